// `hubload cache ls|rm|prune|verify` as huggingface_hub 1.x `hf cache`
// (`scan` and `delete` are kept as aliases of `ls` and `rm`):
//   ls ...                              (cmd_cache_ls.cc)
//   rm TARGET... [--revision R] [--repo-type T] [--dry-run] [-y|--yes]
//      TARGET: a repo id, a cache id (model/org/name), an hf:// URI or a 40-hex revision
//   prune [--min-age-s S] [--json]      (orphaned partial downloads)
//   verify REPO_ID [--revision R] [--repo-type T] [--local-dir D]
//          [--fail-on-missing-files] [--fail-on-extra-files] [--json]
// REPO_ID may be an hf:// URI. Warnings (corrupted entries) go to stderr.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "hubload/cache.h"
#include "hubload/hub.h"
#include "hubload/size.h"
#include "tools/hubload/cli.h"
#include "tools/hubload/cmd_cache.h"
#include "tools/hubload/hf_uri.h"
#include "tools/hubload/progress_bar.h"
#include "util/json.h"

namespace {

std::string Human(uint64_t b) { return hubload::cli::HumanBytes(static_cast<double>(b)); }

struct RepoArgs {
  std::string repo_id, revision, repo_type = "model", local_dir;
  bool fail_missing = false, fail_extra = false, json = false, quiet = false;
  CLI::Option* revision_opt = nullptr;
  CLI::Option* repo_type_opt = nullptr;
};

struct RmArgs {
  std::vector<std::string> targets;
  std::string revision, repo_type = "model";
  bool dry_run = false, yes = false;
  CLI::Option* revision_opt = nullptr;
  CLI::Option* repo_type_opt = nullptr;
};

// One `cache rm` selection: a whole repo, or some of its revisions.
struct Selected {
  const hubload::CachedRepo* repo = nullptr;
  std::vector<const hubload::CachedRevision*> revisions;  // empty: the whole repo
  /// Refs naming a commit with no snapshot (a listing or a dry run wrote them):
  /// deleted with that commit's tree listing and .no_exist markers.
  std::vector<std::pair<std::string, std::string>> ref_only;  // (ref, commit)
};

std::string CacheId(const hubload::CachedRepo& r) {
  return std::string(hubload::RepoTypeName(r.repo_type)) + "/" + r.repo_id;
}

// Finds TARGET in the scan: a 40-hex commit (any repo), a cache id
// ("model/org/name", as hf cache ls prints it), or a repo id / hf:// URI of
// type `type` (with `revision`: that ref or commit of it). Returns "" or why not.
std::string Resolve(const hubload::CacheInfo& info, const std::string& target, hubload::RepoType type,
                    const std::string& revision, std::map<std::string, Selected>* out) {
  auto add_revision = [&](const hubload::CachedRepo& r, const hubload::CachedRevision& v) {
    Selected& s = (*out)[CacheId(r)];
    s.repo = &r;
    if (std::find(s.revisions.begin(), s.revisions.end(), &v) == s.revisions.end()) s.revisions.push_back(&v);
  };
  auto add_repo = [&](const hubload::CachedRepo& r) -> std::string {
    if (revision.empty()) {
      Selected& s = (*out)[CacheId(r)];
      s.repo = &r;
      for (auto& v : r.revisions) add_revision(r, v);
      if (r.revisions.empty()) s.revisions.clear();
      return {};
    }
    std::string commit = revision;
    if (auto it = r.refs.find(revision); it != r.refs.end()) commit = it->second;
    for (auto& v : r.revisions)
      if (v.commit == commit) {
        add_revision(r, v);
        return {};
      }
    if (r.refs.count(revision)) {  // a ref without a snapshot
      Selected& s = (*out)[CacheId(r)];
      s.repo = &r;
      s.ref_only.emplace_back(revision, commit);
      return {};
    }
    return "revision '" + revision + "' of " + CacheId(r) + " is not in the cache";
  };
  std::string lowered = target;
  std::transform(lowered.begin(), lowered.end(), lowered.begin(), [](unsigned char c) { return std::tolower(c); });
  if (hubload::IsCommitHash(lowered)) {
    for (auto& r : info.repos)
      for (auto& v : r.revisions)
        if (v.commit == lowered) {
          add_revision(r, v);
          return {};
        }
    return "no cached revision " + target;
  }
  // A cache id first (hf cache rm), then a repo id of --repo-type.
  if (size_t slash = target.find('/'); slash != std::string::npos) {
    auto t = hubload::ParseRepoType(target.substr(0, slash));
    if (t.ok())
      for (auto& r : info.repos)
        if (r.repo_type == *t && r.repo_id == target.substr(slash + 1)) return add_repo(r);
  }
  for (auto& r : info.repos)
    if (r.repo_type == type && r.repo_id == target) return add_repo(r);
  return std::string(hubload::RepoTypeName(type)) + " " + target + " is not in the cache";
}

// hf cache rm: each TARGET (a repo id, a cache id such as model/org/name, an
// hf:// URI or a 40-hex revision) is deleted; a repo whose every revision
// goes is removed whole. Blobs still linked by a kept snapshot stay.
int Rm(RmArgs a, hubload::cli::Global& g) {
  const char* cmd = "cache rm";
  if (!a.revision.empty() && a.targets.size() != 1) {
    std::fprintf(stderr, "hubload %s: --revision applies to one repo; give the commits as targets instead\n", cmd);
    return 2;
  }
  for (auto& t : a.targets) {
    if (!hubload::cli::IsHfUri(t)) continue;
    if (int rc = hubload::cli::ApplyRepoArg(cmd, &t, &a.repo_type, a.repo_type_opt->count() > 0, &a.revision,
                                            a.revision_opt->count() > 0, nullptr);
        rc != 0)
      return rc;
    if (a.revision_opt->count() == 0 && !a.revision.empty() && a.targets.size() != 1) {
      std::fprintf(stderr, "hubload %s: a revision in an hf:// URI applies to one target only\n", cmd);
      return 2;
    }
  }
  auto type = hubload::ParseRepoType(a.repo_type);
  if (!type.ok()) return hubload::cli::Fail(cmd, type.status().message());
  auto info = hubload::ScanCache(g.config.cache_dir);
  if (!info.ok()) return hubload::cli::Fail(cmd, info.status().ToString());
  std::map<std::string, Selected> selected;  // by cache id: the plan in hf's order
  std::vector<std::string> missing;
  for (auto& t : a.targets)
    if (std::string why = Resolve(*info, t, *type, a.revision, &selected); !why.empty()) missing.push_back(why);
  for (auto& m : missing) std::fprintf(stderr, "hubload %s: %s\n", cmd, m.c_str());
  if (selected.empty()) {
    std::printf("Nothing to delete.\n");
    return missing.empty() ? 0 : 1;
  }
  // The plan, as hf prints it: whole repos, or the revisions with their refs and sizes.
  size_t n_repos = 0, n_revisions = 0;
  uint64_t bytes = 0;
  std::vector<std::string> plan;
  for (auto& [id, s] : selected) {
    const hubload::CachedRepo* repo = s.repo;
    const bool whole = s.revisions.size() == repo->revisions.size() && s.ref_only.empty();
    if (whole) {
      ++n_repos;
      bytes += repo->size_on_disk;
      plan.push_back("  - " + CacheId(*repo) + " (entire repo)");
      continue;
    }
    plan.push_back("  - " + CacheId(*repo) + ":");
    for (auto* v : s.revisions) {
      ++n_revisions;
      bytes += v->size_on_disk;
      std::string refs;
      for (auto& r : v->refs) refs += (refs.empty() ? "" : " ") + r;
      plan.push_back("      " + v->commit + " [" + (refs.empty() ? "(detached)" : refs) + "] " + Human(v->size_on_disk));
    }
    for (auto& [ref, commit] : s.ref_only) {
      ++n_revisions;
      plan.push_back("      " + commit + " [" + ref + "] (no snapshot: the ref, its tree listing and .no_exist markers)");
    }
  }
  std::string what = n_repos ? std::to_string(n_repos) + " repo(s)" : "";
  if (n_revisions) what += (what.empty() ? "" : " and ") + std::to_string(n_revisions) + " revision(s)";
  std::printf("About to delete %s totalling up to %s.\n", what.c_str(), Human(bytes).c_str());
  for (auto& l : plan) std::printf("%s\n", l.c_str());
  if (a.dry_run) {
    std::printf("Dry run: no files were deleted.\n");
    return missing.empty() ? 0 : 1;
  }
  if (!a.yes && ::isatty(0) && ::isatty(1)) {
    std::printf("Proceed with deletion? [y/N] ");
    std::fflush(stdout);
    char answer[16] = {0};
    if (!std::fgets(answer, sizeof answer, stdin) || (answer[0] != 'y' && answer[0] != 'Y')) {
      std::printf("Deletion cancelled.\n");
      return 0;
    }
  }
  uint64_t freed = 0;
  for (auto& [id, s] : selected) {
    const hubload::CachedRepo* repo = s.repo;
    std::vector<std::string> revisions;
    if (s.revisions.size() != repo->revisions.size() || !s.ref_only.empty())
      for (auto* v : s.revisions) revisions.push_back(v->commit);
    for (auto& [ref, commit] : s.ref_only) revisions.push_back(ref);
    if (revisions.empty()) revisions.push_back("");  // the whole repo
    for (auto& rev : revisions) {
      auto r = hubload::DeleteFromCache(g.config.cache_dir, repo->repo_id, repo->repo_type, rev, g.lock);
      if (!r.ok()) return hubload::cli::Fail(cmd, r.status().ToString());
      for (auto& x : r->deleted_snapshots) std::printf("deleted snapshot %s\n", x.c_str());
      for (auto& x : r->deleted_refs) std::printf("deleted ref %s\n", x.c_str());
      for (auto& x : r->deleted_blobs) std::printf("deleted blob %s\n", x.c_str());
      freed += r->freed_bytes;
    }
  }
  std::printf("Deleted %s; freed %s.\n", what.c_str(), Human(freed).c_str());
  return missing.empty() ? 0 : 1;
}

int Prune(double min_age_s, bool as_json, hubload::cli::Global& g) {
  auto r = hubload::PruneIncompleteDownloads(g.config.cache_dir, min_age_s, g.lock);
  if (!r.ok()) return hubload::cli::Fail("cache prune", r.status().ToString());
  if (as_json) {
    nlohmann::json out = {{"cache_dir", g.config.cache_dir}, {"deleted_files", r->deleted_files},
                          {"freed_bytes", r->freed_bytes}, {"kept_locked", r->kept_locked},
                          {"kept_recent", r->kept_recent}};
    std::printf("%s\n", hubload::util::DumpJson(out, 2).c_str());
    return 0;
  }
  for (auto& f : r->deleted_files) std::printf("deleted %s\n", f.c_str());
  for (auto& f : r->kept_locked) std::printf("kept (a live download holds its lock) %s\n", f.c_str());
  std::printf("freed %s in %zu partial files; kept %zu in use, %zu younger than %.0f s\n",
              Human(r->freed_bytes).c_str(), r->deleted_files.size(), r->kept_locked.size(), r->kept_recent.size(),
              min_age_s);
  return 0;
}

// hf cache verify: the Hub's tree listing (or, offline or unreachable, the
// cached trees/<commit>.json) against the snapshot folder or --local-dir.
int Verify(RepoArgs a, hubload::cli::Global& g) {
  if (a.revision.empty()) a.revision = "main";
  if (int rc = hubload::cli::ApplyRepoArg("cache verify", &a.repo_id, &a.repo_type, a.repo_type_opt->count() > 0,
                                          &a.revision, a.revision_opt->count() > 0, nullptr);
      rc != 0)
    return rc;
  auto type = hubload::ParseRepoType(a.repo_type);
  if (!type.ok()) return hubload::cli::Fail("cache verify", type.status().message());
  if (!a.local_dir.empty() && g.cache_dir_given) {
    std::fprintf(stderr, "hubload cache verify: --local-dir and --cache-dir: use one or the other\n");
    return 2;
  }
  hubload::HubClient client(g.Client());
  // Read-only: the listing is not kept in the cache (nothing is written).
  auto listing = client.ListFiles(a.repo_id, a.revision, *type, /*keep_in_cache=*/false);
  if (!listing.ok()) return hubload::cli::Fail("cache verify", listing.status().ToString());
  std::vector<hubload::ExpectedFile> expected;
  for (auto& f : listing->files) expected.push_back({f.path, f.size, f.blob_id, f.lfs_sha256});
  hubload::RepoCache rc(g.config.cache_dir, a.repo_id, *type);
  std::string folder = a.local_dir.empty() ? rc.SnapshotDir(listing->commit) : a.local_dir;
  // Progress on a terminal (progress_bar.h): bytes hashed of the listed total, per file.
  std::unique_ptr<hubload::cli::ProgressBar> bar;
  hubload::VerifyProgressCallback on_progress;
  if (hubload::cli::ProgressWanted(a.quiet)) {
    bar = std::make_unique<hubload::cli::ProgressBar>();
    on_progress = [b = bar.get()](const hubload::VerifyProgress& p) {
      const bool file_end = p.file_bytes_done == p.file_bytes_total;
      b->Update(p.path, p.file_bytes_done, p.file_bytes_total, p.bytes_done, p.bytes_total,
                "files " + std::to_string(p.files_done) + "/" + std::to_string(p.files_total),
                file_end && (p.files_done == 1 || p.files_done == p.files_total));
    };
  }
  auto rep = hubload::VerifyFolder(folder, expected, on_progress);
  if (bar) bar->Finish();
  if (!rep.ok()) return hubload::cli::Fail("cache verify", rep.status().ToString());
  bool fail = !rep->mismatched.empty() || (a.fail_missing && !rep->missing.empty()) ||
              (a.fail_extra && !rep->extra.empty());
  if (a.json) {
    nlohmann::json out = {{"repo_id", a.repo_id},       {"repo_type", hubload::RepoTypeName(*type)},
                          {"revision", a.revision},     {"commit", listing->commit},
                          {"folder", folder},           {"verified", rep->verified},
                          {"mismatched", rep->mismatched}, {"missing", rep->missing},
                          {"extra", rep->extra},        {"warnings", listing->warnings},
                          {"ok", !fail}};
    std::printf("%s\n", hubload::util::DumpJson(out, 2).c_str());
  } else {
    for (auto& m : rep->mismatched) std::printf("mismatch %s\n", m.c_str());
    for (auto& m : rep->missing) std::printf("missing %s\n", m.c_str());
    for (auto& m : rep->extra) std::printf("extra %s\n", m.c_str());
    std::printf("%zu verified, %zu mismatched, %zu missing, %zu extra in %s (commit %s)\n", rep->verified.size(),
                rep->mismatched.size(), rep->missing.size(), rep->extra.size(), folder.c_str(),
                listing->commit.c_str());
  }
  return fail ? 1 : 0;
}

void AddRepoOptions(CLI::App* c, const std::shared_ptr<RepoArgs>& a, const char* revision_help) {
  c->add_option("repo_id", a->repo_id, "repo id (org/name) or hf://[datasets/|spaces/]org/name[@rev]")->required();
  a->revision_opt = c->add_option("--revision", a->revision, revision_help);
  a->repo_type_opt = c->add_option("--repo-type", a->repo_type, "model, dataset or space")->capture_default_str();
}

hubload::cli::Command reg{"cache", [](CLI::App& app, hubload::cli::Global& g) {
  auto* sub = app.add_subcommand("cache", "Inspect, verify or clean the Hugging Face cache (as hf cache)");
  sub->require_subcommand(1);
  auto ls_args = std::make_shared<hubload::cli::CacheLsArgs>();
  auto* ls = hubload::cli::AddCacheLs(sub, ls_args);
  auto d = std::make_shared<RmArgs>();
  auto* rm = sub->add_subcommand(
      "rm", "Delete cached repos or revisions (as hf cache rm); blobs still used by a kept revision stay");
  rm->alias("delete");
  rm->add_option("targets", d->targets,
                 "repo ids (org/name), cache ids (model/org/name, as cache ls prints them), hf:// URIs or 40-hex "
                 "revisions")
      ->required();
  d->revision_opt = rm->add_option("--revision", d->revision, "with one repo: only this ref or commit of it");
  d->repo_type_opt =
      rm->add_option("--repo-type", d->repo_type, "type of the repo ids given (model, dataset or space)")
          ->capture_default_str();
  rm->add_flag("--dry-run", d->dry_run, "print what would be deleted; delete nothing");
  rm->add_flag("-y,--yes", d->yes, "do not ask for confirmation (asked only when stdin and stdout are a terminal)");
  auto prune_json = std::make_shared<bool>(false);
  auto min_age_s = std::make_shared<double>(3600);
  auto* prune = sub->add_subcommand(
      "prune", "Delete orphaned partial downloads (blobs/*.incomplete) that no live download holds");
  prune->add_option("--min-age-s", *min_age_s, "only partials not modified for this many seconds")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  prune->add_flag("--json", *prune_json, "machine-readable output");
  auto v = std::make_shared<RepoArgs>();
  auto* verify = sub->add_subcommand(
      "verify", "Check cached files against the Hub's listing: sha256 of LFS files, git blob sha1 of the others");
  AddRepoOptions(verify, v, "branch, tag or commit (default main)");
  verify->add_option("--local-dir", v->local_dir, "verify this local_dir download instead of the cache");
  verify->add_flag("--fail-on-missing-files", v->fail_missing, "exit 1 when a listed file is absent");
  verify->add_flag("--fail-on-extra-files", v->fail_extra, "exit 1 when the folder has files the listing lacks");
  verify->add_flag("--json", v->json, "machine-readable output");
  verify->add_flag("-q,--quiet", v->quiet, "no progress output");
  return [=, &g]() -> int {
    if (ls->parsed()) return hubload::cli::CacheLs(*ls_args, g);
    if (rm->parsed()) return Rm(*d, g);
    if (prune->parsed()) return Prune(*min_age_s, *prune_json, g);
    if (verify->parsed()) return Verify(*v, g);
    return 2;
  };
}};

}  // namespace
