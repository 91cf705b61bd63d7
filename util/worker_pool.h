// util/worker_pool.h: a bounded set of worker threads and a fork-join loop
// over it (chunked conversions and copies that should use every core).
//
// Thread safety: Post and ParallelFor may be called from any thread, any
// number of times concurrently, including from a task running on the pool
// (ParallelFor never waits for a pool thread to become free: the caller runs
// items itself, so nesting cannot deadlock).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace hubload::util {

class WorkerPool {
 public:
  /// Starts `threads` worker threads (at least 1).
  explicit WorkerPool(size_t threads);
  /// Runs the tasks still queued, then joins the threads.
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  size_t size() const { return threads_.size(); }

  /// Queues `task` for a worker thread (FIFO). `task` must not throw.
  void Post(std::function<void()> task);

  /// Calls fn(i) exactly once for every i in [0, n) and returns when all
  /// calls have returned. Items are claimed in increasing order, one at a
  /// time, by the calling thread and by up to `max_threads - 1` pool threads
  /// (0 = caller plus every pool thread), so consecutive items run on
  /// different threads (interleaved chunks). `fn` must not throw; it may be
  /// called concurrently from several threads.
  void ParallelFor(size_t n, size_t max_threads, const std::function<void(size_t)>& fn);

  /// The process-wide pool: one thread per hardware thread minus one (the
  /// caller of ParallelFor is the other), at least 1, at most 15. Created on
  /// first use; lives until exit.
  static WorkerPool& Shared();

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace hubload::util
