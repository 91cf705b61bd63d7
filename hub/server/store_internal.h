// Internal store helpers shared by the server and the store library calls.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hubload/server.h"
#include "hubload/status.h"

namespace hubload::server::internal {

namespace fs = std::filesystem;

// ---- hashing / encoding ----
std::string HexOf(const unsigned char* md, size_t n);
std::string Sha256Hex(const std::string& data);
std::string Sha1Hex(const std::string& data);
/// sha256 hex of a file's content and its git blob sha1; false on read error.
bool HashFile(const fs::path& p, std::string* sha256, std::string* git_sha1, uint64_t* size);
std::string Base64Decode(const std::string& in, bool* ok);
std::string Base64Encode(const std::string& in);
/// Percent-decodes; false when a '%' is not followed by two hex digits.
bool PercentDecode(const std::string& in, std::string* out, bool plus_is_space = false);
std::string PercentEncode(const std::string& in, bool keep_slash);
bool IsHex(const std::string& s, size_t min_len, size_t max_len);
std::string NowIso8601();

/// The Git LFS pointer text of a file with this sha256 and size.
std::string LfsPointer(const std::string& sha256, uint64_t size);

/// True when `path` is a safe relative repo path: non-empty '/'-separated
/// segments, none "." or "..", no backslash, no NUL, not absolute.
bool IsSafeRepoPath(const std::string& path);
/// Same for a ref name ("main", "refs/pr/1", "v1.0").
bool IsSafeRefName(const std::string& ref);
bool IsValidRepoType(const std::string& t);
bool IsValidRepoId(const std::string& id);

bool IsLfsPath(const std::string& path, uint64_t size, uint64_t threshold, bool by_extension);

// ---- repo settings (.hubload-repo.json) ----
struct RepoSettings {
  bool private_repo = false;
  std::string gated;                       // "" | "auto" | "manual"
  std::vector<std::string> read_sha256;    // sha256 of tokens
  std::vector<std::string> gated_sha256;   // sha256 of tokens
  std::string created_at;
  nlohmann::json commits = nlohmann::json::object();  // id -> {parent,title,date}
};
RepoSettings LoadSettings(const fs::path& repo_dir);
Status SaveSettings(const fs::path& repo_dir, const RepoSettings& s);

// ---- reading a repo ----
struct Entry {
  std::string path;      // repo path
  bool is_dir = false;
  uint64_t size = 0;     // content size (0 for directories)
  fs::path file;         // resolved content file (inside root)
  bool lfs = false;
  std::string sha256;    // LFS only
  std::string oid;       // git blob sha1 (of the pointer for LFS), tree pseudo-oid for dirs
  std::string etag;      // unquoted: sha256 (LFS) or git sha1
  uint64_t pointer_size = 0;
  std::string blob_name;  // file name under blobs/ when it is a blob
};

/// Repo folder for (type, id) under root; nullopt when the names are invalid.
std::optional<fs::path> RepoDir(const fs::path& root, const std::string& repo_type, const std::string& repo_id);

/// Resolves a decoded revision (branch, ref path, "HEAD", full or >=7-hex
/// prefix commit) to a commit that has a snapshot. nullopt when not found.
std::optional<std::string> ResolveRevision(const fs::path& repo_dir, const std::string& revision);

/// Describes the file or directory `path` ("" = root) in snapshot `commit`.
/// Returns NotFound when absent, PermissionDenied when it escapes `root`.
Result<Entry> Stat(const fs::path& root, const fs::path& repo_dir, const std::string& commit, const std::string& path);

/// Lists `dir` ("" = root) of a snapshot: immediate children, or every file
/// and directory below it when recursive. Sorted by path. Entries escaping
/// root are skipped.
Result<std::vector<Entry>> List(const fs::path& root, const fs::path& repo_dir, const std::string& commit,
                                const std::string& dir, bool recursive);

struct LastCommit {
  std::string id, title, date;
};
/// Last commit (walking the commit log from `commit`) that changed `path`.
LastCommit LastCommitFor(const fs::path& repo_dir, const std::string& commit, const std::string& path);

// ---- writing ----
struct Op {
  CommitOperation::Kind kind = CommitOperation::Kind::kAdd;
  std::string path;
  std::string content;
  std::string local_file;
  std::optional<bool> lfs;
  std::string existing_blob;  // kAdd: use blobs/<existing_blob> as is (already verified)
};

/// One atomic commit; see CommitFiles. `create_repo` creates the folder.
Result<std::string> Commit(const fs::path& root, const std::string& repo_id, const std::vector<Op>& ops,
                           const CommitOptions& options, bool create_repo);

/// Moves `tmp_file` (same file system) into repo blobs as `name` (no-op when
/// present). Returns the final path.
Status InstallBlob(const fs::path& repo_dir, const fs::path& tmp_file, const std::string& name);

}  // namespace hubload::server::internal
