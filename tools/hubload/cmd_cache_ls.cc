// `hubload cache ls` (alias `scan`) as huggingface_hub 1.x `hf cache ls`:
//   ls [--revisions] [-f|--filter EXPR]... [--sort KEY[:asc|:desc]] [--limit N]
//      [--format table|json|csv] [-q|--quiet] [--json] [--strict]
// Entries are repos ("model/org/name", hf's cache id) or, with --revisions,
// revisions, ordered by cache id (then commit) unless --sort says otherwise.
// --format json/csv print hf's records; --json prints hubload's full report
// (revisions, files, partials, unreferenced blobs, warnings). Scan warnings
// (corrupted entries) go to stderr; --strict makes them exit 1.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "hubload/cache.h"
#include "hubload/size.h"
#include "tools/hubload/cmd_cache.h"
#include "tools/hubload/progress_bar.h"
#include "util/json.h"
#include "util/text.h"

namespace hubload::cli {
namespace {

std::string Human(uint64_t b) { return HumanBytes(static_cast<double>(b)); }

std::string CacheId(const CachedRepo& r) { return std::string(RepoTypeName(r.repo_type)) + "/" + r.repo_id; }

// One row: a repo, or one of its revisions (--revisions).
struct Entry {
  const CachedRepo* repo;
  const CachedRevision* rev;  // null: the whole repo
  uint64_t Size() const { return rev ? rev->size_on_disk : repo->size_on_disk; }
  // Refs of the revision, or of every revision of the repo (sorted).
  std::vector<std::string> Refs() const {
    if (rev) return rev->refs;
    std::vector<std::string> out;
    for (auto& [name, commit] : repo->refs) out.push_back(name);
    return out;
  }
};

// One `--filter` expression: KEY OP VALUE (hf cache ls).
struct Filter {
  std::string key, op, text;
  double number = 0;  // bytes (size) or seconds of age (accessed, modified)
  RepoType type = RepoType::kModel;
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

// Parses "size>1GB", "accessed>7d", "modified<30d", "type=model", "refs=main"; "" or why not.
std::string ParseFilter(const std::string& text, Filter* f) {
  size_t p = text.find_first_of("<>=!");
  if (p == std::string::npos || p == 0) return "filter '" + text + "' is not KEY OP VALUE (e.g. 'size>1GB')";
  f->key = util::AsciiLower(text.substr(0, p));
  size_t q = p;
  while (q < text.size() && std::string("<>=!").find(text[q]) != std::string::npos) ++q;
  f->op = text.substr(p, q - p);
  std::string value = text.substr(q);
  f->text = value;
  static const char* ops[] = {"<", ">", "<=", ">=", "=", "==", "!="};
  if (std::find_if(std::begin(ops), std::end(ops), [&](const char* o) { return f->op == o; }) == std::end(ops))
    return "filter '" + text + "': unknown operator '" + f->op + "' (one of < > <= >= = !=)";
  if (f->op == "==") f->op = "=";
  if (f->key == "size") {
    auto n = ParseMemorySize(value);
    if (!n.ok()) return "filter '" + text + "': " + n.status().message();
    f->number = static_cast<double>(*n);
  } else if (f->key == "accessed" || f->key == "modified") {
    f->number = ParseAge(value);
    if (f->number < 0) return "filter '" + text + "': '" + value + "' is not an age (e.g. 45s, 30m, 12h, 7d, 2w, 3mo, 1y)";
  } else if (f->key == "type") {
    auto t = ParseRepoType(value);
    if (!t.ok() || (f->op != "=" && f->op != "!="))
      return "filter '" + text + "': type takes = or != and one of model, dataset, space";
    f->type = *t;
  } else if (f->key == "refs") {
    if (f->op != "=" || value.empty()) return "filter '" + text + "': refs takes = and a ref name (e.g. refs=main)";
  } else {
    return "filter '" + text + "': unknown key '" + f->key + "' (one of size, accessed, modified, type, refs)";
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
// A revision has no times of its own here: its repo's count.
bool Keep(const Entry& e, const std::vector<Filter>& filters, double now) {
  for (auto& f : filters) {
    if (f.key == "size" && !Compare(static_cast<double>(e.Size()), f.op, f.number)) return false;
    if (f.key == "accessed" && !Compare(now - e.repo->last_accessed, f.op, f.number)) return false;
    if (f.key == "modified" && !Compare(now - e.repo->last_modified, f.op, f.number)) return false;
    if (f.key == "type" && ((e.repo->repo_type == f.type) != (f.op == "="))) return false;
    if (f.key == "refs") {
      auto refs = e.Refs();
      if (std::none_of(refs.begin(), refs.end(),
                       [&](const std::string& r) { return util::AsciiLower(r) == util::AsciiLower(f.text); }))
        return false;
    }
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

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// A CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break.
std::string Csv(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// Columns padded to their widest cell, two spaces apart (hf's tabulate).
void PrintTable(const std::vector<std::string>& headers, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w(headers.size());
  for (size_t i = 0; i < headers.size(); ++i) w[i] = TextColumns(headers[i]);
  for (auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], TextColumns(r[i]));
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t i = 0; i < cells.size(); ++i) {
      out += cells[i];
      if (i + 1 < cells.size()) out += std::string(w[i] - TextColumns(cells[i]) + 2, ' ');
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    std::printf("%s\n", out.c_str());
  };
  line(headers);
  std::vector<std::string> rule;
  for (size_t x : w) rule.push_back(std::string(x, '-'));
  line(rule);
  for (auto& r : rows) line(r);
}

// hubload's full report (--json): the repos of `entries`, each with every revision.
void PrintFullJson(const CacheInfo& info, const std::vector<Entry>& entries) {
  nlohmann::json out_repos = nlohmann::json::array();
  uint64_t shown_bytes = 0;
  const CachedRepo* last = nullptr;
  for (auto& e : entries) {
    if (e.repo == last) continue;
    last = e.repo;
    const CachedRepo* r = e.repo;
    shown_bytes += r->size_on_disk;
    nlohmann::json revs = nlohmann::json::array();
    for (auto& v : r->revisions)
      revs.push_back({{"commit", v.commit}, {"refs", v.refs}, {"snapshot_path", v.snapshot_path},
                      {"nb_files", v.nb_files}, {"size_on_disk", v.size_on_disk}, {"files", v.files}});
    out_repos.push_back({{"repo_id", r->repo_id}, {"repo_type", RepoTypeName(r->repo_type)},
                         {"repo_path", r->repo_path}, {"size_on_disk", r->size_on_disk}, {"nb_blobs", r->nb_blobs},
                         {"refs", r->refs}, {"revisions", revs}, {"unreferenced_blobs", r->unreferenced_blobs},
                         {"unreferenced_bytes", r->unreferenced_bytes}, {"incomplete_files", r->incomplete_files},
                         {"incomplete_bytes", r->incomplete_bytes}, {"last_accessed", r->last_accessed},
                         {"last_modified", r->last_modified}});
  }
  nlohmann::json out = {{"cache_dir", info.cache_dir}, {"size_on_disk", shown_bytes},
                        {"repos", out_repos}, {"warnings", info.warnings}};
  std::printf("%s\n", hubload::util::DumpJson(out, 2).c_str());
}

// hf cache ls --format json: one record per entry.
nlohmann::ordered_json Record(const Entry& e) {
  auto time_or_null = [](double t) { return t > 0 ? nlohmann::ordered_json(t) : nlohmann::ordered_json(); };
  nlohmann::ordered_json j;
  j["repo_id"] = e.repo->repo_id;
  j["repo_type"] = RepoTypeName(e.repo->repo_type);
  if (e.rev) {
    j["revision"] = e.rev->commit;
    j["snapshot_path"] = e.rev->snapshot_path;
  }
  j["size_on_disk"] = e.Size();
  j["last_accessed"] = time_or_null(e.repo->last_accessed);
  j["last_modified"] = time_or_null(e.repo->last_modified);
  j["refs"] = e.Refs();
  return j;
}

// A time as hf's CSV writes a float ("" when unknown).
std::string CsvTime(double t) {
  if (t <= 0) return {};
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", t);
  return buf;
}

void PrintCsv(const std::vector<Entry>& entries, bool revisions) {
  std::printf("repo_id,repo_type,%ssize_on_disk,last_accessed,last_modified,refs\n",
              revisions ? "revision,snapshot_path," : "");
  for (auto& e : entries) {
    std::vector<std::string> cells = {Csv(e.repo->repo_id), RepoTypeName(e.repo->repo_type)};
    if (e.rev) cells.insert(cells.end(), {e.rev->commit, Csv(e.rev->snapshot_path)});
    cells.insert(cells.end(), {std::to_string(e.Size()), CsvTime(e.repo->last_accessed),
                               CsvTime(e.repo->last_modified), Csv(Join(e.Refs(), " "))});
    std::printf("%s\n", Join(cells, ",").c_str());
  }
}

void PrintTableOf(const CacheInfo& info, const std::vector<Entry>& entries, bool revisions, double now) {
  if (entries.empty()) {
    std::printf("%s\n", revisions ? "No cached revisions found." : "No cached repositories found.");
    return;
  }
  std::vector<std::vector<std::string>> rows;
  std::vector<const CachedRepo*> repos;
  uint64_t bytes = 0, n_revisions = 0;
  for (auto& e : entries) {
    if (repos.empty() || repos.back() != e.repo) repos.push_back(e.repo);
    if (revisions) {
      rows.push_back({CacheId(*e.repo), e.rev->commit, Human(e.Size()), Age(e.repo->last_modified, now),
                      Join(e.Refs(), " ")});
      bytes += e.Size();
      ++n_revisions;
      continue;
    }
    std::string notes;
    if (!e.repo->unreferenced_blobs.empty())
      notes += "unreferenced: " + std::to_string(e.repo->unreferenced_blobs.size()) + " blobs (" +
               Human(e.repo->unreferenced_bytes) + ")";
    if (!e.repo->incomplete_files.empty())
      notes += std::string(notes.empty() ? "" : "; ") + "partial: " + std::to_string(e.repo->incomplete_files.size()) +
               " (" + Human(e.repo->incomplete_bytes) + ")";
    rows.push_back({CacheId(*e.repo), Human(e.Size()), Age(e.repo->last_accessed, now),
                    Age(e.repo->last_modified, now), Join(e.Refs(), " "), notes});
    bytes += e.Size();
    n_revisions += e.repo->revisions.size();
  }
  if (revisions)
    PrintTable({"ID", "REVISION", "SIZE", "LAST_MODIFIED", "REFS"}, rows);
  else
    PrintTable({"ID", "SIZE", "LAST_ACCESSED", "LAST_MODIFIED", "REFS", "NOTES"}, rows);
  std::printf("\nFound %zu repo(s) for a total of %llu revision(s) and %s on disk (%s).\n", repos.size(),
              static_cast<unsigned long long>(n_revisions), Human(bytes).c_str(), info.cache_dir.c_str());
}

int Usage(const std::string& why) {
  std::fprintf(stderr, "hubload cache ls: %s\n", why.c_str());
  return 2;
}

}  // namespace

CLI::App* AddCacheLs(CLI::App* cache, const std::shared_ptr<CacheLsArgs>& a) {
  auto* ls = cache->add_subcommand("ls", "List cached repos or revisions: size, last use, refs (as hf cache ls)");
  ls->alias("scan");
  ls->add_flag("--revisions", a->revisions, "one entry per cached revision instead of per repo");
  ls->add_option("-f,--filter", a->filters,
                 "keep entries matching KEY OP VALUE: size>1GB, accessed>7d (not used for 7 days), modified<30d, "
                 "type=model, refs=main (repeatable; all must match)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  ls->add_option("--sort", a->sort,
                 "accessed, modified, size (default largest/newest first) or name (the cache id, A to Z), "
                 "optionally :asc or :desc");
  ls->add_option("--limit", a->limit, "only the first N entries (after filters and sort)")
      ->check(NonNegativeCheck());
  ls->add_option("--format", a->format, "table, json or csv (hf's records)")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "json", "csv"}));
  ls->add_flag("-q,--quiet", a->quiet, "print only the ids (cache ids such as model/org/name, or commits)");
  ls->add_flag("--json", a->json, "hubload's full report (revisions, files, partials, warnings) as JSON");
  ls->add_flag("--strict", a->strict, "exit 1 when the scan reports warnings (corrupted entries)");
  return ls;
}

int CacheLs(const CacheLsArgs& a, const Global& g) {
  std::vector<Filter> filters;
  for (auto& t : a.filters) {
    Filter f;
    if (std::string why = ParseFilter(t, &f); !why.empty()) return Usage(why);
    filters.push_back(f);
  }
  std::string key = util::AsciiLower(a.sort), dir;
  if (size_t c = key.find(':'); c != std::string::npos) {
    dir = key.substr(c + 1);
    key = key.substr(0, c);
  }
  if (!key.empty() && key != "size" && key != "accessed" && key != "modified" && key != "name")
    return Usage("--sort '" + a.sort + "': one of size, accessed, modified, name[:asc|:desc]");
  if (!dir.empty() && dir != "asc" && dir != "desc")
    return Usage("--sort '" + a.sort + "': the order is asc or desc");
  auto info = ScanCache(g.config.cache_dir);
  if (!info.ok()) return Fail("cache ls", info.status().ToString());
  const double now = static_cast<double>(std::time(nullptr));
  std::vector<Entry> entries;
  for (auto& r : info->repos) {
    if (!a.revisions) entries.push_back({&r, nullptr});
    else
      for (auto& v : r.revisions) entries.push_back({&r, &v});
  }
  // hf's order: by cache id ("dataset/..." < "model/..."), then commit.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& x, const Entry& y) {
    const std::string kx = util::AsciiLower(CacheId(*x.repo)), ky = util::AsciiLower(CacheId(*y.repo));
    if (kx != ky) return kx < ky;
    return x.rev && y.rev && x.rev->commit < y.rev->commit;
  });
  entries.erase(std::remove_if(entries.begin(), entries.end(), [&](const Entry& e) { return !Keep(e, filters, now); }),
                entries.end());
  if (!key.empty()) {
    // Default orders: largest, most recently used/changed first; names A to Z.
    const bool desc = dir.empty() ? key != "name" : dir == "desc";
    auto val = [&](const Entry& e) {
      return key == "size" ? static_cast<double>(e.Size()) : key == "accessed" ? e.repo->last_accessed
                                                                               : e.repo->last_modified;
    };
    std::stable_sort(entries.begin(), entries.end(), [&](const Entry& x, const Entry& y) {
      if (key == "name") {
        const std::string kx = util::AsciiLower(CacheId(*x.repo)), ky = util::AsciiLower(CacheId(*y.repo));
        return desc ? kx > ky : kx < ky;
      }
      return desc ? val(x) > val(y) : val(x) < val(y);
    });
  }
  if (a.limit >= 0 && entries.size() > static_cast<size_t>(a.limit)) entries.resize(static_cast<size_t>(a.limit));

  if (a.quiet) {
    for (auto& e : entries) std::printf("%s\n", e.rev ? e.rev->commit.c_str() : CacheId(*e.repo).c_str());
  } else if (a.json) {
    PrintFullJson(*info, entries);
  } else if (a.format == "json") {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (auto& e : entries) out.push_back(Record(e));
    std::printf("%s\n", hubload::util::DumpJson(out, 2).c_str());
  } else if (a.format == "csv") {
    PrintCsv(entries, a.revisions);
  } else {
    PrintTableOf(*info, entries, a.revisions, now);
  }
  for (auto& w : info->warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  if (a.strict && !info->warnings.empty()) {
    std::fprintf(stderr, "hubload cache ls: %zu warning(s) and --strict\n", info->warnings.size());
    return 1;
  }
  return 0;
}

}  // namespace hubload::cli
