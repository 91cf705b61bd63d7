// The server's JSON-lines access log and its request/byte counters.
#pragma once

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

#include "hub/server/http.h"
#include "hubload/server.h"
#include "hubload/status.h"

namespace hubload::server::internal {

class AccessLog {
 public:
  ~AccessLog();
  /// Opens `path` for appending ("" = no log file). Errors: kIOError.
  Status Open(const std::string& path);
  void Close();

  /// Counts a request and the body bytes planned for it (before the answer
  /// goes out, so a client that read it sees the counters).
  void Count(const Request& r, uint64_t bytes);
  /// Takes back bytes that were planned but not sent (a short write).
  void Uncount(const Request& r, uint64_t bytes);
  /// Writes one line: {"time","method","path","status","bytes","range"} (+
  /// "listener":"cdn", "unproven":true). Never the query or headers.
  void Write(const Request& r, int status, uint64_t bytes, bool unproven);

  ServerStats Stats() const;
  uint64_t RequestCount(const std::string& path_substring) const;
  void Reset();

 private:
  mutable std::mutex stats_mu_;
  ServerStats stats_;
  std::mutex file_mu_;
  std::FILE* file_ = nullptr;
};

}  // namespace hubload::server::internal
