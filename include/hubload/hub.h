// hubload/hub.h: the Hub client — hf_hub_download and snapshot_download done
// in C++, writing the same cache folder the Python and JS clients use
// (layout: hubload/cache.h; protocol: shared/docs/hub-protocol.md §1–4, §9).
//
// Behaviour in one paragraph: a revision that is a 40-hex commit already in the
// cache costs zero requests; a branch/tag costs one metadata request per file
// (HEAD on /resolve/, huggingface_hub style) or one revision call for a file
// set, and reuses the blob when the etag is unchanged; offline mode (option or
// HF_HUB_OFFLINE via HubConfig::FromEnvironment) never touches the network and
// answers Code::kOfflineMiss for what is not cached. Bytes are streamed into
// blobs/<etag>.incomplete with sha256 computed on the fly, resumed across runs
// with Range + If-Range, and promoted only when size and hash match. A file
// whose bytes do not hash to its etag is discarded and fetched once more from
// scratch (one stream, with a warning); a second mismatch is kCorruptDownload
// reason HashMismatch naming the file (huggingface_hub does not hash at all).
//
// Errors (Status codes from status.h) carry ErrorContext {repo_id, revision,
// file, url (redacted), http_status, request_id (X-Request-Id), error_code
// (X-Error-Code)}; the token is never part of any message or context:
//  kRepoNotFound, kRevisionNotFound, kEntryNotFound, kGated, kUnauthorized,
//  kPermissionDenied, kRateLimited, kServerError, kNetwork, kCorruptDownload,
//  kDiskFull, kIOError, kOfflineMiss, kCancelled, kInvalidArgument (bad repo
//  id / unsafe path from the server, reason "UnsafePath").
//
// Thread safety: HubClient is a cheap handle (shared state behind a
// shared_ptr); copies and concurrent calls from many threads are safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hubload/cache.h"
#include "hubload/config.h"
#include "hubload/status.h"
#include "hubload/transport.h"
#include "hubload/upload.h"

namespace hubload {

struct ClientOptions {
  /// endpoint, token, cache_dir, offline, the metadata and download timeouts
  /// (etag_timeout_s, download_timeout_s). The library reads no environment:
  /// pass HubConfig::FromEnvironment() for huggingface_hub's defaults (the CLI
  /// does). An empty cache_dir is allowed for calls that need no cache
  /// (uploads, ListFiles/ResolveCommit without fallback, ReadRange, local_dir
  /// downloads); the others answer kInvalidArgument reason "NoCacheDir".
  HubConfig config;
  /// Most connections downloading at once (DownloadFiles, Snapshot, and the
  /// ranges of one Download); huggingface_hub snapshot_download max_workers
  /// default 8. The scheduler adapts the number it uses between 1 and this
  /// (see `connections`).
  int max_workers = 8;
  /// 0: adaptive — the download scheduler starts with 4 connections, adds
  /// connections while the total throughput grows (>= 10% per step) and
  /// drops them when they bring nothing (no loss with fewer) or when the
  /// server throttles (429/503: halved, never below 1). N > 0 pins the count
  /// to min(N, max_workers).
  int connections = 0;
  /// Files of at least this many bytes (and more than one range_chunk_bytes)
  /// are fetched as parallel byte ranges (RangedBlobWriter: pwrite into
  /// blobs/<etag>.ranges.incomplete, sha256 inline, resumable per chunk),
  /// when the size is known and no single-stream partial (<etag>.incomplete,
  /// e.g. from huggingface_hub) is waiting to be resumed. The first range of a
  /// file is sent alone: a server that answers it with 200 (Range ignored)
  /// streams the whole file on that one connection, so exactly the file's
  /// bytes are transferred (perf S9). Smaller files are one GET each, several
  /// in parallel. 0 disables ranges.
  uint64_t range_threshold_bytes = 16ull << 20;
  /// Byte range size of one request (hf_transfer used 10 MiB; >= 1 MiB).
  uint64_t range_chunk_bytes = 16ull << 20;
  /// Most ranges of one file in flight at once (up to this many connections
  /// work on one file, see `download_order`).
  int max_ranges_per_file = 8;
  /// How the download scheduler spreads the connections of one call
  /// (DownloadFiles, Snapshot, Download) over its files, which are always
  /// started in the order given:
  ///  - kLoadOrder: every connection on the earliest unfinished file (its
  ///    ranges in parallel), the next file only once every byte of it is in;
  ///    so the files complete in order, each at the speed of the whole link —
  ///    what a loader reading files as they arrive needs.
  ///  - kThroughput: each free connection starts the next file not yet started
  ///    and a file gets one connection at a time (its ranges in order, so its
  ///    sha256 runs inline on that connection, as one GET per file does);
  ///    connections left once every file has started join the earliest
  ///    unfinished ones. The files complete about together, as
  ///    huggingface_hub snapshot_download's parallel files do; fastest in
  ///    total when nothing reads the files before the call returns.
  ///  - kAuto (default): kLoadOrder when the call has
  ///    DownloadCallbacks::on_file_bytes (a consumer of bytes as they land:
  ///    the streaming loaders, the distributed transfer), else kThroughput.
  enum class DownloadOrder { kAuto, kLoadOrder, kThroughput };
  DownloadOrder download_order = DownloadOrder::kAuto;
  /// Transport; null = MakeRetryingTransport(MakeCurlTransport(transport_options), retry).
  std::shared_ptr<HttpTransport> transport;
  TransportOptions transport_options;
  RetryPolicy retry;
  /// Longest wait for another process's lock on a blob, seconds.
  double lock_timeout_s = 600;
  /// How blob locks exclude other holders (flock, or leases where the file
  /// system has no flock; see FileLockOptions in hubload/cache.h).
  FileLockOptions lock;
  /// Mid-stream failures resumed with Range per file (counter reset when
  /// bytes arrive), as huggingface_hub http_get.
  int max_resume_attempts = 5;
  /// Symlink snapshots to blobs. false: no symlink anywhere; snapshot entries
  /// are regular files (a freshly downloaded blob is moved there, a cached one
  /// copied), as huggingface_hub does where symlinks are unsupported (B14). The
  /// same fallback happens automatically when symlink() fails with EPERM.
  bool use_symlinks = true;
  /// Refuse a download when the cache file system has less free space than
  /// the file's size (B37 preflight).
  bool check_free_space = true;
  /// Uploads (UploadFolder, CreateCommit): files hashed at once (one thread
  /// reading 1 MiB blocks each), LFS PUTs in flight (parts of one or several
  /// objects, >= 1), files per preupload request and objects per LFS batch
  /// request (huggingface_hub UPLOAD_BATCH_MAX_NUM_FILES = 256), and the
  /// limit of each JSON API request of an upload in seconds (PUTs of file
  /// bytes have only the transport's connect/stall limits).
  int upload_hash_workers = 4;
  int upload_workers = 8;
  int upload_batch_size = 256;
  double upload_api_timeout_s = 300;
};

/// One file of a repo at a commit (tree API entry).
struct RepoFile {
  std::string path;        // path in repo, '/'-separated
  uint64_t size = 0;       // content bytes (for LFS, the real size)
  std::string blob_id;     // git blob sha1 (40 hex)
  std::string lfs_sha256;  // 64 hex for LFS files, empty otherwise
  /// Name of the blob in the cache: lfs_sha256 if set, else blob_id.
  const std::string& etag() const { return lfs_sha256.empty() ? blob_id : lfs_sha256; }
};

struct RepoListing {
  std::string commit;            // 40-hex commit the listing is at
  std::vector<RepoFile> files;   // every file at all depths, tree order
  /// Set when the listing came from the cache because the Hub could not be
  /// reached (one line naming the commit and why), for callers' reports;
  /// also logged once.
  std::vector<std::string> warnings;
};

/// The partial file of one download, as its bytes land (streaming loads).
struct FileBytes {
  std::string path_in_repo;
  int fd = -1;                    // read-only descriptor of the partial file; valid during the call only (dup(2) it)
  uint64_t generation = 0;        // 1, then +1 whenever this file's download restarts in a NEW partial file
  uint64_t contiguous_bytes = 0;  // bytes [0, contiguous_bytes) are written and never rewritten in this file
  uint64_t size = 0;              // final size of the file
  /// Path of the partial file behind `fd` (in blobs/ or the local_dir's
  /// .cache/huggingface/download/) when it was opened by that path; "" when
  /// only the descriptor could be reopened. Only meaningful during the call:
  /// the file is renamed into place or removed afterwards (compare st_dev /
  /// st_ino with fstat(fd) before trusting it later).
  std::string partial_path;
};

struct DownloadCallbacks {
  /// Called once per file, from a worker thread, the moment the file is
  /// complete and verified (or found already cached), in completion order.
  /// Calls for different files may come at once from several threads: the
  /// callback synchronises its own state. A call may block (the loaders hold
  /// a later shard back this way) without holding back other files' calls.
  /// `local_path` is the snapshot pointer (or the local_dir file).
  std::function<void(const std::string& path_in_repo, const std::string& local_path)> on_file_done;
  /// Aggregate progress in bytes (done, total); total counts files whose size
  /// is known. Called from worker threads, possibly concurrently — rate-limited
  /// to about 10 calls/s plus one final call.
  std::function<void(uint64_t bytes_done, uint64_t bytes_total)> on_progress;
  /// Body bytes received over the network in this call so far — without the
  /// bytes of resumed partials or cached files that bytes_done includes: the
  /// numerator of a transfer rate (issue 19: a resumed download is not
  /// "541 MiB/s"). Called right after on_progress, same threads and limits.
  std::function<void(uint64_t bytes_received)> on_bytes_received;
  /// Per-file progress (path_in_repo, done, total; total 0 if unknown).
  std::function<void(const std::string& path_in_repo, uint64_t bytes_done, uint64_t bytes_total)> on_file_progress;
  /// Called from a worker thread whenever the contiguous prefix of a file being downloaded grows (at most
  /// about every 1 MiB, and always once with contiguous_bytes == size before the hash check and rename).
  /// Never called for files that were already cached. Bytes are verified only when on_file_done is called.
  ///
  /// Details: calls for one file never overlap and, within one generation,
  /// contiguous_bytes never decreases. A restart that cannot keep the bytes
  /// (server ignored Range, hash mismatch, ranges unusable) never truncates or
  /// rewrites the announced file: it is unlinked and the download continues in
  /// a new file (new inode) announced with generation + 1, so a reader holding
  /// the old descriptor or mapping never sees its bytes change (no SIGBUS). A
  /// verified partial is renamed into blobs/ (or the local_dir file), so a
  /// descriptor of the last generation reads the final blob. When the size is
  /// not known in advance (a server without Content-Length) the file is
  /// announced once, at the end. A slow callback slows that file's download.
  std::function<void(const FileBytes&)> on_file_bytes;
  /// Polled between chunks; returning true cancels everything (Code::kCancelled).
  std::function<bool()> cancelled;
  /// Alternative to `cancelled`: a flag the caller sets (may be null).
  const std::atomic<bool>* cancel_flag = nullptr;
};

struct FileRequest {
  std::string repo_id;           // "org/name" or legacy "name"
  std::string filename;          // path in repo, may include a subfolder
  std::string revision = "main"; // branch, tag, "refs/pr/N" or 40-hex commit
  RepoType repo_type = RepoType::kModel;
  /// When set: huggingface_hub local_dir mode — the file is written to
  /// <local_dir>/<filename> with .cache/huggingface/download/<filename>.metadata.
  std::string local_dir;
  /// Re-download even if cached (the blob is replaced only after verification).
  bool force_download = false;
  /// Progress of this file's transfer, as DownloadFiles reports it
  /// (on_progress, on_bytes_received, on_file_progress, on_file_bytes, and
  /// cancellation through `cancelled` / `cancel_flag`); a file served from the
  /// cache may report nothing. on_file_done is not used (the path is the
  /// result).
  DownloadCallbacks callbacks;
};

struct SnapshotRequest {
  std::string repo_id;
  std::string revision = "main";
  RepoType repo_type = RepoType::kModel;
  /// huggingface_hub filter_repo_objects rules: fnmatch on the full path,
  /// `*` crosses '/', a pattern ending in '/' gets '*' appended; a file is
  /// kept iff it matches some allow pattern (when any) and no ignore pattern.
  std::vector<std::string> allow_patterns;
  std::vector<std::string> ignore_patterns;
  /// Most connections at once; 0 = ClientOptions::max_workers.
  int max_workers = 0;
  /// When set: files go to <local_dir>/<path> (huggingface_hub local_dir
  /// mode) and the result is local_dir.
  std::string local_dir;
  DownloadCallbacks callbacks;
};

/// huggingface_hub filter_repo_objects on one path (see SnapshotRequest).
bool MatchesPatterns(const std::string& path, const std::vector<std::string>& allow_patterns,
                     const std::vector<std::string>& ignore_patterns);

/// Percent-encoding as huggingface_hub: EncodeRevision = quote(rev, safe="")
/// ("refs/pr/1" → "refs%2Fpr%2F1"); EncodePath = quote(path) with '/' kept
/// ("a b/#.txt" → "a%20b/%23.txt").
std::string EncodeRevision(std::string_view revision);
std::string EncodePath(std::string_view path);


// ---- branches, tags, refs, commits (huggingface_hub HfApi) ----

/// HubClient::CreateBranch arguments (huggingface_hub create_branch).
struct CreateBranchOptions {
  RepoType repo_type = RepoType::kModel;
  /// Branch, tag or commit the new branch starts at; "" = the repo's default branch.
  std::string revision;
  /// An existing branch is not an error (huggingface_hub exist_ok).
  bool exist_ok = false;
};

/// HubClient::CreateTag arguments (huggingface_hub create_tag).
struct CreateTagOptions {
  RepoType repo_type = RepoType::kModel;
  /// Branch, tag or commit to tag; "" = "main" (huggingface_hub's default).
  std::string revision;
  /// Tag message (annotated tag); "" = none.
  std::string message;
  /// An existing tag is not an error.
  bool exist_ok = false;
};

/// One git reference (huggingface_hub GitRefInfo).
struct GitRefInfo {
  std::string name;           // "main", "v1.0", "refs/pr/1"
  std::string ref;            // "refs/heads/main", "refs/tags/v1.0", "refs/pr/1"
  std::string target_commit;  // 40-hex commit
};

/// huggingface_hub GitRefs.
struct RepoRefs {
  std::vector<GitRefInfo> branches;
  std::vector<GitRefInfo> tags;
  std::vector<GitRefInfo> pull_requests;  // only with include_pull_requests
};

/// One commit of a branch's history (huggingface_hub GitCommitInfo).
struct GitCommitInfo {
  std::string commit_id;             // 40 hex
  std::string title;                 // first line of the message
  std::string message;               // the rest of the message ("" when none)
  std::vector<std::string> authors;  // user names
  std::string created_at;            // ISO 8601 as the server sent it
};

class HubClient {
 public:
  explicit HubClient(ClientOptions options);
  ~HubClient();
  HubClient(const HubClient&) = default;
  HubClient& operator=(const HubClient&) = default;

  const ClientOptions& options() const;

  /// hf_hub_download: returns the local path of `req.filename` at
  /// `req.revision`, i.e. <cache>/<repo folder>/snapshots/<commit>/<filename>
  /// (or <local_dir>/<filename>). Writes refs/<revision> for non-commit
  /// revisions and .no_exist markers on EntryNotFound. Falls back to the
  /// cached copy on network errors/5xx/401/403 (never on RevisionNotFound or
  /// EntryNotFound), as huggingface_hub does, with one warning naming the
  /// commit; when such a cached copy exists the metadata request is sent
  /// once (no retry rounds), so a refused connection falls back at once and a
  /// silent server after ClientOptions::config.etag_timeout_s.
  Result<std::string> Download(const FileRequest& req) const;

  /// Reads bytes [offset, offset + length) of `req.filename` at `req.revision`
  /// without putting the file in the cache: one GET with
  /// `Range: bytes=offset-(offset+length-1)` (huggingface_hub
  /// get_safetensors_metadata reads shard headers this way). When the file is
  /// already cached at that revision (a commit, or a cached ref in offline
  /// mode) the bytes come from the cache with no request. A server that
  /// ignores Range has its 200 body cut after the wanted bytes. Returns fewer
  /// than `length` bytes only at the end of the file. `req.local_dir` and
  /// `req.force_download` are ignored. Errors: as Download (kEntryNotFound,
  /// kOfflineMiss, kNetwork, ...); kInvalidArgument when length > 1 GiB.
  Result<std::string> ReadRange(const FileRequest& req, uint64_t offset, uint64_t length) const;

  /// Commit id `revision` currently points to (GET /api/{type}s/{repo}/revision/{rev});
  /// a 40-hex revision is returned as is without a request. Offline: the
  /// cached ref, else kOfflineMiss (naming a ref file that is corrupt; a
  /// refs/<revision> folder, the refs of "<revision>/..." branches, is no ref).
  /// Online, a corrupt refs/<revision> is ignored with one warning naming the
  /// file and rewritten from the answer (this, Download, ListFiles, Snapshot).
  ///
  /// Unreachable Hub (this and ListFiles, DownloadFiles, Snapshot, as
  /// huggingface_hub snapshot_download): when refs/<revision> names a commit
  /// whose snapshot the cache holds (with the files the call needs), the
  /// metadata request is sent without retries and, if it fails with a
  /// connection error, a timeout (config.etag_timeout_s), 5xx, 401/403, 429,
  /// RepoNotFound/Gated or a malformed answer, the cached commit is used with
  /// one warning naming it. RevisionNotFound/EntryNotFound are never masked.
  /// Without such a snapshot the error is returned as before (after retries).
  Result<std::string> ResolveCommit(const std::string& repo_id, const std::string& revision,
                                    RepoType repo_type = RepoType::kModel) const;

  /// Every file at `revision` via the recursive tree API, following
  /// `Link: rel="next"` pagination. Entries are validated with
  /// ValidateRepoPath (unsafe names → kInvalidArgument "UnsafePath", before
  /// anything is written); the listing is kept in trees/<commit>.json.
  /// Offline, or when the Hub cannot be reached (see ResolveCommit; then
  /// RepoListing::warnings says so): trees/<commit>.json, else the snapshot
  /// folder (sizes from the blobs; blob_id/lfs_sha256 from the blob names).
  /// `keep_in_cache` false: nothing is written into the cache (no
  /// trees/<commit>.json, no refs/<revision>, no folder, no CACHEDIR.TAG),
  /// for read-only callers (a dry run, a verification; huggingface_hub's
  /// dry_run writes nothing either).
  Result<RepoListing> ListFiles(const std::string& repo_id, const std::string& revision,
                                RepoType repo_type = RepoType::kModel, bool keep_in_cache = true) const;

  /// Downloads `paths` at `revision`, given in load order: the connections
  /// (up to options().max_workers, adaptive, see ClientOptions::connections)
  /// start the files in that order. With cb.on_file_bytes (or
  /// ClientOptions::download_order kLoadOrder) they fetch byte ranges of the
  /// earliest unfinished file first — a large file in parallel ranges, the
  /// next file's start when a connection is free — so on a link shared by all
  /// connections the files complete in the given order, each at the speed of
  /// the whole link; without it (kThroughput) each file gets a connection of
  /// its own first, as huggingface_hub's parallel files, and spare
  /// connections join the earliest unfinished file. Small files (one chunk or
  /// less) are one GET each, several in parallel. Each file is verified (size,
  /// sha256 inline) before its rename into blobs/; cb.on_file_done is called
  /// for each as soon as it is verified (completion order) and
  /// cb.on_file_bytes as its bytes land. The first error cancels the others
  /// promptly and is returned (its context names the file). A branch revision
  /// is resolved once, so all files come from one commit. Paths already
  /// cached at that commit cost no request.
  Status DownloadFiles(const std::string& repo_id, const std::string& revision, RepoType repo_type,
                       const std::vector<std::string>& paths, const DownloadCallbacks& cb) const;

  /// snapshot_download: resolve the commit, list the tree, filter, download
  /// (the scheduler of DownloadFiles, files in tree order, at most
  /// req.max_workers connections; throughput order unless
  /// ClientOptions::download_order or req.callbacks.on_file_bytes asks for
  /// load order); returns the snapshot folder (or local_dir).
  /// Offline: the cached snapshot when every selected file is present, else
  /// kOfflineMiss reason "IncompleteSnapshot" listing what is missing.
  /// Corrupt trees/<commit>.json (does not parse, a wrong type, an unsafe
  /// path): one warning naming the file, then as huggingface_hub's
  /// _tree_cache.py, which treats it as absent: online the tree is fetched
  /// and the file rewritten; offline the snapshot folder is the listing, so
  /// the completeness check above, which needs the tree, cannot run and the
  /// folder is returned as it is (never an abort, never a write).
  /// Hub unreachable (refused, DNS, no answer within etag_timeout_s) or
  /// offline with req.local_dir set: a non-empty local_dir is returned as it
  /// is, with one warning naming it; its metadata requests are then sent
  /// once, without retry rounds (huggingface_hub's snapshot_download returns
  /// an existing non-empty local_dir the same way). An empty or missing
  /// local_dir: the failure (offline: kOfflineMiss naming the folder).
  Result<std::string> Snapshot(const SnapshotRequest& req) const;

  // ---- uploads (hubload/upload.h for the protocol and the errors) ----

  /// huggingface_hub `create_repo(repo_id, private=..., exist_ok=True)`.
  /// Returns the repo URL ("<endpoint>/<prefix><repo_id>"); an existing repo
  /// is not an error. Sent once. Errors: kInvalidArgument (bad repo_id),
  /// kUnauthorized, kPermissionDenied, kNetwork, ...
  Result<std::string> CreateRepo(const std::string& repo_id, RepoType repo_type = RepoType::kModel,
                                 bool private_repo = false) const;

  /// huggingface_hub `upload_folder`: see hubload/upload.h for the protocol,
  /// UploadFolderRequest for the arguments and CommitInfo for the result. An
  /// empty selection with no deletion fails with kInvalidArgument (nothing
  /// to commit), naming the folder and the patterns. Needs no cache folder.
  Result<CommitInfo> UploadFolder(const UploadFolderRequest& request) const;

  /// huggingface_hub `create_commit` with add (from local files) and delete
  /// operations: the steps of UploadFolder without the folder walk and the
  /// tree listing (`request.folder`, patterns and create_repo are unused).
  /// `deletions` are exact paths in repo. Paths are checked with
  /// ValidateRepoPath; a path both added and deleted is an error.
  Result<CommitInfo> CreateCommit(const UploadFolderRequest& request, const std::vector<CommitAdd>& additions,
                                  const std::vector<std::string>& deletions) const;

  // ---- branches, tags, refs, commits (hub/refs.cc; hub-protocol.md) ----
  // Names may contain '/' (percent-encoded as huggingface_hub quote(safe="")).
  // Errors: kInvalidArgument (bad repo_id/name), kRepoNotFound,
  // kRevisionNotFound (unknown starting revision or ref to delete),
  // kConflict (409 without exist_ok: the branch/tag exists), kUnauthorized,
  // kPermissionDenied, kNetwork, kInvalidFormat "BadServerAnswer". Sent once
  // (no retries for the writing calls). Needs no cache folder.

  /// huggingface_hub create_branch: POST /api/{type}s/{repo}/branch/{branch}
  /// with {"startingPoint": revision} when revision is set. exist_ok turns a
  /// 409 Conflict into success, and a 403 too when ListRepoRefs lists the
  /// branch (as huggingface_hub). exist_ok never moves an existing branch.
  Status CreateBranch(const std::string& repo_id, const std::string& branch,
                      const CreateBranchOptions& options = {}) const;
  /// huggingface_hub delete_branch: DELETE /api/{type}s/{repo}/branch/{branch}.
  Status DeleteBranch(const std::string& repo_id, const std::string& branch,
                      RepoType repo_type = RepoType::kModel) const;
  /// huggingface_hub create_tag: POST /api/{type}s/{repo}/tag/{revision} with
  /// {"tag": tag, "message": message}. exist_ok turns a 409 into success.
  Status CreateTag(const std::string& repo_id, const std::string& tag, const CreateTagOptions& options = {}) const;
  /// huggingface_hub delete_tag: DELETE /api/{type}s/{repo}/tag/{tag}.
  Status DeleteTag(const std::string& repo_id, const std::string& tag, RepoType repo_type = RepoType::kModel) const;
  /// huggingface_hub list_repo_refs: GET /api/{type}s/{repo}/refs
  /// (?include_prs=1 when include_pull_requests).
  Result<RepoRefs> ListRepoRefs(const std::string& repo_id, RepoType repo_type = RepoType::kModel,
                                bool include_pull_requests = false) const;
  /// huggingface_hub list_repo_commits: GET /api/{type}s/{repo}/commits/{revision},
  /// following `Link: rel="next"` pages; newest first, as the server lists them.
  Result<std::vector<GitCommitInfo>> ListRepoCommits(const std::string& repo_id, const std::string& revision = "main",
                                                     RepoType repo_type = RepoType::kModel) const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace hubload
