// Reading a store repo: revisions, stat, listings, and the tree listings of a
// plain cache (mirror mode) (store_internal.h).
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <set>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "hub/server/store_internal.h"
#include "hubload/reasons.h"
#include "util/digest.h"
#include "util/file_io.h"
#include "util/json.h"

namespace hubload::server::internal {
namespace {

bool IsWithin(const fs::path& canonical_root, const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::canonical(p, ec);
  if (ec) return false;
  auto r = canonical_root.native();
  auto s = c.native();
  return s == r || (s.size() > r.size() && s.compare(0, r.size(), r) == 0 && s[r.size()] == '/');
}

// Fills content fields of a file entry from its resolved location.
bool DescribeFile(const fs::path& canonical_root, const fs::path& link, Entry* e) {
  std::error_code ec;
  if (!IsWithin(canonical_root, link)) return false;
  fs::path target = fs::canonical(link, ec);
  if (ec || !fs::is_regular_file(target, ec)) return false;
  e->file = target;
  e->size = fs::file_size(target, ec);
  if (ec) return false;
  std::string name = target.filename().string();
  bool in_blobs = target.parent_path().filename() == "blobs";
  if (in_blobs && IsHexOf(name, 64, 64)) {
    e->lfs = true;
    e->sha256 = name;
    e->etag = name;
    std::string ptr = LfsPointer(name, e->size);
    e->pointer_size = ptr.size();
    e->oid = util::GitBlobId(ptr);
    e->blob_name = name;
  } else if (in_blobs && IsHexOf(name, 40, 40)) {
    e->lfs = false;
    e->etag = name;
    e->oid = name;
    e->blob_name = name;
  } else {
    // A plain file (not a blob): hash it.
    std::string sha1;
    if (!HashFile(target, nullptr, &sha1, nullptr)) return false;
    e->etag = sha1;
    e->oid = sha1;
  }
  return true;
}

std::string DirOid(const std::vector<std::pair<std::string, std::string>>& children) {
  std::string s = "tree\n";
  for (auto& [n, o] : children) s += n + " " + o + "\n";
  return util::Sha1Hex(s);
}

// Recursively lists `dir_path` (absolute) whose repo path is `rel`.
// Returns the pseudo-oid of the directory.
std::string Walk(const fs::path& canonical_root, const fs::path& dir_path, const std::string& rel, bool recursive,
                 int depth, std::vector<Entry>* out) {
  std::vector<std::pair<std::string, std::string>> children;
  std::error_code ec;
  std::vector<fs::directory_entry> items;
  for (auto it = fs::directory_iterator(dir_path, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    items.push_back(*it);
  std::sort(items.begin(), items.end(),
            [](const auto& a, const auto& b) { return a.path().filename() < b.path().filename(); });
  for (auto& it : items) {
    std::string name = it.path().filename().string();
    if (name == ".git" || name == ".cache") continue;  // never listed (the Hub refuses them)
    std::string p = rel.empty() ? name : rel + "/" + name;
    std::error_code ec2;
    if (fs::is_directory(it.path(), ec2) && !fs::is_symlink(it.path(), ec2)) {
      Entry d;
      d.path = p;
      d.is_dir = true;
      size_t pos = out ? out->size() : 0;
      if (out && depth >= 0) out->push_back(d);
      std::vector<Entry>* sub = (recursive && out) ? out : nullptr;
      std::string oid = depth > 64 ? util::Sha1Hex(p) : Walk(canonical_root, it.path(), p, recursive, depth + 1, sub);
      if (out && depth >= 0) (*out)[pos].oid = oid;
      children.push_back({name, oid});
    } else {
      Entry e;
      e.path = p;
      if (!DescribeFile(canonical_root, it.path(), &e)) continue;
      children.push_back({name, e.oid});
      if (out) out->push_back(std::move(e));
    }
  }
  return DirOid(children);
}

Status ParseListing(const std::string& text, const std::string& doc, std::map<std::string, ListedFile>* out) {
  HUBLOAD_ASSIGN_OR_RETURN(nlohmann::json j, util::ParseJson(text, doc));
  util::JsonIn in(j, doc);
  HUBLOAD_ASSIGN_OR_RETURN(uint64_t version, in.Uint("format_version"));
  if (version != 1) return in.Invalid("format_version " + std::to_string(version) + " is not 1");
  HUBLOAD_ASSIGN_OR_RETURN(util::JsonIn files, in.Object("files"));
  HUBLOAD_ASSIGN_OR_RETURN(auto members, files.Members());
  for (auto& [path, e] : members) {
    Status safe = ValidateRepoPath(path);
    if (safe.Is(reason::kForbiddenFolder)) continue;  // .git/.cache entries are never served
    if (!safe.ok()) return e.Invalid("is not a safe path in a repo");
    ListedFile f;
    HUBLOAD_ASSIGN_OR_RETURN(f.size, e.Uint("size"));
    HUBLOAD_ASSIGN_OR_RETURN(f.blob_id, e.String("blob_id"));
    HUBLOAD_ASSIGN_OR_RETURN(auto lfs, e.OptString("lfs_sha256"));
    if (lfs) f.lfs_sha256 = *lfs;
    if (!IsHexOf(f.blob_id, 40, 40)) return e.Invalid("blob_id is not 40 lower-case hex");
    if (!f.lfs_sha256.empty() && !IsHexOf(f.lfs_sha256, 64, 64)) return e.Invalid("lfs_sha256 is not 64 lower-case hex");
    (*out)[path] = std::move(f);
  }
  return Status::Ok();
}

Entry FromListing(const std::string& path, const ListedFile& f) {
  Entry e;
  e.path = path;
  e.size = f.size;
  e.present = false;
  e.oid = f.blob_id;
  if (!f.lfs_sha256.empty()) {
    e.lfs = true;
    e.sha256 = f.lfs_sha256;
    e.etag = f.lfs_sha256;
    e.pointer_size = LfsPointer(f.lfs_sha256, f.size).size();
    e.blob_name = f.lfs_sha256;
  } else {
    e.etag = f.blob_id;
    e.blob_name = f.blob_id;
  }
  return e;
}

// Entries of a listing below `dir` ("" = root): files (present ones described
// from the store) and the directories their paths imply, with pseudo-oids.
std::vector<Entry> ListingEntries(const fs::path& croot, const fs::path& snap,
                                  const std::map<std::string, ListedFile>& listing, const std::string& dir,
                                  bool recursive) {
  std::map<std::string, Entry> files;
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> dir_children;  // dir -> (name, oid)
  for (auto& [p, f] : listing) {
    Entry e;
    e.path = p;
    if (!DescribeFile(croot, snap / p, &e)) e = FromListing(p, f);
    files[p] = e;
  }
  // Directory oids bottom-up (deepest first), like Walk's.
  std::set<std::string> dirs;
  for (auto& [p, e] : files)
    for (size_t s = p.find('/'); s != std::string::npos; s = p.find('/', s + 1)) dirs.insert(p.substr(0, s));
  std::map<std::string, std::string> dir_oid;
  std::vector<std::string> order(dirs.begin(), dirs.end());
  std::sort(order.begin(), order.end(), [](const std::string& a, const std::string& b) {
    return std::count(a.begin(), a.end(), '/') > std::count(b.begin(), b.end(), '/');
  });
  auto parent_of = [](const std::string& p) { return p.rfind('/') == std::string::npos ? "" : p.substr(0, p.rfind('/')); };
  for (auto& [p, e] : files) dir_children[parent_of(p)].push_back({p.substr(p.rfind('/') + 1), e.oid});
  for (auto& d : order) {
    auto& kids = dir_children[d];
    std::sort(kids.begin(), kids.end());
    dir_oid[d] = DirOid(kids);
    dir_children[parent_of(d)].push_back({d.substr(d.rfind('/') + 1), dir_oid[d]});
  }
  std::vector<Entry> out;
  std::string prefix = dir.empty() ? "" : dir + "/";
  auto wanted = [&](const std::string& p) {
    if (p.compare(0, prefix.size(), prefix) != 0 || p.size() == prefix.size()) return false;
    return recursive || p.find('/', prefix.size()) == std::string::npos;
  };
  for (auto& d : dirs)
    if (wanted(d)) {
      Entry e;
      e.path = d;
      e.is_dir = true;
      e.oid = dir_oid[d];
      out.push_back(std::move(e));
    }
  for (auto& [p, e] : files)
    if (wanted(p)) out.push_back(e);
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.path < b.path; });
  return out;
}

}  // namespace

std::optional<std::string> ResolveRevision(const fs::path& repo_dir, const std::string& revision) {
  std::string rev = revision == "HEAD" ? "main" : revision;
  std::error_code ec;
  if (IsSafeRefName(rev)) {
    fs::path ref = repo_dir / "refs" / rev;
    if (fs::is_regular_file(ref, ec)) {
      auto text = util::ReadSmallFile(ref.string(), 4096);
      if (!text.ok()) return std::nullopt;
      std::string t = *text;
      while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
      if (IsHexOf(t, 40, 40) && fs::is_directory(repo_dir / "snapshots" / t, ec)) return t;
      return std::nullopt;
    }
  }
  std::string lower = rev;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (IsHexOf(lower, 40, 40)) {
    if (fs::is_directory(repo_dir / "snapshots" / lower, ec)) return lower;
    return std::nullopt;
  }
  if (IsHexOf(lower, 7, 39)) {
    std::string found;
    for (auto it = fs::directory_iterator(repo_dir / "snapshots", ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      std::string n = it->path().filename().string();
      if (IsHexOf(n, 40, 40) && n.compare(0, lower.size(), lower) == 0) {
        if (!found.empty()) return std::nullopt;  // ambiguous
        found = n;
      }
    }
    if (!found.empty()) return found;
  }
  return std::nullopt;
}

std::optional<std::map<std::string, ListedFile>> ReadTreeListing(const fs::path& repo_dir, const std::string& commit) {
  std::error_code ec;
  if (!IsHexOf(commit, 40, 40) || fs::exists(repo_dir / ".hubload-repo.json", ec)) return std::nullopt;
  std::string path = (repo_dir / "trees" / (commit + ".json")).string();
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  auto text = util::ReadSmallFile(path);
  std::map<std::string, ListedFile> out;
  Status st = text.ok() ? ParseListing(*text, path, &out) : text.status();
  if (!st.ok()) {
    static std::mutex warned_mu;
    static std::set<std::string> warned;
    std::lock_guard<std::mutex> lock(warned_mu);
    if (warned.insert(path).second) spdlog::warn("hubload serve: ignoring corrupt tree listing: {}", st.message());
    return std::nullopt;
  }
  return out;
}

Completeness SnapshotCompleteness(const fs::path& root, const fs::path& repo_dir, const std::string& commit) {
  std::error_code ec;
  if (fs::exists(repo_dir / ".hubload-repo.json", ec)) return Completeness::kComplete;
  auto listing = ReadTreeListing(repo_dir, commit);
  if (!listing) return Completeness::kUnproven;
  fs::path croot = fs::canonical(root, ec);
  fs::path snap = repo_dir / "snapshots" / commit;
  for (auto& [p, f] : *listing) {
    Entry e;
    if (!DescribeFile(croot, snap / p, &e)) return Completeness::kListed;
  }
  return Completeness::kComplete;
}

Result<Entry> Stat(const fs::path& root, const fs::path& repo_dir, const std::string& commit, const std::string& path) {
  std::error_code ec;
  fs::path croot = fs::canonical(root, ec);
  if (ec) return Status(Code::kIOError, "store root unreadable: " + root.string());
  fs::path snap = repo_dir / "snapshots" / commit;
  auto listing = ReadTreeListing(repo_dir, commit);
  if (listing && !path.empty()) {
    if (!IsSafeRepoPath(path)) return Status(Code::kInvalidArgument, "invalid path in repo: " + path);
    auto it = listing->find(path);
    if (it != listing->end()) {
      Entry e;
      e.path = path;
      if (DescribeFile(croot, snap / path, &e)) return e;
      return FromListing(path, it->second);
    }
    // A directory of the listing?
    auto entries = ListingEntries(croot, snap, *listing, "", true);
    for (auto& e : entries)
      if (e.path == path) return e;
    return Status(Code::kEntryNotFound, "no such entry: " + path);
  }
  Entry e;
  e.path = path;
  if (path.empty()) {
    e.is_dir = true;
    e.oid = Walk(croot, snap, "", false, 0, nullptr);
    return e;
  }
  if (!IsSafeRepoPath(path)) return Status(Code::kInvalidArgument, "invalid path in repo: " + path);
  fs::path p = snap / path;
  if (!fs::exists(fs::symlink_status(p, ec))) return Status(Code::kEntryNotFound, "no such entry: " + path);
  if (!IsWithin(croot, p)) return Status(Code::kPermissionDenied, "entry escapes the store: " + path);
  if (fs::is_directory(p, ec)) {
    if (fs::is_symlink(p, ec)) return Status(Code::kEntryNotFound, "no such entry: " + path);
    e.is_dir = true;
    e.oid = Walk(croot, p, path, false, 0, nullptr);
    return e;
  }
  if (!DescribeFile(croot, p, &e)) return Status(Code::kEntryNotFound, "no such file: " + path);
  return e;
}

Result<std::vector<Entry>> List(const fs::path& root, const fs::path& repo_dir, const std::string& commit,
                                const std::string& dir, bool recursive) {
  std::error_code ec;
  fs::path croot = fs::canonical(root, ec);
  if (ec) return Status(Code::kIOError, "store root unreadable: " + root.string());
  if (!dir.empty() && !IsSafeRepoPath(dir)) return Status(Code::kInvalidArgument, "invalid path in repo: " + dir);
  fs::path snap = repo_dir / "snapshots" / commit;
  if (auto listing = ReadTreeListing(repo_dir, commit)) {
    auto out = ListingEntries(croot, snap, *listing, dir, recursive);
    if (!dir.empty() && out.empty()) return Status(Code::kEntryNotFound, "no such directory: " + dir);
    return out;
  }
  fs::path base = snap;
  if (!dir.empty()) {
    base /= dir;
    if (!fs::is_directory(base, ec) || fs::is_symlink(base, ec) || !IsWithin(croot, base))
      return Status(Code::kEntryNotFound, "no such directory: " + dir);
  }
  std::vector<Entry> out;
  Walk(croot, base, dir, recursive, 0, &out);
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.path < b.path; });
  return out;
}

std::string CommitDate(const fs::path& repo_dir, const RepoSettings& s, const std::string& commit) {
  auto it = s.commits.find(commit);
  if (it != s.commits.end() && !it->second.date.empty()) return it->second.date;
  struct stat st {};
  if (::stat((repo_dir / "snapshots" / commit).c_str(), &st) == 0) {
    std::tm tm{};
    gmtime_r(&st.st_mtime, &tm);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.000Z", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    return buf;
  }
  return NowIso8601();
}

LastCommit LastCommitFor(const fs::path& repo_dir, const RepoSettings& s, const std::string& commit,
                         const std::string& path) {
  auto info = [&](const std::string& id) {
    LastCommit lc;
    lc.id = id;
    auto it = s.commits.find(id);
    if (it != s.commits.end()) lc.title = it->second.title;
    lc.date = CommitDate(repo_dir, s, id);
    return lc;
  };
  auto target_of = [&](const std::string& c) -> std::string {
    std::error_code ec;
    fs::path p = repo_dir / "snapshots" / c / path;
    if (fs::is_symlink(p, ec)) return fs::read_symlink(p, ec).filename().string();
    if (fs::exists(p, ec)) return "#plain";
    return "";
  };
  std::string cur = commit;
  std::string blob = target_of(cur);
  for (int i = 0; i < 10000 && !blob.empty(); ++i) {
    auto it = s.commits.find(cur);
    if (it == s.commits.end()) break;
    const std::string& parent = it->second.parent;
    if (parent.empty() || target_of(parent) != blob) break;
    cur = parent;
  }
  return info(cur);
}

}  // namespace hubload::server::internal
