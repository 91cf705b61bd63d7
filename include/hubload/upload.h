// hubload/upload.h: the request and result types of uploads. The calls are
// HubClient methods (hubload/hub.h: CreateRepo, UploadFolder, CreateCommit,
// one Hub session with the downloads, as huggingface_hub's HfApi); they speak
// the Hub's upload protocol as huggingface_hub `upload_folder` /
// `create_commit` do with Xet disabled (shared/docs/hub-protocol.md §5):
//
//   1. (optional) POST /api/repos/create                      (409 = exists: fine)
//   2. every selected file is read ONCE: size, sha256 (OpenSSL EVP) and the
//      first 512 bytes ("sample") come out of that single read;
//   3. POST /api/{type}s/{repo}/preupload/{rev} in batches of 256 files:
//      the server says which files go through LFS and which it already holds
//      (`oid` equal to the local sha256 / git blob sha1 → the file is skipped,
//      no byte is sent, and it is not part of the commit);
//   4. POST {endpoint}/{repo}.git/info/lfs/objects/batch in batches of 256
//      objects; objects the server already stores come back without actions
//      (no byte is sent); the others are uploaded straight from the file:
//      "basic" = one PUT of the whole file; "multipart" = PUTs of
//      [(i-1)*chunk_size, i*chunk_size) in parallel (bounded thread count),
//      each part a re-readable file range (a retried part sends the same bytes
//      again, never an empty body), each answer's ETag collected, then the
//      completion POST; the verify POST when the server offers one;
//   5. one NDJSON commit: header, deletions, regular files inline (base64),
//      LFS pointers (`lfsFile`, algo sha256, oid, size).
//
// All or nothing: any failure in steps 1–4 returns an error before the commit
// request is sent, so the repo does not change; the error names the file
// (ErrorContext::file and the message, plus the part number for multipart)
// and why. The commit itself is sent once (never retried: a lost answer could
// otherwise create two commits, as huggingface_hub does not retry it either).
//
// Errors (status.h codes): kInvalidArgument (bad repo_id, folder missing,
// unsafe path in repo, bad pattern or option), kIOError / kNotFound (a local
// file unreadable, gone, or changed size while read), kRepoNotFound / kUnauthorized /
// kPermissionDenied / kRevisionNotFound (server answers, mapped as
// huggingface_hub hf_raise_for_status), kConflict (stale parent_commit:
// HTTP 409/412), kServerError / kNetwork (after retries), kInvalidFormat (a
// server answer breaks the protocol: missing fields, wrong part count, part
// without ETag), kCancelled (callback asked to stop). Tokens never appear in
// any message, context or log line; URLs in errors are redacted (no query).
//
// Tuning (ClientOptions): upload_hash_workers files hashed at once,
// upload_workers LFS PUTs in flight, upload_batch_size files per preupload /
// objects per LFS batch request (huggingface_hub UPLOAD_BATCH_MAX_NUM_FILES =
// 256), upload_api_timeout_s per JSON API request. The repo-create and commit
// requests are sent once (never retried); the others through the client's
// retry policy.
//
// Thread safety: every call may be made from several threads at once; each
// call uses its own worker threads and joins them before returning.
// Callbacks are called from worker threads, one at a time (serialised).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hubload/cache.h"
#include "hubload/status.h"

namespace hubload {

/// Where an upload is, for progress displays.
enum class UploadPhase {
  kHashing,    // reading files: sha256 + sample
  kUploading,  // sending LFS bytes
  kCommitting, // the commit request (bytes fields are final)
};

struct UploadProgress {
  UploadPhase phase = UploadPhase::kHashing;
  /// Bytes hashed (kHashing) or LFS bytes acknowledged by the server
  /// (kUploading: counted per finished PUT, so it moves in part-size steps).
  uint64_t bytes_done = 0;
  /// Bytes to hash (all selected files) or to upload (LFS objects the
  /// server does not hold yet).
  uint64_t bytes_total = 0;
  /// Path in repo of the file that just advanced ("" for phase changes).
  std::string path_in_repo;
  /// That file's bytes hashed / acknowledged so far and its bytes in this
  /// phase (its size); 0 and 0 with no path. The call that completes a file
  /// (file_bytes_done == file_bytes_total) is never skipped by the rate limit.
  uint64_t file_bytes_done = 0;
  uint64_t file_bytes_total = 0;
};

struct UploadCallbacks {
  /// Called from worker threads (serialised by a mutex), at most about 10
  /// times a second per phase plus once at each phase's end.
  std::function<void(const UploadProgress&)> on_progress;
  /// Polled between blocks and parts, possibly from several worker threads
  /// at once (must be thread-safe); true cancels (Code::kCancelled, no commit).
  std::function<bool()> cancelled;
};

/// huggingface_hub `upload_folder` arguments.
struct UploadFolderRequest {
  std::string repo_id;                 // "org/name" (or legacy "name")
  RepoType repo_type = RepoType::kModel;
  /// Local folder; every regular file below it (symlinks to files followed,
  /// symlinked folders not entered) is a candidate, named by its
  /// '/'-separated path relative to the folder.
  std::string folder;
  /// Prefix in the repo ("" = repo root); leading/trailing '/' removed.
  std::string path_in_repo;
  /// Branch to commit to ("main" default). With create_pr the PR is opened
  /// against this branch.
  std::string revision = "main";
  /// Commit title; "" = "Upload folder using hubload" (huggingface_hub says
  /// "Upload folder using huggingface_hub").
  std::string commit_message;
  std::string commit_description;
  /// Commit to a new pull-request ref refs/pr/N (create_pr=1).
  bool create_pr = false;
  /// 7..40 hex: the server refuses the commit (kConflict) when the branch
  /// head is not this commit (huggingface_hub parent_commit).
  std::string parent_commit;
  /// fnmatch patterns on the path relative to `folder` (huggingface_hub
  /// filter_repo_objects: `*` crosses '/', a trailing '/' means the folder).
  /// `.git/` and `.cache/huggingface/` are always ignored, as huggingface_hub.
  std::vector<std::string> allow_patterns;
  std::vector<std::string> ignore_patterns;
  /// Remote files under path_in_repo whose path relative to path_in_repo
  /// matches one of these are deleted in the same commit, unless this upload
  /// writes the same path (huggingface_hub upload_folder delete_patterns;
  /// `.gitattributes` is never deleted). Listed with the tree API at
  /// `revision` (at the default branch "main" when create_pr).
  std::vector<std::string> delete_patterns;
  /// POST /api/repos/create first (an existing repo is fine).
  bool create_repo = false;
  /// With create_repo: the new repo is private.
  bool private_repo = false;
  UploadCallbacks callbacks;
};

/// What a push did.
struct CommitInfo {
  std::string commit_oid;       // 40 hex
  std::string commit_url;       // "<endpoint>/<repo>/commit/<oid>"
  std::string repo_url;         // commit_url before "/commit/"
  std::string pr_url;           // "<endpoint>/<repo>/discussions/N" with create_pr
  int pr_num = -1;              // N with create_pr, else -1
  /// False when every selected file was already on the Hub unchanged and no
  /// deletion was due: no commit was made and commit_oid is the current head
  /// (huggingface_hub create_commit's "no files have been modified").
  bool committed = true;
  std::vector<std::string> added;      // paths in repo, sorted (regular + LFS)
  std::vector<std::string> lfs;        // subset of `added` sent as LFS pointers
  std::vector<std::string> unchanged;  // skipped: same oid already at that path
  std::vector<std::string> deleted;    // paths in repo, sorted
  uint64_t lfs_bytes_uploaded = 0;     // file bytes PUT (0 when the server had them all)
  uint64_t lfs_objects_uploaded = 0;   // LFS objects sent (not already stored)
  /// One line per thing the caller should know, each naming the local file:
  /// what the folder walk skipped (dangling symlinks; FIFOs, sockets and
  /// devices; symlinked folders, which are not entered) and added files that
  /// look like Git LFS pointer text (first line
  /// "version https://git-lfs.github.com/spec/v1", under 1024 bytes: usually
  /// a clone made without `git lfs pull`). huggingface_hub skips the same
  /// entries without a word.
  std::vector<std::string> warnings;
};

/// One file added by a commit built by hand (HubClient::CreateCommit).
struct CommitAdd {
  std::string path_in_repo;
  std::string local_path;  // file read for hashing and upload
};

/// Git blob id of a byte string: sha1("blob <size>\0" + content), 40 hex —
/// the `oid` the Hub reports for regular (non-LFS) files.
std::string GitBlobOid(const std::string& content);

}  // namespace hubload
