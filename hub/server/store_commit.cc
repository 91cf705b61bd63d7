// The commit engine of the store: blobs in, snapshot published, log and ref
// written (store_internal.h).
#include <algorithm>
#include <fstream>

#include "hub/server/store_internal.h"
#include "hubload/reasons.h"
#include "util/digest.h"
#include "util/file_io.h"

namespace hubload::server::internal {
namespace {

// Writes an added file into blobs/, returns the blob name.
Result<std::string> Ingest(const fs::path& repo_dir, const Op& op, const CommitOptions& o) {
  std::error_code ec;
  fs::create_directories(repo_dir / "blobs", ec);
  if (ec) return Status(Code::kIOError, "cannot create " + (repo_dir / "blobs").string() + ": " + ec.message());
  fs::path tmp = repo_dir / "blobs" / (".incoming-" + util::RandomSuffix() + util::RandomSuffix());
  if (!op.local_file.empty()) {
    fs::copy_file(op.local_file, tmp, fs::copy_options::overwrite_existing, ec);
    if (ec) {
      ErrorContext c;
      c.file = op.local_file;
      return Status(Code::kIOError, "cannot read " + op.local_file + ": " + ec.message(), "", c);
    }
  } else {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(op.content.data(), static_cast<std::streamsize>(op.content.size()));
    out.flush();
    if (!out) {
      fs::remove(tmp, ec);
      return Status(Code::kIOError, "cannot write blob for " + op.path);
    }
  }
  std::string sha256, sha1;
  uint64_t size = 0;
  if (!HashFile(tmp, &sha256, &sha1, &size)) {
    fs::remove(tmp, ec);
    return Status(Code::kIOError, "cannot hash blob for " + op.path);
  }
  bool lfs = op.lfs.has_value() ? *op.lfs : IsLfsPath(op.path, size, o.lfs_threshold_bytes, o.lfs_by_extension);
  std::string name = lfs ? sha256 : sha1;
  HUBLOAD_RETURN_IF_ERROR(InstallBlob(repo_dir, tmp, name));
  return name;
}

// Reads a snapshot as {path -> blob name}; plain files are ingested as blobs.
Result<std::map<std::string, std::string>> ReadTree(const fs::path& repo_dir, const std::string& commit,
                                                    const CommitOptions& o) {
  std::map<std::string, std::string> tree;
  fs::path snap = repo_dir / "snapshots" / commit;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(snap, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code ec2;
    if (it->is_directory(ec2) && !it->is_symlink(ec2)) continue;
    std::string rel = it->path().lexically_relative(snap).generic_string();
    if (it->is_symlink(ec2)) {
      fs::path target = fs::read_symlink(it->path(), ec2);
      std::string name = target.filename().string();
      if (target.parent_path().filename() == "blobs" && (IsHexOf(name, 40, 40) || IsHexOf(name, 64, 64)) &&
          fs::exists(repo_dir / "blobs" / name, ec2)) {
        tree[rel] = name;
        continue;
      }
    }
    if (it->is_regular_file(ec2)) {
      Op op;
      op.path = rel;
      op.local_file = it->path().string();
      HUBLOAD_ASSIGN_OR_RETURN(std::string name, Ingest(repo_dir, op, o));
      tree[rel] = name;
    }
  }
  if (ec) return Status(Code::kIOError, "cannot read snapshot " + snap.string() + ": " + ec.message());
  return tree;
}

// Applies one operation to the tree.
Status Apply(const fs::path& repo_dir, const std::string& repo_id, const Op& op, const CommitOptions& o,
             std::map<std::string, std::string>* tree, const ErrorContext& ctx) {
  std::error_code ec;
  if (op.kind == CommitOperation::Kind::kDelete) {
    if (!tree->erase(op.path))
      return Status(Code::kEntryNotFound, "cannot delete " + op.path + ": not in " + repo_id, reason::kEntryNotFound,
                    ctx);
    return Status::Ok();
  }
  if (op.kind == CommitOperation::Kind::kDeleteFolder) {
    std::string prefix = op.path + "/";
    size_t n = 0;
    for (auto it = tree->lower_bound(prefix); it != tree->end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
      it = tree->erase(it);
      ++n;
    }
    if (n == 0)
      return Status(Code::kEntryNotFound, "cannot delete folder " + op.path + ": not in " + repo_id,
                    reason::kEntryNotFound,
                    ctx);
    return Status::Ok();
  }
  std::string name;
  if (!op.existing_blob.empty()) {
    if (!fs::exists(repo_dir / "blobs" / op.existing_blob, ec))
      return Status(Code::kNotFound, "object " + op.existing_blob + " for " + op.path + " was never uploaded", "", ctx);
    name = op.existing_blob;
  } else {
    HUBLOAD_ASSIGN_OR_RETURN(name, Ingest(repo_dir, op, o));
  }
  (*tree)[op.path] = name;
  return Status::Ok();
}

// Publishes snapshots/<commit>/ from the tree (relative symlinks to blobs).
Status Publish(const fs::path& repo_dir, const std::string& commit, const std::map<std::string, std::string>& tree,
               const ErrorContext& ctx) {
  std::error_code ec;
  fs::path tmp = repo_dir / "snapshots" / (".tmp-" + commit);
  fs::remove_all(tmp, ec);
  for (auto& [p, b] : tree) {
    fs::path link = tmp / p;
    fs::create_directories(link.parent_path(), ec);
    size_t depth = std::count(p.begin(), p.end(), '/');
    std::string target = "../../";
    for (size_t i = 0; i < depth; ++i) target += "../";
    target += "blobs/" + b;
    fs::create_symlink(target, link, ec);
    if (ec) {
      fs::remove_all(tmp, ec);
      return Status(Code::kIOError, "cannot create snapshot link " + link.string(), "", ctx);
    }
  }
  fs::create_directories(tmp, ec);
  fs::rename(tmp, repo_dir / "snapshots" / commit, ec);
  if (ec) {
    std::error_code ec2;
    fs::remove_all(tmp, ec2);
    return Status(Code::kIOError, "cannot publish snapshot " + commit + ": " + ec.message(), "", ctx);
  }
  return Status::Ok();
}

}  // namespace

Status InstallBlob(const fs::path& repo_dir, const fs::path& tmp_file, const std::string& name) {
  std::error_code ec;
  fs::create_directories(repo_dir / "blobs", ec);
  fs::path dst = repo_dir / "blobs" / name;
  if (fs::exists(dst, ec)) {
    fs::remove(tmp_file, ec);
    return Status::Ok();
  }
  fs::rename(tmp_file, dst, ec);
  if (ec) {
    fs::remove(tmp_file, ec);
    return Status(Code::kIOError, "cannot install blob " + dst.string() + ": " + ec.message());
  }
  return Status::Ok();
}

Status RefClash(const fs::path& repo_dir, const std::string& name) {
  // git's rule: "a/b" cannot exist beside "a" (one would be a file and a folder).
  std::error_code ec;
  fs::path p = repo_dir / "refs";
  size_t start = 0;
  while (true) {
    size_t slash = name.find('/', start);
    p /= name.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    bool last = slash == std::string::npos;
    // An empty folder (left by a "a/b" deleted before empty parents were removed) holds no ref.
    if ((!last && fs::is_regular_file(p, ec)) || (last && fs::is_directory(p, ec) && !fs::is_empty(p, ec)))
      return Status(Code::kConflict, "ref '" + name + "' clashes with the existing ref '" +
                                         p.lexically_relative(repo_dir / "refs").generic_string() + "'",
                    reason::kRefExists);
    if (last) break;
    start = slash + 1;
  }
  return Status::Ok();
}

Status WriteRef(const fs::path& repo_dir, const std::string& name, const std::string& commit) {
  HUBLOAD_RETURN_IF_ERROR(RefClash(repo_dir, name));
  std::error_code ec;
  const fs::path file = repo_dir / "refs" / name;
  if (fs::is_directory(file, ec)) fs::remove(file, ec);  // empty (RefClash): make room for the file
  return util::AtomicWriteFile(file.string(), commit);
}

bool RemoveRef(const fs::path& repo_dir, const std::string& name, std::error_code& ec) {
  const fs::path refs = repo_dir / "refs";
  fs::path p = refs / name;
  if (!fs::remove(p, ec) || ec) return false;
  std::error_code e2;
  for (p = p.parent_path(); p != refs && p.native().size() > refs.native().size(); p = p.parent_path())
    if (!fs::is_empty(p, e2) || e2 || !fs::remove(p, e2)) break;
  return true;
}

Result<std::string> Commit(const fs::path& root, const std::string& repo_id, const std::vector<Op>& ops,
                           const CommitOptions& o, bool create_repo) {
  ErrorContext ctx;
  ctx.repo_id = repo_id;
  ctx.revision = o.branch;
  if (!IsValidRepoId(repo_id)) return Status(Code::kInvalidArgument, "invalid repo_id '" + repo_id + "'", "", ctx);
  if (!IsSafeRefName(o.branch) || IsHexOf(o.branch, 40, 40))
    return Status(Code::kInvalidArgument, "invalid branch name '" + o.branch + "': " + NewRefNameProblem(o.branch),
                  "", ctx);
  for (auto& op : ops)
    if (!IsCommittablePath(op.path))
      return Status(Code::kInvalidArgument,
                    "invalid path in repo '" + op.path +
                        "' (must be relative, without '..', empty, '.git' or '.cache' segments)",
                    "", ctx);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return Status(Code::kInvalidArgument, "store root is not a folder: " + root.string());
  fs::path repo_dir = *RepoDir(root, o.repo_type, repo_id);

  std::lock_guard<std::mutex> lock(CommitMutex());
  if (!fs::is_directory(repo_dir, ec)) {
    if (!create_repo) return Status(Code::kRepoNotFound, "repository not found: " + repo_id, reason::kRepoNotFound,
                                    ctx);
    fs::create_directories(repo_dir / "blobs", ec);
    fs::create_directories(repo_dir / "refs", ec);
    fs::create_directories(repo_dir / "snapshots", ec);
    if (ec) return Status(Code::kIOError, "cannot create " + repo_dir.string() + ": " + ec.message(), "", ctx);
  }
  fs::create_directories(repo_dir / "snapshots", ec);
  if (Status clash = RefClash(repo_dir, o.branch); !clash.ok()) return clash.Annotate(ctx);
  std::optional<std::string> head;
  if (fs::is_regular_file(repo_dir / "refs" / o.branch, ec)) {
    head = ResolveRevision(repo_dir, o.branch);
    if (!head) return Status(Code::kIOError, "ref " + o.branch + " of " + repo_id + " is corrupt", "", ctx);
  } else if (std::string why = GitRefNameProblem(o.branch); !why.empty()) {
    return Status(Code::kInvalidArgument,
                  "invalid branch name '" + o.branch + "': " + why + " (git check-ref-format)", "", ctx);
  }
  if (!o.parent_commit.empty()) {
    const std::string& pc = o.parent_commit;
    if (!IsHexOf(pc, 7, 40)) return Status(Code::kInvalidArgument, "parent_commit is not 7-40 hex: " + pc, "", ctx);
    if (!head || head->compare(0, pc.size(), pc) != 0)
      return Status(Code::kConflict,
                    "parent_commit " + pc + " is not the head of " + o.branch + " (head " + (head ? *head : "none") +
                        ")",
                    reason::kParentMismatch, ctx);
  }
  std::string base;
  if (!o.base_commit.empty()) {
    auto b = ResolveRevision(repo_dir, o.base_commit);
    if (!b) return Status(Code::kRevisionNotFound, "base commit not found: " + o.base_commit,
                          reason::kRevisionNotFound, ctx);
    base = *b;
  } else if (head) {
    base = *head;
  }
  std::map<std::string, std::string> tree;
  if (!base.empty()) {
    HUBLOAD_ASSIGN_OR_RETURN(tree, ReadTree(repo_dir, base, o));
  }
  for (auto& op : ops) {
    ErrorContext op_ctx = ctx;
    op_ctx.file = op.path;
    HUBLOAD_RETURN_IF_ERROR(Apply(repo_dir, repo_id, op, o, &tree, op_ctx));
  }
  // A path may not be both a file and a folder.
  for (auto it = tree.begin(); it != tree.end(); ++it) {
    auto next = std::next(it);
    if (next != tree.end() && next->first.size() > it->first.size() &&
        next->first.compare(0, it->first.size(), it->first) == 0 && next->first[it->first.size()] == '/')
      return Status(Code::kInvalidArgument, "'" + it->first + "' would be both a file and a folder", "", ctx);
  }
  std::string manifest = "parent " + base + "\nmessage " + o.message + "\n" + o.description + "\n";
  for (auto& [p, b] : tree) manifest += p + '\0' + b + "\n";
  manifest += "nonce " + NowIso8601() + util::RandomSuffix() + util::RandomSuffix();
  std::string commit = util::Sha1Hex(manifest);
  HUBLOAD_RETURN_IF_ERROR(Publish(repo_dir, commit, tree, ctx));
  RepoSettings s = LoadSettings(repo_dir);
  if (s.created_at.empty()) s.created_at = NowIso8601();
  s.commits[commit] = CommitRecord{base, o.message, o.description, NowIso8601()};
  HUBLOAD_RETURN_IF_ERROR(SaveSettings(repo_dir, s));
  HUBLOAD_RETURN_IF_ERROR(WriteRef(repo_dir, o.branch, commit));
  return commit;
}

}  // namespace hubload::server::internal
