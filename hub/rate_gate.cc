// The shared 429 pause (hub/rate_gate.h).
#include "hub/rate_gate.h"

#include <algorithm>

#include "hub/url.h"

namespace hubload::hub_internal {

std::string RateKey(std::string_view url) {
  std::string origin = UrlOrigin(url);
  size_t scheme = url.find("://");
  size_t path_at = scheme == std::string_view::npos ? 0 : url.find('/', scheme + 3);
  std::string_view path = path_at == std::string_view::npos ? std::string_view() : url.substr(path_at);
  path = path.substr(0, path.find_first_of("?#"));
  if (path.find("/resolve/") != std::string_view::npos || path.find("/raw/") != std::string_view::npos)
    return origin + " resolvers";
  if (path.find("/api/") != std::string_view::npos) return origin + " api";
  return origin;
}

RateGate::Clock::time_point RateGate::Close(std::string_view url, double wait_s, const HttpResponse& answer) {
  const auto until =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::max(0.0, wait_s)));
  std::lock_guard<std::mutex> l(mu_);
  Entry& e = gates_[RateKey(url)];
  if (until > e.until) {
    e.until = until;
    e.answer = answer;
  }
  return e.until;
}

double RateGate::Remaining(std::string_view url, Clock::time_point waited_until, HttpResponse* answer) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = gates_.find(RateKey(url));
  if (it == gates_.end()) return 0;
  const auto from = std::max(Clock::now(), waited_until);
  if (it->second.until <= from) return 0;
  if (answer) *answer = it->second.answer;
  return std::chrono::duration<double>(it->second.until - from).count();
}

}  // namespace hubload::hub_internal
