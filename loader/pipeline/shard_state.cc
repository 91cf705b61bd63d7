// Shard watermarks and the shard view sinks read (loader/pipeline/shard_state.h, driver.h).
#include "loader/pipeline/shard_state.h"

#include "loader/pipeline/common.h"

namespace hubload::pipeline_internal {

Status Cancelled(const std::string& what) {
  return Status(Code::kCancelled, what + " cancelled", std::string(reason::kCancelled));
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
                    "Truncated", ctx);
    }
    p += r;
    offset += static_cast<uint64_t>(r);
    n -= static_cast<uint64_t>(r);
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// ShardData

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
  HUBLOAD_RETURN_IF_ERROR(state_->WaitFor(index_, 1, false, &fd, &avail, &verified, &gen));
  if (mapping_ && mapping_generation_ == gen) return mapping_;
  HUBLOAD_ASSIGN_OR_RETURN(mapping_, safetensors::MappedFile::FromFd(fd, size, planned_->local_path));
  mapping_generation_ = gen;
  if (mapping_fd_ >= 0) ::close(mapping_fd_);
  mapping_fd_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  return mapping_;
}

Result<safetensors::SafetensorsFile> ShardData::File() {
  HUBLOAD_ASSIGN_OR_RETURN(auto m, Mapping());
  return safetensors::SafetensorsFile::FromParts(std::move(m), header_);
}

Status ShardSink::OnWholeShard(ShardData& shard, std::vector<TensorRecord>* records) {
  return PickleUnsupported(shard.file(), "", "");
}

}  // namespace hubload::pipeline_internal
