// util/worker_pool.h: the one bounded pool of worker threads (over
// boost::asio::thread_pool) and its fork-join loop over an index range.
//  - WorkerPool::Shared() for CPU work that should use every core (chunked
//    dtype conversions and copies);
//  - ParallelFor(n, workers, stop, fn) for blocking work (hashing files, LFS
//    part PUTs, the download scheduler's connection loops): its own pool of
//    `workers` threads for the call, so blocking items never starve the
//    shared pool.
// Thread safety: every function may be called from any thread, concurrently,
// including from a task running on a pool (the caller runs items itself, so
// nesting cannot deadlock).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

namespace boost::asio {
class thread_pool;
}

namespace hubload::util {

class WorkerPool {
 public:
  /// Starts `threads` worker threads (at least 1).
  explicit WorkerPool(size_t threads);
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
  /// concurrently from several threads.
  void ParallelFor(size_t n, size_t max_threads, const std::function<void(size_t)>& fn,
                   const std::function<bool()>& stop = nullptr);

  /// The process-wide pool: one thread per hardware thread minus one (the
  /// caller of ParallelFor is the other), at least 1, at most 15. Created on
  /// first use; lives until exit.
  static WorkerPool& Shared();

 private:
  size_t threads_;
  std::unique_ptr<boost::asio::thread_pool> pool_;
};

/// Runs fn(i) for every i in [0, n), handing out indices in increasing order
/// to at most `workers` threads (>= 1; the calling thread is one of them, and
/// a pool of `workers - 1` threads lives for the call). Once `stop` (may be
/// null) returns true no further index is handed out; calls already started
/// finish. Returns after every started call has returned. `fn` must not throw.
void ParallelFor(size_t n, int workers, const std::function<bool()>& stop, const std::function<void(size_t)>& fn);

}  // namespace hubload::util
