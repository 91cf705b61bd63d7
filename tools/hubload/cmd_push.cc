// `hubload push LOCAL_DIR REPO_ID`: huggingface_hub upload_folder in C++
// (hubload/upload.h). On success stdout gets two lines: the commit id and
// the commit URL (then the pull-request URL with --create-pr). Progress goes
// to stderr as a bar with bytes, rate and ETA when stderr is a terminal;
// nothing otherwise (or with --quiet). Errors: one line on stderr, exit 1.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <mutex>

#include "hubload/upload.h"
#include "tools/hubload/cli.h"

namespace {

// One progress line per phase on a terminal (callbacks are serialised by the library).
class Bar {
 public:
  void Update(const hubload::UploadProgress& p) {
    std::lock_guard<std::mutex> l(mu_);
    auto now = std::chrono::steady_clock::now();
    if (p.phase != phase_ || !started_) {
      if (started_) std::fprintf(stderr, "\n");
      phase_ = p.phase;
      started_ = true;
      start_ = now;
    }
    const char* label = p.phase == hubload::UploadPhase::kHashing     ? "hashing  "
                        : p.phase == hubload::UploadPhase::kUploading ? "uploading"
                                                                      : "committing";
    if (p.phase == hubload::UploadPhase::kCommitting) {
      std::fprintf(stderr, "\r\x1b[2K%s", label);
      std::fflush(stderr);
      return;
    }
    double secs = std::chrono::duration<double>(now - start_).count();
    double rate = secs > 0 ? static_cast<double>(p.bytes_done) / secs : 0;
    std::string eta = rate > 0 && p.bytes_total > p.bytes_done
                          ? std::to_string(static_cast<long long>((p.bytes_total - p.bytes_done) / rate)) + " s"
                          : "-";
    int w = 24;
    int filled = p.bytes_total ? static_cast<int>(w * static_cast<double>(p.bytes_done) / p.bytes_total) : w;
    if (filled > w) filled = w;
    std::fprintf(stderr, "\r\x1b[2K%s [%s%s] %s / %s  %s/s  ETA %s", label, std::string(filled, '#').c_str(),
                 std::string(w - filled, '.').c_str(), hubload::cli::HumanBytes(static_cast<double>(p.bytes_done)).c_str(),
                 hubload::cli::HumanBytes(static_cast<double>(p.bytes_total)).c_str(), hubload::cli::HumanBytes(rate).c_str(), eta.c_str());
    std::fflush(stderr);
  }
  void Done() {
    std::lock_guard<std::mutex> l(mu_);
    if (started_) std::fprintf(stderr, "\n");
    started_ = false;
  }

 private:
  std::mutex mu_;
  bool started_ = false;
  hubload::UploadPhase phase_ = hubload::UploadPhase::kHashing;
  std::chrono::steady_clock::time_point start_;
};

struct Args {
  std::string local_dir, repo_id;
  std::string path_in_repo, revision = "main", commit_message, commit_description, parent_commit;
  std::string repo_type = "model";
  bool create_pr = false, private_repo = false, quiet = false;
  std::vector<std::string> include, exclude, del;
  int workers = 8;
};

int Run(const Args& a, hubload::cli::Global& g) {
  auto type = hubload::ParseRepoType(a.repo_type);
  if (!type.ok()) return hubload::cli::Fail("push", type.status().message());
  hubload::ClientOptions opt = g.Client();
  opt.upload_workers = a.workers;
  hubload::UploadFolderRequest req;
  req.repo_id = a.repo_id;
  req.repo_type = *type;
  req.folder = a.local_dir;
  req.path_in_repo = a.path_in_repo;
  req.revision = a.revision;
  req.commit_message = a.commit_message;
  req.commit_description = a.commit_description;
  req.create_pr = a.create_pr;
  req.parent_commit = a.parent_commit;
  req.allow_patterns = a.include;
  req.ignore_patterns = a.exclude;
  req.delete_patterns = a.del;
  req.create_repo = true;  // exist_ok: an existing repo is fine
  req.private_repo = a.private_repo;
  Bar bar;
  if (!a.quiet && ::isatty(STDERR_FILENO)) req.callbacks.on_progress = [&bar](const auto& p) { bar.Update(p); };
  auto info = hubload::HubClient(opt).UploadFolder(req);
  bar.Done();
  if (!info.ok()) return hubload::cli::Fail("push", info.status().ToString());
  if (!info->committed && !a.quiet)
    std::fprintf(stderr, "hubload push: no file changed; no commit made (head %s)\n", info->commit_oid.c_str());
  std::printf("%s\n%s\n", info->commit_oid.c_str(), info->commit_url.c_str());
  if (!info->pr_url.empty()) std::printf("%s\n", info->pr_url.c_str());
  return 0;
}

hubload::cli::Command reg{"push", [](CLI::App& app, hubload::cli::Global& g) {
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("push", "Upload a local folder to a Hub repo in one commit (huggingface_hub upload_folder)");
  sub->add_option("LOCAL_DIR", a->local_dir, "folder to upload")->required();
  sub->add_option("REPO_ID", a->repo_id, "repo id, e.g. org/name (created when absent)")->required();
  sub->add_option("--path-in-repo", a->path_in_repo, "folder in the repo to upload into (default: root)");
  sub->add_option("--revision", a->revision, "branch to commit to")->capture_default_str();
  sub->add_option("--commit-message", a->commit_message, "commit title");
  sub->add_option("--commit-description", a->commit_description, "commit description");
  sub->add_option("--parent-commit", a->parent_commit, "refuse the commit unless the branch head is this commit");
  sub->add_option("--repo-type", a->repo_type, "model, dataset or space")->capture_default_str();
  sub->add_flag("--create-pr", a->create_pr, "commit to a new pull request refs/pr/N");
  sub->add_flag("--private", a->private_repo, "create the repo as private (when it does not exist)");
  sub->add_option("--include", a->include, "only upload files matching this glob (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--exclude", a->exclude, "skip files matching this glob (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--delete", a->del, "delete remote files under --path-in-repo matching this glob (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--workers", a->workers, "parallel LFS part uploads")->capture_default_str();
  sub->add_flag("-q,--quiet", a->quiet, "no progress output");
  return [a, &g]() { return Run(*a, g); };
}};

}  // namespace
