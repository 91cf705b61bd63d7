// util/progress.h: the one rate limiter of progress callbacks (downloads and
// uploads call their callbacks at most about 10 times a second, plus forced
// calls at phase ends).
// Thread safety: Due() may be called from many threads at once.
#pragma once

#include <chrono>
#include <mutex>

namespace hubload::util {

class RateLimiter {
 public:
  explicit RateLimiter(std::chrono::steady_clock::duration interval = std::chrono::milliseconds(100))
      : interval_(interval) {}
  /// True when at least `interval` passed since the last true answer (the
  /// first call is always due), or when `force`; a true answer restarts the interval.
  bool Due(bool force = false) {
    std::lock_guard<std::mutex> l(mu_);
    auto now = std::chrono::steady_clock::now();
    if (!force && started_ && now - last_ < interval_) return false;
    started_ = true;
    last_ = now;
    return true;
  }

 private:
  std::chrono::steady_clock::duration interval_;
  std::mutex mu_;
  bool started_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace hubload::util
