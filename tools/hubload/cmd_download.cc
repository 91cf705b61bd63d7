// `hubload download REPO_ID [FILE...]`: hf download in C++ (huggingface_hub
// 1.x options; REPO_ID may be an hf:// URI). The last stdout
// line is the local path (the file when one FILE is given, else the snapshot
// folder or --local-dir). Progress goes to stderr: bars on a terminal (not with
// HF_HUB_DISABLE_PROGRESS_BARS=1), one line per finished file otherwise,
// nothing with --quiet (no warnings either, as hf download --quiet). FILES
// and --include/--exclude together: the FILES, with a warning that the
// patterns are ignored (as hf download).
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>
#include <spdlog/spdlog.h>
#include <memory>

#include "hubload/hub.h"
#include <nlohmann/json.hpp>

#include "cache/local_dir.h"
#include "hubload/cache.h"
#include "tools/hubload/cli.h"
#include "tools/hubload/hf_uri.h"
#include "tools/hubload/progress_bar.h"
#include "util/json.h"

namespace {

// Progress on stderr: the CLI's renderer (progress_bar.h) on a terminal, one
// "done PATH" line per finished file otherwise, nothing with --quiet.
// Thread-safe: callbacks arrive from download workers; ProgressBar locks.
class Display {
 public:
  explicit Display(bool quiet) : quiet_(quiet) {
    if (hubload::cli::ProgressWanted(quiet)) bar_ = std::make_unique<hubload::cli::ProgressBar>();
  }

  hubload::DownloadCallbacks Callbacks() {
    hubload::DownloadCallbacks cb;
    if (quiet_) return cb;
    auto* bar = bar_.get();
    cb.on_file_done = [bar](const std::string& path, const std::string&) {
      if (bar) {
        bar->File(path, 1, 1);  // its line goes
        bar->Log("done " + path);
      } else {
        std::fprintf(stderr, "done %s\n", path.c_str());
      }
    };
    if (!bar) return cb;
    cb.on_progress = [bar](uint64_t done, uint64_t total) { bar->Total(done, total, "total", total && done >= total); };
    // The rate counts only bytes of this run, not a resumed partial.
    cb.on_bytes_received = [bar](uint64_t n) { bar->RateBytes(n); };
    cb.on_file_progress = [bar](const std::string& p, uint64_t d, uint64_t t) { bar->File(p, d, t); };
    return cb;
  }
  // Callbacks of the `index`-th (from 0) of `count` files fetched one at a
  // time (FileRequest::callbacks): the total line adds up the files so far.
  hubload::DownloadCallbacks OneFile(size_t index, size_t count) {
    hubload::DownloadCallbacks cb;
    if (!bar_) return cb;
    auto* bar = bar_.get();
    cb.on_progress = [this, bar, index, count](uint64_t done, uint64_t total) {
      file_done_ = done;
      const bool complete = total && done >= total;
      // "files N/M": the files done, this one counted once its last byte is in.
      const std::string suffix =
          count > 1 ? "files " + std::to_string(index + (complete ? 1 : 0)) + "/" + std::to_string(count) : "total";
      bar->Total(before_done_ + done, before_done_ + total, suffix, complete);
    };
    cb.on_bytes_received = [this, bar](uint64_t n) {
      file_received_ = n;
      bar->RateBytes(before_received_ + n);
    };
    cb.on_file_progress = [bar](const std::string& p, uint64_t d, uint64_t t) { bar->File(p, d, t); };
    return cb;
  }
  // After each file of OneFile(): its bytes join the files before, and its done line is printed.
  void FileDone(const std::string& path) {
    before_done_ += file_done_;
    before_received_ += file_received_;
    file_done_ = file_received_ = 0;
    if (quiet_) return;
    if (bar_) {
      bar_->File(path, 1, 1);
      bar_->Log("done " + path);
    } else {
      std::fprintf(stderr, "done %s\n", path.c_str());
    }
  }
  void Finish() {
    if (bar_) bar_->Finish();
  }

 private:
  bool quiet_;
  std::unique_ptr<hubload::cli::ProgressBar> bar_;
  // OneFile() sums (one file at a time; a file's callbacks may come from several threads).
  std::atomic<uint64_t> before_done_{0}, before_received_{0}, file_done_{0}, file_received_{0};
};

struct Args {
  std::string repo_id;
  std::vector<std::string> files;
  std::string revision = "main";
  std::string repo_type = "model";
  std::vector<std::string> include, exclude;
  std::string local_dir;
  int max_workers = 8;
  bool offline = false;
  bool quiet = false;
  bool force = false;
  bool dry_run = false;
  bool json = false;
  CLI::Option* revision_opt = nullptr;
  CLI::Option* repo_type_opt = nullptr;
};

// `download --dry-run`: the listing and a look at the cache; nothing is
// downloaded and nothing is written into the cache (as hf download --dry-run).
// With --local-dir and no Hub to ask (offline, unreachable, 5xx), the
// download answers from the local folder as it is (HubClient::Snapshot): the
// dry run lists that folder's files (less its .cache/), all cached.
int DryRunLocalDirAsIs(const Args& a, hubload::RepoType type, const hubload::Status& why) {
  const auto found = hubload::cache_internal::ListLocalDirFiles(a.local_dir);
  const std::string note = why.message() + "; a download would use the local folder " + a.local_dir + " as it is";
  uint64_t total = 0;
  nlohmann::json files = nlohmann::json::array();
  for (auto& [p, n] : found) {
    total += n;
    files.push_back({{"path", p}, {"size", n}, {"cached", true}, {"partial_bytes", 0}, {"bytes_to_fetch", 0}});
  }
  if (a.json) {
    nlohmann::json out = {{"repo_id", a.repo_id}, {"repo_type", hubload::RepoTypeName(type)},
                          {"revision", a.revision}, {"commit", nullptr}, {"local_dir", a.local_dir},
                          {"files", files}, {"total_bytes", total}, {"bytes_to_fetch", 0}, {"files_to_fetch", 0},
                          {"files_cached", found.size()}, {"warnings", {note}}};
    std::printf("%s\n", hubload::util::DumpJson(out, 2).c_str());
    return 0;
  }
  if (!a.quiet) std::fprintf(stderr, "hubload download: warning: %s\n", note.c_str());
  std::printf("%12s %12s  %-7s  %s\n", "SIZE", "TO FETCH", "STATE", "FILE");
  for (auto& [p, n] : found) std::printf("%12llu %12d  cached   %s\n", static_cast<unsigned long long>(n), 0, p.c_str());
  std::printf("%zu files, %llu bytes (%s); 0 files to fetch, 0 bytes (the local folder as it is)\n", found.size(),
              static_cast<unsigned long long>(total), hubload::cli::HumanBytes(static_cast<double>(total)).c_str());
  return 0;
}

int DryRun(const Args& a, hubload::RepoType type, const hubload::HubClient& client) {
  auto listing = client.ListFiles(a.repo_id, a.revision, type, /*keep_in_cache=*/false);
  if (!listing.ok()) {
    const hubload::Code c = listing.status().code();
    std::error_code ec;
    if (!a.local_dir.empty() &&
        (c == hubload::Code::kOfflineMiss || c == hubload::Code::kNetwork || c == hubload::Code::kServerError) &&
        std::filesystem::is_directory(a.local_dir, ec) && !std::filesystem::is_empty(a.local_dir, ec))
      return DryRunLocalDirAsIs(a, type, listing.status());
    return hubload::cli::FailStatus("download", listing.status(), a.json);
  }
  std::map<std::string, const hubload::RepoFile*> by_path;
  for (auto& f : listing->files) by_path[f.path] = &f;
  std::vector<const hubload::RepoFile*> chosen;
  if (!a.files.empty()) {
    for (auto& name : a.files) {
      auto it = by_path.find(name);
      if (it == by_path.end())
        return hubload::cli::Fail("download", "'" + name + "' is not a file of " + a.repo_id + " at " +
                                                  listing->commit + " (revision " + a.revision + ")");
      chosen.push_back(it->second);
    }
  } else {
    for (auto& f : listing->files)
      if (hubload::MatchesPatterns(f.path, a.include, a.exclude)) chosen.push_back(&f);
  }
  hubload::RepoCache rc(client.options().config.cache_dir, a.repo_id, type);
  nlohmann::json files = nlohmann::json::array();
  uint64_t total = 0, to_fetch = 0, n_fetch = 0;
  std::vector<std::string> lines;
  for (const auto* f : chosen) {
    hubload::CachedFileState st = hubload::ProbeCachedFile(rc, f->path, f->etag(), f->size, a.local_dir);
    if (a.force) st = {false, 0, f->size};
    total += f->size;
    to_fetch += st.bytes_to_fetch;
    if (!st.cached) ++n_fetch;
    files.push_back({{"path", f->path}, {"size", f->size}, {"cached", st.cached},
                     {"partial_bytes", st.partial_bytes}, {"bytes_to_fetch", st.bytes_to_fetch}});
    char buf[64];
    std::snprintf(buf, sizeof buf, "%12llu %12llu  ", static_cast<unsigned long long>(f->size),
                  static_cast<unsigned long long>(st.bytes_to_fetch));
    lines.push_back(std::string(buf) + (st.cached ? "cached " : st.partial_bytes ? "partial" : "missing") + "  " + f->path);
  }
  if (a.json) {
    nlohmann::json out = {{"repo_id", a.repo_id},         {"repo_type", hubload::RepoTypeName(type)},
                          {"revision", a.revision},       {"commit", listing->commit},
                          {"files", files},               {"total_bytes", total},
                          {"bytes_to_fetch", to_fetch},   {"files_to_fetch", n_fetch},
                          {"files_cached", chosen.size() - n_fetch}, {"warnings", listing->warnings}};
    std::printf("%s\n", hubload::util::DumpJson(out, 2).c_str());
    return 0;
  }
  std::printf("%12s %12s  %-7s  %s\n", "SIZE", "TO FETCH", "STATE", "FILE");
  for (auto& l : lines) std::printf("%s\n", l.c_str());
  std::printf("%zu files, %llu bytes (%s); %llu files to fetch, %llu bytes (%s); commit %s\n", chosen.size(),
              static_cast<unsigned long long>(total), hubload::cli::HumanBytes(static_cast<double>(total)).c_str(),
              static_cast<unsigned long long>(n_fetch), static_cast<unsigned long long>(to_fetch),
              hubload::cli::HumanBytes(static_cast<double>(to_fetch)).c_str(), listing->commit.c_str());
  return 0;
}

// FILES fetched one at a time through Download (hf_hub_download each):
// --local-dir with FILES, and --force-download (of FILES, or of the files the
// listing picks by --include/--exclude). Several files are pinned to one
// commit first. Returns the one file's path, or the snapshot folder / local_dir.
hubload::Result<std::string> EachFile(const Args& a, hubload::RepoType type, const hubload::HubClient& client,
                                      Display& display) {
  std::vector<std::string> files = a.files;
  std::string revision = a.revision;
  if (files.empty()) {
    HUBLOAD_ASSIGN_OR_RETURN(hubload::RepoListing l, client.ListFiles(a.repo_id, a.revision, type));
    revision = l.commit;
    for (auto& f : l.files)
      if (hubload::MatchesPatterns(f.path, a.include, a.exclude)) files.push_back(f.path);
  } else if (files.size() > 1 && !client.options().config.offline) {
    HUBLOAD_ASSIGN_OR_RETURN(revision, client.ResolveCommit(a.repo_id, a.revision, type));
  }
  std::string path;
  for (size_t i = 0; i < files.size(); ++i) {
    hubload::FileRequest r;
    r.repo_id = a.repo_id;
    r.filename = files[i];
    r.revision = revision;
    r.repo_type = type;
    r.local_dir = a.local_dir;
    r.force_download = a.force;
    r.callbacks = display.OneFile(i, files.size());
    HUBLOAD_ASSIGN_OR_RETURN(path, client.Download(r));
    display.FileDone(files[i]);
  }
  if (a.files.size() == 1) return path;
  if (!a.local_dir.empty()) return a.local_dir;
  if (revision == a.revision) {  // offline: the commit the cache has for the revision
    HUBLOAD_ASSIGN_OR_RETURN(revision, client.ResolveCommit(a.repo_id, a.revision, type));
  }
  hubload::RepoCache rc(client.options().config.cache_dir, a.repo_id, type);
  if (a.revision != revision) HUBLOAD_RETURN_IF_ERROR(rc.WriteRef(a.revision, revision));
  return rc.SnapshotDir(revision);
}

// FILES into the cache, all at once (DownloadFiles); returns the snapshot folder.
hubload::Result<std::string> CachedFiles(const Args& a, hubload::RepoType type, const hubload::HubClient& client,
                                         const hubload::DownloadCallbacks& cb) {
  HUBLOAD_ASSIGN_OR_RETURN(std::string commit, client.ResolveCommit(a.repo_id, a.revision, type));
  HUBLOAD_RETURN_IF_ERROR(client.DownloadFiles(a.repo_id, commit, type, a.files, cb));
  hubload::RepoCache rc(client.options().config.cache_dir, a.repo_id, type);
  if (a.revision != commit) HUBLOAD_RETURN_IF_ERROR(rc.WriteRef(a.revision, commit));
  return rc.SnapshotDir(commit);
}

int Run(Args a, hubload::cli::Global& g) {
  if (int rc = hubload::cli::ApplyRepoArg("download", &a.repo_id, &a.repo_type, a.repo_type_opt->count() > 0,
                                          &a.revision, a.revision_opt->count() > 0, &a.files);
      rc != 0)
    return rc;
  auto type = hubload::ParseRepoType(a.repo_type);
  if (!type.ok()) return hubload::cli::Fail("download", type.status().message());
  // --quiet: the path alone, as hf download --quiet, which also silences the
  // library's warnings; errors are still printed.
  if (a.quiet) spdlog::set_level(spdlog::level::err);
  // As hf download: named files win over the patterns, with a warning.
  if (!a.files.empty() && (!a.include.empty() || !a.exclude.empty())) {
    if (!a.quiet)
      std::fprintf(stderr, "hubload download: warning: ignoring %s since filenames have been explicitly set\n",
                   !a.include.empty() && !a.exclude.empty() ? "--include and --exclude"
                   : !a.include.empty()                      ? "--include"
                                                             : "--exclude");
    a.include.clear();
    a.exclude.clear();
  }
  hubload::ClientOptions opt = g.Client();
  if (a.offline) opt.config.offline = true;
  opt.max_workers = a.max_workers;
  hubload::HubClient client(opt);
  if (a.dry_run) return DryRun(a, *type, client);
  Display display(a.quiet);
  hubload::Result<std::string> out = hubload::Status(hubload::Code::kInternal, "no download made");
  if (a.force || a.files.size() == 1 || (!a.files.empty() && !a.local_dir.empty())) {
    out = EachFile(a, *type, client, display);
  } else if (!a.files.empty()) {
    out = CachedFiles(a, *type, client, display.Callbacks());
  } else {
    hubload::SnapshotRequest r;
    r.repo_id = a.repo_id;
    r.revision = a.revision;
    r.repo_type = *type;
    r.allow_patterns = a.include;
    r.ignore_patterns = a.exclude;
    r.max_workers = a.max_workers;
    r.local_dir = a.local_dir;
    r.callbacks = display.Callbacks();
    out = client.Snapshot(r);
  }
  display.Finish();  // the bars go before the path or the error is printed
  if (!out.ok()) return hubload::cli::FailStatus("download", out.status(), a.json);
  std::printf("%s\n", out->c_str());
  return 0;
}

hubload::cli::Command reg{"download", [](CLI::App& app, hubload::cli::Global& g) {
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("download", "Download files or a whole repo into the Hugging Face cache (as hf download)");
  sub->add_option("repo_id", a->repo_id, "repo id (org/name) or hf://[datasets/|spaces/]org/name[@rev][/path]")
      ->required();
  sub->add_option("files", a->files, "paths in the repo (default: the whole repo)");
  a->revision_opt =
      sub->add_option("--revision", a->revision, "branch, tag, refs/pr/N or 40-hex commit")->capture_default_str();
  a->repo_type_opt = sub->add_option("--repo-type", a->repo_type, "model, dataset or space")->capture_default_str();
  sub->add_option("--include", a->include, "glob of files to download (huggingface_hub fnmatch rules)");
  sub->add_option("--exclude", a->exclude, "glob of files to skip");
  sub->add_option("--local-dir", a->local_dir, "write plain files into this folder instead of the cache");
  sub->add_option("--max-workers", a->max_workers, "files downloaded at once")->capture_default_str()->check(CLI::Range(1, 256));
  sub->add_flag("--offline", a->offline, "no network: serve from the cache or fail");
  sub->add_flag("-q,--quiet", a->quiet, "no progress output");
  sub->add_flag("--force-download", a->force, "download again even when cached (the blob is replaced after verification)");
  sub->add_flag("--dry-run", a->dry_run,
                "list each file, its size, whether it is cached and the bytes a download would fetch; download nothing");
  sub->add_flag("--json", a->json, "with --dry-run: machine-readable output");
  return [a, &g]() { return Run(*a, g); };
}};

}  // namespace
