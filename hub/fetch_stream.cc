// One resumable stream per file, the free-space preflight and the
// on_file_bytes announcer (hub/fetch.h).
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "hub/errors.h"
#include "hub/fetch.h"
#include "hub/http_parse.h"
#include "hubload/reasons.h"

namespace hubload::hub_internal {
namespace fs = std::filesystem;

constexpr uint64_t kAnnounceStep = 1 << 20;

BytesAnnouncer::BytesAnnouncer(const DownloadCallbacks* cb, std::string path_in_repo)
    : cb_(cb), path_(std::move(path_in_repo)) {}

BytesAnnouncer::~BytesAnnouncer() {
  if (ro_fd_ >= 0) ::close(ro_fd_);
}

uint64_t BytesAnnouncer::generation() const {
  std::lock_guard<std::mutex> l(mu_);
  return generation_;
}

void BytesAnnouncer::Update(int writer_fd, const std::string& partial_path, uint64_t contiguous, int64_t size,
                            bool final) {
  if (!enabled() || writer_fd < 0) return;
  std::lock_guard<std::mutex> l(mu_);
  bool due = final ? !(any_ && size >= 0 && last_ == static_cast<uint64_t>(size) && contiguous == last_)
                   : size >= 0 && (!any_ ? contiguous > 0 : contiguous >= last_ + kAnnounceStep);
  if (!due && !(any_ && contiguous < last_)) return;
  struct stat st;
  if (::fstat(writer_fd, &st) != 0) return;
  if (generation_ == 0 || st.st_ino != ino_ || st.st_dev != dev_) {
    // A new partial file: a new generation with its own read-only descriptor.
    if (ro_fd_ >= 0) ::close(ro_fd_);
    ro_fd_ = ::open(partial_path.c_str(), O_RDONLY | O_CLOEXEC);
    ro_path_ = partial_path;
    struct stat rs;
    if (ro_fd_ >= 0 && (::fstat(ro_fd_, &rs) != 0 || rs.st_ino != st.st_ino || rs.st_dev != st.st_dev)) {
      ::close(ro_fd_);
      ro_fd_ = -1;
    }
    if (ro_fd_ < 0) {
      ro_fd_ = ::open(("/proc/self/fd/" + std::to_string(writer_fd)).c_str(), O_RDONLY | O_CLOEXEC);
      ro_path_.clear();
    }
    if (ro_fd_ < 0) return;
    dev_ = st.st_dev;
    ino_ = st.st_ino;
    ++generation_;
    last_ = 0;
    any_ = false;
    due = final || (size >= 0 && contiguous > 0);
  }
  if (!due) return;
  FileBytes fb;
  fb.path_in_repo = path_;
  fb.fd = ro_fd_;
  fb.generation = generation_;
  fb.contiguous_bytes = contiguous;
  fb.size = size >= 0 ? static_cast<uint64_t>(size) : contiguous;
  fb.partial_path = ro_path_;
  last_ = contiguous;
  any_ = true;
  cb_->on_file_bytes(fb);
}

bool GiveUpAfter(const Status& s, const RetryBudget& budget) {
  return s.Is(reason::kConnectFailed) || s.Is(reason::kDnsFailed) || budget.exhausted();
}

std::pair<std::string, uint64_t> CurrentUrl(const FetchTarget& t) {
  if (t.signed_url) return t.signed_url->Current();
  return {t.url, 0};
}

bool RenewAfter403(const FetchTarget& t, uint64_t gen, const std::string& body, int* idle, Status* err) {
  if (!t.signed_url) return false;
  const bool worked = t.signed_url->Productive(gen);
  const bool says_expired = body.find("xpired") != std::string::npos;  // "Request has expired", "Expired"
  if (!worked && *idle >= (says_expired ? 3 : 1)) return false;
  *err = t.signed_url->Renew(gen);
  if (!err->ok()) return false;
  if (!worked) ++*idle;
  spdlog::info("'{}': the signed download URL was refused (HTTP 403{}); continuing on a fresh one", t.path_in_repo,
               says_expired ? ", expired" : "");
  return true;
}

std::shared_ptr<SignedUrl> MakeSignedUrl(const Session& s, RepoType type, const std::string& repo,
                                         const std::string& path, const FileMeta& m) {
  if (m.location.empty()) return nullptr;
  const Session* sp = &s;  // the session outlives every download it runs
  return std::make_shared<SignedUrl>(m.location, [sp, type, repo, path, m]() -> Result<std::string> {
    HUBLOAD_ASSIGN_OR_RETURN(FileMeta fresh, Head(*sp, type, repo, m.commit, path, nullptr));
    if (fresh.etag != m.etag || fresh.size != m.size || fresh.location.empty())
      return Status(Code::kCorruptDownload,
                    "'" + path + "' changed on the server while it was downloading (etag " + m.etag + " -> " +
                        fresh.etag + ")",
                    reason::kFileChanged, sp->Ctx(repo, m.commit, path));
    return fresh.location;
  });
}

bool UseRanges(const Session& s, const FetchTarget& t) {
  const ClientOptions& o = s.opt;
  const int64_t size = t.meta.size;
  if (o.range_threshold_bytes == 0 || o.max_ranges_per_file < 2 || size <= 0 ||
      static_cast<uint64_t>(size) < o.range_threshold_bytes ||
      static_cast<uint64_t>(size) <= std::max<uint64_t>(o.range_chunk_bytes, 1ull << 20))
    return false;
  struct stat st;
  // A single-stream partial (ours or huggingface_hub's) is resumed as it is.
  return !(::stat(t.single_partial.c_str(), &st) == 0 && st.st_size > 0);
}

namespace {

struct StreamSink : BodySink {
  BlobWriter* w = nullptr;
  FileIo* io = nullptr;
  const FetchTarget* t = nullptr;
  uint64_t off = 0;
  uint64_t got = 0;
  uint64_t gen = 0;  // generation of the signed URL asked
  bool mismatch = false;
  Status err;
  bool OnResponseStart(const HttpResponse& h) override {
    const FileMeta& m = t->meta;
    if (h.status == 206) {
      int64_t first = 0, total = 0;
      auto cr = h.headers.Get("Content-Range");
      if (!cr || !ParseContentRange(*cr, &first, &total) || first != static_cast<int64_t>(off) ||
          (m.size >= 0 && total >= 0 && total != m.size)) {
        mismatch = true;
        return false;
      }
      // A 206 from a server that ignored If-Range (B02): its etag must
      // still be ours when it sends one in the Hub's format.
      std::string e = NormalizeEtag(h.headers.Get("X-Linked-Etag").value_or(h.headers.Get("ETag").value_or("")));
      if (IsHubEtag(e) && e != m.etag) {
        mismatch = true;
        return false;
      }
    } else if (off > 0) {
      // 200 to a ranged request: Range ignored or validator changed — start
      // over in a new partial (the announced one is never rewritten).
      if (io->progress) io->progress->Add(-static_cast<int64_t>(w->offset()));
      err = w->Restart();
      if (!err.ok()) return false;
    }
    return true;
  }
  bool OnData(const char* d, size_t n) override {
    if (io->cancel && io->cancel->Cancelled()) return false;
    if (got == 0 && t->signed_url) t->signed_url->MarkProductive(gen);
    uint64_t before = w->flushed_bytes();
    err = w->Append(d, n);
    if (!err.ok()) return false;
    got += n;
    if (io->wire_bytes) io->wire_bytes->fetch_add(n, std::memory_order_relaxed);
    if (io->progress) io->progress->AddReceived(n);
    const int64_t size = t->meta.size;
    if (io->cb && io->cb->on_file_progress)
      io->cb->on_file_progress(t->path_in_repo, w->offset(), size < 0 ? 0 : static_cast<uint64_t>(size));
    if (io->bytes && w->flushed_bytes() != before)
      io->bytes->Update(w->fd(), w->partial_path(), w->flushed_bytes(), size, false);
    return true;
  }
};

}  // namespace

Result<std::string> FetchStream(const Session& s, const FetchTarget& t, const ErrorContext& ctx0, FileIo io) {
  const FileMeta& m = t.meta;
  ErrorContext ctx = ctx0;
  ctx.url = RedactUrl(t.url);
  auto open = [&](bool resume) {
    return BlobWriter::OpenPaths(t.single_partial, t.final_path, t.label, cache_internal::StreamOptions(t.id, resume));
  };
  // Verifies and renames; the last announcement (contiguous == size) comes first.
  auto commit = [&](BlobWriter& w) -> Result<std::string> {
    HUBLOAD_RETURN_IF_ERROR(w.Flush());
    if (io.bytes) io.bytes->Update(w.fd(), w.partial_path(), w.flushed_bytes(), m.size, true);
    return w.Commit();
  };
  HUBLOAD_ASSIGN_OR_RETURN(std::unique_ptr<BlobWriter> w, open(true));
  if (io.progress) io.progress->Add(static_cast<int64_t>(w->offset()));
  int failures = 0;
  int hash_failures = 0;
  // After a sha256 mismatch of the whole file: true when it is fetched again
  // from scratch (io.hash_retries times at most), with a warning.
  auto again_after = [&](const Status& st) {
    if (!st.Is(reason::kHashMismatch) || hash_failures >= io.hash_retries) return false;
    ++hash_failures;
    spdlog::warn("{}: {}; downloading it again", ctx.file, st.message());
    return true;
  };
  auto restart = [&]() -> Status {
    if (io.progress) io.progress->Add(-static_cast<int64_t>(w->offset()));
    return w->Restart();
  };
  const int max_attempts = s.opt.max_resume_attempts;
  if (!io.budget) io.budget = std::make_shared<RetryBudget>();
  int renewed_idle = 0;  // B44: renewals since this fetch's last body byte
  while (true) {
    if (io.cancel && io.cancel->Cancelled()) return Cancelled(ctx);
    uint64_t off = w->offset();
    if (m.size >= 0 && off == static_cast<uint64_t>(m.size) && off > 0) {
      // B03: the partial is already complete; verify without a request.
      auto c = commit(*w);
      if (c.ok()) return c;
      if (!again_after(c.status())) return WithCtx(c.status(), ctx);
      if (io.progress) io.progress->Add(-static_cast<int64_t>(off));
      HUBLOAD_ASSIGN_OR_RETURN(w, open(false));
      continue;
    }
    StreamSink sink;
    sink.w = w.get();
    sink.io = &io;
    sink.t = &t;
    sink.off = off;
    HttpRequest req;
    auto [url, gen] = CurrentUrl(t);
    sink.gen = gen;
    req.url = url;
    ctx.url = RedactUrl(url);
    req.stall_timeout_s = s.opt.config.download_timeout_s;
    req.on_retry = io.on_retry;
    req.budget = io.budget;
    s.AddAuth(&req);
    if (off > 0) {
      req.headers.emplace_back("Range", "bytes=" + std::to_string(off) + "-");
      if (std::string v = IfRangeValue(m.raw_etag); !v.empty()) req.headers.emplace_back("If-Range", v);
    }
    auto r = s.http->Send(req, &sink);
    if (!sink.err.ok()) return WithCtx(sink.err, ctx);
    if (io.cancel && io.cancel->Cancelled()) return Cancelled(ctx);
    if (sink.got > 0) renewed_idle = 0;
    if (r.ok() && r->status == 403) {
      Status renew;
      if (RenewAfter403(t, gen, r->body, &renewed_idle, &renew)) continue;
      HUBLOAD_RETURN_IF_ERROR(WithCtx(renew, ctx));
    }
    if (sink.mismatch) {
      HUBLOAD_RETURN_IF_ERROR(restart());
      if (++failures > max_attempts)
        return Status(Code::kCorruptDownload,
                      "the server keeps answering ranges that do not fit the partial of '" + ctx.file + "'",
                      reason::kRangeMismatch, ctx);
      continue;
    }
    if (!r.ok()) {
      if (r.status().code() != Code::kNetwork) return WithCtx(r.status(), ctx);
      if (sink.got > 0) failures = 0;
      else if (GiveUpAfter(r.status(), *io.budget)) return WithCtx(r.status(), ctx);
      if (++failures > max_attempts) return WithCtx(r.status(), ctx);
      spdlog::debug("resuming {} after: {}", ctx.file, r.status().message());
      continue;
    }
    if (r->status == 416) {
      // Range not satisfiable: trust only what the hash check confirms.
      int64_t first = 0, total = -1;
      auto cr = r->headers.Get("Content-Range");
      if (cr && ParseContentRange(*cr, &first, &total) && total == static_cast<int64_t>(off) &&
          (m.size < 0 || m.size == total)) {
        auto c = commit(*w);
        if (c.ok()) return c;
      }
      HUBLOAD_RETURN_IF_ERROR(restart());
      if (++failures > max_attempts) return StatusFromHttp(r->status, r->headers, r->body, ctx);
      continue;
    }
    if (r->status >= 300) return StatusFromHttp(r->status, r->headers, r->body, ctx);
    if (m.size >= 0 && w->offset() < static_cast<uint64_t>(m.size)) {
      // Close-delimited body that ended early: resume.
      if (sink.got > 0) failures = 0;
      if (++failures > max_attempts)
        return Status(Code::kNetwork, "connection closed early while downloading '" + ctx.file + "'",
                      reason::kConnectionLost, ctx);
      continue;
    }
    auto c = commit(*w);
    if (c.ok()) return c;
    if (again_after(c.status())) {
      HUBLOAD_ASSIGN_OR_RETURN(w, open(false));
      continue;
    }
    return WithCtx(c.status(), ctx);
  }
}

}  // namespace hubload::hub_internal
