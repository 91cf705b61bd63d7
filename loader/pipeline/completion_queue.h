// A bounded multi-producer / single-consumer queue of completed files, with
// cancellation. Internal to loader/pipeline.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <string>

namespace hubload::pipeline_internal {

/// A weights file ready to load.
struct CompletedFile {
  std::string file;        // repo-relative path (Hub) or local path
  std::string local_path;  // what to open
};

/// Thread safety: all methods may be called from any thread.
class CompletionQueue {
 public:
  explicit CompletionQueue(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  /// Blocks while the queue is full. Returns false (dropping `f`) once
  /// Cancel() was called.
  bool Push(CompletedFile f) {
    std::unique_lock<std::mutex> l(mu_);
    not_full_.wait(l, [&] { return cancelled_ || q_.size() < capacity_; });
    if (cancelled_) return false;
    q_.push_back(std::move(f));
    not_empty_.notify_one();
    return true;
  }

  /// Blocks until a file is available, or returns nullopt when the producers
  /// are done (Close()) and the queue is empty, or after Cancel().
  std::optional<CompletedFile> Pop() {
    std::unique_lock<std::mutex> l(mu_);
    not_empty_.wait(l, [&] { return cancelled_ || closed_ || !q_.empty(); });
    if (cancelled_ || q_.empty()) return std::nullopt;
    CompletedFile f = std::move(q_.front());
    q_.pop_front();
    not_full_.notify_one();
    return f;
  }

  /// No more Push() calls will come.
  void Close() {
    std::lock_guard<std::mutex> l(mu_);
    closed_ = true;
    not_empty_.notify_all();
  }

  /// Drops queued files and wakes every waiter; Push and Pop fail from now on.
  void Cancel() {
    std::lock_guard<std::mutex> l(mu_);
    cancelled_ = true;
    q_.clear();
    not_full_.notify_all();
    not_empty_.notify_all();
  }

 private:
  const size_t capacity_;
  std::mutex mu_;
  std::condition_variable not_full_, not_empty_;
  std::deque<CompletedFile> q_;
  bool closed_ = false;
  bool cancelled_ = false;
};

}  // namespace hubload::pipeline_internal
