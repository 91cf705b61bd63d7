// `hubload store add ROOT REPO_ID FOLDER`: creates a repo of a server store from a folder.
#include <cstdio>

#include "hubload/server.h"
#include "tools/hubload/cli.h"
#include "tools/hubload/hf_uri.h"

namespace {

struct StoreArgs {
  std::string root, repo_id, folder;
  hubload::server::CreateRepoOptions opt;
  bool gated = false;
  std::string repo_type = "model";
};

hubload::cli::Command reg{"store", [](CLI::App& app, hubload::cli::Global&) {
  auto a = std::make_shared<StoreArgs>();
  auto* sub = app.add_subcommand("store", "Manage a `hubload serve` store");
  sub->require_subcommand(1);
  auto* add = sub->add_subcommand("add", "Create (or add a commit to) a repo from a plain folder; prints the commit id");
  add->add_option("root", a->root, "store root folder")->required();
  add->add_option("repo_id", a->repo_id, "repo id (org/name) or hf://[datasets/|spaces/]org/name[@branch]")
      ->required();
  add->add_option("folder", a->folder, "folder whose files become the repo tree")->required();
  add->add_option("--repo-type", a->repo_type, "model|dataset|space")->capture_default_str();
  add->add_option("--revision", a->opt.branch, "branch to commit to")->capture_default_str();
  add->add_option("--message", a->opt.commit_message, "commit message")->capture_default_str();
  add->add_flag("--private", a->opt.private_repo, "make the repo private");
  add->add_flag("--gated", a->gated, "make the repo gated (auto)");
  add->add_option("--read-token", a->opt.read_tokens, "token allowed to read the private repo (repeatable)");
  add->add_option("--gated-token", a->opt.gated_tokens, "token approved for the gated repo (repeatable)");
  add->add_option("--lfs-threshold", a->opt.lfs_threshold_bytes, "files of at least this size are LFS (e.g. 10MB)")
      ->capture_default_str()
      ->transform(hubload::cli::SizeToBytes());
  return [a, add]() {
    if (int rc = hubload::cli::ApplyRepoArg("store add", &a->repo_id, &a->repo_type,
                                            add->get_option("--repo-type")->count() > 0, &a->opt.branch,
                                            add->get_option("--revision")->count() > 0, nullptr);
        rc != 0)
      return rc;
    if (a->gated) a->opt.gated = "auto";
    auto type = hubload::ParseRepoType(a->repo_type);
    if (!type.ok()) return hubload::cli::Fail("store add", type.status().message());
    a->opt.repo_type = *type;
    std::error_code ec;
    if (!std::filesystem::is_directory(a->root, ec)) std::filesystem::create_directories(a->root, ec);
    auto c = hubload::server::CreateRepoFromFolder(a->root, a->repo_id, a->folder, a->opt);
    if (!c.ok()) return hubload::cli::Fail("store add", c.status().ToString());
    std::printf("%s\n", c->c_str());
    return 0;
  };
}};

}  // namespace
