// Fault switches of `hubload serve` (see hubload/server.h).
#include "hubload/server_faults.h"

#include <algorithm>
#include <thread>

namespace hubload::server {
namespace {
bool Matches(const std::string& sub, const std::string& path) { return sub.empty() || path.find(sub) != std::string::npos; }
}  // namespace

Faults::Faults(const Faults& other) { *this = other; }

Faults& Faults::operator=(const Faults& other) {
  if (this == &other) return *this;
  std::scoped_lock lock(mu_, other.mu_);
  status_rules_ = other.status_rules_;
  drop_rules_ = other.drop_rules_;
  stall_rules_ = other.stall_rules_;
  replace_rules_ = other.replace_rules_;
  latency_ms_ = other.latency_ms_;
  bandwidth_ = other.bandwidth_;
  total_bandwidth_ = other.total_bandwidth_;
  ignore_range_ = other.ignore_range_;
  strip_length_ = other.strip_length_;
  rate_rules_ = other.rate_rules_;
  for (auto& r : rate_rules_) {
    r.started = false;
    r.used = 0;
  }
  redirect_rules_ = other.redirect_rules_;
  signed_ttl_s_ = other.signed_ttl_s_;
  url_byte_budget_ = other.url_byte_budget_;
  url_bytes_used_.clear();
  path_prefix_ = other.path_prefix_;
  return *this;
}

void Faults::SetStatusForNext(std::string path_substring, int status, int count, int retry_after_s) {
  std::lock_guard<std::mutex> lock(mu_);
  status_rules_.push_back({std::move(path_substring), status, count, retry_after_s});
}

void Faults::SetDropAfterBytes(std::string path_substring, uint64_t after_bytes, int count) {
  std::lock_guard<std::mutex> lock(mu_);
  drop_rules_.push_back({std::move(path_substring), after_bytes, count});
}

void Faults::SetStallAfterBytes(std::string path_substring, uint64_t after_bytes, int stall_ms, int count) {
  std::lock_guard<std::mutex> lock(mu_);
  stall_rules_.push_back({std::move(path_substring), after_bytes, stall_ms < 0 ? 0 : stall_ms, count});
}

void Faults::SetLatencyMs(int ms) {
  std::lock_guard<std::mutex> lock(mu_);
  latency_ms_ = ms < 0 ? 0 : ms;
}

void Faults::SetBandwidthBytesPerSec(uint64_t bytes_per_s) {
  std::lock_guard<std::mutex> lock(mu_);
  bandwidth_ = bytes_per_s;
}

void Faults::SetTotalBandwidthBytesPerSec(uint64_t bytes_per_s) {
  std::lock_guard<std::mutex> lock(mu_);
  total_bandwidth_ = bytes_per_s;
  link_free_at_ = std::chrono::steady_clock::now();
}

uint64_t Faults::total_bandwidth_bytes_per_s() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_bandwidth_;
}

void Faults::ThrottleTotal(uint64_t n, const std::atomic<bool>& stopping) {
  using Clock = std::chrono::steady_clock;
  Clock::time_point due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (total_bandwidth_ == 0) return;
    auto now = Clock::now();
    // An idle link accumulates at most 20 ms of credit (no long bursts).
    auto earliest = now - std::chrono::milliseconds(20);
    if (link_free_at_ < earliest) link_free_at_ = earliest;
    link_free_at_ += std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(static_cast<double>(n) / static_cast<double>(total_bandwidth_)));
    due = link_free_at_;
  }
  while (!stopping.load() && Clock::now() < due)
    std::this_thread::sleep_for(std::min<Clock::duration>(due - Clock::now(), std::chrono::milliseconds(50)));
}

void Faults::SetIgnoreRange(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  ignore_range_ = on;
}

void Faults::SetStripContentLength(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  strip_length_ = on;
}

void Faults::ReplaceFileAfter(std::string path_substring, int after_requests, std::string repo_id,
                              std::string path_in_repo, std::string new_content, RepoType repo_type,
                              std::string branch) {
  std::lock_guard<std::mutex> lock(mu_);
  replace_rules_.push_back({std::move(path_substring), after_requests < 1 ? 1 : after_requests, std::move(repo_id),
                            std::move(path_in_repo), std::move(new_content), repo_type, std::move(branch)});
}

void Faults::SetRateLimit(std::string group, int quota, int window_s, unsigned hints) {
  std::lock_guard<std::mutex> lock(mu_);
  rate_rules_.erase(std::remove_if(rate_rules_.begin(), rate_rules_.end(),
                                   [&](const RateLimitRule& r) { return r.group == group; }),
                    rate_rules_.end());
  if (quota < 0) return;
  RateLimitRule r;
  r.group = std::move(group);
  r.quota = quota;
  r.window_s = window_s < 1 ? 1 : window_s;
  r.hints = hints;
  rate_rules_.push_back(std::move(r));
}

std::optional<Faults::RateDecision> Faults::TakeRate(const std::string& group) {
  using Clock = std::chrono::steady_clock;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& r : rate_rules_) {
    if (r.group != group) continue;
    auto now = Clock::now();
    auto window = std::chrono::seconds(r.window_s);
    if (!r.started || now >= r.window_start + window) {
      r.started = true;
      r.window_start = now;
      r.used = 0;
    }
    RateDecision d;
    d.group = r.group;
    d.quota = r.quota;
    d.window_s = r.window_s;
    d.hints = r.hints;
    auto left = r.window_start + window - now;
    d.reset_s = static_cast<int>((std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 999) / 1000);
    if (r.used >= r.quota) {
      d.limited = true;
      d.remaining = 0;
    } else {
      ++r.used;
      d.remaining = r.quota - r.used;
    }
    return d;
  }
  return std::nullopt;
}

void Faults::SetRedirect(std::string from_prefix, std::string to_prefix, int status, RedirectForm form, int count) {
  std::lock_guard<std::mutex> lock(mu_);
  redirect_rules_.push_back({std::move(from_prefix), std::move(to_prefix), status, form, count});
}

std::optional<Faults::RedirectRule> Faults::TakeRedirect(const std::string& raw_path) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = redirect_rules_.begin(); it != redirect_rules_.end(); ++it) {
    if (raw_path.compare(0, it->from_prefix.size(), it->from_prefix) != 0) continue;
    RedirectRule r = *it;
    if (it->remaining > 0 && --it->remaining == 0) redirect_rules_.erase(it);
    return r;
  }
  return std::nullopt;
}

void Faults::SetSignedUrlTtl(int seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  signed_ttl_s_ = seconds < 0 ? 0 : seconds;
}

void Faults::SetSignedUrlByteBudget(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  url_byte_budget_ = bytes;
  url_bytes_used_.clear();
}

uint64_t Faults::ReserveUrlBytes(const std::string& sig, uint64_t want) {
  std::lock_guard<std::mutex> lock(mu_);
  if (url_byte_budget_ == 0) return want;
  uint64_t& used = url_bytes_used_[sig];
  uint64_t allowed = used >= url_byte_budget_ ? 0 : std::min(want, url_byte_budget_ - used);
  used += allowed;
  return allowed;
}

void Faults::ReleaseUrlBytes(const std::string& sig, uint64_t unused) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = url_bytes_used_.find(sig);
  if (it != url_bytes_used_.end()) it->second -= std::min(unused, it->second);
}

void Faults::SetPathPrefix(std::string prefix) {
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (!prefix.empty() && prefix[0] != '/') prefix = "/" + prefix;
  std::lock_guard<std::mutex> lock(mu_);
  path_prefix_ = std::move(prefix);
}

int Faults::signed_url_ttl_s() const {
  std::lock_guard<std::mutex> lock(mu_);
  return signed_ttl_s_;
}
uint64_t Faults::signed_url_byte_budget() const {
  std::lock_guard<std::mutex> lock(mu_);
  return url_byte_budget_;
}
std::string Faults::path_prefix() const {
  std::lock_guard<std::mutex> lock(mu_);
  return path_prefix_;
}

void Faults::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  status_rules_.clear();
  drop_rules_.clear();
  stall_rules_.clear();
  replace_rules_.clear();
  latency_ms_ = 0;
  bandwidth_ = 0;
  total_bandwidth_ = 0;
  ignore_range_ = false;
  strip_length_ = false;
  rate_rules_.clear();
  redirect_rules_.clear();
  signed_ttl_s_ = 0;
  url_byte_budget_ = 0;
  url_bytes_used_.clear();
  path_prefix_.clear();
}

std::optional<Faults::StatusRule> Faults::TakeStatus(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = status_rules_.begin(); it != status_rules_.end(); ++it) {
    if (!Matches(it->path_substring, path)) continue;
    StatusRule r = *it;
    if (it->remaining > 0 && --it->remaining == 0) status_rules_.erase(it);
    return r;
  }
  return std::nullopt;
}

std::optional<uint64_t> Faults::TakeDrop(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = drop_rules_.begin(); it != drop_rules_.end(); ++it) {
    if (!Matches(it->path_substring, path)) continue;
    uint64_t n = it->after_bytes;
    if (it->remaining > 0 && --it->remaining == 0) drop_rules_.erase(it);
    return n;
  }
  return std::nullopt;
}

std::optional<Faults::StallRule> Faults::TakeStall(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = stall_rules_.begin(); it != stall_rules_.end(); ++it) {
    if (!Matches(it->path_substring, path)) continue;
    StallRule r = *it;
    if (it->remaining > 0 && --it->remaining == 0) stall_rules_.erase(it);
    return r;
  }
  return std::nullopt;
}

std::vector<Faults::ReplaceRule> Faults::TakeDueReplacements(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ReplaceRule> due;
  for (auto it = replace_rules_.begin(); it != replace_rules_.end();) {
    if (Matches(it->path_substring, path) && --it->remaining_requests <= 0) {
      due.push_back(*it);
      it = replace_rules_.erase(it);
    } else {
      ++it;
    }
  }
  return due;
}

int Faults::latency_ms() const {
  std::lock_guard<std::mutex> lock(mu_);
  return latency_ms_;
}
uint64_t Faults::bandwidth_bytes_per_s() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bandwidth_;
}
bool Faults::ignore_range() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ignore_range_;
}
bool Faults::strip_content_length() const {
  std::lock_guard<std::mutex> lock(mu_);
  return strip_length_;
}

}  // namespace hubload::server
