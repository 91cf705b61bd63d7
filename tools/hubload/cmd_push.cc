// `hubload upload REPO_ID [LOCAL_PATH [PATH_IN_REPO]]` as huggingface_hub
// 1.x `hf upload` (upload_folder / upload_file in C++, hubload/upload.h), and
// `hubload push LOCAL_DIR REPO_ID`, its deprecated alias (one line on stderr
// says so). Warnings about skipped or suspicious files go to stderr, one
// line each naming the file. On success stdout gets two lines: the commit id and
// the commit URL (then the pull-request URL with --create-pr). Progress goes
// to stderr when stderr is a terminal: per phase (hashing, uploading) a line
// per file in progress and a total line (bytes, rate, ETA) left on screen;
// nothing otherwise (or with --quiet or HF_HUB_DISABLE_PROGRESS_BARS=1). Errors: one line on stderr, exit 1.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "hubload/upload.h"
#include "tools/hubload/cli.h"
#include "tools/hubload/hf_uri.h"
#include "tools/hubload/progress_bar.h"

namespace {

// Progress on a terminal, through the CLI's renderer (progress_bar.h): per
// phase ("hashing", "uploading", then "committing") a line per file in
// progress and the phase's total line, which stays on screen when the next
// phase starts.
void Show(hubload::cli::ProgressBar* bar, const hubload::UploadProgress& p) {
  const char* label = p.phase == hubload::UploadPhase::kHashing     ? "hashing  "
                      : p.phase == hubload::UploadPhase::kUploading ? "uploading"
                                                                    : "committing";
  bar->Phase(label);
  if (p.phase == hubload::UploadPhase::kCommitting) return;
  bar->Update(p.path_in_repo, p.file_bytes_done, p.file_bytes_total, p.bytes_done, p.bytes_total, {},
              p.path_in_repo.empty());
}

struct Args {
  std::string local_path, repo_id;
  std::string path_in_repo, revision, commit_message, commit_description, parent_commit;
  std::string repo_type = "model";
  bool create_pr = false, private_repo = false, quiet = false;
  std::vector<std::string> include, exclude, del;
  int workers = 8;
  bool path_in_repo_given = false;  // upload: PATH_IN_REPO given
  bool local_path_given = false;    // upload: LOCAL_PATH given
  CLI::Option* revision_opt = nullptr;
  CLI::Option* repo_type_opt = nullptr;
};

// hf upload's argument rules (huggingface_hub commands/upload.py): no
// LOCAL_PATH = the local file or folder named like the repo (its last
// segment); a file goes to PATH_IN_REPO or its own name at the root; a folder
// to PATH_IN_REPO or the root. Returns "" or why not.
std::string ResolvePaths(Args* a, const std::string& cmd) {
  std::error_code ec;
  if (!a->local_path_given) {
    std::string name = a->repo_id.substr(a->repo_id.rfind('/') + 1);
    if (std::filesystem::is_regular_file(name, ec)) {
      a->local_path = name;
      a->path_in_repo = name;
    } else if (std::filesystem::is_directory(name, ec)) {
      a->local_path = name;
      a->path_in_repo = "";
    } else {
      return "'" + name + "' is not a local file or folder; give LOCAL_PATH (e.g. `hubload " + cmd + " " +
             a->repo_id + " .`)";
    }
    return {};
  }
  if (!a->path_in_repo_given && std::filesystem::is_regular_file(a->local_path, ec))
    a->path_in_repo = std::filesystem::path(a->local_path).filename().string();
  if (a->path_in_repo == ".") a->path_in_repo.clear();
  return {};
}

int Run(Args a, hubload::cli::Global& g, const std::string& cmd) {
  if (int rc = hubload::cli::ApplyRepoArg(cmd, &a.repo_id, &a.repo_type, a.repo_type_opt->count() > 0, &a.revision,
                                          a.revision_opt->count() > 0, nullptr);
      rc != 0)
    return rc;
  auto type = hubload::ParseRepoType(a.repo_type);
  if (!type.ok()) return hubload::cli::Fail(cmd, type.status().message());
  std::error_code ec;
  if (a.local_path_given && !std::filesystem::exists(a.local_path, ec))
    return hubload::cli::Fail(cmd, "'" + a.local_path + "' does not exist (LOCAL_PATH: a file or folder to upload)");
  if (std::string why = ResolvePaths(&a, cmd); !why.empty()) {
    std::fprintf(stderr, "hubload %s: %s\n", cmd.c_str(), why.c_str());
    return 2;
  }
  hubload::ClientOptions opt = g.Client();
  opt.upload_workers = a.workers;
  hubload::HubClient client(opt);
  hubload::UploadFolderRequest req;
  req.repo_id = a.repo_id;
  req.repo_type = *type;
  req.folder = a.local_path;
  req.path_in_repo = a.path_in_repo;
  req.revision = a.revision.empty() ? "main" : a.revision;
  req.commit_message = a.commit_message;
  req.commit_description = a.commit_description;
  req.create_pr = a.create_pr;
  req.parent_commit = a.parent_commit;
  req.allow_patterns = a.include;
  req.ignore_patterns = a.exclude;
  req.delete_patterns = a.del;
  req.private_repo = a.private_repo;
  // create_repo(exist_ok=True) first, then (as hf upload) a --revision that
  // names no branch yet is created from the default branch.
  auto repo = client.CreateRepo(a.repo_id, *type, a.private_repo);
  if (!repo.ok()) return hubload::cli::Fail(cmd, repo.status().ToString());
  if (!a.revision.empty() && !a.create_pr) {
    auto head = client.ResolveCommit(a.repo_id, a.revision, *type);
    if (!head.ok() && head.status().code() == hubload::Code::kRevisionNotFound) {
      hubload::CreateBranchOptions bo;
      bo.repo_type = *type;
      bo.exist_ok = true;
      hubload::Status st = client.CreateBranch(a.repo_id, a.revision, bo);
      if (!st.ok()) return hubload::cli::Fail(cmd, st.ToString());
      if (!a.quiet) std::fprintf(stderr, "hubload %s: created branch %s\n", cmd.c_str(), a.revision.c_str());
    } else if (!head.ok()) {
      return hubload::cli::Fail(cmd, head.status().ToString());
    }
  }
  std::shared_ptr<hubload::cli::ProgressBar> bar;
  if (hubload::cli::ProgressWanted(a.quiet)) {
    bar = std::make_shared<hubload::cli::ProgressBar>();
    req.callbacks.on_progress = [bar](const hubload::UploadProgress& p) { Show(bar.get(), p); };
  }
  auto done = [&bar] {
    if (bar) bar->Finish(/*keep=*/true);
  };
  hubload::Result<hubload::CommitInfo> info = hubload::Status(hubload::Code::kInternal, "no upload made");
  if (std::filesystem::is_regular_file(a.local_path, ec)) {
    if (!a.include.empty() || !a.exclude.empty() || !a.del.empty()) {
      done();
      std::fprintf(stderr, "hubload %s: --include/--exclude/--delete apply to a folder, not to the file '%s'\n",
                   cmd.c_str(), a.local_path.c_str());
      return 2;
    }
    if (req.commit_message.empty()) req.commit_message = "Upload " + a.path_in_repo + " with hubload";
    info = client.CreateCommit(req, {{a.path_in_repo, a.local_path}}, {});
  } else {
    info = client.UploadFolder(req);
  }
  done();
  if (!info.ok()) return hubload::cli::Fail(cmd, info.status().ToString());
  for (auto& w : info->warnings) std::fprintf(stderr, "hubload %s: warning: %s\n", cmd.c_str(), w.c_str());
  if (!info->committed && !a.quiet)
    std::fprintf(stderr, "hubload %s: no file changed; no commit made (head %s)\n", cmd.c_str(),
                 info->commit_oid.c_str());
  std::printf("%s\n%s\n", info->commit_oid.c_str(), info->commit_url.c_str());
  if (!info->pr_url.empty()) std::printf("%s\n", info->pr_url.c_str());
  return 0;
}

// Options `upload` and `push` share, with hf upload's names.
void AddCommon(CLI::App* sub, const std::shared_ptr<Args>& a) {
  a->revision_opt = sub->add_option("--revision", a->revision,
                                    "branch to commit to (default main; created from the default branch when absent)");
  sub->add_option("--commit-message", a->commit_message, "commit title");
  sub->add_option("--commit-description", a->commit_description, "commit description");
  a->repo_type_opt = sub->add_option("--repo-type", a->repo_type, "model, dataset or space")->capture_default_str();
  sub->add_flag("--create-pr", a->create_pr, "commit to a new pull request refs/pr/N");
  sub->add_flag("--private", a->private_repo, "create the repo as private (when it does not exist)");
  sub->add_option("--include", a->include, "only upload files matching this glob (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--exclude", a->exclude, "skip files matching this glob (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--delete", a->del, "delete remote files under PATH_IN_REPO matching this glob (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_option("--parent-commit", a->parent_commit, "refuse the commit unless the branch head is this commit");
  sub->add_option("--workers", a->workers, "parallel LFS part uploads")->capture_default_str();
  sub->add_flag("-q,--quiet", a->quiet, "no progress output");
}

hubload::cli::Command upload_reg{"upload", [](CLI::App& app, hubload::cli::Global& g) {
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand(
      "upload", "Upload a local folder or file to a Hub repo in one commit (as hf upload REPO_ID LOCAL_PATH [PATH_IN_REPO])");
  sub->add_option("repo_id", a->repo_id, "repo id (org/name) or hf://[datasets/|spaces/]org/name; created when absent")
      ->required();
  auto* lp = sub->add_option("local_path", a->local_path,
                             "file or folder to upload (default: the local file or folder named like the repo)");
  auto* pir = sub->add_option("path_in_repo", a->path_in_repo,
                              "where in the repo (default: the file's name, or the root for a folder)");
  AddCommon(sub, a);
  return [a, lp, pir, &g]() {
    a->local_path_given = lp->count() > 0;
    a->path_in_repo_given = pir->count() > 0;
    return Run(*a, g, "upload");
  };
}};

hubload::cli::Command push_reg{"push", [](CLI::App& app, hubload::cli::Global& g) {
  auto a = std::make_shared<Args>();
  auto* sub = app.add_subcommand("push", "Deprecated alias: `push LOCAL_DIR REPO_ID` = `upload REPO_ID LOCAL_DIR`");
  sub->add_option("LOCAL_DIR", a->local_path, "folder to upload")->required();
  sub->add_option("REPO_ID", a->repo_id, "repo id, e.g. org/name (created when absent)")->required();
  auto* pir = sub->add_option("--path-in-repo", a->path_in_repo, "folder in the repo to upload into (default: root)");
  AddCommon(sub, a);
  return [a, pir, &g]() {
    std::fprintf(stderr, "hubload push: deprecated; use `hubload upload %s %s%s%s` (same options)\n",
                 a->repo_id.c_str(), a->local_path.c_str(), a->path_in_repo.empty() ? "" : " ",
                 a->path_in_repo.c_str());
    a->local_path_given = true;
    a->path_in_repo_given = pir->count() > 0;
    return Run(*a, g, "push");
  };
}};

}  // namespace
