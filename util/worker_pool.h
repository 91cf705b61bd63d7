// util/worker_pool.h: the one bounded pool of worker threads (over
// boost::asio::thread_pool) for work split by index: hashing files, LFS part
// PUTs, the download scheduler's preparation and connection loops.
// Thread safety: ParallelFor may be called from several threads at once; each
// call has its own pool and joins it before returning.
#pragma once

#include <cstddef>
#include <functional>

namespace hubload::util {

/// Runs fn(i) for every i in [0, n), handing out indices in increasing order
/// to at most `workers` threads (>= 1; the calling thread waits). Once
/// `stop` (may be null) returns true no further index is handed out; calls
/// already started finish. Returns after every started call has returned.
/// `fn` must not throw.
void ParallelFor(size_t n, int workers, const std::function<bool()>& stop, const std::function<void(size_t)>& fn);

}  // namespace hubload::util
