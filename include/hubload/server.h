// hubload/server.h: `hubload serve`, a Hugging Face Hub-compatible HTTP server
// (Boost.Beast) used as the test double of every client test and as a
// read-only cluster mirror of an existing cache folder.
//
// Protocol source: ../shared/docs/hub-protocol.md (section 8 checklist), i.e.
// what huggingface_hub, @huggingface/hub and hf-hub send and require.
//
// Store layout (the Hugging Face cache layout, so a cache is a valid store):
//   ROOT/{models|datasets|spaces}--org--name/
//     blobs/<sha256>          LFS file (name = sha256 of the content, 64 hex)
//     blobs/<git-sha1>        regular file (name = git blob sha1, 40 hex)
//     snapshots/<commit>/...  complete tree of that commit, relative symlinks
//     refs/<branch>           40-hex commit id, no newline (refs/refs/pr/N for PRs)
//     .hubload-repo.json      store-only settings: private, gated, access lists
//                             (sha256 of tokens, never tokens), commit log
//                             (parent, title, date). Absent = public repo.
// A client cache never contains `.hubload-repo.json`; the server treats its
// absence as "public, ungated, no history" (mirror mode).
//
// Commit ids are 40-hex SHA-1 values computed by hubload over (parent, sorted
// path/oid list, message, time); they are unique but are not git commit objects.
//
// LFS rule (CreateRepoOptions / CommitOptions / server preupload answers): a
// non-empty file is stored as LFS when its size >= lfs_threshold_bytes
// (default 10 MiB, the Hub's rule) or, when lfs_by_extension is true, its
// name matches the Hub's default .gitattributes LFS patterns (*.safetensors,
// *.bin, *.pt, *.pth, *.ckpt, *.h5, *.onnx, *.msgpack, *.gguf, *.npy, *.npz,
// *.pkl, *.pickle, *.parquet, *.arrow, *.zip, *.tar, *.gz, *.tgz, *.model,
// *.ot, *.tflite, *.joblib). Empty files are always regular.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "hubload/status.h"

namespace hubload::server {

inline constexpr uint64_t kDefaultLfsThresholdBytes = 10ull * 1024 * 1024;

// ---------------------------------------------------------------------------
// Faults for tests.
// ---------------------------------------------------------------------------

/// Fault switches injected by the server. Every switch can be set before
/// Start (in ServerOptions::faults) and changed on a running server through
/// Server::faults(). A `path_substring` matches when it occurs in the request
/// target's path (percent-decoded, query excluded); empty matches every path.
/// Rules with a count apply to the next `count` matching requests/responses
/// and then expire; count < 0 means "forever".
///
/// Thread safety: all methods are safe to call concurrently with each other
/// and with a running server. Copying copies the current switch values.
class Faults {
 public:
  Faults() = default;
  Faults(const Faults& other);
  Faults& operator=(const Faults& other);

  /// Answers the next `count` requests whose path contains `path_substring`
  /// with `status` (e.g. 500, 503, 429) and a JSON body {"error": ...};
  /// when retry_after_s >= 0 the answer carries `Retry-After: retry_after_s`.
  void SetStatusForNext(std::string path_substring, int status, int count, int retry_after_s = -1);

  /// For the next `count` responses with a body (HEAD and 304 answers do not
  /// count) to matching paths, closes the connection abruptly after
  /// `after_bytes` bytes of the body (headers are sent whole). An LFS file's
  /// body comes from the CDN listener, whose paths are
  /// "/<repo folder>/<blob>", e.g. match "models--org--name".
  void SetDropAfterBytes(std::string path_substring, uint64_t after_bytes, int count);

  /// For the next `count` responses with a body to matching paths, sends
  /// `after_bytes` bytes of the body, then nothing for `stall_ms`
  /// milliseconds while keeping the connection open (a proxy or CDN that
  /// hangs mid-transfer: B19 b), then the rest of the body. The stall ends
  /// early when the client closes the connection or the server stops.
  /// Paths match as in SetDropAfterBytes (LFS bodies: "/<repo folder>/<blob>").
  void SetStallAfterBytes(std::string path_substring, uint64_t after_bytes, int stall_ms, int count);

  /// Sleeps `ms` milliseconds before answering every request (0 = off).
  void SetLatencyMs(int ms);

  /// Caps every connection's body throughput at `bytes_per_s` (0 = off).
  void SetBandwidthBytesPerSec(uint64_t bytes_per_s);

  /// Caps the SUM of all connections' body throughput at `bytes_per_s`
  /// (0 = off): one link shared by every connection (a home line, a node's
  /// uplink). Connections take turns in pieces of at most 64 KiB, so each
  /// gets an equal share while several are busy. Combines with the
  /// per-connection cap (both apply).
  void SetTotalBandwidthBytesPerSec(uint64_t bytes_per_s);

  /// When true, `Range` headers are ignored: 200 with the full body.
  void SetIgnoreRange(bool on);

  /// When true, responses carry neither Content-Length nor Content-Range; the
  /// body is close-delimited (`Connection: close`, connection closed after it).
  void SetStripContentLength(bool on);

  /// After the `after_requests`-th request (counted from now) whose path
  /// contains `path_substring` has been answered, replaces `path_in_repo` of
  /// repo `repo_id` on `branch` with `new_content` (a new commit, so the file
  /// gets a new etag and the branch a new head; older snapshots stay).
  /// Use it to test "file changed between HEAD and GET".
  void ReplaceFileAfter(std::string path_substring, int after_requests, std::string repo_id,
                        std::string path_in_repo, std::string new_content,
                        std::string repo_type = "model", std::string branch = "main");

  /// Removes every switch.
  void Clear();

  // ---- used by the server (also readable by tests) ----
  struct StatusRule {
    std::string path_substring;
    int status = 500;
    int remaining = 1;
    int retry_after_s = -1;
  };
  struct DropRule {
    std::string path_substring;
    uint64_t after_bytes = 0;
    int remaining = 1;
  };
  struct StallRule {
    std::string path_substring;
    uint64_t after_bytes = 0;
    int stall_ms = 0;
    int remaining = 1;
  };
  struct ReplaceRule {
    std::string path_substring;
    int remaining_requests = 1;
    std::string repo_id, path_in_repo, new_content, repo_type, branch;
  };
  /// Consumes one use of the first status rule matching `path`, if any.
  std::optional<StatusRule> TakeStatus(const std::string& path);
  /// Consumes one use of the first drop rule matching `path`; returns the byte
  /// count after which to drop.
  std::optional<uint64_t> TakeDrop(const std::string& path);
  /// Consumes one use of the first stall rule matching `path`, if any.
  std::optional<StallRule> TakeStall(const std::string& path);
  /// Counts one answered request to `path`; returns the replacements now due.
  std::vector<ReplaceRule> TakeDueReplacements(const std::string& path);
  int latency_ms() const;
  uint64_t bandwidth_bytes_per_s() const;
  uint64_t total_bandwidth_bytes_per_s() const;
  /// Blocks until `n` more body bytes fit under the total cap (returns at once
  /// when it is off, or when `stopping` becomes true while waiting).
  void ThrottleTotal(uint64_t n, const std::atomic<bool>& stopping);
  bool ignore_range() const;
  bool strip_content_length() const;

 private:
  mutable std::mutex mu_;
  std::vector<StatusRule> status_rules_;
  std::vector<DropRule> drop_rules_;
  std::vector<StallRule> stall_rules_;
  std::vector<ReplaceRule> replace_rules_;
  int latency_ms_ = 0;
  uint64_t bandwidth_ = 0;
  uint64_t total_bandwidth_ = 0;
  /// Total cap: the time at which the link is free again (virtual clock).
  std::chrono::steady_clock::time_point link_free_at_{};
  bool ignore_range_ = false;
  bool strip_length_ = false;
};

// ---------------------------------------------------------------------------
// Server.
// ---------------------------------------------------------------------------

struct ServerOptions {
  /// Store root (cache layout, see the top of this file). Must exist.
  std::string root;
  /// Address of the hub listener and the host name used in its URLs.
  std::string host = "127.0.0.1";
  /// Hub port; 0 = pick a free port (see Server::port()).
  uint16_t port = 0;
  /// Host name of the second listener standing for the CDN (LFS redirects
  /// point there). It listens on the same address as `host`, another port;
  /// use a different name for the same address (127.0.0.1 vs localhost) so
  /// clients see a cross-host redirect and drop Authorization.
  std::string cdn_host = "localhost";
  /// Accepted bearer tokens. Empty = any token is accepted (for public repos;
  /// private/gated access lists still apply). A token not accepted gets 401
  /// + `X-Error-Message: Invalid credentials in Authorization header`.
  std::vector<std::string> tokens;
  /// Mirror mode: every write endpoint answers 403.
  bool read_only = false;
  /// JSON-lines access log file (appended), empty = none. One line per
  /// request: {"time","method","path","status","range","bytes"}; the query
  /// string and headers (so tokens and URL signatures) are never written.
  std::string access_log;
  Faults faults;
  /// Worker threads for accepting; each connection is served on its own thread.
  int threads = 2;
  /// Lifetime of signed CDN and upload URLs, seconds.
  int signed_url_ttl_s = 3600;
  /// LFS rule used for preupload answers and inline `file` commit ops.
  uint64_t lfs_threshold_bytes = kDefaultLfsThresholdBytes;
  bool lfs_by_extension = true;
  /// LFS batch: objects larger than this are offered "multipart" transfer with
  /// parts of this many bytes; smaller ones "basic".
  uint64_t multipart_chunk_size = 8ull * 1024 * 1024;
  /// Tree API page size (entries per page, `Link: <...>; rel="next"` beyond).
  int tree_page_size = 1000;
  /// Largest accepted JSON request body (bytes); larger gets 413.
  uint64_t max_json_body_bytes = 16ull * 1024 * 1024;
  /// Largest accepted NDJSON commit body (bytes, inline base64 included).
  uint64_t max_commit_body_bytes = 1ull << 30;
};

/// Counters for tests that count transfers. Paths are request paths without
/// the query string, percent-decoded.
struct ServerStats {
  uint64_t requests = 0;
  uint64_t body_bytes_sent = 0;
  std::map<std::string, uint64_t> requests_per_path;
  std::map<std::string, uint64_t> body_bytes_per_path;
};

class Server {
 public:
  /// Binds both listeners and starts serving. Errors: InvalidArgument (root
  /// missing, bad host), IOError (bind/listen failure, access log not
  /// writable). Thread safety: the returned server's methods are thread-safe.
  static Result<std::unique_ptr<Server>> Start(ServerOptions options);

  ~Server();  // Stop()s.
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// "http://HOST:PORT" of the hub listener (the endpoint clients use).
  std::string url() const;
  /// "http://CDN_HOST:CDN_PORT" of the CDN listener.
  std::string cdn_url() const;
  uint16_t port() const;
  uint16_t cdn_port() const;
  const std::string& root() const;

  /// Live fault switches (thread-safe).
  Faults& faults();

  /// Snapshot of the counters since start (or the last ResetStats()).
  ServerStats stats() const;
  /// Number of requests whose path contains `path_substring`.
  uint64_t RequestCount(const std::string& path_substring) const;
  void ResetStats();

  /// Closes the listeners and every open connection, joins all threads.
  /// Idempotent.
  void Stop();

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------
// Store (library calls; also used by `hubload store add`).
// ---------------------------------------------------------------------------

struct CreateRepoOptions {
  std::string repo_type = "model";  // model | dataset | space
  std::string branch = "main";
  std::string commit_message = "Initial commit";
  bool private_repo = false;
  /// "" or "false" = not gated; "auto" or "manual" = gated.
  std::string gated;
  /// Tokens allowed to read a private repo (empty = every accepted token).
  std::vector<std::string> read_tokens;
  /// Tokens approved for a gated repo (others get 403 GatedRepo).
  std::vector<std::string> gated_tokens;
  uint64_t lfs_threshold_bytes = kDefaultLfsThresholdBytes;
  bool lfs_by_extension = true;
  /// Fail with Conflict when the repo already exists (else add a commit on branch).
  bool fail_if_exists = false;
};

/// Creates repo `repo_id` ("org/name" or "name") under `root` from every
/// regular file below `folder` (hidden `.git` folder skipped), writing blobs
/// (LFS rule above), snapshots/<commit>/ (relative symlinks), refs/<branch>
/// and .hubload-repo.json. Returns the commit id (40 hex). If the repo exists
/// (and !fail_if_exists) the folder becomes a new commit on `branch` whose
/// tree is exactly the folder. Errors: InvalidArgument (bad repo_id/type,
/// folder missing), Conflict, IOError. Thread-safe (commits are serialised
/// per process); the snapshot and the ref appear atomically.
Result<std::string> CreateRepoFromFolder(const std::string& root, const std::string& repo_id,
                                         const std::string& folder, const CreateRepoOptions& options = {});

/// Same, from an in-memory map {path in repo -> bytes}.
Result<std::string> CreateRepoFromFiles(const std::string& root, const std::string& repo_id,
                                        const std::map<std::string, std::string>& files,
                                        const CreateRepoOptions& options = {});

struct CommitOperation {
  enum class Kind { kAdd, kDelete, kDeleteFolder };
  Kind kind = Kind::kAdd;
  std::string path;        // path in repo, '/'-separated
  std::string content;     // bytes for kAdd (ignored when local_file is set)
  std::string local_file;  // kAdd: read bytes from this file instead
  /// kAdd: force LFS (true) / regular (false); nullopt = the LFS rule.
  std::optional<bool> lfs;
};

struct CommitOptions {
  std::string repo_type = "model";
  std::string branch = "main";  // may be "refs/pr/N"
  std::string message = "Update files";
  std::string description;
  /// When non-empty, the commit fails with Conflict unless the branch head
  /// starts with it (7..40 hex).
  std::string parent_commit;
  /// Start from this commit instead of the branch head (new branches, PRs).
  std::string base_commit;
  uint64_t lfs_threshold_bytes = kDefaultLfsThresholdBytes;
  bool lfs_by_extension = true;
};

/// Applies `ops` on top of `branch` (created when absent; the new tree is
/// then `ops` alone, or base_commit's tree plus ops) as one atomic commit.
/// Returns the new commit id. Errors: RepoNotFound, Conflict (parent_commit),
/// EntryNotFound (deleting a missing path), InvalidArgument (bad path such as
/// "../x", absolute, empty segment), IOError. Thread-safe.
Result<std::string> CommitFiles(const std::string& root, const std::string& repo_id,
                                const std::vector<CommitOperation>& ops, const CommitOptions& options = {});

/// Convenience: one-file CommitFiles (new commit, new etag; older snapshot stays).
Result<std::string> ReplaceFile(const std::string& root, const std::string& repo_id, const std::string& path,
                                const std::string& content, const CommitOptions& options = {});

/// Points ref `ref_name` ("v1.0", "refs/pr/3", "dev") of the repo at `commit`
/// (which must have a snapshot). Errors: RepoNotFound, RevisionNotFound,
/// InvalidArgument (ref escaping refs/).
Status SetRef(const std::string& root, const std::string& repo_id, const std::string& ref_name,
              const std::string& commit, const std::string& repo_type = "model");

struct RepoAccess {
  bool private_repo = false;
  std::string gated;  // "" = not gated, else "auto" | "manual"
  std::vector<std::string> read_tokens;
  std::vector<std::string> gated_tokens;
};
/// Rewrites the access settings of an existing repo (stored as token sha256).
Status SetRepoAccess(const std::string& root, const std::string& repo_id, const RepoAccess& access,
                     const std::string& repo_type = "model");

/// "models--org--name" for ("model", "org/name"); empty when invalid.
std::string RepoFolderName(const std::string& repo_type, const std::string& repo_id);

/// Git blob sha1 ("blob <size>\0" + content), 40 lower-case hex.
std::string GitBlobSha1(const std::string& content);

}  // namespace hubload::server
