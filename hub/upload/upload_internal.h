// Private to hub/upload/: the steps of one upload (hub-protocol.md §5,
// include/hubload/upload.h) over the client's one Hub session:
//   hashing.cc       one read per file: size check, sha256, 512-byte sample
//   preupload.cc     upload modes and remote oids, in batches
//   lfs_transfer.cc  LFS batch, basic and multipart PUTs, completion, verify
//   commit.cc        the NDJSON commit, create_repo, the branch head
//   upload_folder.cc the folder walk, patterns and deletions
#pragma once

#include <atomic>
#include <memory>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hub/session.h"
#include "hubload/upload.h"
#include "util/progress.h"

namespace hubload::hub_internal::upload {

inline constexpr size_t kSampleBytes = 512;
inline constexpr const char* kLfsJson = "application/vnd.git-lfs+json";

// One file of the commit.
struct Item {
  std::string path;   // in repo
  std::string local;  // local file
  uint64_t size = 0;
  std::string sha256;
  std::string sample;
  bool lfs = false;
  bool ignore = false;
  std::string remote_oid;
  std::string content;  // regular files: the bytes (read after preupload)
  bool unchanged = false;
};

// An LFS object to send (several items may share one oid).
struct Object {
  std::string oid;
  uint64_t size = 0;
  std::string local;
  std::string path;  // first path in repo with this content (for messages)
  std::string upload_href;
  std::string verify_href;
  uint64_t chunk_size = 0;              // multipart when > 0
  std::vector<std::string> part_urls;   // ordered by part number
  std::vector<std::string> part_etags;  // filled by the PUTs
  std::atomic<int> parts_left{0};
};

// Progress reporting, serialised and rate-limited (util::RateLimiter).
class Progress {
 public:
  explicit Progress(const UploadCallbacks* cb) : cb_(cb) {}
  void Start(UploadPhase phase, uint64_t total);
  /// `n` more bytes of the file `path` (`file_total` bytes in this phase).
  void Add(uint64_t n, const std::string& path, uint64_t file_total);
  void Finish();

 private:
  void Emit();
  const UploadCallbacks* cb_;
  std::mutex mu_;
  UploadProgress p_;
  std::map<std::string, uint64_t> file_done_;  // per path, this phase
  util::RateLimiter rate_;
};

// First error wins; everybody else stops.
class FirstError {
 public:
  explicit FirstError(const UploadCallbacks* cb) : cb_(cb) {}
  void Set(Status s);
  bool Stop();
  Status Get();

 private:
  const UploadCallbacks* cb_;
  std::mutex mu_;
  Status st_;
  std::atomic<bool> stop_{false};
};

// One upload call: the session and the request.
struct Call {
  const Session& s;
  const UploadFolderRequest& req;
  std::string ApiRepo() const;
  ErrorContext Ctx(const std::string& file = {}) const;
  /// Sends `req`: `auth` adds the bearer token (only ever for the
  /// endpoint's origin, never for presigned URLs); `retry` false sends it
  /// once (the commit and repo creation: a lost answer must not commit twice).
  Result<HttpResponse> Send(HttpRequest req, bool auth, bool retry) const;
  /// A JSON API call (timeout ClientOptions::upload_api_timeout_s); the
  /// answer is parsed with util::ParseJson ("" -> {}).
  Result<nlohmann::json> Json(const std::string& method, const std::string& url, const std::string& body,
                              const std::string& content_type, bool auth, bool retry, const std::string& what,
                              const std::string& file = {}, const std::string& accept = "application/json") const;
};

Status BadAnswer(const std::string& what, ErrorContext ctx);

// hashing.cc
Status HashFile(Item& it, Progress& progress, FirstError& err);
Result<std::string> ReadWhole(const std::string& path, uint64_t size);

// preupload.cc
Status Preupload(const Call& c, std::vector<Item>& items);

// lfs_transfer.cc
Status LfsBatch(const Call& c, std::vector<std::unique_ptr<Object>>& objects, std::vector<Object*>& to_send);
Status Transfer(const Call& c, std::vector<Object*>& to_send, Progress& progress, FirstError& err, CommitInfo& info);

// commit.cc
Status CheckRequest(const UploadFolderRequest& req);

/// True when the file at `path` (`size` bytes) is Git LFS pointer text: under
/// 1024 bytes and its first line is "version https://git-lfs.github.com/spec/v1".
bool LooksLikeLfsPointer(const std::string& path, uint64_t size);
Result<std::string> CreateRepo(const Session& s, const std::string& repo_id, RepoType repo_type, bool private_repo);
Result<CommitInfo> CreateCommit(const Session& s, const UploadFolderRequest& request,
                                const std::vector<CommitAdd>& additions, const std::vector<std::string>& deletions);

// upload_folder.cc
Result<CommitInfo> UploadFolder(const Session& s, const UploadFolderRequest& request);

}  // namespace hubload::hub_internal::upload
