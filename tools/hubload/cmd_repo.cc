// `hubload repo branch create|delete`, `repo tag create|delete|list`,
// `repo refs`, `repo commits`: branches, tags and history on the Hub, as
// huggingface_hub 1.x `hf repo branch ...` / `hf repo tag ...` and HfApi
// list_repo_refs / list_repo_commits (HubClient, hub/refs.cc).
// Exit codes: 0 done, 1 refused or failed (the reason on stderr), 2 usage.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "hubload/hub.h"
#include "hubload/reasons.h"
#include "tools/hubload/cli.h"
#include "tools/hubload/hf_uri.h"
#include "util/json.h"

namespace {

using hubload::cli::Fail;
using nlohmann::json;

struct RepoArgs {
  std::string repo_id, name, revision, message, repo_type = "model";
  bool exist_ok = false, as_json = false, yes = false;
};

void AddType(CLI::App* c, RepoArgs* a) {
  c->add_option("--repo-type", a->repo_type, "model, dataset or space")
      ->capture_default_str()
      ->check(CLI::IsMember({"model", "dataset", "space"}));
}

json RefsJson(const std::vector<hubload::GitRefInfo>& v) {
  json a = json::array();
  for (auto& r : v) a.push_back({{"name", r.name}, {"ref", r.ref}, {"target_commit", r.target_commit}});
  return a;
}

void PrintRefs(const char* kind, const std::vector<hubload::GitRefInfo>& v) {
  for (auto& r : v) std::printf("%-8s %-40s %s\n", kind, r.name.c_str(), r.target_commit.c_str());
}

// --exist-ok and the ref is there already: success, saying so (nothing was created).
int Exists(const char* kind, const RepoArgs& a) {
  std::printf("%s %s of %s exists already (--exist-ok: nothing changed)\n", kind, a.name.c_str(), a.repo_id.c_str());
  return 0;
}

int Run(const std::string& what, const RepoArgs& a, hubload::cli::Global& g) {
  const std::string cmd = "repo " + what;
  auto type = hubload::ParseRepoType(a.repo_type);
  if (!type.ok()) return Fail(cmd, type.status().message());
  hubload::HubClient client(g.Client());
  if (what == "branch create") {
    hubload::CreateBranchOptions o;
    o.repo_type = *type;
    o.revision = a.revision;
    // Asked without exist_ok first, so that an existing branch is reported as such.
    hubload::Status st = client.CreateBranch(a.repo_id, a.name, o);
    if (a.exist_ok && st.Is(hubload::reason::kRefExists)) return Exists("branch", a);
    if (a.exist_ok && st.code() == hubload::Code::kPermissionDenied) {  // the library's listed-branch rule
      o.exist_ok = true;
      if (client.CreateBranch(a.repo_id, a.name, o).ok()) return Exists("branch", a);
    }
    if (!st.ok()) return Fail(cmd, st.ToString());
    std::printf("created branch %s of %s%s\n", a.name.c_str(), a.repo_id.c_str(),
                a.revision.empty() ? "" : (" at " + a.revision).c_str());
    return 0;
  }
  if (what == "branch delete") {
    hubload::Status st = client.DeleteBranch(a.repo_id, a.name, *type);
    if (!st.ok()) return Fail(cmd, st.ToString());
    std::printf("deleted branch %s of %s\n", a.name.c_str(), a.repo_id.c_str());
    return 0;
  }
  if (what == "tag create") {
    hubload::CreateTagOptions o;
    o.repo_type = *type;
    o.revision = a.revision;
    o.message = a.message;
    hubload::Status st = client.CreateTag(a.repo_id, a.name, o);
    if (a.exist_ok && st.Is(hubload::reason::kRefExists)) return Exists("tag", a);
    if (!st.ok()) return Fail(cmd, st.ToString());
    std::printf("created tag %s of %s at %s\n", a.name.c_str(), a.repo_id.c_str(),
                a.revision.empty() ? "main" : a.revision.c_str());
    return 0;
  }
  if (what == "tag delete") {
    hubload::Status st = client.DeleteTag(a.repo_id, a.name, *type);
    if (!st.ok()) return Fail(cmd, st.ToString());
    std::printf("deleted tag %s of %s\n", a.name.c_str(), a.repo_id.c_str());
    return 0;
  }
  if (what == "tag list" || what == "refs") {
    auto refs = client.ListRepoRefs(a.repo_id, *type, what == "refs");
    if (!refs.ok()) return Fail(cmd, refs.status().ToString());
    if (a.as_json) {
      json out{{"tags", RefsJson(refs->tags)}};
      if (what == "refs") {
        out["branches"] = RefsJson(refs->branches);
        out["pull_requests"] = RefsJson(refs->pull_requests);
      }
      std::printf("%s\n", hubload::util::DumpJson(out, 2).c_str());
      return 0;
    }
    if (what == "refs") PrintRefs("branch", refs->branches);
    PrintRefs("tag", refs->tags);
    if (what == "refs") PrintRefs("pr", refs->pull_requests);
    return 0;
  }
  if (what == "commits") {
    auto commits = client.ListRepoCommits(a.repo_id, a.revision.empty() ? "main" : a.revision, *type);
    if (!commits.ok()) return Fail(cmd, commits.status().ToString());
    if (a.as_json) {
      json arr = json::array();
      for (auto& c : *commits)
        arr.push_back({{"commit_id", c.commit_id}, {"title", c.title}, {"message", c.message},
                       {"authors", c.authors}, {"created_at", c.created_at}});
      std::printf("%s\n", hubload::util::DumpJson(arr, 2).c_str());
      return 0;
    }
    for (auto& c : *commits) std::printf("%s %s %s\n", c.commit_id.c_str(), c.created_at.c_str(), c.title.c_str());
    return 0;
  }
  return 2;
}

hubload::cli::Command reg{"repo", [](CLI::App& app, hubload::cli::Global& g) {
  auto* sub = app.add_subcommand("repo", "Branches, tags, refs and commits of a Hub repo (as `hf repo`)");
  sub->require_subcommand(1);
  auto a = std::make_shared<RepoArgs>();
  auto repo_arg = [&](CLI::App* c) {
    c->add_option("repo_id", a->repo_id, "repo id (org/name) or hf://[datasets/|spaces/]org/name[@rev]")->required();
  };

  auto* branch = sub->add_subcommand("branch", "Create or delete a branch");
  branch->require_subcommand(1);
  auto* bc = branch->add_subcommand("create", "Create a branch (huggingface_hub create_branch)");
  repo_arg(bc);
  bc->add_option("branch", a->name, "new branch name")->required();
  bc->add_option("--revision", a->revision, "branch, tag or commit to start from (default: the default branch)");
  bc->add_flag("--exist-ok", a->exist_ok, "an existing branch is not an error");
  AddType(bc, a.get());
  auto add_delete = [&](CLI::App* parent, const std::string& kind) {
    auto* d = parent->add_subcommand("delete", "Delete a " + kind + " (huggingface_hub delete_" + kind + ")");
    repo_arg(d);
    d->add_option(kind, a->name, kind + " name")->required();
    d->add_flag("-y,--yes", a->yes, "accepted for `hf` compatibility (never asks)");
    AddType(d, a.get());
    return d;
  };
  auto* bd = add_delete(branch, "branch");

  auto* tag = sub->add_subcommand("tag", "Create, delete or list tags");
  tag->require_subcommand(1);
  auto* tc = tag->add_subcommand("create", "Tag a revision (huggingface_hub create_tag)");
  repo_arg(tc);
  tc->add_option("tag", a->name, "tag name")->required();
  tc->add_option("--revision", a->revision, "branch, tag or commit to tag (default: main)");
  tc->add_option("-m,--message", a->message, "tag message");
  tc->add_flag("--exist-ok", a->exist_ok, "an existing tag is not an error");
  AddType(tc, a.get());
  auto* td = add_delete(tag, "tag");
  auto* tl = tag->add_subcommand("list", "List the tags and the commits they point to");
  repo_arg(tl);
  tl->add_flag("--json", a->as_json, "machine-readable output");
  AddType(tl, a.get());

  auto* refs = sub->add_subcommand("refs", "List branches, tags and pull-request refs (list_repo_refs)");
  repo_arg(refs);
  refs->add_flag("--json", a->as_json, "machine-readable output");
  AddType(refs, a.get());
  auto* commits = sub->add_subcommand("commits", "List the commits of a revision, newest first (list_repo_commits)");
  repo_arg(commits);
  commits->add_option("--revision", a->revision, "branch, tag or commit (default: main)");
  commits->add_flag("--json", a->as_json, "machine-readable output");
  AddType(commits, a.get());

  // REPO_ID may be an hf:// URI: its type, and its revision where the command takes one.
  auto apply_uri = [a](CLI::App* leaf, const std::string& what) -> int {
    const CLI::Option* rev = leaf->get_option_no_throw("--revision");
    if (int rc = hubload::cli::ApplyRepoArg("repo " + what, &a->repo_id, &a->repo_type,
                                            leaf->get_option("--repo-type")->count() > 0, &a->revision,
                                            rev && rev->count() > 0, nullptr);
        rc != 0)
      return rc;
    if (!rev && !a->revision.empty()) {
      std::fprintf(stderr, "hubload repo %s: takes no revision (drop the '@%s' of the repo id)\n", what.c_str(),
                   a->revision.c_str());
      return 2;
    }
    return 0;
  };
  return [=, &g]() -> int {
    const std::pair<CLI::App*, const char*> leaves[] = {{bc, "branch create"}, {bd, "branch delete"},
                                                        {tc, "tag create"},    {td, "tag delete"},
                                                        {tl, "tag list"},      {refs, "refs"},
                                                        {commits, "commits"}};
    for (auto& [leaf, what] : leaves)
      if (leaf->parsed()) {
        if (int rc = apply_uri(leaf, what); rc != 0) return rc;
        return Run(what, *a, g);
      }
    return 2;
  };
}};

}  // namespace
