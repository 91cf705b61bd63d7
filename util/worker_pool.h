// util/worker_pool.h: the one bounded pool of worker threads (over
// boost::asio::thread_pool) and its fork-join loop over an index range.
//  - WorkerPool::Shared() for CPU work that should use every core (chunked
//    dtype conversions and copies);
//  - a PoolRoute sends one thread's WorkerPool::ForThisThread() work to a pool
//    of its own (e.g. the loader's conversions, at lower CPU priority, while
//    downloads share the cores);
//  - ParallelFor(n, workers, stop, fn) for blocking work (hashing files, LFS
//    part PUTs, the download scheduler's connection loops): its own pool of
//    `workers` threads for the call, so blocking items never starve the
//    shared pool.
// Thread safety: every function may be called from any thread, concurrently,
// including from a task running on a pool (the caller runs items itself, so
// nesting cannot deadlock).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>

namespace boost::asio {
class thread_pool;
}

namespace hubload::util {

class WorkerPool {
 public:
  /// Starts `threads` worker threads (at least 1); throws std::system_error
  /// when the system refuses a thread. `nice_increment` > 0: each thread
  /// raises its own nice value (that of the thread that made the pool) by that much (Linux
  /// setpriority(2) on the thread, at most 19) before its first task, so
  /// the pool's work yields the CPU to the process's other threads; best
  /// effort (a refusal leaves the thread as it is). A thread never lowers
  /// its nice value again: it keeps it until the pool is destroyed.
  explicit WorkerPool(size_t threads, int nice_increment = 0);
  /// Runs the tasks still queued, then joins the threads.
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  size_t size() const { return threads_; }

  /// Queues `task` for a worker thread (FIFO). `task` must not throw.
  void Post(std::function<void()> task);

  /// Calls fn(i) once for every i in [0, n) and returns when all calls have
  /// returned. Items are claimed in increasing order, one at a time, by the
  /// calling thread and by up to `max_threads - 1` pool threads (0 = caller
  /// plus every pool thread), so consecutive items run on different threads.
  /// Once `stop` (may be null) returns true no further item is claimed; calls
  /// already started finish. `fn` must not throw; it may be called
  /// concurrently from several threads. `caller_helps` false: the calling
  /// thread only waits; up to `max_threads` pool threads (0 = every one)
  /// run the items, one of them even for n == 1 (ignored when the caller is
  /// one of this pool's threads: it helps, so nesting cannot deadlock).
  void ParallelFor(size_t n, size_t max_threads, const std::function<void(size_t)>& fn,
                   const std::function<bool()>& stop = nullptr, bool caller_helps = true);

  /// The process-wide pool: one thread per hardware thread minus one (the
  /// caller of ParallelFor is the other), at least 1, at most 15. Created on
  /// first use; lives until exit.
  static WorkerPool& Shared();

  /// Where the calling thread's chunked CPU work goes: Shared() with the
  /// caller helping, or, while a PoolRoute is alive on this thread and its
  /// flag is set, the route's pool with the caller only waiting
  /// (`*caller_helps` false).
  static WorkerPool& ForThisThread(bool* caller_helps);

 private:
  size_t threads_;
  int nice_increment_ = 0;
  std::unique_ptr<boost::asio::thread_pool> pool_;
};

/// While alive, and while `*when` is true, WorkerPool::ForThisThread() on the
/// thread that made it answers `pool` (see there). Routes nest (the innermost
/// decides); a route must be destroyed on the thread that made it, before
/// `pool`. Not copyable.
class PoolRoute {
 public:
  PoolRoute(WorkerPool* pool, const std::atomic<bool>* when);
  ~PoolRoute();
  PoolRoute(const PoolRoute&) = delete;
  PoolRoute& operator=(const PoolRoute&) = delete;

 private:
  friend class WorkerPool;
  WorkerPool* pool_;
  const std::atomic<bool>* when_;
  PoolRoute* outer_;
};

/// Runs fn(i) for every i in [0, n), handing out indices in increasing order
/// to at most `workers` threads (>= 1; the calling thread is one of them, and
/// a pool of `workers - 1` threads lives for the call). Once `stop` (may be
/// null) returns true no further index is handed out; calls already started
/// finish. Returns after every started call has returned. `fn` must not throw.
void ParallelFor(size_t n, int workers, const std::function<bool()>& stop, const std::function<void(size_t)>& fn);

}  // namespace hubload::util
