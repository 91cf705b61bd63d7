// util/worker_pool.h and util/progress.h: every index runs exactly once on at
// most the given number of threads; stop ends the handing out; the rate
// limiter answers by an injected interval (no timing assertion: an interval
// of zero is always due, one of an hour never after the first).
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "util/progress.h"
#include "util/worker_pool.h"

namespace hubload::util {
namespace {

TEST(WorkerPool, EveryIndexOnceOnBoundedThreads) {
  std::vector<std::atomic<int>> seen(1000);
  std::mutex mu;
  std::set<std::thread::id> threads;
  std::atomic<int> running{0}, peak{0};
  ParallelFor(seen.size(), 3, nullptr, [&](size_t i) {
    int now = ++running;
    for (int p = peak.load(); now > p && !peak.compare_exchange_weak(p, now);) {
    }
    seen[i]++;
    {
      std::lock_guard<std::mutex> l(mu);
      threads.insert(std::this_thread::get_id());
    }
    --running;
  });
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
  EXPECT_LE(threads.size(), 3u);
  EXPECT_LE(peak.load(), 3);
  int calls = 0;
  ParallelFor(0, 4, nullptr, [&](size_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(WorkerPool, StopEndsTheHandingOut) {
  std::atomic<bool> stop{false};
  std::atomic<int> calls{0};
  ParallelFor(100000, 2, [&] { return stop.load(); }, [&](size_t i) {
    ++calls;
    if (i == 10) stop = true;
  });
  EXPECT_GE(calls.load(), 11);
  EXPECT_LT(calls.load(), 100000);
  // A single worker runs on the calling thread, in index order.
  std::vector<size_t> order;
  ParallelFor(5, 1, nullptr, [&](size_t i) { order.push_back(i); });
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3, 4}));
}

TEST(RateLimiter, FirstCallAndForcedCallsAreDue) {
  RateLimiter hourly(std::chrono::hours(1));
  EXPECT_TRUE(hourly.Due());
  EXPECT_FALSE(hourly.Due());
  EXPECT_FALSE(hourly.Due());
  EXPECT_TRUE(hourly.Due(/*force=*/true));
  EXPECT_FALSE(hourly.Due());
  RateLimiter always(std::chrono::nanoseconds(0));
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(always.Due());
}

}  // namespace
}  // namespace hubload::util
