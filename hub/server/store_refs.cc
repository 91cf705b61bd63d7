// Branches, tags, the refs listing and the commit history of a store repo
// (hubload/server.h "refs and history"), as huggingface_hub's HfApi sees them.
#include <algorithm>
#include <set>

#include "hub/server/store_internal.h"
#include "hubload/reasons.h"

namespace hubload::server {

using namespace internal;

namespace {

Result<fs::path> ExistingRepo(const std::string& root, const std::string& repo_id, RepoType type) {
  auto dir = RepoDir(root, type, repo_id);
  std::error_code ec;
  if (!dir || !fs::is_directory(*dir / "snapshots", ec)) {
    ErrorContext ctx;
    ctx.repo_id = repo_id;
    return Status(Code::kRepoNotFound, "repository not found: " + repo_id, reason::kRepoNotFound, ctx);
  }
  return *dir;
}

// AtomicWriteFile's temp files ("<name>.tmp<8 hex>") are not refs.
bool IsTempName(const std::string& name) {
  size_t p = name.rfind(".tmp");
  return p != std::string::npos && name.size() - p == 12 && IsHexOf(name.substr(p + 4), 8, 8);
}

// Every ref file below refs/ as (name relative to refs/, commit).
std::vector<std::pair<std::string, std::string>> RefFiles(const fs::path& repo_dir) {
  std::vector<std::pair<std::string, std::string>> out;
  fs::path refs = repo_dir / "refs";
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(refs, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code ec2;
    if (!it->is_regular_file(ec2)) continue;
    std::string name = it->path().lexically_relative(refs).generic_string();
    if (IsTempName(it->path().filename().string()) || !IsSafeRefName(name)) continue;
    auto commit = ResolveRevision(repo_dir, name);
    if (commit) out.push_back({name, *commit});
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status CheckNewName(const std::string& name, const char* what, const ErrorContext& ctx) {
  if (std::string why = NewRefNameProblem(name); !why.empty())
    return Status(Code::kInvalidArgument, std::string("invalid ") + what + " name '" + name + "': " + why, "", ctx);
  if (name.rfind("refs/", 0) == 0)
    return Status(Code::kInvalidArgument,
                  std::string("invalid ") + what + " name '" + name + "': names under refs/ are reserved", "", ctx);
  return Status::Ok();
}

ErrorContext Ctx(const std::string& repo_id, const std::string& rev) {
  ErrorContext ctx;
  ctx.repo_id = repo_id;
  ctx.revision = rev;
  return ctx;
}

}  // namespace

Result<RepoRefs> ListRefs(const std::string& root, const std::string& repo_id, RepoType repo_type) {
  HUBLOAD_ASSIGN_OR_RETURN(fs::path dir, ExistingRepo(root, repo_id, repo_type));
  RepoSettings s = LoadSettings(dir);
  RepoRefs out;
  for (auto& [name, commit] : RefFiles(dir)) {
    if (name.rfind("refs/pr/", 0) == 0) {
      out.pull_requests.push_back({name, name, commit});
    } else if (name.rfind("refs/convert/", 0) == 0) {
      out.converts.push_back({name.substr(13), name, commit});
    } else if (name.rfind("refs/", 0) == 0) {
      continue;  // other refs/refs/* entries are not listed by the Hub
    } else if (s.tags.count(name)) {
      out.tags.push_back({name, "refs/tags/" + name, commit});
    } else {
      out.branches.push_back({name, "refs/heads/" + name, commit});
    }
  }
  return out;
}

Status CreateBranch(const std::string& root, const std::string& repo_id, const std::string& branch,
                    const std::string& starting_point, RepoType repo_type, bool empty, bool overwrite) {
  ErrorContext ctx = Ctx(repo_id, branch);
  HUBLOAD_ASSIGN_OR_RETURN(fs::path dir, ExistingRepo(root, repo_id, repo_type));
  HUBLOAD_RETURN_IF_ERROR(CheckNewName(branch, "branch", ctx));
  std::string commit;
  if (empty) {
    CommitOptions co;
    co.repo_type = repo_type;
    co.branch = branch;
    co.message = "Create empty branch " + branch;
    {
      std::lock_guard<std::mutex> lock(CommitMutex());
      RepoSettings s = LoadSettings(dir);
      std::error_code ec;
      if (s.tags.count(branch) || (fs::is_regular_file(dir / "refs" / branch, ec) && !overwrite))
        return Status(Code::kConflict, "reference " + branch + " already exists in " + repo_id, reason::kRefExists,
                      ctx);
      if (fs::is_regular_file(dir / "refs" / branch, ec)) RemoveRef(dir, branch, ec);
    }
    return Commit(root, repo_id, {}, co, false).status();
  }
  std::string from = starting_point.empty() ? "main" : starting_point;
  auto c = ResolveRevision(dir, from);
  if (!c) return Status(Code::kRevisionNotFound, "invalid rev id: " + from, reason::kRevisionNotFound, ctx);
  commit = *c;
  std::lock_guard<std::mutex> lock(CommitMutex());
  RepoSettings s = LoadSettings(dir);
  std::error_code ec;
  // overwrite without a starting point leaves an existing branch alone (@huggingface/hub createBranch).
  if (overwrite && starting_point.empty() && !s.tags.count(branch) && fs::is_regular_file(dir / "refs" / branch, ec))
    return Status::Ok();
  if (s.tags.count(branch))
    return Status(Code::kConflict, "a tag named " + branch + " already exists in " + repo_id, reason::kRefExists, ctx);
  if (fs::is_regular_file(dir / "refs" / branch, ec) && !overwrite)
    return Status(Code::kConflict, "reference " + branch + " already exists in " + repo_id, reason::kRefExists, ctx);
  return WriteRef(dir, branch, commit);
}

Status DeleteBranch(const std::string& root, const std::string& repo_id, const std::string& branch,
                    RepoType repo_type) {
  ErrorContext ctx = Ctx(repo_id, branch);
  HUBLOAD_ASSIGN_OR_RETURN(fs::path dir, ExistingRepo(root, repo_id, repo_type));
  if (branch == "main")
    return Status(Code::kPermissionDenied, "cannot delete the default branch main of " + repo_id, "", ctx);
  std::lock_guard<std::mutex> lock(CommitMutex());
  RepoSettings s = LoadSettings(dir);
  std::error_code ec;
  if (!IsSafeRefName(branch) || branch.rfind("refs/", 0) == 0 || s.tags.count(branch) ||
      !fs::is_regular_file(dir / "refs" / branch, ec))
    return Status(Code::kRevisionNotFound, "branch " + branch + " not found in " + repo_id, reason::kRevisionNotFound,
                  ctx);
  if (!RemoveRef(dir, branch, ec))
    return Status(Code::kIOError, "cannot delete branch " + branch + ": " + ec.message(), "", ctx);
  return Status::Ok();
}

Status CreateTag(const std::string& root, const std::string& repo_id, const std::string& tag,
                 const std::string& revision, const std::string& message, RepoType repo_type) {
  ErrorContext ctx = Ctx(repo_id, tag);
  HUBLOAD_ASSIGN_OR_RETURN(fs::path dir, ExistingRepo(root, repo_id, repo_type));
  HUBLOAD_RETURN_IF_ERROR(CheckNewName(tag, "tag", ctx));
  std::string from = revision.empty() ? "main" : revision;
  auto c = ResolveRevision(dir, from);
  if (!c) return Status(Code::kRevisionNotFound, "invalid rev id: " + from, reason::kRevisionNotFound, ctx);
  std::lock_guard<std::mutex> lock(CommitMutex());
  RepoSettings s = LoadSettings(dir);
  std::error_code ec;
  if (s.tags.count(tag) || fs::is_regular_file(dir / "refs" / tag, ec))
    return Status(Code::kConflict, "reference " + tag + " already exists in " + repo_id, reason::kRefExists, ctx);
  // A clash ("rel" beside "rel/1") is refused before the settings record the tag.
  if (Status clash = RefClash(dir, tag); !clash.ok()) return clash.Annotate(ctx);
  if (s.created_at.empty()) s.created_at = NowIso8601();
  s.tags[tag] = message;
  HUBLOAD_RETURN_IF_ERROR(SaveSettings(dir, s));
  return WriteRef(dir, tag, *c);
}

Status DeleteTag(const std::string& root, const std::string& repo_id, const std::string& tag, RepoType repo_type) {
  ErrorContext ctx = Ctx(repo_id, tag);
  HUBLOAD_ASSIGN_OR_RETURN(fs::path dir, ExistingRepo(root, repo_id, repo_type));
  std::lock_guard<std::mutex> lock(CommitMutex());
  RepoSettings s = LoadSettings(dir);
  if (!s.tags.count(tag))
    return Status(Code::kRevisionNotFound, "tag " + tag + " not found in " + repo_id, reason::kRevisionNotFound, ctx);
  std::error_code ec;
  RemoveRef(dir, tag, ec);
  s.tags.erase(tag);
  return SaveSettings(dir, s);
}

Result<std::vector<CommitInfo>> ListCommits(const std::string& root, const std::string& repo_id,
                                            const std::string& revision, RepoType repo_type) {
  HUBLOAD_ASSIGN_OR_RETURN(fs::path dir, ExistingRepo(root, repo_id, repo_type));
  auto head = ResolveRevision(dir, revision.empty() ? "main" : revision);
  if (!head)
    return Status(Code::kRevisionNotFound, "invalid rev id: " + revision, reason::kRevisionNotFound, Ctx(repo_id,
                                                                                                         revision));
  RepoSettings s = LoadSettings(dir);
  std::vector<CommitInfo> out;
  std::set<std::string> seen;
  std::string cur = *head;
  std::error_code ec;
  while (!cur.empty() && seen.insert(cur).second) {
    CommitInfo c;
    c.id = cur;
    auto it = s.commits.find(cur);
    if (it != s.commits.end()) {
      c.parent = it->second.parent;
      c.title = it->second.title;
      c.message = it->second.message;
    }
    c.date = CommitDate(dir, s, cur);
    out.push_back(c);
    // A parent without a snapshot (pruned) ends the walk.
    if (c.parent.empty() || !fs::is_directory(dir / "snapshots" / c.parent, ec)) break;
    cur = c.parent;
  }
  return out;
}

}  // namespace hubload::server
