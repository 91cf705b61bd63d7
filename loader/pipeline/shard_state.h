// Internal (loader/pipeline): the per-shard byte watermarks the shard source
// (producer threads) and the driver share, and the leaves both use.
// Thread safety: ShardState is thread-safe (one mutex); see driver.h.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
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
#include "util/file_io.h"

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
  ~ShardState() override {
    for (auto& s : slots_)
      for (int fd : s.fds) ::close(fd);
  }

  void Bytes(const std::string& file, int fd, uint64_t generation, uint64_t contiguous) override {
    auto it = by_file_.find(file);
    if (it == by_file_.end() || fd < 0) return;
    std::lock_guard<std::mutex> l(mu_);
    Slot& s = slots_[it->second];
    if (s.verified) return;
    if (s.fds.empty() || generation != s.generation) {
      int d = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
      if (d < 0) return;  // the shard is then read once verified
      s.fds.push_back(d);
      s.generation = generation;
      s.available = contiguous;
    } else {
      s.available = std::max(s.available, contiguous);
    }
    cv_.notify_all();
  }

  void Done(const std::string& file, const std::string& local_path) override {
    auto it = by_file_.find(file);
    if (it == by_file_.end()) return;
    const size_t i = it->second;
    int fd = ::open(local_path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st{};
    Status err;
    if (fd < 0) err = util::IoError("cannot open", local_path, errno);
    else if (::fstat(fd, &st) != 0) err = util::IoError("cannot stat", local_path, errno);
    {
      std::unique_lock<std::mutex> l(mu_);
      Slot& s = slots_[i];
      if (!err.ok()) {
        if (fd >= 0) ::close(fd);
        Fail(err);
        return;
      }
      s.fds.push_back(fd);
      s.available = static_cast<uint64_t>(st.st_size);
      s.verified = true;
      cv_.notify_all();
      // Backpressure: a later shard waits while enough verified shards wait for
      // the driver; the shard the driver needs next never waits.
      cv_.wait(l, [&] {
        if (cancel_.load() || max_in_flight_ <= 0 || i <= earliest_unended_) return true;
        int pending = 0;
        for (size_t k = earliest_unended_ + 1; k < slots_.size(); ++k)
          if (k != i && slots_[k].verified && !slots_[k].ended) ++pending;
        return pending < max_in_flight_;
      });
    }
    if (cb_.on_file_downloaded) cb_.on_file_downloaded(file);
  }

  void Progress(uint64_t done, uint64_t total) override {
    if (cb_.on_progress) cb_.on_progress(done, total);
  }
  void FileProgress(const std::string& file, uint64_t done, uint64_t total) override {
    if (cb_.on_file_progress) cb_.on_file_progress(file, done, total);
  }
  void ShardLoaded(const std::string& file) {
    if (cb_.on_shard_loaded) cb_.on_shard_loaded(file);
  }
  const std::atomic<bool>* cancel_flag() const override { return &cancel_; }

  // ---- driver side ----
  void Fail(Status st) {  // with mu_ held
    if (error_.ok()) error_ = std::move(st);
    cancel_ = true;
    cv_.notify_all();
  }
  void Cancel() {
    std::lock_guard<std::mutex> l(mu_);
    cancel_ = true;
    cv_.notify_all();
  }
  void SourceFinished(Status st) {
    std::lock_guard<std::mutex> l(mu_);
    source_done_ = true;
    download_done_ = std::chrono::steady_clock::now();
    if (!st.ok() && error_.ok() && !(st.code() == Code::kCancelled && cancel_.load())) error_ = std::move(st);
    if (!st.ok()) cancel_ = true;
    cv_.notify_all();
  }
  void MarkEnded(size_t i) {
    std::lock_guard<std::mutex> l(mu_);
    slots_[i].ended = true;
    while (earliest_unended_ < slots_.size() && slots_[earliest_unended_].ended) ++earliest_unended_;
    cv_.notify_all();
  }
  /// Waits until slot `i` has `need` bytes or is verified; returns its state.
  Status WaitFor(size_t i, uint64_t need, bool want_verified, int* fd, uint64_t* available, bool* verified,
                 uint64_t* generation) {
    std::unique_lock<std::mutex> l(mu_);
    const Slot& s = slots_[i];
    cv_.wait(l, [&] {
      if (cancel_.load()) return true;
      if (s.verified) return true;
      if (want_verified) return source_done_;
      return (!s.fds.empty() && s.available >= need) || source_done_;
    });
    if (!error_.ok()) return error_;
    if (cancel_.load()) return Cancelled("load");
    if (!s.verified && (want_verified || s.fds.empty() || s.available < need))
      return Status(Code::kInternal, "the download of '" + plan_.shards[i].file + "' ended without the file",
                    "SourceIncomplete");
    *fd = s.fds.back();
    *available = s.available;
    *verified = s.verified;
    *generation = s.generation + (s.verified ? 1 : 0);
    return Status::Ok();
  }
  /// Waits until some unended shard can make progress: returns its index, or
  /// slots_.size() when every shard ended. `need[i]`: bytes the next step of i needs.
  Result<size_t> NextReady(const std::vector<uint64_t>& need) {
    std::unique_lock<std::mutex> l(mu_);
    size_t found = slots_.size();
    cv_.wait(l, [&] {
      if (cancel_.load()) return true;
      bool all = true;
      for (size_t i = 0; i < slots_.size(); ++i) {
        const Slot& s = slots_[i];
        if (s.ended) continue;
        all = false;
        if (s.verified || (!s.fds.empty() && need[i] != kNever && s.available >= need[i])) {
          found = i;
          return true;
        }
      }
      if (all) return true;
      return source_done_;  // nothing more will come
    });
    if (!error_.ok()) return error_;
    if (cancel_.load()) return Cancelled("load");
    if (found == slots_.size()) {
      for (const Slot& s : slots_)
        if (!s.ended)
          return Status(Code::kInternal, "the shard source ended before every shard was delivered",
                        "SourceIncomplete");
    }
    return found;
  }
  std::chrono::steady_clock::time_point download_done() {
    std::lock_guard<std::mutex> l(mu_);
    return download_done_;
  }

 private:
  const FetchPlan& plan_;
  const int max_in_flight_;
  const DriverCallbacks& cb_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Slot> slots_;
  std::unordered_map<std::string, size_t> by_file_;
  std::atomic<bool> cancel_{false};
  Status error_;
  bool source_done_ = false;
  size_t earliest_unended_ = 0;
  std::chrono::steady_clock::time_point download_done_{};
};

}  // namespace hubload::pipeline_internal
