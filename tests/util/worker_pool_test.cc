// util/worker_pool: every item runs exactly once, on more than one thread when
// the pool has threads, nested loops finish, Post runs everything before the
// destructor returns. No timing.
#include "util/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace hubload::util {
namespace {

TEST(WorkerPool, ParallelForRunsEveryItemOnce) {
  WorkerPool pool(3);
  for (size_t n : {0u, 1u, 2u, 7u, 1000u}) {
    std::vector<std::atomic<int>> hits(n);
    pool.ParallelFor(n, 0, [&](size_t i) { hits[i].fetch_add(1); });
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
  }
}

TEST(WorkerPool, MaxThreadsCapsTheThreadsUsed) {
  WorkerPool pool(3);
  std::mutex mu;
  std::set<std::thread::id> ids;
  std::atomic<int> inside{0}, max_inside{0};
  // Items wait (bounded) for a second thread to arrive, so that a helper does join in; the
  // assertions are on the number of threads, never on time.
  pool.ParallelFor(64, 2, [&](size_t) {
    int now = inside.fetch_add(1) + 1;
    int m = max_inside.load();
    while (now > m && !max_inside.compare_exchange_weak(m, now)) {
    }
    for (int spin = 0; spin < 2000 && max_inside.load() < 2; ++spin) std::this_thread::yield();
    {
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
    }
    inside.fetch_sub(1);
  });
  EXPECT_LE(max_inside.load(), 2);  // caller + at most one helper
  EXPECT_LE(ids.size(), 2u);
}

TEST(WorkerPool, NestedParallelForFromPoolThreadsFinishes) {
  WorkerPool pool(2);
  std::atomic<int> total{0};
  pool.ParallelFor(8, 0, [&](size_t) { pool.ParallelFor(16, 0, [&](size_t) { total.fetch_add(1); }); });
  EXPECT_EQ(total.load(), 8 * 16);
}

TEST(WorkerPool, DestructorRunsQueuedTasks) {
  std::atomic<int> ran{0};
  {
    WorkerPool pool(1);
    for (int i = 0; i < 100; ++i) pool.Post([&] { ran.fetch_add(1); });
  }
  EXPECT_EQ(ran.load(), 100);
}

TEST(WorkerPool, SharedPoolExistsAndWorks) {
  WorkerPool& shared = WorkerPool::Shared();
  EXPECT_GE(shared.size(), 1u);
  EXPECT_EQ(&shared, &WorkerPool::Shared());
  std::atomic<long> sum{0};
  shared.ParallelFor(100, 0, [&](size_t i) { sum.fetch_add(static_cast<long>(i)); });
  EXPECT_EQ(sum.load(), 99 * 100 / 2);
}

}  // namespace
}  // namespace hubload::util
