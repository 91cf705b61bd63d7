// A `hubload serve` instance for tests (header-only; link the test with hubload_server).
//
//   auto hub = hubload::testing::StartTestHub();
//   std::string commit = hub->AddRepo("org/model", {{"config.json", "{}"}, {"model.safetensors", bytes}});
//   ... point the client at hub->url() ...
// The server binds 127.0.0.1 on a free port, its CDN listener the same address on
// another; both stop and the store is deleted when the TestHub is destroyed.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "hubload/server.h"
#include "testing/util.h"

namespace hubload::testing {

struct TestHub {
  TempDir root;  // the store; destroyed after the server (declared first)
  std::unique_ptr<server::Server> server;

  std::string url() const { return server->url(); }
  server::Faults& faults() { return server->faults(); }

  /// Creates (or replaces the tree of) repo `repo_id` with {path -> bytes};
  /// returns the commit id, or "" after ADD_FAILURE on error. Set
  /// options.lfs_threshold_bytes small to force small files through LFS.
  std::string AddRepo(const std::string& repo_id, const std::map<std::string, std::string>& files,
                      const server::CreateRepoOptions& options = {}) {
    auto c = server::CreateRepoFromFiles(root.str(), repo_id, files, options);
    if (!c.ok()) {
      ADD_FAILURE() << "AddRepo " << repo_id << ": " << c.status().ToString();
      return "";
    }
    return *c;
  }

  /// New commit on `branch` replacing one file (new etag); returns the commit id.
  std::string Replace(const std::string& repo_id, const std::string& path, const std::string& content,
                      const server::CommitOptions& options = {}) {
    auto c = server::ReplaceFile(root.str(), repo_id, path, content, options);
    if (!c.ok()) {
      ADD_FAILURE() << "Replace " << repo_id << "/" << path << ": " << c.status().ToString();
      return "";
    }
    return *c;
  }
};

/// Repo options that store every file of 1 KiB or more in LFS (sha256 etag,
/// bytes from the CDN listener), so small test files take the LFS paths.
inline server::CreateRepoOptions SmallLfs() {
  server::CreateRepoOptions o;
  o.lfs_threshold_bytes = 1024;
  return o;
}

/// Starts a server over a fresh temporary store. `options.root` is ignored.
/// Returns nullptr after ADD_FAILURE when the server cannot start.
inline std::unique_ptr<TestHub> StartTestHub(server::ServerOptions options = {}) {
  auto hub = std::make_unique<TestHub>();
  options.root = hub->root.str();
  auto s = server::Server::Start(std::move(options));
  if (!s.ok()) {
    ADD_FAILURE() << "cannot start hubload serve: " << s.status().ToString();
    return nullptr;
  }
  hub->server = std::move(*s);
  return hub;
}

}  // namespace hubload::testing
