// The bounded worker pool (util/worker_pool.h) over boost::asio::thread_pool.
#include "util/worker_pool.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace hubload::util {

WorkerPool::WorkerPool(size_t threads, int nice_increment)
    : threads_(std::max<size_t>(threads, 1)),
      nice_increment_(std::max(0, nice_increment)),
      pool_(std::make_unique<boost::asio::thread_pool>(threads_)) {}

WorkerPool::~WorkerPool() { pool_->join(); }  // join() lets queued tasks run (stop() would drop them)

void WorkerPool::Post(std::function<void()> task) {
  if (nice_increment_ == 0) return boost::asio::post(*pool_, std::move(task));
  boost::asio::post(*pool_, [inc = nice_increment_, task = std::move(task)] {
    // A pool thread belongs to one pool: once per thread is once per pool thread.
    thread_local bool lowered = false;
    if (!lowered) {
      lowered = true;
      errno = 0;
      const int now = ::getpriority(PRIO_PROCESS, 0);  // 0: this thread (Linux: nice is per thread)
      if (errno == 0) ::setpriority(PRIO_PROCESS, 0, std::min(19, now + inc));
    }
    task();
  });
}

namespace {

// Shared by the caller and the helpers. Items are claimed under `mu`; once
// `closed` no item is claimed, so helpers that start late never touch `fn`.
struct ForState {
  size_t n = 0;
  const std::function<void(size_t)>* fn = nullptr;
  const std::function<bool()>* stop = nullptr;
  std::mutex mu;
  std::condition_variable cv;
  size_t next = 0;     // guarded by mu
  size_t running = 0;  // claimed and not yet returned; guarded by mu
  bool closed = false;  // guarded by mu

  bool Claim(size_t* i) {
    std::lock_guard<std::mutex> lock(mu);
    if (!closed && (next >= n || (*stop && (*stop)()))) {
      closed = true;
      cv.notify_all();  // a caller that does not help waits for this
    }
    if (closed) return false;
    *i = next++;
    ++running;
    return true;
  }
  void Work() {
    size_t i = 0;
    while (Claim(&i)) {
      (*fn)(i);
      std::lock_guard<std::mutex> lock(mu);
      --running;
      cv.notify_all();
    }
  }
};

}  // namespace

void WorkerPool::ParallelFor(size_t n, size_t max_threads, const std::function<void(size_t)>& fn,
                             const std::function<bool()>& stop, bool caller_helps) {
  if (n == 0) return;
  // Called from one of this pool's own threads, a caller that only waited
  // could hold the last thread the items need: it helps.
  if (pool_->get_executor().running_in_this_thread()) caller_helps = true;
  size_t helpers = max_threads == 0 ? size() : std::min(size(), max_threads - (caller_helps ? 1 : 0));
  helpers = caller_helps ? std::min(helpers, n - 1) : std::clamp<size_t>(helpers, 1, n);
  if (helpers == 0) {
    for (size_t i = 0; i < n && !(stop && stop()); ++i) fn(i);
    return;
  }
  auto state = std::make_shared<ForState>();
  state->n = n;
  state->fn = &fn;
  state->stop = &stop;
  for (size_t h = 0; h < helpers; ++h) Post([state] { state->Work(); });
  if (caller_helps) state->Work();  // returns once nothing is left to claim (closed)
  std::unique_lock<std::mutex> lock(state->mu);
  // Without the caller, "closed" (set by the helper that finds nothing left) marks the end.
  state->cv.wait(lock, [&] { return state->running == 0 && (caller_helps || state->closed); });
}

WorkerPool& WorkerPool::Shared() {
  static WorkerPool* pool = [] {
    const size_t hw = std::max(1u, std::thread::hardware_concurrency());
    return new WorkerPool(std::clamp<size_t>(hw - 1, 1, 15));  // never destroyed: usable during exit
  }();
  return *pool;
}

namespace {
thread_local PoolRoute* route = nullptr;  // innermost PoolRoute of this thread
}  // namespace

PoolRoute::PoolRoute(WorkerPool* pool, const std::atomic<bool>* when) : pool_(pool), when_(when), outer_(route) {
  route = this;
}

PoolRoute::~PoolRoute() { route = outer_; }

WorkerPool& WorkerPool::ForThisThread(bool* caller_helps) {
  if (route && route->pool_ && route->when_ && route->when_->load(std::memory_order_relaxed)) {
    *caller_helps = false;
    return *route->pool_;
  }
  *caller_helps = true;
  return Shared();
}

void ParallelFor(size_t n, int workers, const std::function<bool()>& stop, const std::function<void(size_t)>& fn) {
  if (n == 0) return;
  const size_t t = std::min<size_t>(n, static_cast<size_t>(std::max(1, workers)));
  if (t == 1) {
    for (size_t i = 0; i < n && !(stop && stop()); ++i) fn(i);
    return;
  }
  WorkerPool pool(t - 1);
  pool.ParallelFor(n, t, fn, stop);
}

}  // namespace hubload::util
