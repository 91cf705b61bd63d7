// Reading the JSON-lines access log of the in-process `hubload serve` in hub
// tests (which requests went out, with which Range, and how many body bytes
// the server sent), plus the shared byte generator of these tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "testing/util.h"

namespace hubload::testing {

struct LogLine {
  std::string method, path, range;
  int status = 0;
  uint64_t bytes = 0;
};

/// GET lines of `log` whose path contains `needle`. Waits 300 ms first: the
/// server writes a line after the last byte, possibly after the client returned.
inline std::vector<LogLine> Gets(const std::string& log, const std::string& needle) {
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::vector<LogLine> out;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
    LogLine l;
    l.method = j.value("method", "");
    l.path = j.value("path", "");
    l.status = j.value("status", 0);
    l.range = j.contains("range") && j["range"].is_string() ? j["range"].get<std::string>() : "";
    l.bytes = j.value("bytes", uint64_t{0});
    if (l.method == "GET" && l.path.find(needle) != std::string::npos) out.push_back(l);
  }
  return out;
}

inline uint64_t SumBytes(const std::vector<LogLine>& v) {
  uint64_t n = 0;
  for (auto& l : v) n += l.bytes;
  return n;
}

/// "bytes=a-b" -> (a, b); (a, -1) for "bytes=a-"; (-1, -1) when absent.
inline std::pair<int64_t, int64_t> ParseRange(const std::string& r) {
  if (r.rfind("bytes=", 0) != 0) return {-1, -1};
  auto dash = r.find('-');
  if (dash == std::string::npos || dash + 1 >= r.size()) return {std::stoll(r.substr(6, dash - 6)), -1};
  return {std::stoll(r.substr(6, dash - 6)), std::stoll(r.substr(dash + 1))};
}

}  // namespace hubload::testing
