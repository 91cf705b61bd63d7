// HubClient public methods: hf_hub_download / snapshot_download semantics
// over the session (hub/session.h) and the download scheduler (hub/scheduler.h).
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "hub/errors.h"
#include "cache/tree_cache.h"
#include "hub/answers.h"
#include "hub/cache_answers.h"
#include "hub/file_metadata.h"
#include "hub/listing.h"
#include "hub/prepare.h"
#include "hub/refs.h"
#include "hub/scheduler.h"
#include "hub/session.h"
#include "hub/upload/upload_internal.h"
#include "hubload/hub.h"
#include "hubload/reasons.h"
#include "util/file_io.h"

namespace hubload {
namespace fs = std::filesystem;
using hub_internal::FileWork;
using hub_internal::Session;
using hub_internal::WithCtx;

struct HubClient::Impl : Session {
  explicit Impl(ClientOptions o) : Session(std::move(o)) {}

  bool has_cache() const { return !opt.config.cache_dir.empty(); }
  // Calls that write the cache need one (the library reads no environment).
  Status NeedCache(const ErrorContext& ctx) const {
    if (has_cache()) return Status::Ok();
    return Status(Code::kInvalidArgument,
                  "no cache folder: ClientOptions::config.cache_dir is empty (HubConfig::FromEnvironment() gives "
                  "huggingface_hub's default, $HF_HUB_CACHE or ~/.cache/huggingface/hub)",
                  reason::kNoCacheDir, ctx);
  }

  // Files at `commit` (cache mode) or into `local_dir`, in the order given.
  hub_internal::ScheduleOutcome Run(const RepoCache& rc, const std::string& commit,
                                    const std::vector<std::string>& paths, const DownloadCallbacks& cb, int workers,
                                    const std::string& local_dir, const std::map<std::string, uint64_t>& sizes) const {
    std::vector<FileWork> work;
    work.reserve(paths.size());
    std::map<std::string, uint64_t> tree_sizes;  // sizes unknown: the cached listing's, to catch truncated files
    if (sizes.empty() && local_dir.empty())
      if (auto tree = cache_internal::ReadTreeCache(rc, commit))
        for (auto& e : *tree) tree_sizes[e.path] = e.size;
    for (const std::string& p : paths) {
      FileWork w;
      w.path = p;
      const auto& known = sizes.empty() ? tree_sizes : sizes;
      if (auto it = known.find(p); it != known.end()) w.size = it->second;
      w.ctx = Ctx(rc.repo_id(), commit, p);
      const int64_t size = w.size ? static_cast<int64_t>(*w.size) : -1;
      if (local_dir.empty())
        w.prepare = [this, rc, commit, p, size] { return hub_internal::PrepareAtCommit(*this, rc, commit, p, size); };
      else
        w.prepare = [this, rc, commit, p, local_dir, size] {
          return hub_internal::PrepareLocalDir(*this, rc.repo_type(), rc.repo_id(), commit, p, local_dir, false, size);
        };
      work.push_back(std::move(w));
    }
    return hub_internal::RunDownloads(*this, std::move(work), cb, workers);
  }

  // One file whose preparation is `prepare`; returns its local path.
  // `cb`: FileRequest::callbacks (on_file_done left out: the path is the result).
  Result<std::string> RunOne(const std::string& path, const ErrorContext& ctx, DownloadCallbacks cb,
                             std::function<Result<hub_internal::PreparedFile>()> prepare) const {
    FileWork w;
    w.path = path;
    w.ctx = ctx;
    w.prepare = std::move(prepare);
    std::vector<FileWork> v;
    v.push_back(std::move(w));
    cb.on_file_done = nullptr;
    auto out = hub_internal::RunDownloads(*this, std::move(v), cb, opt.max_workers);
    if (!out.status.ok()) return out.status;
    return out.local_paths[0];
  }

  Status RefMiss(const RepoCache& rc, const std::string& rev, const std::string& what) const {
    Status s = OfflineMiss(rc, rev, what);
    std::string why = hub_internal::RefProblem(rc, rev);
    return why.empty() ? s : Status(s.code(), s.message() + why, s.reason(), s.context());
  }

  // ResolveCommit. When the cache can answer (`can_answer(commit)` for the
  // cached commit of `rev`; null: its snapshot folder exists) the request is
  // sent once, and a failure huggingface_hub falls back on returns the cached
  // commit with *why set to that failure (the caller warns once).
  // `answered_elsewhere`: the caller has an answer outside the cache (a
  // local_dir); the request is sent once and its failure returned as is.
  Result<std::string> Resolve(const RepoCache& rc, const std::string& rev,
                              const std::function<bool(const std::string&)>& can_answer, Status* why,
                              bool answered_elsewhere = false) const {
    if (IsCommitHash(rev)) return rev;
    ErrorContext ctx = Ctx(rc.repo_id(), rev, "");
    if (opt.config.offline) {
      HUBLOAD_RETURN_IF_ERROR(NeedCache(ctx));
      if (auto c = rc.ReadRef(rev)) return *c;
      return RefMiss(rc, rev, "ref");
    }
    std::optional<std::string> cached = hub_internal::CachedSnapshot(rc, rev, /*online=*/true);
    if (cached && (answered_elsewhere || (can_answer && !can_answer(*cached)))) cached.reset();
    std::string url = ApiUrl(rc.repo_type(), rc.repo_id(), "/revision/" + EncodeRevision(rev));
    auto j = GetJson(url, ctx, nullptr, cached || answered_elsewhere ? 0 : -1);
    Result<std::string> sha = Status(Code::kInternal, "unset");
    if (j.ok()) {
      sha = hub_internal::ParseRevisionSha(*j, RedactUrl(url));
      if (!sha.ok()) sha = sha.status().Annotate(ctx);
      else if (!IsCommitHash(*sha))
        sha = Status(Code::kInvalidFormat, "revision info of " + rc.repo_id() + "@" + rev + " has no 40-hex 'sha'",
                     reason::kBadRevisionInfo, ctx);
    } else {
      sha = j.status();
    }
    if (!sha.ok() && cached && hub_internal::FallbackAllowed(sha.status().code())) {
      *why = sha.status();
      return *cached;
    }
    if (!sha.ok() && !answered_elsewhere)
      return hub_internal::NotCachedEither(rc, rev, "a complete snapshot", sha.status());
    return sha;
  }

  // The listing of `commit` kept in the cache: trees/<commit>.json, else the snapshot folder.
  Result<RepoListing> ListCached(const RepoCache& rc, const std::string& commit) const {
    RepoListing out;
    out.commit = commit;
    if (auto tree = cache_internal::ReadTreeCache(rc, commit)) {
      out.files = hub_internal::FromTreeEntries(*tree);
      return out;
    }
    HUBLOAD_ASSIGN_OR_RETURN(auto entries, cache_internal::ListSnapshotFolder(rc, commit));
    out.files = hub_internal::FromTreeEntries(entries);
    return out;
  }

  // Listing from the cache only (offline).
  Result<RepoListing> ListLocal(const RepoCache& rc, const std::string& rev) const {
    auto commit = hub_internal::CachedSnapshot(rc, rev);
    if (!commit) return RefMiss(rc, rev, "snapshot");
    return ListCached(rc, *commit);
  }
};

HubClient::HubClient(ClientOptions options) : impl_(std::make_shared<Impl>(std::move(options))) {}
HubClient::~HubClient() = default;
const ClientOptions& HubClient::options() const { return impl_->opt; }

Result<std::string> HubClient::Download(const FileRequest& req) const {
  const Impl& im = *impl_;
  ErrorContext ctx = im.Ctx(req.repo_id, req.revision, req.filename);
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRepoId(req.repo_id), ctx));
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRevision(req.revision), ctx));
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRepoPath(req.filename), ctx));
  if (!req.local_dir.empty())
    return im.RunOne(req.filename, ctx, req.callbacks, [&] {
      return hub_internal::PrepareLocalDir(im, req.repo_type, req.repo_id, req.revision, req.filename, req.local_dir,
                                           req.force_download);
    });
  HUBLOAD_RETURN_IF_ERROR(im.NeedCache(ctx));
  RepoCache rc(im.opt.config.cache_dir, req.repo_id, req.repo_type);
  if (im.opt.config.offline) {
    auto commit = rc.LocalCommit(req.revision);
    if (commit) {
      if (auto p = rc.CachedPointer(*commit, req.filename)) return *p;
      if (rc.IsMarkedNoExist(*commit, req.filename))
        return Status(Code::kEntryNotFound,
                      "'" + req.filename + "' does not exist in " + req.repo_id + " at " + *commit +
                          " (known from the cache's .no_exist marker; offline mode)",
                      reason::kEntryNotFound, ctx);
    }
    return im.RefMiss(rc, req.revision, req.filename);
  }
  if (IsCommitHash(req.revision) && !req.force_download)
    if (auto p = rc.CachedPointer(req.revision, req.filename)) return *p;  // zero requests
  std::string commit404;
  // With a cached copy to fall back on, the metadata request is not retried.
  std::optional<std::string> cached;
  if (auto c = hub_internal::LocalCommitOnline(rc, req.revision)) cached = rc.CachedPointer(*c, req.filename);
  auto m = hub_internal::Head(im, req.repo_type, req.repo_id, req.revision, req.filename, &commit404,
                              cached && !req.force_download ? 0 : -1);
  if (!m.ok()) {
    Code c = m.status().code();
    if (c == Code::kEntryNotFound && IsCommitHash(commit404)) {
      (void)rc.MarkNoExist(commit404, req.filename);
      if (!IsCommitHash(req.revision)) (void)rc.WriteRef(req.revision, commit404);
    }
    if (hub_internal::FallbackAllowed(c)) {
      if (auto commit = rc.LocalCommit(req.revision))
        if (auto p = rc.CachedPointer(*commit, req.filename)) {
          spdlog::warn("{}: {}; using the cached copy at {}", req.filename, m.status().message(), *commit);
          return *p;
        }
    }
    return hub_internal::NotCachedEither(rc, req.revision, "'" + req.filename + "'", m.status());
  }
  HUBLOAD_ASSIGN_OR_RETURN(std::string path, im.RunOne(req.filename, ctx, req.callbacks, [&] {
    return hub_internal::PrepareBlob(im, rc, *m, req.filename, req.revision, req.force_download);
  }));
  if (req.revision != m->commit) HUBLOAD_RETURN_IF_ERROR(WithCtx(rc.WriteRef(req.revision, m->commit), ctx));
  return path;
}

Result<std::string> HubClient::ReadRange(const FileRequest& req, uint64_t offset, uint64_t length) const {
  const Impl& im = *impl_;
  ErrorContext ctx = im.Ctx(req.repo_id, req.revision, req.filename);
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRepoId(req.repo_id), ctx));
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRevision(req.revision), ctx));
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRepoPath(req.filename), ctx));
  if (length > (1ull << 30))
    return Status(Code::kInvalidArgument,
                  "ReadRange of '" + req.filename + "' asks for " + std::to_string(length) + " bytes (limit 1 GiB)",
                  reason::kRangeTooLarge, ctx);
  if (length == 0) return std::string();
  RepoCache rc(im.opt.config.cache_dir, req.repo_id, req.repo_type);
  std::optional<std::string> commit;
  if (IsCommitHash(req.revision)) commit = req.revision;
  else if (im.opt.config.offline) commit = rc.LocalCommit(req.revision);
  if (commit && im.has_cache()) {
    if (auto p = rc.CachedPointer(*commit, req.filename)) {
      std::ifstream in(*p, std::ios::binary);
      if (!in) return Status(Code::kIOError, "cannot open cached " + *p, reason::kIOError, ctx);
      in.seekg(static_cast<std::streamoff>(offset));
      std::string out(length, '\0');
      in.read(out.data(), static_cast<std::streamsize>(length));
      out.resize(in ? length : static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
      return out;
    }
  }
  if (im.opt.config.offline) return im.OfflineMiss(rc, req.revision, req.filename);
  std::string url = im.ResolveUrlFor(req.repo_type, req.repo_id, req.revision, req.filename);
  ctx.url = RedactUrl(url);
  struct Sink : BodySink {
    uint64_t skip = 0, want = 0;
    std::string out;
    bool OnResponseStart(const HttpResponse& h) override {
      if (h.status != 206) return true;  // 200: Range ignored, cut the body here
      skip = 0;
      return true;
    }
    bool OnData(const char* d, size_t n) override {
      if (skip > 0) {
        size_t s = static_cast<size_t>(std::min<uint64_t>(skip, n));
        skip -= s;
        d += s;
        n -= s;
      }
      size_t t = static_cast<size_t>(std::min<uint64_t>(want - out.size(), n));
      out.append(d, t);
      return out.size() < want;  // stop reading once we have enough
    }
  } sink;
  sink.skip = offset;
  sink.want = length;
  HttpRequest hr;
  hr.url = url;
  hr.timeout_s = im.opt.config.etag_timeout_s + static_cast<double>(length) / (1 << 20);
  hr.stall_timeout_s = im.opt.config.download_timeout_s;
  hr.headers.emplace_back("Range", "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + length - 1));
  hr.headers.emplace_back("Accept-Encoding", "identity");
  im.AddAuth(&hr);
  auto r = im.http->Send(hr, &sink);
  if (!r.ok()) {
    if (r.status().Is(reason::kSinkAborted) && sink.out.size() == length) return std::move(sink.out);
    return WithCtx(r.status(), ctx);
  }
  if (r->status == 416) return std::string();  // offset at or past the end
  if (r->status >= 300) return StatusFromHttp(r->status, r->headers, r->body, ctx);
  return std::move(sink.out);
}

Result<std::string> HubClient::ResolveCommit(const std::string& repo_id, const std::string& revision,
                                             RepoType repo_type) const {
  const Impl& im = *impl_;
  ErrorContext ctx = im.Ctx(repo_id, revision, "");
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRepoId(repo_id), ctx));
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRevision(revision), ctx));
  RepoCache rc(im.opt.config.cache_dir, repo_id, repo_type);
  Status why;
  auto c = im.Resolve(rc, revision, nullptr, &why);
  if (!why.ok()) spdlog::warn("{}", hub_internal::UnreachableWarning(rc, revision, *c, why));
  return c;
}

Result<RepoListing> HubClient::ListFiles(const std::string& repo_id, const std::string& revision,
                                         RepoType repo_type, bool keep_in_cache) const {
  const Impl& im = *impl_;
  ErrorContext ctx = im.Ctx(repo_id, revision, "");
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRepoId(repo_id), ctx));
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRevision(revision), ctx));
  RepoCache rc(im.opt.config.cache_dir, repo_id, repo_type);
  if (im.opt.config.offline) {
    HUBLOAD_RETURN_IF_ERROR(im.NeedCache(ctx));
    return im.ListLocal(rc, revision);
  }
  auto can_list = [&](const std::string& commit) {
    if (!im.has_cache()) return false;
    std::error_code ec;
    return fs::exists(cache_internal::TreeCachePath(rc, commit), ec) || fs::is_directory(rc.SnapshotDir(commit), ec);
  };
  auto from_cache = [&](const std::string& commit, const std::string& warning) -> Result<RepoListing> {
    HUBLOAD_ASSIGN_OR_RETURN(RepoListing l, im.ListCached(rc, commit));
    spdlog::warn("{}", warning);
    l.warnings.push_back(warning);
    return l;
  };
  Status why;
  HUBLOAD_ASSIGN_OR_RETURN(std::string commit, im.Resolve(rc, revision, can_list, &why));
  if (!why.ok()) return from_cache(commit, hub_internal::UnreachableWarning(rc, revision, commit, why));
  bool cached = can_list(commit);
  auto l = hub_internal::ListTree(im, repo_type, repo_id, commit, cached ? 0 : -1);
  if (!l.ok()) {
    if (cached && hub_internal::FallbackAllowed(l.status().code()))
      return from_cache(commit, hub_internal::UnreachableWarning(rc, revision, commit, l.status()));
    return l.status();
  }
  if (im.has_cache() && keep_in_cache) {
    (void)cache_internal::WriteTreeCache(rc, commit, hub_internal::ToTreeEntries(l->files));
    // As snapshot_download: the revision's ref is recorded once it is resolved
    // (only when it changes, so a read-only cache hit writes nothing).
    if (revision != commit && rc.ReadRef(revision) != commit)
      HUBLOAD_RETURN_IF_ERROR(WithCtx(rc.WriteRef(revision, commit), ctx));
  }
  return l;
}

Status HubClient::DownloadFiles(const std::string& repo_id, const std::string& revision, RepoType repo_type,
                                const std::vector<std::string>& paths, const DownloadCallbacks& cb) const {
  const Impl& im = *impl_;
  ErrorContext ctx = im.Ctx(repo_id, revision, "");
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRepoId(repo_id), ctx));
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRevision(revision), ctx));
  for (auto& p : paths) HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRepoPath(p), ctx));
  HUBLOAD_RETURN_IF_ERROR(im.NeedCache(ctx));
  RepoCache rc(im.opt.config.cache_dir, repo_id, repo_type);
  auto local_commit = rc.LocalCommit(revision);
  auto all_cached = [&](const std::string& commit) {
    std::vector<std::string> missing;
    for (auto& p : paths)
      if (!rc.CachedPointer(commit, p)) missing.push_back(p);
    return missing;
  };
  // Every file from the cache: its bytes count as done, as the scheduler counts cached files.
  auto serve_cached = [&](const std::string& commit) -> Status {
    std::vector<std::pair<std::string, uint64_t>> files;  // pointer, size
    uint64_t total = 0, done = 0;
    for (auto& p : paths) {
      auto ptr = rc.CachedPointer(commit, p);
      if (!ptr)  // removed since all_cached looked (another process pruning the cache)
        return Status(Code::kNotFound, "'" + p + "' left the cache of " + repo_id + " while it was being read",
                      reason::kNotFound, im.Ctx(repo_id, revision, p));
      std::error_code ec;
      const uint64_t n = fs::file_size(*ptr, ec);
      files.emplace_back(std::move(*ptr), ec ? 0 : n);
      total += files.back().second;
    }
    for (size_t i = 0; i < paths.size(); ++i) {
      done += files[i].second;
      if (cb.on_progress) cb.on_progress(done, total);
      if (cb.on_file_done) cb.on_file_done(paths[i], files[i].first);
    }
    return Status::Ok();
  };
  if (im.opt.config.offline) {
    if (!local_commit) return im.RefMiss(rc, revision, "ref");
    auto missing = all_cached(*local_commit);
    if (!missing.empty()) {
      std::string list;
      for (auto& m : missing) list += (list.empty() ? "" : ", ") + m;
      return im.OfflineMiss(rc, revision, list);
    }
    return serve_cached(*local_commit);
  }
  std::string commit;
  bool resolved = false;
  if (IsCommitHash(revision)) {
    commit = revision;
  } else {
    Status why;
    auto c = im.Resolve(rc, revision, [&](const std::string& cc) { return all_cached(cc).empty(); }, &why);
    if (!c.ok()) return c.status();
    if (!why.ok()) {
      spdlog::warn("{}", hub_internal::UnreachableWarning(rc, revision, *c, why));
      return serve_cached(*c);
    }
    commit = *c;
    resolved = true;
  }
  auto out = im.Run(rc, commit, paths, cb, im.opt.max_workers, "", {});
  if (!out.status.ok() && resolved &&
      (out.failed_code == Code::kEntryNotFound || out.failed_code == Code::kRevisionNotFound)) {
    // B11: the revision API may have answered a stale commit; /resolve/<branch> wins.
    auto m = hub_internal::Head(im, repo_type, repo_id, revision, out.failed_path, nullptr);
    if (m.ok() && m->commit != commit) {
      spdlog::warn("{}@{} resolved to {} which lacks '{}'; retrying at {}", repo_id, revision, commit,
                   out.failed_path, m->commit);
      commit = m->commit;
      out = im.Run(rc, commit, paths, cb, im.opt.max_workers, "", {});
    }
  }
  HUBLOAD_RETURN_IF_ERROR(out.status);
  if (revision != commit) HUBLOAD_RETURN_IF_ERROR(WithCtx(rc.WriteRef(revision, commit), ctx));
  return Status::Ok();
}

Result<std::string> HubClient::Snapshot(const SnapshotRequest& req) const {
  const Impl& im = *impl_;
  ErrorContext ctx = im.Ctx(req.repo_id, req.revision, "");
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRepoId(req.repo_id), ctx));
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRevision(req.revision), ctx));
  if (req.local_dir.empty()) HUBLOAD_RETURN_IF_ERROR(im.NeedCache(ctx));
  RepoCache rc(im.opt.config.cache_dir, req.repo_id, req.repo_type);
  int workers = req.max_workers > 0 ? req.max_workers : im.opt.max_workers;
  auto select = [&](const RepoListing& l) {
    std::vector<std::string> paths;
    std::map<std::string, uint64_t> sizes;
    for (auto& f : l.files)
      if (MatchesPatterns(f.path, req.allow_patterns, req.ignore_patterns)) {
        paths.push_back(f.path);
        sizes[f.path] = f.size;
      }
    return std::make_pair(paths, sizes);
  };
  // The cached snapshot at `commit`, complete per trees/<commit>.json when
  // that file exists; `why`: the failure that sent us here (null: offline).
  auto from_cache = [&](const std::string& commit, const Status* why) -> Result<std::string> {
    if (auto tree = cache_internal::ReadTreeCache(rc, commit)) {
      RepoListing l;
      l.commit = commit;
      l.files = hub_internal::FromTreeEntries(*tree);
      auto [paths, sizes] = select(l);
      std::string missing;
      for (auto& p : paths)
        if (!rc.CachedPointer(commit, p)) missing += (missing.empty() ? "" : ", ") + p;
      if (!missing.empty())
        return Status(why ? why->code() : Code::kOfflineMiss,
                      "incomplete snapshot of " + req.repo_id + " at " + commit + " in " + rc.cache_dir() +
                          ": missing " + missing + (why ? " (" + why->message() + ")" : " (offline mode)"),
                      "IncompleteSnapshot", ctx);
      for (auto& p : paths)
        if (req.callbacks.on_file_done) req.callbacks.on_file_done(p, *rc.CachedPointer(commit, p));
    }
    if (why) spdlog::warn("{}", hub_internal::UnreachableWarning(rc, req.revision, commit, *why));
    return rc.SnapshotDir(commit);
  };
  // The local folder answers when the Hub cannot: a non-empty directory, as
  // huggingface_hub's snapshot_download (an empty one is no snapshot).
  std::error_code local_ec;
  const bool local_answers = !req.local_dir.empty() && fs::is_directory(req.local_dir, local_ec) &&
                             !fs::is_empty(req.local_dir, local_ec);
  auto offline_snapshot = [&](const Status* why) -> Result<std::string> {
    if (!req.local_dir.empty()) {
      if (local_answers) {
        if (why) spdlog::warn("{}: {}; using the local folder {}", req.repo_id, why->message(), req.local_dir);
        return req.local_dir;
      }
      // ENAMETOOLONG, ELOOP, EACCES: the folder cannot be used (not-found is the miss below).
      if (local_ec && local_ec != std::errc::no_such_file_or_directory && local_ec != std::errc::not_a_directory)
        return WithCtx(util::IoError("cannot use the local folder", req.local_dir, local_ec.value()), ctx);
      if (why) return *why;
      std::error_code ec;
      return Status(Code::kOfflineMiss,
                    "local folder " + req.local_dir +
                        (fs::is_directory(req.local_dir, ec) ? " is empty (offline)" : " does not exist (offline)"),
                    reason::kOfflineMiss, ctx);
    }
    auto commit = hub_internal::CachedSnapshot(rc, req.revision);
    if (!commit) {
      if (why) return *why;
      return im.RefMiss(rc, req.revision, "snapshot");
    }
    return from_cache(*commit, why);
  };
  if (im.opt.config.offline) return offline_snapshot(nullptr);
  Status why;
  auto never = [](const std::string&) { return false; };  // local_dir: the cache is not the answer
  auto commit_r = req.local_dir.empty() ? im.Resolve(rc, req.revision, nullptr, &why)
                                        : im.Resolve(rc, req.revision, never, &why, local_answers);
  if (!commit_r.ok()) {
    if (hub_internal::FallbackAllowed(commit_r.status().code())) {
      Status failed = commit_r.status();
      return offline_snapshot(&failed);
    }
    return commit_r.status();
  }
  if (!why.ok()) return from_cache(*commit_r, &why);
  std::string commit = *commit_r;
  auto list_and_cache = [&](const std::string& c) -> Result<RepoListing> {
    HUBLOAD_ASSIGN_OR_RETURN(RepoListing l,
                             hub_internal::ListTree(im, req.repo_type, req.repo_id, c, local_answers ? 0 : -1));
    if (req.local_dir.empty()) (void)cache_internal::WriteTreeCache(rc, c, hub_internal::ToTreeEntries(l.files));
    return l;
  };
  RepoListing listing;
  if (auto tree = cache_internal::ReadTreeCache(rc, commit); tree && req.local_dir.empty()) {
    listing.commit = commit;
    listing.files = hub_internal::FromTreeEntries(*tree);
  } else {
    auto l = list_and_cache(commit);
    if (!l.ok()) {
      // The Hub went away between the two calls: a cached snapshot still answers.
      std::error_code ec;
      Status failed = l.status();
      if (!hub_internal::FallbackAllowed(failed.code())) return failed;
      if (local_answers) return offline_snapshot(&failed);
      if (req.local_dir.empty() && fs::is_directory(rc.SnapshotDir(commit), ec)) return from_cache(commit, &failed);
      return failed;
    }
    listing = std::move(*l);
  }
  auto [paths, sizes] = select(listing);
  auto out = im.Run(rc, commit, paths, req.callbacks, workers, req.local_dir, sizes);
  if (!out.status.ok() && !IsCommitHash(req.revision) &&
      (out.failed_code == Code::kEntryNotFound || out.failed_code == Code::kRevisionNotFound)) {
    // B11: a stale revision answer; the commit /resolve/<revision> reports wins.
    auto m = hub_internal::Head(im, req.repo_type, req.repo_id, req.revision, out.failed_path, nullptr);
    if (m.ok() && m->commit != commit) {
      spdlog::warn("{}@{} resolved to {} which lacks '{}'; retrying at {}", req.repo_id, req.revision, commit,
                   out.failed_path, m->commit);
      commit = m->commit;
      HUBLOAD_ASSIGN_OR_RETURN(listing, list_and_cache(commit));
      auto sel = select(listing);
      out = im.Run(rc, commit, sel.first, req.callbacks, workers, req.local_dir, sel.second);
    }
  }
  HUBLOAD_RETURN_IF_ERROR(out.status);
  if (!req.local_dir.empty()) return req.local_dir;
  if (req.revision != commit) HUBLOAD_RETURN_IF_ERROR(WithCtx(rc.WriteRef(req.revision, commit), ctx));
  std::error_code ec;
  fs::create_directories(rc.SnapshotDir(commit), ec);
  return rc.SnapshotDir(commit);
}

Result<std::string> HubClient::CreateRepo(const std::string& repo_id, RepoType repo_type, bool private_repo) const {
  return hub_internal::upload::CreateRepo(*impl_, repo_id, repo_type, private_repo);
}

Result<CommitInfo> HubClient::UploadFolder(const UploadFolderRequest& request) const {
  return hub_internal::upload::UploadFolder(*impl_, request);
}

Result<CommitInfo> HubClient::CreateCommit(const UploadFolderRequest& request, const std::vector<CommitAdd>& additions,
                                           const std::vector<std::string>& deletions) const {
  return hub_internal::upload::CreateCommit(*impl_, request, additions, deletions);
}

Status HubClient::CreateBranch(const std::string& repo_id, const std::string& branch,
                               const CreateBranchOptions& options) const {
  return hub_internal::CreateBranch(*impl_, repo_id, branch, options);
}

Status HubClient::DeleteBranch(const std::string& repo_id, const std::string& branch, RepoType repo_type) const {
  return hub_internal::DeleteBranch(*impl_, repo_id, branch, repo_type);
}

Status HubClient::CreateTag(const std::string& repo_id, const std::string& tag, const CreateTagOptions& options) const {
  return hub_internal::CreateTag(*impl_, repo_id, tag, options);
}

Status HubClient::DeleteTag(const std::string& repo_id, const std::string& tag, RepoType repo_type) const {
  return hub_internal::DeleteTag(*impl_, repo_id, tag, repo_type);
}

Result<RepoRefs> HubClient::ListRepoRefs(const std::string& repo_id, RepoType repo_type,
                                         bool include_pull_requests) const {
  return hub_internal::ListRepoRefs(*impl_, repo_id, repo_type, include_pull_requests);
}

Result<std::vector<GitCommitInfo>> HubClient::ListRepoCommits(const std::string& repo_id, const std::string& revision,
                                                              RepoType repo_type) const {
  return hub_internal::ListRepoCommits(*impl_, repo_id, revision, repo_type);
}

}  // namespace hubload
