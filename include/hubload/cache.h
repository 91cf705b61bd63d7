// hubload/cache.h: the Hugging Face cache folder, exactly as huggingface_hub
// lays it out (huggingface_hub file_download.py, _local_folder.py,
// utils/_cache_manager.py), so hubload, Python and JS processes share one cache:
//
//   <cache>/models--org--name/blobs/<etag>            content (etag normalised)
//   <cache>/models--org--name/blobs/<etag>.incomplete partial download (resumable)
//   <cache>/models--org--name/snapshots/<commit>/<path> relative symlink → blob
//   <cache>/models--org--name/refs/<revision>         40-hex commit, no newline
//   <cache>/models--org--name/.no_exist/<commit>/<path> empty: known absent
//   <cache>/.locks/models--org--name/<etag>.lock      flock()ed while writing
//
// This module knows nothing of HTTP. Every writer follows two rules:
//  1. a path under blobs/<etag> or snapshots/ appears (by rename/symlink) only
//     after the content's size matches and, for LFS blobs (64-hex etag), its
//     sha256 matches — computed while the bytes are written;
//  2. refs are replaced atomically (temp file + rename).
//
// Thread safety: free functions are thread-safe. RepoCache is an immutable
// value (paths) plus methods that take flock()-based locks where they write;
// one instance may be used from many threads and processes concurrently.
// BlobWriter is used by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hubload/repo.h"  // RepoType, ValidateRepoId, ValidateRepoPath, IsCommitHash
#include "hubload/status.h"

namespace hubload {

/// "models--org--name" / "datasets--org--name" / "spaces--name"
/// (huggingface_hub repo_folder_name). Does not validate `repo_id`.
std::string RepoFolderName(std::string_view repo_id, RepoType type);

/// Blob name from an ETag header value: strips a leading weak marker `W/` and
/// surrounding double quotes (huggingface_hub _normalize_etag). `"abc"` → abc.
std::string NormalizeEtag(std::string_view header_value);

/// Checks a revision name for use under refs/ (no "..", no empty segments,
/// no leading '/', no control characters). kInvalidArgument on failure.
Status ValidateRevision(std::string_view revision);

/// How FileLock excludes other holders of the same lock path.
enum class LockMode {
  /// flock(LOCK_EX) on the lock file; when the file system refuses flock
  /// (ENOLCK, EOPNOTSUPP, ENOSYS, EINVAL: some NFS mounts, FUSE, SMB) falls
  /// back to kLease with one warning per process. The library reads no
  /// environment: the CLI maps HUBLOAD_LOCK_MODE=auto|flock|lease to this
  /// (ClientOptions::lock, PruneIncompleteDownloads' options).
  kAuto,
  /// flock only: a file system without flock is an error (kIOError).
  kFlock,
  /// Existence lease (B09; the heartbeat design of huggingface_hub PR #3944):
  /// the holder creates `<lock path>.lease` with O_CREAT|O_EXCL (atomic on
  /// local file systems and NFSv3+), writes "pid <pid> host <name>" into it
  /// and refreshes its mtime (futimens) every `heartbeat_s` from a background
  /// thread; the destructor removes it. A lease whose mtime is older than
  /// `stale_after_s` belongs to a dead (or frozen) holder and is taken over:
  /// one waiter at a time creates `<lock path>.lease.break` (O_EXCL), checks
  /// that the same file (inode) is still stale, unlinks it and then competes
  /// for a new lease like everyone else, so two waiters never both win. When
  /// flock works, a lease holder also holds the flock on the lock file, so
  /// kAuto and kLease processes on one host exclude each other. Use it for
  /// caches on NFS mounted with local_lock=all, where flock only excludes
  /// processes of the same host. Leases compare the file server's mtime with
  /// the local clock: keep clocks within a fraction of stale_after_s.
  kLease,
};

/// Options of FileLock::Acquire; the defaults suit every caller.
struct FileLockOptions {
  LockMode mode = LockMode::kAuto;
  /// A lease not refreshed for this many seconds is stale (default 10 min,
  /// as proposed in huggingface_hub PR #3944). Also used by kAuto/kFlock:
  /// after taking the flock they wait while a lease younger than this exists
  /// (a kLease process on another host).
  double stale_after_s = 600;
  /// Seconds between two mtime refreshes of a held lease; capped at
  /// stale_after_s / 4.
  double heartbeat_s = 5;
};

/// An exclusive lock on a file (see LockMode), created if needed. Released
/// by the destructor; a flock is also released when the process dies (so a
/// crashed holder never leaves a stale lock: B09), a lease goes stale
/// stale_after_s after its holder stopped refreshing it. Move-only.
/// Thread safety: one FileLock object is used by one thread at a time; the
/// lease heartbeat runs on its own thread.
class FileLock {
 public:
  /// Waits up to `timeout_s` seconds (polling; 0 = try once) for the lock on
  /// `path`; parent folders are created. Errors: kIOError / kDiskFull (cannot
  /// create or open the lock or lease file; flock unsupported under
  /// kFlock), kConflict reason "LockTimeout" whose message names `path` and,
  /// for a lease, the lease file, its holder and how long ago it was refreshed.
  static Result<FileLock> Acquire(const std::string& path, double timeout_s, const FileLockOptions& options = {});
  FileLock(FileLock&& o) noexcept;
  FileLock& operator=(FileLock&& o) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();
  const std::string& path() const { return path_; }
  /// True when this lock is held as a lease (kLease, or the kAuto fallback).
  bool is_lease() const { return lease_ != nullptr; }

  struct Lease;  // held lease + heartbeat thread (lock.cc)

 private:
  FileLock(int fd, std::string path, std::unique_ptr<Lease> lease);
  void Release();
  int fd_ = -1;  // flocked lock file, -1 when none
  std::string path_;
  std::unique_ptr<Lease> lease_;
};

/// Paths and small operations for one repo inside a cache folder.
class RepoCache {
 public:
  RepoCache(std::string cache_dir, std::string repo_id, RepoType type);

  const std::string& cache_dir() const { return cache_dir_; }
  const std::string& repo_id() const { return repo_id_; }
  RepoType repo_type() const { return type_; }
  /// <cache>/models--org--name
  const std::string& repo_dir() const { return repo_dir_; }
  std::string BlobPath(std::string_view etag) const;
  /// blobs/<etag>.incomplete (the partial kept for resuming across runs).
  std::string IncompletePath(std::string_view etag) const;
  /// blobs/<etag>.ranges.incomplete: the partial of a download made of
  /// parallel byte ranges (RangedBlobWriter). A different name from
  /// IncompletePath on purpose: huggingface_hub resumes <etag>.incomplete from
  /// its size, which is only correct for a contiguous prefix.
  std::string RangedIncompletePath(std::string_view etag) const;
  std::string SnapshotDir(std::string_view commit) const;
  /// snapshots/<commit>/<path_in_repo>
  std::string PointerPath(std::string_view commit, std::string_view path_in_repo) const;
  /// refs/<revision>; a revision with '/' nests folders (refs/refs/pr/1).
  std::string RefPath(std::string_view revision) const;
  std::string NoExistPath(std::string_view commit, std::string_view path_in_repo) const;
  /// <cache>/.locks/models--org--name/<etag>.lock
  std::string LockPath(std::string_view etag) const;

  /// Commit stored in refs/<revision> (surrounding whitespace trimmed),
  /// nullopt when absent, a folder, unreadable or not a commit hash. Never fails.
  std::optional<std::string> ReadRef(std::string_view revision) const;
  /// ReadRef telling a corrupt ref from an absent one: nullopt when
  /// refs/<revision> does not exist or is a folder (the refs of branches
  /// "<revision>/...": not a ref, as huggingface_hub's isfile check); error
  /// kInvalidFormat, reason "CorruptRef", naming the file (ErrorContext::file)
  /// when it exists but cannot be read, is over 4 KiB or does not hold a
  /// 40-hex commit. Never throws. Thread safety: reads only.
  Result<std::optional<std::string>> ReadRefChecked(std::string_view revision) const;
  /// Atomically writes refs/<revision> = commit (temp + rename), only if it
  /// differs. kInvalidArgument for a bad revision/commit, kIOError/kDiskFull.
  Status WriteRef(std::string_view revision, std::string_view commit) const;

  /// Commit for `revision` known locally: the revision itself when it is a
  /// commit hash, else refs/<revision>. Never touches the network.
  std::optional<std::string> LocalCommit(std::string_view revision) const;

  /// snapshots/<commit>/<path> when it exists and can be opened (a dangling
  /// symlink from another host counts as absent: B14). Never fails.
  std::optional<std::string> CachedPointer(std::string_view commit, std::string_view path_in_repo) const;

  /// True when blobs/<etag> exists with `expected_size` bytes (any size when
  /// expected_size < 0).
  bool HasBlob(std::string_view etag, int64_t expected_size) const;

  /// Makes snapshots/<commit>/<path> point at blobs/<etag> with a relative
  /// symlink. When `use_symlinks` is false, or the file system refuses
  /// symlinks (EPERM, EOPNOTSUPP, ENOSYS: vfat/exFAT, some SMB/NAS mounts;
  /// B14), the snapshot entry becomes a regular file, as huggingface_hub
  /// _create_symlink does: with `new_blob` (the blob was just downloaded by
  /// this call) the blob is moved into the snapshot, so no second full-size
  /// copy stays in blobs/; otherwise it is copied. The first refused symlink
  /// of the process logs one spdlog warning. Replaces an existing pointer
  /// atomically (temp file + rename). Returns the pointer path. Errors:
  /// kInvalidArgument (unsafe path, bad commit), kIOError / kDiskFull naming
  /// the pointer.
  Result<std::string> LinkSnapshot(std::string_view commit, std::string_view path_in_repo, std::string_view etag,
                                   bool use_symlinks = true, bool new_blob = false) const;

  /// Creates the empty .no_exist/<commit>/<path> marker, as huggingface_hub's
  /// hf_hub_download does on a 404 EntryNotFound (an entry of another kind
  /// there, a symlink or a non-empty file, is replaced). Errors: kIOError.
  Status MarkNoExist(std::string_view commit, std::string_view path_in_repo) const;
  /// True when .no_exist/<commit>/<path> is the empty regular file
  /// huggingface_hub writes. A folder there (markers of paths below) or
  /// nothing: false. Anything else (a symlink, a non-empty file, a fifo) is
  /// ignored with one warning naming it: false. Never fails.
  bool IsMarkedNoExist(std::string_view commit, std::string_view path_in_repo) const;

 private:
  std::string cache_dir_, repo_id_, repo_dir_;
  RepoType type_;
};

/// Writes one blob: streamed into blobs/<etag>.incomplete, sha256 computed as
/// bytes arrive, promoted to blobs/<etag> by Commit() only after size (and for
/// 64-hex etags, sha256) match. The caller holds the etag's FileLock.
class BlobWriter {
 public:
  struct Options {
    /// Expected size in bytes, or -1 when unknown (B08: learned from the body).
    int64_t expected_size = -1;
    /// Expected lowercase hex sha256; empty = not checked. Set it for LFS
    /// blobs (the etag is the sha256).
    std::string expected_sha256;
    /// Keep bytes already in the partial (resume). When false the partial is
    /// started anew (a new file). A partial longer than expected_size is always discarded.
    bool resume = true;
    /// Expected git blob sha1 (40 hex); empty = not checked. Set it for
    /// regular (non-LFS) files, whose etag is their git blob id; checked by
    /// Commit() reading the partial back (regular files are small).
    std::string expected_git_sha1;
  };
  /// Opens (creates) the partial for `etag` in `repo`.
  /// Errors: kIOError, kDiskFull.
  static Result<std::unique_ptr<BlobWriter>> Open(const RepoCache& repo, std::string etag, Options options);
  /// Same with explicit paths (huggingface_hub local_dir mode): the partial
  /// `partial_path` becomes `final_path` on Commit(); `label` names the file
  /// in messages. Parent folders of both are created.
  static Result<std::unique_ptr<BlobWriter>> OpenPaths(std::string partial_path, std::string final_path,
                                                       std::string label, Options options);
  /// Without Commit/Discard: flushes what was received and keeps the partial
  /// (resumable, also by huggingface_hub), except a partial holding no byte
  /// at all (opened, never written, nothing resumed), which is removed.
  ~BlobWriter();

  /// Bytes already present in the partial (the offset to resume from; the
  /// hash state already covers them). 0 after Restart().
  uint64_t offset() const { return offset_; }
  /// Appends at offset(). Errors: kDiskFull (ENOSPC/EDQUOT/EFBIG) or kIOError,
  /// naming the partial's path; kCorruptDownload when the data would exceed
  /// the expected size.
  Status Append(const char* data, size_t n);
  /// Writes the buffered bytes out (after it, flushed_bytes() == offset()).
  /// Errors: as Append.
  Status Flush();
  /// Drops every byte written so far (server ignored Range, etag changed...).
  /// The partial is unlinked and created anew (a new inode), never truncated
  /// in place, so a reader holding the old file never sees its bytes change;
  /// Open with resume = false does the same with a partial that holds bytes.
  Status Restart();
  /// Descriptor of the partial (read-write; -1 after Commit/Discard). Owned by
  /// the writer: dup(2) it to keep it.
  int fd() const;
  /// Bytes [0, flushed_bytes()) are written to the partial (visible through
  /// fd()) and never rewritten in this file.
  uint64_t flushed_bytes() const;
  /// Verifies (size, sha256, git blob sha1 as set in Options) and renames to
  /// blobs/<etag>. Errors: kCorruptDownload reason "SizeMismatch" (too short:
  /// the partial is kept) or "HashMismatch" (the partial is deleted),
  /// kIOError/kDiskFull.
  /// Returns the final blob path.
  Result<std::string> Commit();
  /// Removes the partial (e.g. when it can never be resumed).
  void Discard();
  const std::string& partial_path() const { return partial_path_; }
  /// sha256 (lowercase hex) of the bytes written so far; for tests/diagnostics.
  std::string CurrentSha256() const;

 private:
  BlobWriter() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string partial_path_, blob_path_;
  uint64_t offset_ = 0;
};

/// Writes one large blob whose size is known from parallel byte ranges: the
/// blob is cut into fixed chunks; each chunk is filled by one thread at a time,
/// in order within the chunk, with pwrite() at its offset into
/// blobs/<etag>.ranges.incomplete. Behind the data (at offset `size`) the
/// partial carries a small journal (magic, chunk size, size, bytes written per
/// chunk), so a run killed at any point resumes every chunk where it stopped;
/// Commit() cuts the journal off before the rename. The sha256 is computed while
/// the bytes arrive: bytes that extend the contiguous written prefix are hashed
/// from memory by the Append that wrote them; chunks written ahead of the
/// prefix are read back from the page cache and hashed by the writer's own
/// hasher thread (so connection threads go back to the network); Commit()
/// hashes whatever is left. Writes are >= 1 MiB: smaller pieces go through a
/// 1 MiB buffer, a piece of 1 MiB or more is written as it is. Memory: one
/// 1 MiB buffer per chunk being written; one thread per open writer.
///
/// Thread safety: Append/FinishChunk may be called concurrently for different
/// chunks; Open/Restart/Commit/Discard are called with no Append running.
class RangedBlobWriter {
 public:
  struct Options {
    /// Exact size of the blob in bytes (> 0).
    uint64_t size = 0;
    /// Chunk size in bytes (>= 1 MiB); the last chunk may be shorter.
    uint64_t chunk_bytes = 16ull << 20;
    /// Expected lowercase hex sha256; empty = not checked.
    std::string expected_sha256;
    /// Keep the chunks of a partial left by an earlier run with the same size
    /// and chunk size; otherwise the partial is started anew (a new file).
    bool resume = true;
    /// Expected git blob sha1 (40 hex; regular Hub files); empty = not
    /// checked. Commit() reads the blob back for it.
    std::string expected_git_sha1;
  };
  /// Opens (creates) RangedIncompletePath(etag) of `repo`; the final name is
  /// BlobPath(etag). Errors: kInvalidArgument (size 0, chunk < 1 MiB),
  /// kIOError, kDiskFull.
  static Result<std::unique_ptr<RangedBlobWriter>> Open(const RepoCache& repo, std::string etag, Options options);
  /// Same with explicit paths (local_dir mode); `label` names the file in messages.
  static Result<std::unique_ptr<RangedBlobWriter>> OpenPaths(std::string partial_path, std::string final_path,
                                                             std::string label, Options options);
  /// Without Commit/Discard: flushes what was received and keeps the partial
  /// with its journal (resumable), except a partial holding no byte at all
  /// (opened, never written, nothing resumed), which is removed.
  ~RangedBlobWriter();

  size_t num_chunks() const;
  /// Byte range [chunk_begin(k), chunk_end(k)) of chunk k in the blob.
  uint64_t chunk_begin(size_t k) const;
  uint64_t chunk_end(size_t k) const;
  /// Bytes of chunk k received so far, from its start (buffered bytes included).
  uint64_t chunk_received(size_t k) const;
  /// Sum of chunk_received over all chunks (resumed bytes included).
  uint64_t bytes_received() const;
  /// Appends n bytes to chunk k at chunk_begin(k) + chunk_received(k).
  /// Errors: kCorruptDownload (past the chunk end), kDiskFull/kIOError naming
  /// the partial.
  Status Append(size_t k, const char* data, size_t n);
  /// Writes out chunk k's buffered bytes and records them in the journal (call
  /// when its transfer ends, complete or not).
  Status FlushChunk(size_t k);
  /// Drops every byte (server ignored Range, validator changed...). A partial
  /// that holds data is unlinked and created anew (a new inode), never
  /// truncated in place; Open without a usable journal does the same.
  Status Restart();
  /// Descriptor of the partial (-1 after Commit/Discard). Owned by the writer.
  int fd() const;
  /// Length of the written prefix: bytes [0, contiguous_bytes()) are on disk
  /// (flushed, every chunk before complete) and never rewritten in this file.
  /// Safe to call concurrently with Append/FlushChunk.
  uint64_t contiguous_bytes() const;
  /// Bytes the sha256 read back from the partial (chunks written ahead of the
  /// hashed prefix) rather than taking them from the Append that wrote them.
  /// Bytes appended in order (each extending the prefix) are never read back;
  /// resumed chunks always are. For tests and benchmarks; safe to call at any
  /// time.
  uint64_t bytes_read_back() const;
  /// Flushes, checks every chunk is complete, finishes the hash, truncates the
  /// journal, verifies the sha256 and renames to the final name. Errors:
  /// kCorruptDownload reason "SizeMismatch" (chunks missing; partial kept) or
  /// "HashMismatch" (partial deleted); kIOError/kDiskFull.
  Result<std::string> Commit();
  /// Removes the partial.
  void Discard();
  const std::string& partial_path() const { return partial_path_; }

 private:
  RangedBlobWriter() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string partial_path_, blob_path_;
};

/// What the cache (or a local_dir) already holds of one file of a listing,
/// for `hubload download --dry-run` (huggingface_hub 1.x `hf download
/// --dry-run` reports the same "cached" / "to download" split).
struct CachedFileState {
  /// The file is complete: blobs/<etag> with `size` bytes (the snapshot link,
  /// if missing, costs no download), or in local_dir mode <dir>/<path> with
  /// `size` bytes and metadata naming `etag`.
  bool cached = false;
  /// Bytes of a resumable partial already on disk (0 when cached or none):
  /// the size of blobs/<etag>.incomplete (a contiguous prefix, capped at
  /// `size`), else the chunk prefixes recorded in the journal of
  /// blobs/<etag>.ranges.incomplete; the same names under
  /// <dir>/.cache/huggingface/download/ in local_dir mode.
  uint64_t partial_bytes = 0;
  /// size - partial_bytes, or 0 when cached.
  uint64_t bytes_to_fetch = 0;
};

/// Probes the cache for blob `etag` of `size` bytes (path `path_in_repo`);
/// with `local_dir` non-empty probes that folder instead. Reads only; never
/// fails (unreadable entries count as absent). Thread-safe.
CachedFileState ProbeCachedFile(const RepoCache& repo, std::string_view path_in_repo, std::string_view etag,
                                uint64_t size, const std::string& local_dir = {});

/// Writes <cache_dir>/CACHEDIR.TAG with the standard signature line
/// ("Signature: 8a477f597d28d172789f06886806bc55", bford.ch/cachedir) when it
/// is absent; huggingface_hub's local_dir writes the same file. Best effort:
/// the caller may ignore the error (kIOError naming the file).
Status WriteCacheDirTag(const std::string& cache_dir);

/// One file a folder should hold (a Hub tree listing entry).
struct ExpectedFile {
  std::string path;        // path in repo
  uint64_t size = 0;
  std::string blob_id;     // git blob sha1 (40 hex); checked when lfs_sha256 is empty
  std::string lfs_sha256;  // 64 hex for LFS files
};

/// What VerifyFolder found; every list holds paths in repo, sorted.
struct VerifyReport {
  std::vector<std::string> verified;
  /// "PATH: why" — the size, sha256 or git blob sha1 differs (expected and
  /// actual values named).
  std::vector<std::string> mismatched;
  std::vector<std::string> missing;  // listed but not in the folder (or unreadable)
  std::vector<std::string> extra;    // in the folder but not listed
};

/// Where VerifyFolder is, for progress displays.
struct VerifyProgress {
  std::string path;              // path in repo of the file being hashed
  uint64_t file_bytes_done = 0;  // bytes of `path` hashed so far
  uint64_t file_bytes_total = 0; // its listed size
  uint64_t bytes_done = 0;       // bytes hashed (or skipped: absent, size differs) of every listed file so far
  uint64_t bytes_total = 0;      // sum of the listed sizes of `expected`
  size_t files_done = 0;         // listed files checked so far
  size_t files_total = 0;
};
/// Called on VerifyFolder's (the calling) thread, so calls are serialised:
/// after every 1 MiB block hashed and once at the end of each listed file
/// (file_bytes_done = file_bytes_total then); not rate-limited further.
using VerifyProgressCallback = std::function<void(const VerifyProgress&)>;

/// huggingface_hub 1.x `hf cache verify`: checks every file of `expected`
/// under `folder` (a snapshot folder, symlinks followed, or a local_dir):
/// the size, then the sha256 of LFS files and the git blob sha1 of the
/// others. Files under `folder` that are not listed are `extra`; the
/// local_dir metadata folder .cache/huggingface/ is skipped. Reads files
/// once each, one at a time. kNotFound when `folder` does not exist; an
/// unsafe listed path (ValidateRepoPath) is kInvalidArgument. Thread-safe.
/// `on_progress` (optional) follows the bytes hashed, see VerifyProgressCallback.
Result<VerifyReport> VerifyFolder(const std::string& folder, const std::vector<ExpectedFile>& expected,
                                  const VerifyProgressCallback& on_progress = {});

/// Lowercase hex sha256 of a whole file (util::Sha256File). IoError's if unreadable.
Result<std::string> Sha256File(const std::string& path);

// ---- scan and delete (huggingface_hub scan_cache_dir / delete_revisions) ----

struct CachedRevision {
  std::string commit;
  std::vector<std::string> refs;  // names of refs pointing at it (sorted)
  std::string snapshot_path;
  uint64_t nb_files = 0;
  uint64_t size_on_disk = 0;      // bytes of the distinct blobs it uses
  std::vector<std::string> files; // paths in repo (sorted)
};

struct CachedRepo {
  std::string repo_id;
  RepoType repo_type = RepoType::kModel;
  std::string repo_path;
  uint64_t size_on_disk = 0;       // all blobs, incl. unreferenced and partials
  uint64_t nb_blobs = 0;
  std::vector<CachedRevision> revisions;  // sorted by commit
  std::map<std::string, std::string> refs;  // ref name → commit
  std::vector<std::string> unreferenced_blobs;  // etags no snapshot uses
  uint64_t unreferenced_bytes = 0;
  std::vector<std::string> incomplete_files;  // partial downloads (paths)
  uint64_t incomplete_bytes = 0;
  /// Newest st_atime / st_mtime of its blobs (seconds since the epoch; 0
  /// when it has none), as huggingface_hub CachedRepoInfo.last_accessed /
  /// last_modified.
  double last_accessed = 0;
  double last_modified = 0;
};

struct CacheInfo {
  std::string cache_dir;
  std::vector<CachedRepo> repos;  // sorted by (type, repo_id)
  uint64_t size_on_disk = 0;
  /// Folders/files that do not follow the layout and corrupted entries
  /// (reported, never fatal; huggingface_hub CorruptedCacheException
  /// warnings), one line each naming the path: a snapshot symlink whose blob
  /// is missing ("dangling link"), a ref naming a commit with no snapshot, a
  /// blob whose size differs from trees/<commit>.json, a partial download no
  /// live download holds ("stray partial").
  std::vector<std::string> warnings;
};

/// Scans `cache_dir` (huggingface_hub scan_cache_dir). Partial downloads
/// (blobs/*.incomplete, *.ranges.incomplete, temp files) are listed in
/// CachedRepo::incomplete_files and counted by their allocated bytes
/// (st_blocks * 512, at most their length: a ranged partial is sparse), as
/// PruneIncompleteDownloads counts them. Reads only (a partial's lock file is
/// probed with a non-blocking flock when it exists, never created).
/// kNotFound when the folder does not exist; kIOError when it cannot be read.
Result<CacheInfo> ScanCache(const std::string& cache_dir);

struct PruneReport {
  std::vector<std::string> deleted_files;  // paths of the partials removed (sorted)
  uint64_t freed_bytes = 0;                // their allocated bytes (as ScanCache counts them), summed
  std::vector<std::string> kept_locked;    // partials whose lock a live process holds
  std::vector<std::string> kept_recent;    // partials modified less than min_age_s ago
};

/// Deletes orphaned partial downloads (B37): every blobs/<etag>.incomplete
/// and blobs/<etag>.ranges.incomplete of every repo in `cache_dir` whose
/// mtime is at least `min_age_s` seconds old and whose lock
/// (.locks/<repo folder>/<etag>.lock, see FileLock) no live process holds.
/// The lock is taken without waiting (FileLock::Acquire with timeout 0 and
/// `lock`) and held while the partial is removed, so a
/// download starting at the same time either waits or finds no partial.
/// A held lock, or a lease younger than its stale limit, keeps the partial.
/// huggingface_hub has no such call (its scan reports nothing about
/// partials); this is `hubload cache prune`. kNotFound when the folder does
/// not exist, kInvalidArgument for a negative min_age_s, kIOError when a
/// folder cannot be read or a partial cannot be removed.
/// Thread safety: safe to run concurrently with downloads and other prunes.
Result<PruneReport> PruneIncompleteDownloads(const std::string& cache_dir, double min_age_s,
                                             const FileLockOptions& lock = {});

struct DeleteReport {
  std::vector<std::string> deleted_snapshots;  // commits
  std::vector<std::string> deleted_refs;
  std::vector<std::string> deleted_blobs;      // etags
  uint64_t freed_bytes = 0;
  bool deleted_repo = false;                   // whole repo folder removed
};

/// Deletes a repo from the cache, or with `revision` (a ref name or a commit)
/// only that snapshot, its trees/<commit>.json listing, its .no_exist folder
/// and the refs pointing at it; blobs are removed only when
/// no remaining snapshot links them (huggingface_hub delete_revisions). When no
/// snapshot and no ref remain, the repo folder and its .locks folder go too.
/// Not synchronised with a concurrent download of the same repo. kNotFound
/// when the repo or revision is not cached; kIOError when removal fails.
/// `lock`: how the partials' locks are probed (see PruneIncompleteDownloads).
Result<DeleteReport> DeleteFromCache(const std::string& cache_dir, std::string_view repo_id, RepoType type,
                                     std::string_view revision = {}, const FileLockOptions& lock = {});

}  // namespace hubload
