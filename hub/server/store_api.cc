// The public store calls of hubload/server.h (repo creation, commits, refs,
// access settings) over the internal commit engine.
#include <set>

#include "hub/server/store_internal.h"
#include "util/digest.h"
#include "hubload/reasons.h"

namespace hubload::server {

using namespace internal;

namespace {

Status ApplyAccess(const fs::path& repo_dir, const RepoAccess& a) {
  RepoSettings s = LoadSettings(repo_dir);
  s.private_repo = a.private_repo;
  s.gated = (a.gated == "false") ? "" : a.gated;
  s.read_sha256.clear();
  s.gated_sha256.clear();
  for (auto& t : a.read_tokens) s.read_sha256.push_back(util::Sha256Hex(t));
  for (auto& t : a.gated_tokens) s.gated_sha256.push_back(util::Sha256Hex(t));
  if (s.created_at.empty()) s.created_at = NowIso8601();
  return SaveSettings(repo_dir, s);
}

Result<std::string> CreateFromOps(const std::string& root, const std::string& repo_id, const std::vector<Op>& ops,
                                  const CreateRepoOptions& o) {
  if (o.gated != "" && o.gated != "false" && o.gated != "auto" && o.gated != "manual")
    return Status(Code::kInvalidArgument, "gated must be auto or manual, got '" + o.gated + "'");
  auto dir = RepoDir(root, o.repo_type, repo_id);
  if (!dir) return Status(Code::kInvalidArgument, "invalid repo_id '" + repo_id + "'");
  std::error_code ec;
  if (fs::exists(*dir, ec) && o.fail_if_exists) return Status(Code::kConflict, "repository already exists: " + repo_id);
  // Remove everything the folder does not contain: the commit tree is exactly `ops`.
  CommitOptions co;
  co.repo_type = o.repo_type;
  co.branch = o.branch;
  co.message = o.commit_message;
  co.lfs_threshold_bytes = o.lfs_threshold_bytes;
  co.lfs_by_extension = o.lfs_by_extension;
  std::vector<Op> all = ops;
  if (fs::exists(*dir, ec)) {
    auto head = ResolveRevision(*dir, o.branch);
    if (head) {
      auto listing = List(root, *dir, *head, "", true);
      if (listing.ok()) {
        std::set<std::string> keep;
        for (auto& op : ops) keep.insert(op.path);
        for (auto& e : *listing)
          if (!e.is_dir && !keep.count(e.path)) {
            Op d;
            d.kind = CommitOperation::Kind::kDelete;
            d.path = e.path;
            all.push_back(d);
          }
      }
    }
  }
  HUBLOAD_ASSIGN_OR_RETURN(std::string commit, Commit(root, repo_id, all, co, true));
  RepoAccess a;
  a.private_repo = o.private_repo;
  a.gated = o.gated;
  a.read_tokens = o.read_tokens;
  a.gated_tokens = o.gated_tokens;
  std::lock_guard<std::mutex> lock(CommitMutex());
  HUBLOAD_RETURN_IF_ERROR(ApplyAccess(*dir, a));
  return commit;
}

Result<fs::path> ExistingRepoDir(const std::string& root, const std::string& repo_id, RepoType type) {
  auto dir = RepoDir(root, type, repo_id);
  if (!dir) return Status(Code::kInvalidArgument, "invalid repo_id '" + repo_id + "'");
  std::error_code ec;
  if (!fs::is_directory(*dir, ec)) return Status(Code::kRepoNotFound, "repository not found: " + repo_id,
                                                 reason::kRepoNotFound);
  return *dir;
}

}  // namespace

Result<std::string> CreateRepoFromFolder(const std::string& root, const std::string& repo_id,
                                         const std::string& folder, const CreateRepoOptions& o) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return Status(Code::kInvalidArgument, "not a folder: " + folder);
  std::vector<Op> ops;
  for (auto it = fs::recursive_directory_iterator(folder, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code ec2;
    if (it->path().filename() == ".git" && it->is_directory(ec2)) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(ec2)) continue;
    Op op;
    op.path = it->path().lexically_relative(folder).generic_string();
    op.local_file = it->path().string();
    ops.push_back(op);
  }
  if (ec) return Status(Code::kIOError, "cannot list " + folder + ": " + ec.message());
  return CreateFromOps(root, repo_id, ops, o);
}

Result<std::string> CreateRepoFromFiles(const std::string& root, const std::string& repo_id,
                                        const std::map<std::string, std::string>& files, const CreateRepoOptions& o) {
  std::vector<Op> ops;
  for (auto& [p, c] : files) {
    Op op;
    op.path = p;
    op.content = c;
    ops.push_back(op);
  }
  return CreateFromOps(root, repo_id, ops, o);
}

Result<std::string> CommitFiles(const std::string& root, const std::string& repo_id,
                                const std::vector<CommitOperation>& ops, const CommitOptions& options) {
  std::vector<Op> iops;
  for (auto& op : ops) {
    Op o;
    o.kind = op.kind;
    o.path = op.path;
    o.content = op.content;
    o.local_file = op.local_file;
    o.lfs = op.lfs;
    iops.push_back(o);
  }
  return Commit(root, repo_id, iops, options, false);
}

Result<std::string> ReplaceFile(const std::string& root, const std::string& repo_id, const std::string& path,
                                const std::string& content, const CommitOptions& options) {
  CommitOperation op;
  op.path = path;
  op.content = content;
  CommitOptions o = options;
  if (o.message == "Update files") o.message = "Update " + path;
  return CommitFiles(root, repo_id, {op}, o);
}

Status SetRef(const std::string& root, const std::string& repo_id, const std::string& ref_name,
              const std::string& commit, RepoType repo_type) {
  HUBLOAD_ASSIGN_OR_RETURN(fs::path dir, ExistingRepoDir(root, repo_id, repo_type));
  if (!IsSafeRefName(ref_name)) return Status(Code::kInvalidArgument, "invalid ref name '" + ref_name + "'");
  std::error_code ec;
  if (!IsHexOf(commit, 40, 40) || !fs::is_directory(dir / "snapshots" / commit, ec))
    return Status(Code::kRevisionNotFound, "commit " + commit + " not in " + repo_id, reason::kRevisionNotFound);
  std::lock_guard<std::mutex> lock(CommitMutex());
  return WriteRef(dir, ref_name, commit);
}

Status SetRepoAccess(const std::string& root, const std::string& repo_id, const RepoAccess& access,
                     RepoType repo_type) {
  HUBLOAD_ASSIGN_OR_RETURN(fs::path dir, ExistingRepoDir(root, repo_id, repo_type));
  std::lock_guard<std::mutex> lock(CommitMutex());
  return ApplyAccess(dir, access);
}

}  // namespace hubload::server
