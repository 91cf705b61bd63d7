// Shared by the hub tests of the field failures (failures_test.cc,
// rate_limit, signed_url_expiry, readonly_cache, endpoint_prefix, proxy, auth_errors,
// quant_select_test.cc): client options for the in-process `hubload serve`, the
// test's own bytes and hashes, and the server's JSON-lines access log.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hubload/hub.h"
#include "testing/hub_server.h"
#include "testing/util.h"

namespace hubload::testing::field {

inline constexpr uint64_t kMiB = 1024 * 1024;

using hubload::testing::PatternBytes;
using hubload::testing::SmallLfs;

inline std::string Sha256(const std::string& s) { return hubload::testing::Sha256Hex(s.data(), s.size()); }

inline std::string FileSha256(const std::filesystem::path& p) {
  auto b = hubload::testing::ReadFileBytes(p);
  return hubload::testing::Sha256Hex(b.data(), b.size());
}

inline hubload::ClientOptions Opts(const TestHub& hub, const std::string& cache) {
  hubload::ClientOptions o;
  o.config.endpoint = hub.url();
  o.config.cache_dir = cache;
  o.config.token = "";
  o.config.offline = false;
  o.retry.initial_backoff_s = 0.01;
  o.retry.max_backoff_s = 0.05;
  o.retry.jitter_fraction = 0;
  o.retry.max_total_s = 10;
  o.transport_options.low_speed_time_s = 5;
  o.config.download_timeout_s = 5;
  o.lock_timeout_s = 60;
  return o;
}

inline hubload::FileRequest Req(const std::string& repo, const std::string& file) {
  hubload::FileRequest r;
  r.repo_id = repo;
  r.filename = file;
  return r;
}

inline std::unique_ptr<TestHub> HubWithLog(const TempDir& logs, hubload::server::Faults faults = {}) {
  hubload::server::ServerOptions so;
  so.access_log = logs.str() + "/access.log";
  so.faults = faults;
  return StartTestHub(so);
}

// Access-log lines (one JSON object each). Stops the server first so that
// every answer, including one cut short, has been logged.
inline std::vector<nlohmann::json> AccessLog(TestHub& hub, const TempDir& logs) {
  hub.server->Stop();
  std::vector<nlohmann::json> out;
  std::ifstream in(logs.str() + "/access.log");
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

// Requests with `method` whose path contains `needle`.
inline std::vector<nlohmann::json> Lines(const std::vector<nlohmann::json>& log, const std::string& method,
                                         const std::string& needle) {
  std::vector<nlohmann::json> out;
  for (auto& j : log)
    if (j.value("method", "") == method && j.value("path", "").find(needle) != std::string::npos) out.push_back(j);
  return out;
}

// Sets environment variables for the scope of one test and restores them.
class ScopedEnv {
 public:
  void Set(const std::string& k, const std::string& v) {
    if (!saved_.count(k)) {
      const char* old = std::getenv(k.c_str());
      saved_[k] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    ::setenv(k.c_str(), v.c_str(), 1);
  }
  void Unset(const std::string& k) {
    Set(k, "");
    ::unsetenv(k.c_str());
  }
  ~ScopedEnv() {
    for (auto& [k, v] : saved_) {
      if (v)
        ::setenv(k.c_str(), v->c_str(), 1);
      else
        ::unsetenv(k.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

}  // namespace hubload::testing::field
