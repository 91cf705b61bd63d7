// `hubload download REPO_ID [FILE...]`: hf download in C++ (huggingface_hub
// 1.x options; REPO_ID may be an hf:// URI). The last stdout
// line is the local path (the file when one FILE is given, else the snapshot
// folder or --local-dir). Progress goes to stderr: bars on a terminal, one
// line per finished file otherwise, nothing with --quiet.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>

#include "hubload/hub.h"
#include <nlohmann/json.hpp>

#include "hubload/cache.h"
#include "tools/hubload/cli.h"
#include "tools/hubload/hf_uri.h"

namespace {

// Progress display on stderr (thread-safe: callbacks arrive from workers).
class Display {
 public:
  Display(bool quiet, bool tty) : quiet_(quiet), tty_(tty), start_(std::chrono::steady_clock::now()) {}

  hubload::DownloadCallbacks Callbacks() {
    hubload::DownloadCallbacks cb;
    if (quiet_) return cb;
    cb.on_file_done = [this](const std::string& path, const std::string& local) { FileDone(path, local); };
    cb.on_progress = [this](uint64_t done, uint64_t total) { Total(done, total); };
    cb.on_bytes_received = [this](uint64_t n) {
      std::lock_guard<std::mutex> l(mu_);
      received_ = n;  // the rate counts only bytes of this run, not a resumed partial
    };
    if (tty_)
      cb.on_file_progress = [this](const std::string& p, uint64_t d, uint64_t t) { FileProgress(p, d, t); };
    return cb;
  }
  void Finish() {
    if (quiet_ || !tty_) return;
    std::lock_guard<std::mutex> l(mu_);
    Clear();
  }

 private:
  void FileDone(const std::string& path, const std::string& local) {
    std::lock_guard<std::mutex> l(mu_);
    active_.erase(path);
    if (tty_) Clear();
    std::fprintf(stderr, "done %s\n", path.c_str());
    if (tty_) Draw(true);
  }
  void FileProgress(const std::string& p, uint64_t d, uint64_t t) {
    std::lock_guard<std::mutex> l(mu_);
    active_[p] = {d, t};
    Draw(false);
  }
  void Total(uint64_t d, uint64_t t) {
    std::lock_guard<std::mutex> l(mu_);
    done_ = d;
    total_ = t;
    if (tty_) Draw(false);
  }
  static std::string Bar(uint64_t d, uint64_t t) {
    int w = 24, filled = t ? static_cast<int>(w * static_cast<double>(d) / static_cast<double>(t)) : 0;
    if (filled > w) filled = w;
    return "[" + std::string(filled, '#') + std::string(w - filled, '.') + "]";
  }
  void Clear() {
    for (int i = 0; i < lines_; ++i) std::fprintf(stderr, "\x1b[1A\x1b[2K");
    lines_ = 0;
  }
  void Draw(bool force) {
    auto now = std::chrono::steady_clock::now();
    if (!force && now - last_ < std::chrono::milliseconds(150)) return;
    last_ = now;
    Clear();
    int shown = 0;
    for (auto& [p, dt] : active_) {
      if (shown == 8) break;
      std::fprintf(stderr, "%s %s / %s  %s\n", Bar(dt.first, dt.second).c_str(), hubload::cli::HumanBytes(dt.first).c_str(),
                   dt.second ? hubload::cli::HumanBytes(dt.second).c_str() : "?", p.c_str());
      ++shown;
    }
    double secs = std::chrono::duration<double>(now - start_).count();
    double rate = secs > 0 ? static_cast<double>(received_) / secs : 0;
    std::string eta = rate > 0 && total_ > done_ ? std::to_string(static_cast<int>((total_ - done_) / rate)) + " s" : "-";
    std::fprintf(stderr, "%s %s / %s  %s/s  ETA %s  total\n", Bar(done_, total_).c_str(), hubload::cli::HumanBytes(done_).c_str(),
                 hubload::cli::HumanBytes(total_).c_str(), hubload::cli::HumanBytes(rate).c_str(), eta.c_str());
    lines_ = shown + 1;
  }

  bool quiet_, tty_;
  std::mutex mu_;
  std::map<std::string, std::pair<uint64_t, uint64_t>> active_;
  uint64_t done_ = 0, total_ = 0, received_ = 0;
  int lines_ = 0;
  std::chrono::steady_clock::time_point start_, last_{};
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

// `download --dry-run`: the listing (which writes trees/<commit>.json and
// refs/<revision>, as any listing does) and a look at the cache; no download.
int DryRun(const Args& a, hubload::RepoType type, const hubload::HubClient& client) {
  auto listing = client.ListFiles(a.repo_id, a.revision, type);
  if (!listing.ok()) return hubload::cli::Fail("download", listing.status().ToString());
  std::map<std::string, const hubload::RepoFile*> by_path;
  for (auto& f : listing->files) by_path[f.path] = &f;
  std::vector<const hubload::RepoFile*> chosen;
  if (!a.files.empty()) {
    for (auto& name : a.files) {
      auto it = by_path.find(name);
      if (it == by_path.end())
        return hubload::cli::Fail("download", "'" + name + "' is not a file of " + a.repo_id + " at " +
                                                  listing->commit + " (revision " + a.revision + ")");
      if (hubload::MatchesPatterns(name, a.include, a.exclude)) chosen.push_back(it->second);
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
    std::printf("%s\n", out.dump(2).c_str());
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

// --force-download of several files: each file again through Download
// (force_download), one at a time, after the listing picked them.
hubload::Result<std::string> ForceMany(const Args& a, hubload::RepoType type, const hubload::HubClient& client,
                                       const hubload::DownloadCallbacks& cb) {
  std::vector<std::string> files;
  std::string commit;
  if (a.files.empty()) {
    HUBLOAD_ASSIGN_OR_RETURN(hubload::RepoListing l, client.ListFiles(a.repo_id, a.revision, type));
    commit = l.commit;
    for (auto& f : l.files)
      if (hubload::MatchesPatterns(f.path, a.include, a.exclude)) files.push_back(f.path);
  } else {
    HUBLOAD_ASSIGN_OR_RETURN(commit, client.ResolveCommit(a.repo_id, a.revision, type));
    for (auto& f : a.files)
      if (hubload::MatchesPatterns(f, a.include, a.exclude)) files.push_back(f);
  }
  for (auto& f : files) {
    hubload::FileRequest r;
    r.repo_id = a.repo_id;
    r.filename = f;
    r.revision = commit;
    r.repo_type = type;
    r.local_dir = a.local_dir;
    r.force_download = true;
    HUBLOAD_ASSIGN_OR_RETURN(std::string p, client.Download(r));
    if (cb.on_file_done) cb.on_file_done(f, p);
  }
  hubload::RepoCache rc(client.options().config.cache_dir, a.repo_id, type);
  if (!a.local_dir.empty()) return a.local_dir;
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
  hubload::ClientOptions opt = g.Client();
  if (a.offline) opt.config.offline = true;
  opt.max_workers = a.max_workers;
  hubload::HubClient client(opt);
  if (a.dry_run) return DryRun(a, *type, client);
  Display display(a.quiet, ::isatty(2) == 1);
  auto cb = display.Callbacks();
  std::string out;
  if (a.force && !(a.files.size() == 1 && a.include.empty() && a.exclude.empty())) {
    auto p = ForceMany(a, *type, client, cb);
    display.Finish();
    if (!p.ok()) return hubload::cli::Fail("download", p.status().ToString());
    out = *p;
  } else if (a.files.size() == 1 && a.include.empty() && a.exclude.empty()) {
    hubload::FileRequest r;
    r.repo_id = a.repo_id;
    r.filename = a.files[0];
    r.revision = a.revision;
    r.repo_type = *type;
    r.local_dir = a.local_dir;
    r.force_download = a.force;
    auto p = client.Download(r);
    display.Finish();
    if (!p.ok()) return hubload::cli::Fail("download", p.status().ToString());
    if (cb.on_file_done) cb.on_file_done(r.filename, *p);
    out = *p;
  } else if (!a.files.empty()) {
    std::vector<std::string> files;
    for (auto& f : a.files)
      if (hubload::MatchesPatterns(f, a.include, a.exclude)) files.push_back(f);
    if (!a.local_dir.empty()) {
      for (auto& f : files) {
        hubload::FileRequest r;
        r.repo_id = a.repo_id;
        r.filename = f;
        r.revision = a.revision;
        r.repo_type = *type;
        r.local_dir = a.local_dir;
        auto p = client.Download(r);
        if (!p.ok()) return hubload::cli::Fail("download", p.status().ToString());
        if (cb.on_file_done) cb.on_file_done(f, *p);
      }
      out = a.local_dir;
    } else {
      auto commit = client.ResolveCommit(a.repo_id, a.revision, *type);
      if (!commit.ok()) return hubload::cli::Fail("download", commit.status().ToString());
      hubload::Status st = client.DownloadFiles(a.repo_id, *commit, *type, files, cb);
      display.Finish();
      if (!st.ok()) return hubload::cli::Fail("download", st.ToString());
      hubload::RepoCache rc(client.options().config.cache_dir, a.repo_id, *type);
      if (a.revision != *commit) {
        auto w = rc.WriteRef(a.revision, *commit);
        if (!w.ok()) return hubload::cli::Fail("download", w.ToString());
      }
      out = rc.SnapshotDir(*commit);
    }
  } else {
    hubload::SnapshotRequest r;
    r.repo_id = a.repo_id;
    r.revision = a.revision;
    r.repo_type = *type;
    r.allow_patterns = a.include;
    r.ignore_patterns = a.exclude;
    r.max_workers = a.max_workers;
    r.local_dir = a.local_dir;
    r.callbacks = cb;
    auto p = client.Snapshot(r);
    display.Finish();
    if (!p.ok()) return hubload::cli::Fail("download", p.status().ToString());
    out = *p;
  }
  std::printf("%s\n", out.c_str());
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
  sub->add_flag("--quiet", a->quiet, "no progress output");
  sub->add_flag("--force-download", a->force, "download again even when cached (the blob is replaced after verification)");
  sub->add_flag("--dry-run", a->dry_run,
                "list each file, its size, whether it is cached and the bytes a download would fetch; download nothing");
  sub->add_flag("--json", a->json, "with --dry-run: machine-readable output");
  return [a, &g]() { return Run(*a, g); };
}};

}  // namespace
