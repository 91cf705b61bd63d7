// Private to hub/: the pause that every request of one client shares after a
// 429 (field failure B38). Rate limits are counted per endpoint group and per
// client address, so when one worker is told to wait, the others would only
// burn their retries on the same 429: they wait at the gate instead, and all
// resume together when the announced reset time has passed.
//
// Thread safety: RateGate is safe to use from many threads at once.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "hubload/transport.h"

namespace hubload::hub_internal {

/// The rate-limit group a request URL counts against, as the Hub groups its
/// limits (hub-docs rate-limits.md): "<origin> resolvers" for paths holding
/// /resolve/ or /raw/, "<origin> api" for /api/, "<origin>" for anything else
/// (a CDN, upload URLs). A path prefix in front (B41) does not change it.
std::string RateKey(std::string_view url);

class RateGate {
 public:
  using Clock = std::chrono::steady_clock;
  /// Closes the gate of `url`'s group for `wait_s` seconds from now (a later
  /// closing time already set is kept) and keeps `answer` (the 429) for
  /// requests that will not wait. Returns the gate's closing end.
  Clock::time_point Close(std::string_view url, double wait_s, const HttpResponse& answer);
  /// Seconds a request to `url` must still wait, 0 when the gate is open or
  /// when the caller already waited until `waited_until` (its own sleep after
  /// the 429 it received). When > 0 and `answer` is set, *answer receives the
  /// 429 that closed the gate.
  double Remaining(std::string_view url, Clock::time_point waited_until, HttpResponse* answer) const;

 private:
  struct Entry {
    Clock::time_point until{};
    HttpResponse answer;
  };
  mutable std::mutex mu_;
  std::map<std::string, Entry> gates_;
};

}  // namespace hubload::hub_internal
