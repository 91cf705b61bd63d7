// Bounded worker pool (util/worker_pool.h).
#include "util/worker_pool.h"

#include <algorithm>
#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

namespace hubload::util {

void ParallelFor(size_t n, int workers, const std::function<bool()>& stop, const std::function<void(size_t)>& fn) {
  if (n == 0) return;
  std::atomic<size_t> next{0};
  auto loop = [&] {
    while (!(stop && stop())) {
      size_t i = next.fetch_add(1);
      if (i >= n) return;
      fn(i);
    }
  };
  size_t t = std::min<size_t>(n, static_cast<size_t>(std::max(1, workers)));
  if (t == 1) {
    loop();
    return;
  }
  boost::asio::thread_pool pool(t);
  for (size_t k = 0; k < t; ++k) boost::asio::post(pool, loop);
  pool.join();
}

}  // namespace hubload::util
