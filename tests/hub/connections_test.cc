// ConnectionController (hub/connections.h) driven by model links: the
// throughput each connection count gets is the model's (a hand-written
// function of n), the clock is simulated. No real time, no network.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "hub/connections.h"

using hubload::hub_internal::ConnectionController;

namespace {

constexpr double kMiB = 1 << 20;

struct Trace {
  std::vector<int> limits;  // limit after each window
  int max_seen = 0;
  int min_seen = 1 << 30;
};

// Runs `windows` windows of 0.3 s, each at the rate `link(n)` (bytes/s) for
// the controller's current n; `throttles(n)` says whether the server answers
// 429 at that n.
Trace Drive(ConnectionController& c, const std::function<double(int)>& link, int windows,
            const std::function<bool(int)>& throttles = nullptr) {
  Trace t;
  double now = 0;
  double bytes = 0;
  c.Sample(0, now, true);
  for (int w = 0; w < windows; ++w) {
    int n = c.limit();
    if (throttles && throttles(n)) c.Throttled(now + 0.01);
    for (int step = 0; step < 3; ++step) {  // three samples per window, as the scheduler calls often
      now += 0.1;
      bytes += link(n) * 0.1;
      c.Sample(static_cast<uint64_t>(bytes), now, true);
    }
    t.limits.push_back(c.limit());
    t.max_seen = std::max(t.max_seen, c.limit());
    t.min_seen = std::min(t.min_seen, c.limit());
  }
  return t;
}

ConnectionController Adaptive(int max = 8) {
  ConnectionController::Options o;
  o.max = max;
  return ConnectionController(o);
}

}  // namespace

TEST(ConnectionController, OneStreamFillsASharedLinkSoItSettlesOnOne) {
  // A 150 MB/s uplink shared by all connections; one connection alone reaches it.
  auto c = Adaptive();
  auto t = Drive(c, [](int n) { return 150e6; }, 60);
  EXPECT_EQ(t.limits.back(), 1);
  EXPECT_LE(t.max_seen, 3) << "it never spreads over many connections for nothing";
  int ones = 0;
  for (size_t i = 20; i < t.limits.size(); ++i) ones += t.limits[i] == 1;
  EXPECT_GE(ones, 30) << "most of the time on one connection";
}

TEST(ConnectionController, GrowsWhilePerConnectionCapsAddUp) {
  // Each connection is capped at 40 MB/s (a CDN per-connection limit).
  auto c = Adaptive(8);
  auto t = Drive(c, [](int n) { return 40e6 * n; }, 40);
  EXPECT_EQ(t.max_seen, 8);
  EXPECT_GE(std::count(t.limits.begin(), t.limits.end(), 8), 30);
  // It gets there within a few windows (2 -> 3 -> 4 -> 6 -> 8).
  EXPECT_EQ(t.limits[5], 8);
}

TEST(ConnectionController, StopsWhereMoreConnectionsBringNothing) {
  // Per-connection 50 MB/s, total capped at 160 MB/s: 4 connections fill it.
  auto c = Adaptive(16);
  auto t = Drive(c, [](int n) { return std::min(50e6 * n, 160e6); }, 80);
  int near = 0;
  for (size_t i = 20; i < t.limits.size(); ++i) {
    EXPECT_GE(t.limits[i], 2) << "window " << i;
    EXPECT_LE(t.limits[i], 6) << "window " << i;
    near += t.limits[i] == 3 || t.limits[i] == 4;
  }
  EXPECT_GE(near, 45) << "mostly where the link is full (3 or 4 connections)";
  EXPECT_LE(t.max_seen, 6);
}

TEST(ConnectionController, ThrottlingHalvesButNeverCollapses) {
  // 40 MB/s per connection; the server answers 429 whenever more than 4 are open.
  auto c = Adaptive(16);
  int throttled = 0;
  auto t = Drive(
      c, [](int n) { return 40e6 * std::min(n, 4); }, 120,
      [&](int n) {
        if (n > 4) ++throttled;
        return n > 4;
      });
  EXPECT_GT(throttled, 0);
  EXPECT_GE(t.min_seen, 1);
  for (size_t i = 10; i < t.limits.size(); ++i) EXPECT_GE(t.limits[i], 2) << "window " << i;
  // Time spent above the server's limit stays small.
  int above = 0;
  for (int l : t.limits) above += l > 4;
  EXPECT_LE(above, 12);
}

TEST(ConnectionController, PinnedNeverMoves) {
  auto c = ConnectionController::Pinned(3);
  auto t = Drive(c, [](int n) { return 40e6 * n; }, 20, [](int) { return true; });
  EXPECT_EQ(t.min_seen, 3);
  EXPECT_EQ(t.max_seen, 3);
}

TEST(ConnectionController, WindowsWithIdleConnectionsAreIgnored) {
  auto c = Adaptive(8);
  double now = 0;
  c.Sample(0, now, true);
  for (int i = 1; i <= 40; ++i) c.Sample(static_cast<uint64_t>(i * 10 * kMiB), now += 0.1, false);
  EXPECT_EQ(c.windows(), 0);
  EXPECT_EQ(c.limit(), 2);
}
