// Internal store helpers shared by the server and the store library calls.
// Files: store_util.cc (names, hashing, LFS rule), store_settings.cc
// (.hubload-repo.json), store_read.cc (revisions, stat, listing, mirror
// listings), store_commit.cc (the commit engine), store_refs.cc (branches,
// tags, history), store_api.cc (the public calls of hubload/server.h).
//
// The validation here is the server's own (an independent oracle for the
// client's, hubload/cache.h); the cache vocabulary (RepoType, RepoFolderName)
// is shared.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hubload/cache.h"
#include "hubload/server.h"
#include "hubload/status.h"

namespace hubload::server::internal {

namespace fs = std::filesystem;

// ---- names, hashing (store_util.cc) ----
/// Lower-case hex of min..max characters.
bool IsHexOf(std::string_view s, size_t min_len, size_t max_len);
std::string NowIso8601();
/// The Git LFS pointer text of a file with this sha256 and size.
std::string LfsPointer(const std::string& sha256, uint64_t size);
/// sha256 hex of a file's content and its git blob sha1 (either may be null);
/// false on a read error.
bool HashFile(const fs::path& p, std::string* sha256, std::string* git_sha1, uint64_t* size);

/// True when `path` passes the one repo path rule, ValidateRepoPath
/// (hubload/repo.h): relative, no empty/"."/".." segment, no backslash or
/// control character, no `.git` or `.cache` segment (the Hub refuses both in
/// commits and never lists them; huggingface_hub refuses them on upload).
bool IsSafeRepoPath(const std::string& path);
/// What a commit may write: the same rule as IsSafeRepoPath (kept as a name
/// at the commit call sites).
bool IsCommittablePath(const std::string& path);
/// Same as IsSafeRepoPath for a ref name ("main", "refs/pr/1", "v1.0"), plus
/// git's forbidden characters (space ~ ^ : ? * [ and controls); every
/// segment at most 200 bytes (room for the temporary suffix within NAME_MAX).
bool IsSafeRefName(const std::string& ref);
/// The rule of IsSafeRefName that `ref` breaks, for a 400 message ("no '..'",
/// "a component is longer than 200 bytes", ...), or "" when it passes.
std::string RefNameSafetyProblem(const std::string& ref);
/// Why `name` cannot be a new branch or tag (IsSafeRefName, 40 hex digits,
/// "HEAD", GitRefNameProblem), or "" when it can.
std::string NewRefNameProblem(const std::string& name);
/// For a new branch or tag name (which must also pass IsSafeRefName): the
/// rule of git check-ref-format (and `git branch`) it breaks, or "" when none:
/// a component starting with '.' or ending with ".lock", a name ending with
/// '.' or starting with '-', the name "@". Existing refs are read without it.
std::string GitRefNameProblem(const std::string& ref);
/// ValidateRepoId (hubload/repo.h) passes.
bool IsValidRepoId(const std::string& id);
/// Web URL prefix of a repo type: "", "datasets/", "spaces/".
const char* TypePrefix(RepoType type);

bool IsLfsPath(const std::string& path, uint64_t size, uint64_t threshold, bool by_extension);

/// Serialises every commit and ref change of this process.
std::mutex& CommitMutex();

// ---- repo settings, .hubload-repo.json (store_settings.cc) ----
struct CommitRecord {
  std::string parent, title, message, date;
};
struct RepoSettings {
  bool present = false;  // the file exists: a store repo (else a plain cache)
  bool private_repo = false;
  std::string gated;                      // "" | "auto" | "manual"
  std::vector<std::string> read_sha256;   // sha256 of tokens
  std::vector<std::string> gated_sha256;  // sha256 of tokens
  std::string created_at;
  std::map<std::string, CommitRecord> commits;  // commit id -> record
  std::map<std::string, std::string> tags;      // tag name -> message
};
/// Reads the settings; a missing or unreadable file gives defaults
/// (present = false), a corrupt one defaults with a warning.
RepoSettings LoadSettings(const fs::path& repo_dir);
/// The text of a .hubload-repo.json (`doc` names it in errors) into *s.
/// Errors: util::ParseJson's and util::JsonIn's (kInvalidFormat naming the
/// field): private (bool), gated (string or bool), *_tokens_sha256 (arrays of
/// strings), created_at (string), commits.<id>.{parent,title,message,date}
/// and tags.<name>.message (strings). Absent or null fields keep defaults.
Status ParseSettings(const std::string& text, const std::string& doc, RepoSettings* s);
Status SaveSettings(const fs::path& repo_dir, const RepoSettings& s);

// ---- reading a repo (store_read.cc) ----
struct Entry {
  std::string path;      // repo path
  bool is_dir = false;
  uint64_t size = 0;     // content size (0 for directories)
  fs::path file;         // resolved content file (inside root); empty when !present
  bool lfs = false;
  std::string sha256;    // LFS only
  std::string oid;       // git blob sha1 (of the pointer for LFS), tree pseudo-oid for dirs
  std::string etag;      // unquoted: sha256 (LFS) or git sha1
  uint64_t pointer_size = 0;
  std::string blob_name;  // file name under blobs/ when it is a blob
  /// false: listed by trees/<commit>.json but absent from the store.
  bool present = true;
};

/// Repo folder for (type, id) under root; nullopt when the id is invalid.
std::optional<fs::path> RepoDir(const fs::path& root, RepoType repo_type, const std::string& repo_id);

/// Resolves a decoded revision (branch, tag, ref path, "HEAD", full or
/// >= 7-hex prefix commit) to a commit that has a snapshot. nullopt when not found.
std::optional<std::string> ResolveRevision(const fs::path& repo_dir, const std::string& revision);

/// One file of a huggingface_hub tree listing (trees/<commit>.json).
struct ListedFile {
  uint64_t size = 0;
  std::string blob_id, lfs_sha256;
};
/// The listing of `commit` when the repo is a plain cache (no settings) and
/// trees/<commit>.json exists and is valid (format_version 1, safe paths,
/// sizes, hex ids; read through util::JsonIn). nullopt otherwise; a corrupt
/// file is ignored with one warning.
std::optional<std::map<std::string, ListedFile>> ReadTreeListing(const fs::path& repo_dir, const std::string& commit);

/// How much of a snapshot the store can vouch for.
enum class Completeness {
  kComplete,  // store repo, or a listing whose files are all present
  kListed,    // a listing names files the store lacks
  kUnproven,  // a plain cache snapshot without a listing
};
Completeness SnapshotCompleteness(const fs::path& root, const fs::path& repo_dir, const std::string& commit);

/// Describes the file or directory `path` ("" = root) in snapshot `commit`.
/// Returns EntryNotFound when absent, PermissionDenied when it escapes `root`.
/// A file only in the snapshot's listing is returned with present = false.
Result<Entry> Stat(const fs::path& root, const fs::path& repo_dir, const std::string& commit, const std::string& path);

/// Lists `dir` ("" = root) of a snapshot: immediate children, or every file
/// and directory below it when recursive. Sorted by path. Entries escaping
/// root are skipped. With a listing, its files (present or not) are listed.
Result<std::vector<Entry>> List(const fs::path& root, const fs::path& repo_dir, const std::string& commit,
                                const std::string& dir, bool recursive);

struct LastCommit {
  std::string id, title, date;
};
/// Last commit (walking the commit log from `commit`) that changed `path`.
LastCommit LastCommitFor(const fs::path& repo_dir, const RepoSettings& s, const std::string& commit,
                         const std::string& path);
/// Date of a commit: its log record, else its snapshot folder's mtime.
std::string CommitDate(const fs::path& repo_dir, const RepoSettings& s, const std::string& commit);

// ---- writing (store_commit.cc) ----
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

/// kConflict (reason RefExists) when refs/<name> would clash with an existing
/// ref ("a/b" beside the file "a", or "a" beside the folder "a/").
Status RefClash(const fs::path& repo_dir, const std::string& name);
/// Writes refs/<name> = commit atomically (folders created); RefClash first.
Status WriteRef(const fs::path& repo_dir, const std::string& name, const std::string& commit);
/// Removes the ref file refs/NAME, then every parent folder up to refs/ that
/// it leaves empty (so that a deleted "a/b" does not block a later "a").
/// False (with `ec`) when the file could not be removed.
bool RemoveRef(const fs::path& repo_dir, const std::string& name, std::error_code& ec);

}  // namespace hubload::server::internal
