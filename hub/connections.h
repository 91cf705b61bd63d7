// Private to hub/: how many connections the download scheduler uses at once.
//
// A hill climb on measured throughput, in windows of at least `window_s`
// seconds and `window_min_bytes` bytes during which every allowed connection
// had work (a window with idle capacity says nothing and is dropped):
//  - it starts at `start` and first tries one level up (levels 1, 2, 3, 4, 6,
//    8, 12, 16, 24, 32, ... capped at max); a step up is kept while it brings
//    at least `gain` (default +10%) over the level below, else it goes back;
//  - after a failed step up it tries one level down; a step down is kept
//    while it loses less than `tolerance` (5%): with equal throughput fewer
//    connections win (on one link shared by all connections, e.g. a capped
//    uplink, one stream already fills it and files then complete in order);
//  - every `hold_windows` windows on a plateau it probes again, alternating;
//  - a throttling answer (429, 503) halves the count at once (never below
//    `min`; a burst of such answers within one window counts once) and
//    blocks steps up for 2 x hold_windows windows.
// Pinned(n) never changes. Deterministic: the caller passes the clock and the
// byte counter (tests/hub/connections_test.cc drives it with model links).
//
// Thread safety: none; the scheduler calls it under its own lock.
#pragma once

#include <cstdint>
#include <map>

namespace hubload::hub_internal {

class ConnectionController {
 public:
  struct Options {
    int min = 1;
    int max = 8;
    int start = 2;
    double window_s = 0.25;
    uint64_t window_min_bytes = 1 << 20;
    double gain = 1.10;
    double tolerance = 0.95;
    int hold_windows = 6;
  };
  explicit ConnectionController(Options o);
  /// A controller that always answers `n` (>= 1).
  static ConnectionController Pinned(int n);

  /// Connections allowed now.
  int limit() const { return n_; }
  /// `total_bytes`: body bytes received so far by the whole download;
  /// `now_s`: a monotonic clock; `saturated`: every allowed connection had
  /// work since the previous call.
  void Sample(uint64_t total_bytes, double now_s, bool saturated);
  /// The server answered 429/503 (a retry is coming).
  void Throttled(double now_s);
  /// Number of windows measured (for tests).
  int windows() const { return windows_; }

 private:
  enum class Phase { kHold, kUp, kDown };
  int Up(int n) const;
  int Down(int n) const;
  void Move(int to, Phase p);

  Options o_;
  bool pinned_ = false;
  int n_ = 1;
  int from_ = 1;
  Phase phase_ = Phase::kHold;
  int hold_left_ = 1;
  bool next_probe_up_ = true;
  int no_up_windows_ = 0;
  bool started_ = false;
  bool window_valid_ = true;
  double window_t_ = 0;
  uint64_t window_bytes_ = 0;
  int windows_ = 0;
  double last_throttle_t_ = -1e300;
  std::map<int, double> rate_;  // bytes/s measured at each level (latest)
};

}  // namespace hubload::hub_internal
