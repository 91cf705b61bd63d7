// Metadata APIs: repo info (/api/{type}s/{repo}[/revision/{rev}]), tree
// listing with Link pagination, paths-info (hub-protocol.md §2, §8.3).
#include <algorithm>
#include <cctype>

#include "hub/server/bodies.h"
#include "hub/server/impl.h"
#include "util/digest.h"
#include "util/percent.h"

namespace hubload::server {

using namespace internal;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

json EntryJson(const Entry& e, const fs::path& repo_dir, const RepoSettings& s, const std::string& commit, bool expand) {
  json j;
  j["type"] = e.is_dir ? "directory" : "file";
  j["oid"] = e.oid;
  j["size"] = e.is_dir ? 0 : e.size;
  j["path"] = e.path;
  if (!e.is_dir && e.lfs) j["lfs"] = {{"oid", e.sha256}, {"size", e.size}, {"pointerSize", e.pointer_size}};
  if (expand) {
    LastCommit lc = LastCommitFor(repo_dir, s, commit, e.path);
    j["lastCommit"] = {{"id", lc.id}, {"title", lc.title}, {"date", lc.date}};
    if (!e.is_dir) j["securityFileStatus"] = {{"status", "safe"}};
  }
  return j;
}

}  // namespace

Response Server::Impl::RepoInfo(Request& r, RepoType type, const std::string& repo_id, const std::string& rev) {
  fs::path repo_dir;
  if (auto deny = OpenRepo(r, type, repo_id, Need::kRead, &repo_dir)) return *deny;
  RepoSettings s = LoadSettings(repo_dir);
  auto commit = ResolveRevision(repo_dir, rev.empty() ? "main" : rev);
  if (!commit) {
    if (rev.empty()) {
      // An empty repo (no main): no sha, no siblings.
      return JsonResponse(200, json{{"id", repo_id}, {"_id", util::Sha1Hex(repo_id).substr(0, 24)},
                                    {"private", s.private_repo}, {"siblings", json::array()}});
    }
    return ErrorResponse(404, "RevisionNotFound", "Invalid rev id: " + rev);
  }
  auto listing = List(root, repo_dir, *commit, "", true);
  if (!listing.ok()) return StatusResponse(listing.status());
  bool blobs = r.QueryBool("blobs");
  json siblings = json::array();
  for (auto& e : *listing) {
    if (e.is_dir) continue;
    json sj{{"rfilename", e.path}};
    if (blobs) {
      sj["size"] = e.size;
      sj["blobId"] = e.oid;
      if (e.lfs) sj["lfs"] = {{"sha256", e.sha256}, {"size", e.size}, {"pointerSize", e.pointer_size}};
    }
    siblings.push_back(sj);
  }
  std::string date = CommitDate(repo_dir, s, *commit);
  std::string author = repo_id.find('/') == std::string::npos ? "" : repo_id.substr(0, repo_id.find('/'));
  json j{{"_id", util::Sha1Hex(std::string(RepoTypeName(type)) + "/" + repo_id).substr(0, 24)},
         {"id", repo_id},
         {"author", author},
         {"sha", *commit},
         {"lastModified", date},
         {"createdAt", s.created_at.empty() ? date : s.created_at},
         {"private", s.private_repo},
         {"disabled", false},
         {"downloads", 0},
         {"likes", 0},
         {"tags", json::array()},
         {"siblings", siblings}};
  if (type == RepoType::kModel) j["modelId"] = repo_id;
  if (s.gated.empty()) {
    j["gated"] = false;
  } else {
    j["gated"] = s.gated;
  }
  if (type == RepoType::kSpace) j["sdk"] = "static";
  Response resp = JsonResponse(200, j);
  resp.unproven = SnapshotCompleteness(root, repo_dir, *commit) == Completeness::kUnproven;
  return resp;
}

Response Server::Impl::Tree(Request& r, RepoType type, const std::string& repo_id, const std::string& rev,
                            const std::string& path) {
  fs::path repo_dir;
  if (auto deny = OpenRepo(r, type, repo_id, Need::kRead, &repo_dir)) return *deny;
  auto commit = ResolveRevision(repo_dir, rev);
  if (!commit) return ErrorResponse(404, "RevisionNotFound", "Invalid rev id: " + rev);
  if (!path.empty() && !IsSafeRepoPath(path)) return ErrorResponse(404, "EntryNotFound", "Invalid path: " + path);
  auto listing = List(root, repo_dir, *commit, path, r.QueryBool("recursive"));
  if (!listing.ok()) {
    Response e = ErrorResponse(404, "EntryNotFound", "Path not found: " + path);
    e.Set("X-Repo-Commit", *commit);
    return e;
  }
  bool expand = r.QueryBool("expand");
  size_t page = static_cast<size_t>(std::max(1, opt.tree_page_size));
  std::string limit_s = r.Query("limit");  // overrides the page size, at most 10000
  if (auto limit = ParseDecimal(limit_s, 6); limit && *limit > 0) page = std::min<size_t>(10000, *limit);
  size_t cursor = 0;
  std::string cursor_s = r.Query("cursor");
  if (!cursor_s.empty()) {
    auto c = ParseDecimal(cursor_s, 12);
    if (!c) return ErrorResponse(400, "", "Invalid cursor '" + cursor_s + "'");
    cursor = static_cast<size_t>(*c);
  }
  RepoSettings s = LoadSettings(repo_dir);
  json arr = json::array();
  size_t end = std::min(listing->size(), cursor + page);
  for (size_t i = cursor; i < end; ++i) arr.push_back(EntryJson((*listing)[i], repo_dir, s, *commit, expand));
  Response resp = JsonResponse(200, arr);
  resp.Set("X-Repo-Commit", *commit);
  resp.unproven = SnapshotCompleteness(root, repo_dir, *commit) == Completeness::kUnproven;
  if (end < listing->size()) {
    // The route below the path prefix, re-based on the address the client used.
    std::string next = Base(r) + r.route_path + "?recursive=" + (r.QueryBool("recursive") ? "true" : "false") +
                       "&expand=" + (expand ? "true" : "false") + "&cursor=" + std::to_string(end);
    if (!limit_s.empty()) next += "&limit=" + util::PercentEncode(limit_s);
    resp.Set("Link", "<" + next + ">; rel=\"next\"");
  }
  return resp;
}

Response Server::Impl::PathsInfo(Request& r, RepoType type, const std::string& repo_id, const std::string& rev) {
  fs::path repo_dir;
  if (auto deny = OpenRepo(r, type, repo_id, Need::kRead, &repo_dir)) return *deny;
  auto commit = ResolveRevision(repo_dir, rev);
  if (!commit) return ErrorResponse(404, "RevisionNotFound", "Invalid rev id: " + rev);
  auto body = ParsePathsInfo(r.body, r.Header("content-type"), "paths-info body");
  if (!body.ok()) return ErrorResponse(400, "", body.status().message());
  RepoSettings s = LoadSettings(repo_dir);
  json arr = json::array();
  for (auto& p : body->paths) {
    std::string clean = p;
    while (!clean.empty() && clean.back() == '/') clean.pop_back();
    if (!IsSafeRepoPath(clean)) continue;
    auto st = Stat(root, repo_dir, *commit, clean);
    if (!st.ok()) continue;
    arr.push_back(EntryJson(*st, repo_dir, s, *commit, body->expand));
  }
  Response resp = JsonResponse(200, arr);
  resp.Set("X-Repo-Commit", *commit);
  return resp;
}

}  // namespace hubload::server
