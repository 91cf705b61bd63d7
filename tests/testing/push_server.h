// Shared fixtures of the upload and push tests (tests/hub/upload_test.cc,
// tests/pipeline/push_*_test.cc): the suites' one in-process `hubload serve`
// (testing/hub_server.h) with tokens and multipart uploads, a transport that
// records every request it forwards, and
// helpers that read the server's store directly (the independent view of
// what was committed).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "hubload/server.h"
#include "hubload/transport.h"
#include "hubload/upload.h"
#include "testing/hub_server.h"
#include "testing/util.h"

namespace hubload::pushtest {
namespace fs = std::filesystem;
using hubload::testing::PatternBytes;

inline constexpr const char* kToken = "hf_pushtest_token_123";

/// Every request that went through, as seen below the retry layer.
struct Recorded {
  std::string method;
  std::string url;         // as sent (query included: test-local only)
  uint64_t body_bytes = 0; // body length declared for the request
  bool body_from_file = false;
  int status = 0;          // 0 when the transport failed
};

/// Forwards to `inner` and records each request (thread-safe).
class RecordingTransport : public HttpTransport {
 public:
  explicit RecordingTransport(std::shared_ptr<HttpTransport> inner) : inner_(std::move(inner)) {}
  Result<HttpResponse> Send(const HttpRequest& req, BodySink* sink) override {
    auto r = inner_->Send(req, sink);
    Recorded rec;
    rec.method = req.method;
    rec.url = req.url;
    rec.body_from_file = req.body_file.has_value();
    rec.body_bytes = req.body_file ? req.body_file->length : req.body.size();
    rec.status = r.ok() ? r->status : 0;
    std::lock_guard<std::mutex> l(mu_);
    log_.push_back(rec);
    return r;
  }
  std::vector<Recorded> log() const {
    std::lock_guard<std::mutex> l(mu_);
    return log_;
  }
  void Clear() {
    std::lock_guard<std::mutex> l(mu_);
    log_.clear();
  }

 private:
  std::shared_ptr<HttpTransport> inner_;
  mutable std::mutex mu_;
  std::vector<Recorded> log_;
};

inline std::string ReadText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// A server on port 0 with a fresh store, plus upload options pointing at it
/// through a RecordingTransport over curl with fast retries.
class PushServer {
 public:
  explicit PushServer(uint64_t multipart_chunk = 64 * 1024) {
    server::ServerOptions so;
    so.tokens = {kToken};
    so.multipart_chunk_size = multipart_chunk;
    so.access_log = (log_dir_.path() / "access.jsonl").string();
    // One accepting thread: the server names a part's temp file after the
    // socket object's address masked to 24 bits, and sockets allocated by two
    // accept threads (two malloc arenas) can share those bits, so concurrent
    // part PUTs of one object could overwrite each other's temp file (server
    // issue reported to the lead). With one accept thread every live socket has
    // a distinct address and the parts still upload in parallel.
    so.threads = 1;
    hub_ = testing::StartTestHub(so);  // so.root: the hub's own store
    if (!hub_) return;
    RetryPolicy fast;
    fast.max_retries = 3;
    fast.initial_backoff_s = 0.01;
    fast.max_backoff_s = 0.05;
    fast.max_total_s = 20;
    recorder_ = std::make_shared<RecordingTransport>(MakeCurlTransport());
    options_.config.endpoint = hub_->url();
    options_.config.token = kToken;
    options_.transport = MakeRetryingTransport(recorder_, fast);
    options_.upload_workers = 4;
  }

  server::Server& server() { return *hub_->server; }
  bool ok() const { return hub_ != nullptr; }
  ClientOptions& options() { return options_; }
  /// A client of this server (the one Hub session of uploads and downloads).
  HubClient client() const { return HubClient(options_); }
  /// Options of a plain client (no recording transport) that reads this
  /// server back into `cache_dir`: the independent download of what was pushed.
  ClientOptions ReaderOptions(const std::string& cache_dir) const {
    ClientOptions co;
    co.config.endpoint = hub_->url();
    co.config.token = kToken;
    co.config.cache_dir = cache_dir;
    return co;
  }
  RecordingTransport& recorder() { return *recorder_; }
  fs::path store() const { return hub_->root.path(); }
  fs::path RepoDir(const std::string& repo_id) const {
    return hub_->root.path() / hubload::RepoFolderName(repo_id, RepoType::kModel);
  }
  /// Head of `ref` read from the store's refs folder ("" when absent).
  std::string Ref(const std::string& repo_id, const std::string& ref = "main") const {
    fs::path p = RepoDir(repo_id) / "refs" / ref;
    std::error_code ec;
    if (!fs::exists(p, ec)) return "";
    std::string s = ReadText(p);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  }
  /// Number of snapshot folders (one per commit) in the store.
  size_t Snapshots(const std::string& repo_id) const {
    size_t n = 0;
    std::error_code ec;
    for (auto it = fs::directory_iterator(RepoDir(repo_id) / "snapshots", ec); !ec && it != fs::directory_iterator();
         it.increment(ec))
      ++n;
    return n;
  }
  /// Files of commit `commit` in the store: path -> bytes (symlinks followed).
  std::map<std::string, std::string> Tree(const std::string& repo_id, const std::string& commit) const {
    std::map<std::string, std::string> out;
    fs::path snap = RepoDir(repo_id) / "snapshots" / commit;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(snap, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      std::error_code ec2;
      if (!it->is_regular_file(ec2)) continue;
      out[it->path().lexically_relative(snap).generic_string()] = ReadText(it->path());
    }
    return out;
  }
  /// Number of PUT requests recorded (attempts, retries included).
  size_t Puts() const {
    size_t n = 0;
    for (auto& r : recorder_->log())
      if (r.method == "PUT") ++n;
    return n;
  }

 private:
  testing::TempDir log_dir_;
  std::unique_ptr<testing::TestHub> hub_;
  std::shared_ptr<RecordingTransport> recorder_;
  ClientOptions options_;
};

}  // namespace hubload::pushtest
