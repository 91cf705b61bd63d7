// Shard watermarks and the shard view sinks read (loader/pipeline/shard_state.h, driver.h).
#include "loader/pipeline/shard_state.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "loader/pipeline/common.h"
#include "util/file_io.h"
#include "hubload/reasons.h"

namespace hubload::pipeline_internal {

Status Cancelled(const std::string& what) {
  return Status(Code::kCancelled, what + " cancelled", reason::kCancelled);
}

Status PreadAll(int fd, uint64_t offset, void* dst, uint64_t n, const std::string& label) {
  auto* p = static_cast<uint8_t*>(dst);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, static_cast<size_t>(std::min<uint64_t>(n, 1ull << 30)), static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return util::IoError("cannot read", label, errno);
    if (r == 0) {
      ErrorContext ctx;
      ctx.file = label;
      return Status(Code::kIOError, label + " ends before byte " + std::to_string(offset) + " (truncated)",
                    reason::kTruncated, ctx);
    }
    p += r;
    offset += static_cast<uint64_t>(r);
    n -= static_cast<uint64_t>(r);
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// ShardData

// ---- ShardState ----

ShardState::~ShardState() {
  for (auto& s : slots_)
    for (int fd : s.fds) ::close(fd);
}

void ShardState::Bytes(const std::string& file, int fd, uint64_t generation, uint64_t contiguous) {
  auto it = by_file_.find(file);
  if (it == by_file_.end() || fd < 0) return;
  std::lock_guard<std::mutex> l(mu_);
  Slot& s = slots_[it->second];
  if (s.verified) return;
  if (!source_done_) downloading_.store(true, std::memory_order_relaxed);
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

void ShardState::Done(const std::string& file, const std::string& local_path) {
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
    // Every file verified: nothing lands any more (the source may still wait below).
    if (std::all_of(slots_.begin(), slots_.end(), [](const Slot& x) { return x.verified; }))
      downloading_.store(false, std::memory_order_relaxed);
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

void ShardState::Progress(uint64_t done, uint64_t total) {
  if (cb_.on_progress) cb_.on_progress(done, total);
}

void ShardState::FileProgress(const std::string& file, uint64_t done, uint64_t total) {
  if (cb_.on_file_progress) cb_.on_file_progress(file, done, total);
}

void ShardState::ShardLoaded(const std::string& file) {
  if (cb_.on_shard_loaded) cb_.on_shard_loaded(file);
}

const std::atomic<bool>* ShardState::cancel_flag() const { return &cancel_; }


void ShardState::Fail(Status st) {  // with mu_ held
  if (error_.ok()) error_ = std::move(st);
  cancel_ = true;
  cv_.notify_all();
}

void ShardState::Cancel() {
  std::lock_guard<std::mutex> l(mu_);
  cancel_ = true;
  cv_.notify_all();
}

void ShardState::SourceFinished(Status st) {
  std::lock_guard<std::mutex> l(mu_);
  source_done_ = true;
  downloading_.store(false, std::memory_order_relaxed);
  download_done_ = std::chrono::steady_clock::now();
  if (!st.ok() && error_.ok() && !(st.code() == Code::kCancelled && cancel_.load())) error_ = std::move(st);
  if (!st.ok()) cancel_ = true;
  cv_.notify_all();
}

void ShardState::MarkEnded(size_t i) {
  std::lock_guard<std::mutex> l(mu_);
  slots_[i].ended = true;
  while (earliest_unended_ < slots_.size() && slots_[earliest_unended_].ended) ++earliest_unended_;
  cv_.notify_all();
}

Result<size_t> ShardState::NextReady(const std::vector<uint64_t>& need) {
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
                      reason::kSourceIncomplete);
  }
  return found;
}

std::chrono::steady_clock::time_point ShardState::download_done() {
  std::lock_guard<std::mutex> l(mu_);
  return download_done_;
}

Status ShardState::WaitFor(size_t i, uint64_t need, bool want_verified, int* fd, uint64_t* available, bool* verified,
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
                  reason::kSourceIncomplete);
  *fd = s.fds.back();
  *available = s.available;
  *verified = s.verified;
  *generation = s.generation + (s.verified ? 1 : 0);
  return Status::Ok();
}

// ---- ShardData ----

Status ShardData::WaitFor(uint64_t end) {
  int fd;
  uint64_t avail, gen;
  bool verified;
  return state_->WaitFor(index_, end, false, &fd, &avail, &verified, &gen);
}

Status ShardData::WaitVerified() {
  int fd;
  uint64_t avail, gen;
  bool verified;
  return state_->WaitFor(index_, kNever, true, &fd, &avail, &verified, &gen);
}

Status ShardData::Read(uint64_t offset, void* dst, uint64_t n) {
  int fd;
  uint64_t avail, gen;
  bool verified;
  HUBLOAD_RETURN_IF_ERROR(state_->WaitFor(index_, offset + n, false, &fd, &avail, &verified, &gen));
  return PreadAll(fd, offset, dst, n, file());
}

Result<std::shared_ptr<safetensors::MappedFile>> ShardData::Mapping() {
  int fd;
  uint64_t avail, gen;
  bool verified;
  const uint64_t size = header_.file_size ? header_.file_size : planned_->size;
  if (tensor_fd_ >= 0) {  // read where the driver checked the bytes (see Descriptor)
    fd = tensor_fd_;
    gen = tensor_generation_;
  } else {
    HUBLOAD_RETURN_IF_ERROR(state_->WaitFor(index_, 1, false, &fd, &avail, &verified, &gen));
  }
  if (mapping_ && mapping_generation_ == gen) return mapping_;
  HUBLOAD_ASSIGN_OR_RETURN(mapping_, safetensors::MappedFile::FromFd(fd, size, planned_->local_path));
  mapping_generation_ = gen;
  if (mapping_fd_ >= 0) ::close(mapping_fd_);
  mapping_fd_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  return mapping_;
}

Result<int> ShardData::Descriptor() {
  // A restarted download has a new file: read where the driver checked the bytes.
  if (tensor_fd_ >= 0) return tensor_fd_;
  int fd;
  uint64_t avail, gen;
  bool verified;
  HUBLOAD_RETURN_IF_ERROR(state_->WaitFor(index_, 1, false, &fd, &avail, &verified, &gen));
  return fd;
}

Result<safetensors::SafetensorsFile> ShardData::File() {
  HUBLOAD_ASSIGN_OR_RETURN(auto m, Mapping());
  return safetensors::SafetensorsFile::FromParts(std::move(m), header_);
}

Status ShardSink::OnWholeShard(ShardData& shard, std::vector<TensorRecord>* records) {
  return PickleUnsupported(shard.file(), "", "");
}

}  // namespace hubload::pipeline_internal
