// Internal (loader/pipeline): the per-shard byte watermarks the shard source
// (producer threads) and the driver share, and the leaves both use.
// Thread safety: ShardState is thread-safe (one mutex); see driver.h.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "hubload/reasons.h"
#include "loader/pipeline/common.h"
#include "loader/pipeline/driver.h"

namespace hubload::pipeline_internal {

/// "Needs the verified file" (no byte count suffices).
inline constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

/// kCancelled for `what`.
Status Cancelled(const std::string& what);
/// pread of exactly n bytes at offset (kIOError "Truncated" when the file ends first).
Status PreadAll(int fd, uint64_t offset, void* dst, uint64_t n, const std::string& label);

/// Per-file byte watermarks shared by the source (producer threads) and the
/// driver. Descriptors are kept open until the load ends, so a descriptor the
/// driver read once stays valid.
class ShardState : public ShardEvents {
 public:
  struct Slot {
    std::vector<int> fds;    // every descriptor seen; fds.back() is current
    uint64_t generation = 0;
    uint64_t available = 0;  // readable prefix of fds.back()
    bool verified = false;
    bool ended = false;      // the driver finished the shard
  };

  ShardState(const FetchPlan& plan, int max_in_flight, const DriverCallbacks& cb)
      : plan_(plan), max_in_flight_(max_in_flight), cb_(cb), slots_(plan.shards.size()) {
    for (size_t i = 0; i < plan.shards.size(); ++i) by_file_[plan.shards[i].file] = i;
  }
  ~ShardState() override;

  void Bytes(const std::string& file, int fd, uint64_t generation, uint64_t contiguous) override;

  void Done(const std::string& file, const std::string& local_path) override;

  void Progress(uint64_t done, uint64_t total) override;
  void FileProgress(const std::string& file, uint64_t done, uint64_t total) override;
  void ShardLoaded(const std::string& file);
  const std::atomic<bool>* cancel_flag() const override;
  /// True from the first Bytes() of a file not yet verified (a download in
  /// flight) until every file is verified or the source finishes.
  const std::atomic<bool>* downloading() const { return &downloading_; }

  // ---- driver side ----
  /// Records the first error and cancels; called with mu_ held.
  void Fail(Status st);
  void Cancel();
  void SourceFinished(Status st);
  void MarkEnded(size_t i);
  /// Waits until slot `i` has `need` bytes or is verified; returns its state.
  Status WaitFor(size_t i, uint64_t need, bool want_verified, int* fd, uint64_t* available, bool* verified,
                 uint64_t* generation);
  /// Waits until some unended shard can make progress: returns its index, or
  /// slots_.size() when every shard ended. `need[i]`: bytes the next step of i needs.
  Result<size_t> NextReady(const std::vector<uint64_t>& need);
  std::chrono::steady_clock::time_point download_done();

 private:
  const FetchPlan& plan_;
  const int max_in_flight_;
  const DriverCallbacks& cb_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Slot> slots_;
  std::unordered_map<std::string, size_t> by_file_;
  std::atomic<bool> cancel_{false};
  std::atomic<bool> downloading_{false};
  Status error_;
  bool source_done_ = false;
  size_t earliest_unended_ = 0;
  std::chrono::steady_clock::time_point download_done_{};
};

}  // namespace hubload::pipeline_internal
