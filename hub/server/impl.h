// Server::Impl: the state of one running `hubload serve` and its handlers.
// Files by responsibility:
//   listener.cc          Start/Stop, acceptors, one thread per connection
//   connection.cc        Beast reads/writes with the byte-level faults
//   upload_put.cc        streaming LFS PUT bodies to files
//   router.cc            request building, fault rules, routing, access checks, guard
//   addresses.cc         URLs handed out (Host / public_url / prefix / CDN)
//   handlers_download.cc resolve, raw, ranges, conditional requests, CDN
//   handlers_metadata.cc repo info, tree, paths-info
//   handlers_upload.cc   repo create, preupload, LFS batch, multipart completion
//   handlers_commit.cc   NDJSON commit
//   handlers_refs.cc     branches, tags, refs, commits, commit/discussion pages
//   mirror.cc            start-up completeness report, pull-through upstream
// No Beast or Asio here: only listener.cc, connection.cc and upload_put.cc
// include them (connection.h).
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "hub/server/access_log.h"
#include "hub/server/http.h"
#include "hub/server/signing.h"
#include "hub/server/store_internal.h"
#include "hubload/server.h"

namespace hubload::server {

namespace internal {
class Upstream;  // mirror.cc

/// Test hook (tests/server only; unset in production): called with every
/// request inside Dispatch's guard, before routing, so a test can make a
/// handler throw and check the 500 path. Thread-safe; nullptr unsets it.
void SetDispatchHookForTesting(std::function<void(const Request&)> hook);
}  // namespace internal

struct Server::Impl {
  ServerOptions opt;
  std::filesystem::path root;
  Faults* faults = nullptr;  // points at opt.faults
  std::atomic<bool> stopping{false};
  uint16_t hub_port = 0, cdn_port = 0;
  internal::Signer signer;
  internal::AccessLog log;
  std::mutex upload_mu;  // multipart completion and PR numbering
  std::shared_ptr<internal::Upstream> upstream;

  struct Net;  // acceptors and connection bookkeeping (listener.cc)
  std::unique_ptr<Net> net;

  Impl();
  ~Impl();

  // ---- addresses (addresses.cc) ----
  /// opt.host as a URL host (0.0.0.0 -> 127.0.0.1, :: -> [::1], [v6]).
  std::string UrlHost() const;
  /// "http://host:port" of the hub listener + the path prefix (or public_url).
  std::string HubUrl() const;
  /// The base of URLs handed out in answers to `r` (see ServerOptions::public_url).
  std::string Base(const internal::Request& r) const;
  /// "http://cdn-host:cdn-port" for answers to `r` (null: no request).
  std::string CdnUrl(const internal::Request* r) const;
  /// TTL of signed URLs handed out now.
  int SignedTtl() const;

  // ---- requests (router.cc) ----
  /// Fills path, route_path, query, token, host of a request whose method,
  /// target and headers are set.
  void Prepare(internal::Request& r) const;
  /// Answers that do not need the body: path prefix 404, injected status,
  /// rate limit, redirect. Counts the request against rate limits.
  std::optional<internal::Response> Early(internal::Request& r);
  /// Routes a request with its body; never throws (a handler exception is
  /// a 500 with a log line).
  internal::Response Dispatch(internal::Request& r);
  internal::Response Route(internal::Request& r);
  internal::Response RouteApi(internal::Request& r, const std::vector<std::string>& seg);
  internal::Response RouteWeb(internal::Request& r, const std::vector<std::string>& seg);
  /// Fault replacements due after `r` (committed before its answer goes out).
  void ApplyReplacements(const internal::Request& r);

  enum class Need { kRead, kDownload, kWrite };
  std::optional<internal::Response> CheckAccess(const internal::Request& r, const std::string& repo_id,
                                                const std::filesystem::path& repo_dir, Need need) const;
  /// RepoDir + CheckAccess: the repo folder, or the error answer.
  std::optional<internal::Response> OpenRepo(const internal::Request& r, RepoType type, const std::string& repo_id,
                                             Need need, std::filesystem::path* repo_dir) const;
  bool RepoExists(RepoType type, const std::string& repo_id) const;

  // ---- downloads (handlers_download.cc) ----
  internal::Response ServeFile(const internal::Request& r, internal::Response base, const std::filesystem::path& file,
                               uint64_t size, const std::string& etag);
  internal::Response Resolve(internal::Request& r, RepoType type, const std::string& repo_id, const std::string& rev,
                             const std::string& path, bool raw);
  internal::Response HandleCdn(internal::Request& r);

  // ---- metadata (handlers_metadata.cc) ----
  internal::Response RepoInfo(internal::Request& r, RepoType type, const std::string& repo_id, const std::string& rev);
  internal::Response Tree(internal::Request& r, RepoType type, const std::string& repo_id, const std::string& rev,
                          const std::string& path);
  internal::Response PathsInfo(internal::Request& r, RepoType type, const std::string& repo_id,
                               const std::string& rev);

  // ---- uploads (handlers_upload.cc, handlers_commit.cc) ----
  internal::Response CreateRepo(internal::Request& r);
  internal::Response UpdateSettings(internal::Request& r, RepoType type, const std::string& repo_id);
  internal::Response Preupload(internal::Request& r, RepoType type, const std::string& repo_id, const std::string& rev);
  internal::Response LfsBatch(internal::Request& r, RepoType type, const std::string& repo_id);
  internal::Response LfsComplete(internal::Request& r, const std::string& folder, const std::string& oid,
                                 uint64_t size);
  internal::Response LfsVerify(internal::Request& r, const std::string& folder, const std::string& oid, uint64_t size);
  internal::Response CommitApi(internal::Request& r, RepoType type, const std::string& repo_id, const std::string& rev);

  // ---- refs (handlers_refs.cc) ----
  internal::Response Branch(internal::Request& r, RepoType type, const std::string& repo_id, const std::string& name);
  internal::Response Tag(internal::Request& r, RepoType type, const std::string& repo_id, const std::string& name);
  internal::Response Refs(internal::Request& r, RepoType type, const std::string& repo_id);
  internal::Response Commits(internal::Request& r, RepoType type, const std::string& repo_id, const std::string& rev);
  internal::Response CommitPage(internal::Request& r, RepoType type, const std::string& repo_id,
                                const std::string& oid);
  internal::Response DiscussionPage(internal::Request& r, RepoType type, const std::string& repo_id,
                                    const std::string& num);

  // ---- mirror (mirror.cc) ----
  /// Logs which snapshots of plain-cache repos may be partial (no listing) or
  /// miss listed files.
  void ReportMirrorCompleteness() const;
  /// Fetches a listed-but-absent file from the upstream into the store (once
  /// per file however many requests ask at once). Errors: kEntryNotFound when
  /// there is no upstream, the upstream's errors otherwise.
  Status PullThrough(RepoType type, const std::string& repo_id, const std::string& commit, const std::string& path);
};

/// Builds an Impl without listeners (tests, fuzz targets): options checked,
/// root canonical, key drawn, access log open. Errors as Server::Start.
Result<std::unique_ptr<Server::Impl>> NewServerImpl(ServerOptions options);

/// Maps a store Status to the Hub's error answer (404 + X-Error-Code, 409, 412, 400, 500).
internal::Response StatusResponse(const Status& s);

}  // namespace hubload::server
