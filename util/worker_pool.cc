#include "util/worker_pool.h"

#include <algorithm>
#include <atomic>
#include <memory>

namespace hubload::util {

WorkerPool::WorkerPool(size_t threads) {
  threads = std::max<size_t>(threads, 1);
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkerPool::Post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void WorkerPool::Run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

namespace {

// Shared by the caller and the helpers; helpers that start after every item
// was claimed find nothing to do and never touch `fn`.
struct ForState {
  size_t n = 0;
  const std::function<void(size_t)>* fn = nullptr;
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  std::mutex mu;
  std::condition_variable cv;

  void Work() {
    for (;;) {
      const size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= n) return;
      (*fn)(i);
      if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
        std::lock_guard<std::mutex> lock(mu);
        cv.notify_all();
      }
    }
  }
};

}  // namespace

void WorkerPool::ParallelFor(size_t n, size_t max_threads, const std::function<void(size_t)>& fn) {
  if (n == 0) return;
  size_t helpers = max_threads == 0 ? size() : std::min(size(), max_threads - 1);
  helpers = std::min(helpers, n - 1);
  if (helpers == 0) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  auto state = std::make_shared<ForState>();
  state->n = n;
  state->fn = &fn;
  for (size_t h = 0; h < helpers; ++h) Post([state] { state->Work(); });
  state->Work();
  std::unique_lock<std::mutex> lock(state->mu);
  state->cv.wait(lock, [&] { return state->done.load(std::memory_order_acquire) == n; });
}

WorkerPool& WorkerPool::Shared() {
  static WorkerPool* pool = [] {
    const size_t hw = std::max(1u, std::thread::hardware_concurrency());
    return new WorkerPool(std::clamp<size_t>(hw - 1, 1, 15));  // never destroyed: usable during exit
  }();
  return *pool;
}

}  // namespace hubload::util
