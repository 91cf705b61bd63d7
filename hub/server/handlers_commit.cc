// POST /api/{type}s/{repo}/commit/{rev}[?create_pr=1]: the NDJSON commit
// (hub-protocol.md §5.4, §8.4 items 38-42).
#include <algorithm>
#include <cctype>

#include "hub/server/bodies.h"
#include "hub/server/impl.h"
#include "hubload/reasons.h"

namespace hubload::server {

using namespace internal;
using json = nlohmann::json;
namespace fs = std::filesystem;

Response Server::Impl::CommitApi(Request& r, RepoType type, const std::string& repo_id, const std::string& rev) {
  fs::path repo_dir;
  if (auto deny = OpenRepo(r, type, repo_id, Need::kWrite, &repo_dir)) return *deny;
  auto body = ParseCommitNdjson(r.body, "commit body");
  if (!body.ok()) return ErrorResponse(400, "", body.status().message());
  CommitOptions co;
  co.repo_type = type;
  co.lfs_threshold_bytes = opt.lfs_threshold_bytes;
  co.lfs_by_extension = opt.lfs_by_extension;
  co.message = body->summary.empty() ? "Upload files" : body->summary;
  co.description = body->description;
  co.parent_commit = body->parent_commit;
  std::vector<Op> ops;
  for (auto& line : body->ops) {
    Op op;
    op.path = line.path;
    switch (line.kind) {
      case CommitLine::Kind::kFile: op.content = line.content; break;
      case CommitLine::Kind::kLfsFile: {
        std::error_code ec;
        fs::path blob = repo_dir / "blobs" / line.oid;
        if (!fs::is_regular_file(blob, ec))
          return ErrorResponse(422, "", "commit: LFS object " + line.oid + " for " + op.path + " was not uploaded");
        if (line.size && *line.size != fs::file_size(blob, ec))
          return ErrorResponse(422, "", "commit: LFS object " + line.oid + " for " + op.path + " has a different size");
        op.existing_blob = line.oid;
        break;
      }
      case CommitLine::Kind::kDeletedFile: op.kind = CommitOperation::Kind::kDelete; break;
      case CommitLine::Kind::kDeletedFolder: op.kind = CommitOperation::Kind::kDeleteFolder; break;
    }
    ops.push_back(std::move(op));
  }
  bool create_pr = r.QueryBool("create_pr");
  std::string pr_url;
  int pr_num = 0;
  std::lock_guard<std::mutex> lock(upload_mu);
  if (create_pr) {
    auto base = ResolveRevision(repo_dir, co.parent_commit.empty() ? rev : co.parent_commit);
    if (!base) return ErrorResponse(404, "RevisionNotFound", "Invalid rev id: " + rev);
    pr_num = 1;
    std::error_code ec;
    for (auto it = fs::directory_iterator(repo_dir / "refs" / "refs" / "pr", ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      std::string name = it->path().filename().string();
      if (!name.empty() && name.size() < 9 && std::all_of(name.begin(), name.end(), ::isdigit))
        pr_num = std::max(pr_num, std::stoi(name) + 1);
    }
    co.branch = "refs/pr/" + std::to_string(pr_num);
    co.base_commit = *base;
    co.parent_commit.clear();
    pr_url = Base(r) + "/" + TypePrefix(type) + repo_id + "/discussions/" + std::to_string(pr_num);
  } else {
    if (IsHexOf(rev, 40, 40) || !IsSafeRefName(rev))
      return ErrorResponse(400, "", "commit: revision must be a branch, got '" + rev + "'");
    std::error_code ec;
    bool branch_exists = fs::exists(repo_dir / "refs" / rev, ec);
    bool any_ref = false;
    for (auto it = fs::directory_iterator(repo_dir / "refs", ec); !ec && it != fs::directory_iterator();
         it.increment(ec))
      any_ref = true;
    if (!branch_exists && any_ref) return ErrorResponse(404, "RevisionNotFound", "Invalid rev id: " + rev);
    if (LoadSettings(repo_dir).tags.count(rev))
      return ErrorResponse(400, "", "commit: '" + rev + "' is a tag; commits go to branches");
    co.branch = rev;
  }
  auto c = Commit(root, repo_id, ops, co, false);
  if (!c.ok()) {
    const Status& s = c.status();
    if (s.Is(reason::kParentMismatch))
      return ErrorResponse(412, "", "A commit has happened since. Please refresh and try again. (" + s.message() + ")");
    return StatusResponse(s);
  }
  json out{{"commitOid", *c},
           {"commitUrl", Base(r) + "/" + TypePrefix(type) + repo_id + "/commit/" + *c},
           {"hookOutput", ""},
           {"success", true}};
  if (create_pr) {
    out["pullRequestUrl"] = pr_url;
    out["prNum"] = pr_num;
  }
  return JsonResponse(200, out);
}

}  // namespace hubload::server
