// `hubload cache scan [--json]`, `hubload cache delete REPO_ID [--revision R]`
// (huggingface_hub scan_cache_dir / delete_revisions semantics) and
// `hubload cache prune [--min-age-s S] [--json]` (orphaned partial downloads).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "hubload/cache.h"
#include "tools/hubload/cli.h"

namespace {

std::string Human(uint64_t b) { return hubload::cli::HumanBytes(static_cast<double>(b)); }

int Scan(bool as_json, hubload::cli::Global& g) {
  auto info = hubload::ScanCache(g.config.cache_dir);
  if (!info.ok()) return hubload::cli::Fail("cache scan", info.status().ToString());
  if (as_json) {
    nlohmann::json repos = nlohmann::json::array();
    for (auto& r : info->repos) {
      nlohmann::json revs = nlohmann::json::array();
      for (auto& v : r.revisions)
        revs.push_back({{"commit", v.commit}, {"refs", v.refs}, {"snapshot_path", v.snapshot_path},
                        {"nb_files", v.nb_files}, {"size_on_disk", v.size_on_disk}, {"files", v.files}});
      repos.push_back({{"repo_id", r.repo_id}, {"repo_type", hubload::RepoTypeName(r.repo_type)},
                       {"repo_path", r.repo_path}, {"size_on_disk", r.size_on_disk}, {"nb_blobs", r.nb_blobs},
                       {"refs", r.refs}, {"revisions", revs}, {"unreferenced_blobs", r.unreferenced_blobs},
                       {"unreferenced_bytes", r.unreferenced_bytes}, {"incomplete_files", r.incomplete_files},
                       {"incomplete_bytes", r.incomplete_bytes}});
    }
    nlohmann::json out = {{"cache_dir", info->cache_dir}, {"size_on_disk", info->size_on_disk},
                          {"repos", repos}, {"warnings", info->warnings}};
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%-8s %-40s %10s %6s %s\n", "TYPE", "REPO ID", "SIZE", "REVS", "REFS / NOTES");
  for (auto& r : info->repos) {
    std::string refs;
    for (auto& [n, c] : r.refs) refs += (refs.empty() ? "" : ",") + n;
    std::string notes;
    if (!r.unreferenced_blobs.empty())
      notes += " unreferenced: " + std::to_string(r.unreferenced_blobs.size()) + " blobs (" + Human(r.unreferenced_bytes) + ")";
    if (!r.incomplete_files.empty())
      notes += " partial: " + std::to_string(r.incomplete_files.size()) + " (" + Human(r.incomplete_bytes) + ")";
    std::printf("%-8s %-40s %10s %6zu %s%s\n", hubload::RepoTypeName(r.repo_type), r.repo_id.c_str(),
                Human(r.size_on_disk).c_str(), r.revisions.size(), refs.c_str(), notes.c_str());
    for (auto& v : r.revisions) {
      std::string vr;
      for (auto& n : v.refs) vr += (vr.empty() ? "" : ",") + n;
      std::printf("         %s %10s %6llu files %s\n", v.commit.c_str(), Human(v.size_on_disk).c_str(),
                  static_cast<unsigned long long>(v.nb_files), vr.c_str());
    }
  }
  std::printf("total %s in %zu repos (%s)\n", Human(info->size_on_disk).c_str(), info->repos.size(),
              info->cache_dir.c_str());
  for (auto& w : info->warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  return 0;
}

struct DeleteArgs {
  std::string repo_id, revision, repo_type = "model";
};

int Delete(const DeleteArgs& a, hubload::cli::Global& g) {
  auto type = hubload::ParseRepoType(a.repo_type);
  if (!type.ok()) return hubload::cli::Fail("cache delete", type.status().message());
  auto r = hubload::DeleteFromCache(g.config.cache_dir, a.repo_id, *type, a.revision, g.lock);
  if (!r.ok()) return hubload::cli::Fail("cache delete", r.status().ToString());
  for (auto& s : r->deleted_snapshots) std::printf("deleted snapshot %s\n", s.c_str());
  for (auto& s : r->deleted_refs) std::printf("deleted ref %s\n", s.c_str());
  for (auto& s : r->deleted_blobs) std::printf("deleted blob %s\n", s.c_str());
  std::printf("freed %s%s\n", Human(r->freed_bytes).c_str(), r->deleted_repo ? " (repo removed)" : "");
  return 0;
}

int Prune(double min_age_s, bool as_json, hubload::cli::Global& g) {
  auto r = hubload::PruneIncompleteDownloads(g.config.cache_dir, min_age_s, g.lock);
  if (!r.ok()) return hubload::cli::Fail("cache prune", r.status().ToString());
  if (as_json) {
    nlohmann::json out = {{"cache_dir", g.config.cache_dir}, {"deleted_files", r->deleted_files},
                          {"freed_bytes", r->freed_bytes}, {"kept_locked", r->kept_locked},
                          {"kept_recent", r->kept_recent}};
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  for (auto& f : r->deleted_files) std::printf("deleted %s\n", f.c_str());
  for (auto& f : r->kept_locked) std::printf("kept (a live download holds its lock) %s\n", f.c_str());
  std::printf("freed %s in %zu partial files; kept %zu in use, %zu younger than %.0f s\n",
              Human(r->freed_bytes).c_str(), r->deleted_files.size(), r->kept_locked.size(), r->kept_recent.size(),
              min_age_s);
  return 0;
}

hubload::cli::Command reg{"cache", [](CLI::App& app, hubload::cli::Global& g) {
  auto* sub = app.add_subcommand("cache", "Inspect or clean the Hugging Face cache");
  sub->require_subcommand(1);
  auto as_json = std::make_shared<bool>(false);
  auto* scan = sub->add_subcommand("scan", "List cached repos, revisions, sizes and unreferenced blobs");
  scan->add_flag("--json", *as_json, "machine-readable output");
  auto d = std::make_shared<DeleteArgs>();
  auto* del = sub->add_subcommand("delete", "Delete a repo or one revision; blobs still used elsewhere are kept");
  del->add_option("repo_id", d->repo_id, "repo id")->required();
  del->add_option("--revision", d->revision, "ref name or commit (default: the whole repo)");
  del->add_option("--repo-type", d->repo_type, "model, dataset or space")->capture_default_str();
  auto prune_json = std::make_shared<bool>(false);
  auto min_age_s = std::make_shared<double>(3600);
  auto* prune = sub->add_subcommand(
      "prune", "Delete orphaned partial downloads (blobs/*.incomplete) that no live download holds");
  prune->add_option("--min-age-s", *min_age_s, "only partials not modified for this many seconds")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  prune->add_flag("--json", *prune_json, "machine-readable output");
  return [=, &g]() -> int {
    if (scan->parsed()) return Scan(*as_json, g);
    if (del->parsed()) return Delete(*d, g);
    if (prune->parsed()) return Prune(*min_age_s, *prune_json, g);
    return 2;
  };
}};

}  // namespace
