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
//     refs/<branch or tag>    40-hex commit id, no newline (refs/refs/pr/N for PRs)
//     trees/<commit>.json     file listing of a commit (huggingface_hub _tree_cache)
//     .hubload-repo.json      store-only settings: private, gated, access lists
//                             (sha256 of tokens, never tokens), commit log
//                             (parent, title, message, date), tag names.
// A client cache never contains `.hubload-repo.json`; the server treats its
// absence as "public, ungated, no history" (mirror mode). A store repo's
// snapshots are complete by construction. A cache snapshot is served as
// complete only when trees/<commit>.json lists it: the info, tree and
// paths-info answers then list every file of the listing, and a listed file
// the cache lacks answers 404 EntryNotFound (or is pulled from
// ServerOptions::upstream). Without a listing only the files present are
// listed, and Start() warns that the snapshot may be partial.
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


#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hubload/cache.h"
#include "hubload/server_faults.h"
#include "hubload/status.h"

namespace hubload::server {

inline constexpr uint64_t kDefaultLfsThresholdBytes = 10ull * 1024 * 1024;

// ---------------------------------------------------------------------------
// Server.
// ---------------------------------------------------------------------------

struct ServerOptions {
  /// Store root (cache layout, see the top of this file). Must exist.
  std::string root;
  /// Address both listeners bind ("127.0.0.1", "127.0.0.2", "0.0.0.0", "::",
  /// or a name that resolves to a local address).
  std::string host = "127.0.0.1";
  /// Hub port; 0 = pick a free port (see Server::port()).
  uint16_t port = 0;
  /// Addresses handed out (issue 19). URLs in answers (LFS redirects, upload
  /// actions, commit and PR URLs, pagination links) are built from, in order:
  /// `public_url` when set (scheme://host[:port][/path], used verbatim: the
  /// address of a proxy or Service in front of the server, path prefix
  /// included); else "http://" + the request's Host header when it is a valid
  /// host[:port] (no path, space, CR or LF) + the path prefix; else the
  /// configured address ("http://host:port", 0.0.0.0 given as 127.0.0.1).
  std::string public_url;
  /// Host name used in the URLs of the second listener standing for the CDN
  /// (LFS redirects and LFS download actions point there). Empty (default):
  /// the host of `public_url` when set, else the host name the client used in
  /// its Host header, else the configured address; always with the CDN port
  /// (a different origin, so clients drop Authorization). Set a name to
  /// override it (e.g. "localhost" for a cross-name redirect).
  std::string cdn_host;
  /// Accepted bearer tokens. Empty = any token is accepted (for public repos;
  /// private/gated access lists still apply). A token not accepted gets 401
  /// + `X-Error-Message: Invalid credentials in Authorization header`.
  std::vector<std::string> tokens;
  /// Mirror mode: every write endpoint answers 403.
  bool read_only = false;
  /// Pull-through mirror (issue 19): the Hub endpoint ("http://host:port") a
  /// file listed by a snapshot's trees/<commit>.json but absent from the store
  /// is fetched from (HubClient::Download into `root`, so concurrent requests
  /// for one file cause one upstream download) before it is served. Empty: such
  /// files answer 404 EntryNotFound.
  std::string upstream;
  /// Bearer token sent to `upstream` (empty = none). Never logged.
  std::string upstream_token;
  /// JSON-lines access log file (appended), empty = none. One line per
  /// request: {"time","method","path","status","range","bytes"} (+
  /// "listener":"cdn" on the CDN, "unproven":true for answers from a snapshot
  /// the store cannot prove complete); the query string and headers (so
  /// tokens and URL signatures) are never written.
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

/// The Hub test double. Every request is answered: malformed input gets 400
/// (JSON body {"error": ...}), a bug of ours 500 with a log line; no request
/// ends the process or another connection.
class Server {
 public:
  /// Binds both listeners on `options.host` and starts serving; warns (log)
  /// about mirror snapshots the store cannot prove complete. Errors:
  /// InvalidArgument (root missing, bad host, bad public_url/upstream),
  /// IOError (bind/listen failure, access log not writable). Thread safety:
  /// the returned server's methods are thread-safe.
  static Result<std::unique_ptr<Server>> Start(ServerOptions options);

  ~Server();  // Stop()s.
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// The endpoint clients use: public_url when set, else
  /// "http://HOST:PORT" of the hub listener (0.0.0.0 as 127.0.0.1, :: as
  /// [::1]) followed by the current path prefix.
  std::string url() const;
  /// "http://CDN_HOST:CDN_PORT" of the CDN listener (CDN_HOST as for url()
  /// when ServerOptions::cdn_host is empty).
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
// Store (library calls; also used by `hubload store add`). All are
// thread-safe: commits and ref changes are serialised per process, and the
// snapshot and the ref of a commit appear atomically.
// ---------------------------------------------------------------------------

struct CreateRepoOptions {
  RepoType repo_type = RepoType::kModel;
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
/// folder missing), Conflict, IOError.
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
  RepoType repo_type = RepoType::kModel;
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
/// "../x", absolute, empty segment, a `.git` or `.cache` segment), IOError.
Result<std::string> CommitFiles(const std::string& root, const std::string& repo_id,
                                const std::vector<CommitOperation>& ops, const CommitOptions& options = {});

/// Convenience: one-file CommitFiles (new commit, new etag; older snapshot stays).
Result<std::string> ReplaceFile(const std::string& root, const std::string& repo_id, const std::string& path,
                                const std::string& content, const CommitOptions& options = {});

/// Points ref `ref_name` ("v1.0", "refs/pr/3", "dev") of the repo at `commit`
/// (which must have a snapshot). Errors: RepoNotFound, RevisionNotFound,
/// InvalidArgument (ref escaping refs/).
Status SetRef(const std::string& root, const std::string& repo_id, const std::string& ref_name,
              const std::string& commit, RepoType repo_type = RepoType::kModel);

struct RepoAccess {
  bool private_repo = false;
  std::string gated;  // "" = not gated, else "auto" | "manual"
  std::vector<std::string> read_tokens;
  std::vector<std::string> gated_tokens;
};
/// Rewrites the access settings of an existing repo (stored as token sha256).
Status SetRepoAccess(const std::string& root, const std::string& repo_id, const RepoAccess& access,
                     RepoType repo_type = RepoType::kModel);

// ---- refs and history (huggingface_hub HfApi.create_branch / delete_branch /
// create_tag / delete_tag / list_repo_refs / list_repo_commits) ----

/// One ref as the Hub's `/refs` API lists it: name "main" / "v1.0" /
/// "parquet" / "refs/pr/1"; ref "refs/heads/main" / "refs/tags/v1.0" /
/// "refs/convert/parquet" / "refs/pr/1".
struct RefInfo {
  std::string name, ref, target_commit;
};
struct RepoRefs {
  std::vector<RefInfo> branches, tags, converts, pull_requests;  // each sorted by name
};
/// Store layout of refs: branches and tags are files refs/<name> (tags are
/// named in .hubload-repo.json; a plain cache has branches only), pull
/// requests refs/refs/pr/<n>, converts refs/refs/convert/<name>.
/// Errors: RepoNotFound.
Result<RepoRefs> ListRefs(const std::string& root, const std::string& repo_id, RepoType repo_type = RepoType::kModel);

/// Creates branch `branch` at `starting_point` (branch, tag or commit; ""
/// = the head of main), or at a new commit with an empty tree when `empty`.
/// `overwrite` moves an existing branch; with no starting point it leaves it
/// as it is (as @huggingface/hub createBranch documents).
/// Errors: RepoNotFound; RevisionNotFound (starting point); InvalidArgument
/// (name starting with "refs/", a 40-hex name, unsafe name); Conflict (a
/// branch or tag of that name exists and !overwrite, or a tag is overwritten).
Status CreateBranch(const std::string& root, const std::string& repo_id, const std::string& branch,
                    const std::string& starting_point = "", RepoType repo_type = RepoType::kModel,
                    bool empty = false, bool overwrite = false);
/// Deletes branch `branch`. Errors: RepoNotFound; RevisionNotFound (no such
/// branch; tags are not branches); PermissionDenied (main, the default branch).
Status DeleteBranch(const std::string& root, const std::string& repo_id, const std::string& branch,
                    RepoType repo_type = RepoType::kModel);
/// Tags `revision` (branch, tag or commit, >= 7 hex) as `tag`, with an
/// optional message. Errors: RepoNotFound; RevisionNotFound; InvalidArgument
/// (unsafe name, "refs/" prefix); Conflict (a branch or tag of that name exists).
Status CreateTag(const std::string& root, const std::string& repo_id, const std::string& tag,
                 const std::string& revision = "main", const std::string& message = "",
                 RepoType repo_type = RepoType::kModel);
/// Deletes tag `tag`. Errors: RepoNotFound; RevisionNotFound (no such tag).
Status DeleteTag(const std::string& root, const std::string& repo_id, const std::string& tag,
                 RepoType repo_type = RepoType::kModel);

struct CommitInfo {
  std::string id, parent, title, message;
  std::string date;  // ISO 8601, UTC ("2026-12-01T10:00:00.000Z")
};
/// The commits reachable from `revision` through their parents, newest
/// first (the store's commit log; a snapshot of a plain cache has no log and
/// is listed alone, dated by its folder). Errors: RepoNotFound, RevisionNotFound.
Result<std::vector<CommitInfo>> ListCommits(const std::string& root, const std::string& repo_id,
                                            const std::string& revision = "main",
                                            RepoType repo_type = RepoType::kModel);

}  // namespace hubload::server
