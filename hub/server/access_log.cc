// Access log and counters (hub/server/access_log.h).
#include "hub/server/access_log.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "hub/server/store_internal.h"

namespace hubload::server::internal {

AccessLog::~AccessLog() { Close(); }

Status AccessLog::Open(const std::string& path) {
  if (path.empty()) return Status::Ok();
  file_ = std::fopen(path.c_str(), "a");
  if (!file_) return Status(Code::kIOError, "cannot open access log " + path);
  return Status::Ok();
}

void AccessLog::Close() {
  std::lock_guard<std::mutex> lock(file_mu_);
  if (file_) std::fclose(file_);
  file_ = nullptr;
}

void AccessLog::Count(const Request& r, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.requests++;
  stats_.body_bytes_sent += bytes;
  stats_.requests_per_path[r.path]++;
  stats_.body_bytes_per_path[r.path] += bytes;
}

void AccessLog::Uncount(const Request& r, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.body_bytes_sent -= std::min(bytes, stats_.body_bytes_sent);
  stats_.body_bytes_per_path[r.path] -= std::min(bytes, stats_.body_bytes_per_path[r.path]);
}

void AccessLog::Write(const Request& r, int status, uint64_t bytes, bool unproven) {
  std::lock_guard<std::mutex> lock(file_mu_);
  if (!file_) return;
  nlohmann::json j{{"time", NowIso8601()}, {"method", r.method}, {"path", r.path}, {"status", status}, {"bytes", bytes}};
  std::string range = r.Header("range");
  j["range"] = range.empty() ? nlohmann::json(nullptr) : nlohmann::json(range);
  if (r.cdn) j["listener"] = "cdn";
  if (unproven) j["unproven"] = true;
  std::string line = DumpJson(j) + "\n";
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
}

ServerStats AccessLog::Stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

uint64_t AccessLog::RequestCount(const std::string& path_substring) const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  uint64_t n = 0;
  for (auto& [p, c] : stats_.requests_per_path)
    if (p.find(path_substring) != std::string::npos) n += c;
  return n;
}

void AccessLog::Reset() {
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_ = ServerStats{};
}

}  // namespace hubload::server::internal
