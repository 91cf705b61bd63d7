// `hubload cache ls|rm|prune|verify` as huggingface_hub 1.x `hf cache`
// (`scan` and `delete` are kept as aliases of `ls` and `rm`):
//   ls [--filter EXPR]... [--sort KEY[:asc|:desc]] [--json] [--strict]
//   rm REPO_ID [--revision R] [--repo-type T]
//   prune [--min-age-s S] [--json]      (orphaned partial downloads)
//   verify REPO_ID [--revision R] [--repo-type T] [--local-dir D]
//          [--fail-on-missing-files] [--fail-on-extra-files] [--json]
// REPO_ID may be an hf:// URI. Warnings (corrupted entries) go to stderr.
#include <cstdio>
#include <ctime>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "hubload/cache.h"
#include "hubload/hub.h"
#include "hubload/size.h"
#include "tools/hubload/cli.h"
#include "tools/hubload/hf_uri.h"

namespace {

std::string Human(uint64_t b) { return hubload::cli::HumanBytes(static_cast<double>(b)); }

// One `--filter` expression: KEY OP VALUE (hf cache ls).
struct Filter {
  std::string key, op;
  double number = 0;  // bytes (size) or seconds of age (accessed, modified)
  hubload::RepoType type = hubload::RepoType::kModel;
};

// "7d", "12h", "30m", "45s", "2w", "3mo", "1y" -> seconds; -1 when malformed.
double ParseAge(const std::string& t) {
  size_t i = 0;
  while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.')) ++i;
  if (i == 0) return -1;
  char* end = nullptr;
  std::string num = t.substr(0, i);
  double v = std::strtod(num.c_str(), &end);
  if (!end || *end) return -1;
  std::string u = t.substr(i);
  const std::pair<const char*, double> units[] = {{"s", 1},         {"m", 60},          {"h", 3600},
                                                  {"d", 86400},     {"w", 7 * 86400.0}, {"mo", 30 * 86400.0},
                                                  {"y", 365 * 86400.0}};
  for (auto& [name, secs] : units)
    if (u == name) return v * secs;
  return -1;
}

// Parses "size>1GB", "accessed>7d", "modified<30d", "type=model"; "" or why not.
std::string ParseFilter(const std::string& text, Filter* f) {
  size_t p = text.find_first_of("<>=!");
  if (p == std::string::npos || p == 0) return "filter '" + text + "' is not KEY OP VALUE (e.g. 'size>1GB')";
  f->key = text.substr(0, p);
  size_t q = p;
  while (q < text.size() && std::string("<>=!").find(text[q]) != std::string::npos) ++q;
  f->op = text.substr(p, q - p);
  std::string value = text.substr(q);
  static const char* ops[] = {"<", ">", "<=", ">=", "=", "==", "!="};
  if (std::find_if(std::begin(ops), std::end(ops), [&](const char* o) { return f->op == o; }) == std::end(ops))
    return "filter '" + text + "': unknown operator '" + f->op + "' (one of < > <= >= = !=)";
  if (f->op == "==") f->op = "=";
  if (f->key == "size") {
    auto n = hubload::ParseMemorySize(value);
    if (!n.ok()) return "filter '" + text + "': " + n.status().message();
    f->number = static_cast<double>(*n);
  } else if (f->key == "accessed" || f->key == "modified") {
    f->number = ParseAge(value);
    if (f->number < 0) return "filter '" + text + "': '" + value + "' is not an age (e.g. 45s, 30m, 12h, 7d, 2w, 3mo, 1y)";
  } else if (f->key == "type") {
    auto t = hubload::ParseRepoType(value);
    if (!t.ok() || (f->op != "=" && f->op != "!="))
      return "filter '" + text + "': type takes = or != and one of model, dataset, space";
    f->type = *t;
  } else {
    return "filter '" + text + "': unknown key '" + f->key + "' (one of size, accessed, modified, type)";
  }
  return {};
}

bool Compare(double a, const std::string& op, double b) {
  if (op == "<") return a < b;
  if (op == ">") return a > b;
  if (op == "<=") return a <= b;
  if (op == ">=") return a >= b;
  if (op == "=") return a == b;
  return a != b;
}

// accessed>7d: last accessed more than 7 days ago (hf cache ls); an age is now - time.
bool Keep(const hubload::CachedRepo& r, const std::vector<Filter>& filters, double now) {
  for (auto& f : filters) {
    if (f.key == "size" && !Compare(static_cast<double>(r.size_on_disk), f.op, f.number)) return false;
    if (f.key == "accessed" && !Compare(now - r.last_accessed, f.op, f.number)) return false;
    if (f.key == "modified" && !Compare(now - r.last_modified, f.op, f.number)) return false;
    if (f.key == "type" && ((r.repo_type == f.type) != (f.op == "="))) return false;
  }
  return true;
}

std::string Age(double t, double now) {
  if (t <= 0) return "-";
  double a = now - t;
  char buf[32];
  if (a < 120) std::snprintf(buf, sizeof buf, "%.0fs ago", std::max(0.0, a));
  else if (a < 7200) std::snprintf(buf, sizeof buf, "%.0fm ago", a / 60);
  else if (a < 2 * 86400) std::snprintf(buf, sizeof buf, "%.0fh ago", a / 3600);
  else std::snprintf(buf, sizeof buf, "%.0fd ago", a / 86400);
  return buf;
}

struct LsArgs {
  bool json = false, strict = false;
  std::vector<std::string> filters;
  std::string sort;
};

int Ls(const LsArgs& a, hubload::cli::Global& g) {
  std::vector<Filter> filters;
  for (auto& t : a.filters) {
    Filter f;
    if (std::string why = ParseFilter(t, &f); !why.empty()) {
      std::fprintf(stderr, "hubload cache ls: %s\n", why.c_str());
      return 2;
    }
    filters.push_back(f);
  }
  std::string key = a.sort, dir;
  if (size_t c = key.find(':'); c != std::string::npos) {
    dir = key.substr(c + 1);
    key = key.substr(0, c);
  }
  if (!key.empty() && key != "size" && key != "accessed" && key != "modified" && key != "name") {
    std::fprintf(stderr, "hubload cache ls: --sort '%s': one of size, accessed, modified, name[:asc|:desc]\n",
                 a.sort.c_str());
    return 2;
  }
  if (!dir.empty() && dir != "asc" && dir != "desc") {
    std::fprintf(stderr, "hubload cache ls: --sort '%s': the order is asc or desc\n", a.sort.c_str());
    return 2;
  }
  auto info = hubload::ScanCache(g.config.cache_dir);
  if (!info.ok()) return hubload::cli::Fail("cache ls", info.status().ToString());
  const double now = static_cast<double>(std::time(nullptr));
  std::vector<const hubload::CachedRepo*> repos;
  for (auto& r : info->repos)
    if (Keep(r, filters, now)) repos.push_back(&r);
  if (!key.empty()) {
    // Default orders: largest, most recently used/changed first; names A to Z.
    bool desc = dir.empty() ? key != "name" : dir == "desc";
    auto val = [&](const hubload::CachedRepo* r) {
      return key == "size" ? static_cast<double>(r->size_on_disk) : key == "accessed" ? r->last_accessed : r->last_modified;
    };
    std::stable_sort(repos.begin(), repos.end(), [&](const hubload::CachedRepo* x, const hubload::CachedRepo* y) {
      if (key == "name") return desc ? x->repo_id > y->repo_id : x->repo_id < y->repo_id;
      return desc ? val(x) > val(y) : val(x) < val(y);
    });
  }
  uint64_t shown_bytes = 0;
  for (auto* r : repos) shown_bytes += r->size_on_disk;
  if (a.json) {
    nlohmann::json out_repos = nlohmann::json::array();
    for (auto* r : repos) {
      nlohmann::json revs = nlohmann::json::array();
      for (auto& v : r->revisions)
        revs.push_back({{"commit", v.commit}, {"refs", v.refs}, {"snapshot_path", v.snapshot_path},
                        {"nb_files", v.nb_files}, {"size_on_disk", v.size_on_disk}, {"files", v.files}});
      out_repos.push_back({{"repo_id", r->repo_id}, {"repo_type", hubload::RepoTypeName(r->repo_type)},
                           {"repo_path", r->repo_path}, {"size_on_disk", r->size_on_disk}, {"nb_blobs", r->nb_blobs},
                           {"refs", r->refs}, {"revisions", revs}, {"unreferenced_blobs", r->unreferenced_blobs},
                           {"unreferenced_bytes", r->unreferenced_bytes}, {"incomplete_files", r->incomplete_files},
                           {"incomplete_bytes", r->incomplete_bytes}, {"last_accessed", r->last_accessed},
                           {"last_modified", r->last_modified}});
    }
    nlohmann::json out = {{"cache_dir", info->cache_dir}, {"size_on_disk", shown_bytes},
                          {"repos", out_repos}, {"warnings", info->warnings}};
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("%-8s %-40s %10s %10s %10s %5s %s\n", "TYPE", "REPO ID", "SIZE", "ACCESSED", "MODIFIED", "REVS",
                "REFS / NOTES");
    for (auto* r : repos) {
      std::string refs;
      for (auto& [n, c] : r->refs) refs += (refs.empty() ? "" : ",") + n;
      std::string notes;
      if (!r->unreferenced_blobs.empty())
        notes += " unreferenced: " + std::to_string(r->unreferenced_blobs.size()) + " blobs (" +
                 Human(r->unreferenced_bytes) + ")";
      if (!r->incomplete_files.empty())
        notes += " partial: " + std::to_string(r->incomplete_files.size()) + " (" + Human(r->incomplete_bytes) + ")";
      std::printf("%-8s %-40s %10s %10s %10s %5zu %s%s\n", hubload::RepoTypeName(r->repo_type), r->repo_id.c_str(),
                  Human(r->size_on_disk).c_str(), Age(r->last_accessed, now).c_str(),
                  Age(r->last_modified, now).c_str(), r->revisions.size(), refs.c_str(), notes.c_str());
      for (auto& v : r->revisions) {
        std::string vr;
        for (auto& n : v.refs) vr += (vr.empty() ? "" : ",") + n;
        std::printf("         %s %10s %6llu files %s\n", v.commit.c_str(), Human(v.size_on_disk).c_str(),
                    static_cast<unsigned long long>(v.nb_files), vr.c_str());
      }
    }
    std::printf("total %s in %zu repos (%s)\n", Human(shown_bytes).c_str(), repos.size(), info->cache_dir.c_str());
  }
  for (auto& w : info->warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  if (a.strict && !info->warnings.empty()) {
    std::fprintf(stderr, "hubload cache ls: %zu warning(s) and --strict\n", info->warnings.size());
    return 1;
  }
  return 0;
}

struct RepoArgs {
  std::string repo_id, revision, repo_type = "model", local_dir;
  bool fail_missing = false, fail_extra = false, json = false;
  CLI::Option* revision_opt = nullptr;
  CLI::Option* repo_type_opt = nullptr;
};

int Rm(RepoArgs a, hubload::cli::Global& g) {
  if (int rc = hubload::cli::ApplyRepoArg("cache rm", &a.repo_id, &a.repo_type, a.repo_type_opt->count() > 0,
                                          &a.revision, a.revision_opt->count() > 0, nullptr);
      rc != 0)
    return rc;
  auto type = hubload::ParseRepoType(a.repo_type);
  if (!type.ok()) return hubload::cli::Fail("cache rm", type.status().message());
  auto r = hubload::DeleteFromCache(g.config.cache_dir, a.repo_id, *type, a.revision, g.lock);
  if (!r.ok()) return hubload::cli::Fail("cache rm", r.status().ToString());
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
  hubload::HubClient client(g.Client());
  auto listing = client.ListFiles(a.repo_id, a.revision, *type);
  if (!listing.ok()) return hubload::cli::Fail("cache verify", listing.status().ToString());
  std::vector<hubload::ExpectedFile> expected;
  for (auto& f : listing->files) expected.push_back({f.path, f.size, f.blob_id, f.lfs_sha256});
  hubload::RepoCache rc(g.config.cache_dir, a.repo_id, *type);
  std::string folder = a.local_dir.empty() ? rc.SnapshotDir(listing->commit) : a.local_dir;
  auto rep = hubload::VerifyFolder(folder, expected);
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
    std::printf("%s\n", out.dump(2).c_str());
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
  auto ls_args = std::make_shared<LsArgs>();
  auto* ls = sub->add_subcommand("ls", "List cached repos, sizes, last use, revisions and corrupted entries");
  ls->alias("scan");
  ls->add_flag("--json", ls_args->json, "machine-readable output");
  ls->add_option("--filter", ls_args->filters,
                 "keep repos matching KEY OP VALUE: size>1GB, accessed>7d (not used for 7 days), modified<30d, "
                 "type=model (repeatable; all must match)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  ls->add_option("--sort", ls_args->sort, "size, accessed, modified or name, optionally :asc or :desc");
  ls->add_flag("--strict", ls_args->strict, "exit 1 when the scan reports warnings (corrupted entries)");
  auto d = std::make_shared<RepoArgs>();
  auto* rm = sub->add_subcommand("rm", "Delete a repo or one revision; blobs still used elsewhere are kept");
  rm->alias("delete");
  AddRepoOptions(rm, d, "ref name or commit (default: the whole repo)");
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
  return [=, &g]() -> int {
    if (ls->parsed()) return Ls(*ls_args, g);
    if (rm->parsed()) return Rm(*d, g);
    if (prune->parsed()) return Prune(*min_age_s, *prune_json, g);
    if (verify->parsed()) return Verify(*v, g);
    return 2;
  };
}};

}  // namespace
