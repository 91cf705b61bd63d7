// util/worker_pool: every item runs exactly once, on more than one thread when
// the pool has threads, nested loops finish, Post runs everything before the
// destructor returns. No timing.
#include "util/worker_pool.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>

#include <atomic>
#include <map>
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


int NiceOfThisThread() {
  errno = 0;
  int n = ::getpriority(PRIO_PROCESS, 0);  // Linux: 0 = the calling thread
  EXPECT_EQ(errno, 0);
  return n;
}

TEST(WorkerPool, ANicePoolRunsEveryItemOnItsOwnThreadsAtTheRaisedNice) {
  const int caller_nice = NiceOfThisThread();
  WorkerPool pool(2, 5);
  std::mutex mu;
  std::map<size_t, std::pair<std::thread::id, int>> seen;  // item -> (thread, its nice)
  for (size_t n : {1u, 2u, 9u}) {
    seen.clear();
    pool.ParallelFor(
        n, 0,
        [&](size_t i) {
          std::lock_guard<std::mutex> lock(mu);
          seen[i] = {std::this_thread::get_id(), NiceOfThisThread()};
        },
        nullptr, /*caller_helps=*/false);
    ASSERT_EQ(seen.size(), n) << "every item once, n=" << n;
    for (const auto& [i, who] : seen) {
      EXPECT_NE(who.first, std::this_thread::get_id()) << "item " << i << " ran on the caller, n=" << n;
      EXPECT_EQ(who.second, std::min(19, caller_nice + 5)) << "item " << i << ", n=" << n;
    }
  }
  EXPECT_EQ(NiceOfThisThread(), caller_nice);  // the caller's own priority never changes
}

TEST(WorkerPool, ACallerThatDoesNotHelpStillStopsWhenAsked) {
  WorkerPool pool(2);
  std::atomic<int> ran{0};
  pool.ParallelFor(100, 0, [&](size_t) { ran.fetch_add(1); }, [] { return true; }, false);
  EXPECT_EQ(ran.load(), 0);
  pool.ParallelFor(100, 1, [&](size_t) { ran.fetch_add(1); }, [&] { return ran.load() >= 10; }, false);
  EXPECT_EQ(ran.load(), 10);  // one thread: the stop is seen right after the 10th item
}

// A caller that does not help, nested on the pool's only thread, would wait
// for a thread that is itself: it helps instead, and everything runs once.
TEST(WorkerPool, ANestedCallerThatDoesNotHelpOnThePoolsOwnThreadFinishes) {
  WorkerPool pool(1);
  std::atomic<int> total{0};
  pool.ParallelFor(
      2, 0,
      [&](size_t) { pool.ParallelFor(3, 0, [&](size_t) { total.fetch_add(1); }, nullptr, /*caller_helps=*/false); },
      nullptr, /*caller_helps=*/false);
  EXPECT_EQ(total.load(), 2 * 3);
}

TEST(WorkerPool, ARouteSendsItsThreadsWorkToItsPoolOnlyWhileItsFlagIsSet) {
  WorkerPool mine(1), inner(1);
  std::atomic<bool> when{false}, inner_when{true};
  bool helps = false;
  EXPECT_EQ(&WorkerPool::ForThisThread(&helps), &WorkerPool::Shared());
  EXPECT_TRUE(helps);
  {
    PoolRoute route(&mine, &when);
    EXPECT_EQ(&WorkerPool::ForThisThread(&helps), &WorkerPool::Shared());  // flag not set
    EXPECT_TRUE(helps);
    when = true;
    EXPECT_EQ(&WorkerPool::ForThisThread(&helps), &mine);
    EXPECT_FALSE(helps);
    std::thread other([&] {  // another thread has no route
      bool h = false;
      EXPECT_EQ(&WorkerPool::ForThisThread(&h), &WorkerPool::Shared());
      EXPECT_TRUE(h);
    });
    other.join();
    {
      PoolRoute nested(&inner, &inner_when);
      EXPECT_EQ(&WorkerPool::ForThisThread(&helps), &inner);
    }
    EXPECT_EQ(&WorkerPool::ForThisThread(&helps), &mine);
    when = false;
    EXPECT_EQ(&WorkerPool::ForThisThread(&helps), &WorkerPool::Shared());
    EXPECT_TRUE(helps);
    when = true;
  }
  EXPECT_EQ(&WorkerPool::ForThisThread(&helps), &WorkerPool::Shared());  // route gone
  EXPECT_TRUE(helps);
}

}  // namespace
}  // namespace hubload::util
