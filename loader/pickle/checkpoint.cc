// Format detection, byte sources, the final storage checks and the public
// entry points of hubload/pickle.h.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>

#include "hubload/reasons.h"
#include "loader/pickle/internal.h"
#include "util/file_io.h"

namespace hubload::pickle {

using safetensors::Dtype;

namespace internal {

Status MemorySource::ReadAt(uint64_t offset, void* dst, size_t n) const {
  if (offset > size_ || n > size_ - offset) {
    return Error(reason::kPickleMalformed, label_, "read of " + std::to_string(n) + " bytes at " +
                                                       std::to_string(offset) + " is past the end of the file");
  }
  if (n) std::memcpy(dst, data_ + offset, n);
  return Status::Ok();
}

Status FdSource::ReadAt(uint64_t offset, void* dst, size_t n) const {
  if (offset > size_ || n > size_ - offset) {
    return Error(reason::kPickleMalformed, label_, "read of " + std::to_string(n) + " bytes at " +
                                                       std::to_string(offset) + " is past the end of the file");
  }
  auto* out = static_cast<uint8_t*>(dst);
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd_, out + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return util::IoError("cannot read", label_, errno);
    if (r == 0) {
      return Error(reason::kShortRead, label_,
                   "file ended at " + std::to_string(offset + done) + " bytes (it shrank while being read)", {},
                   Code::kIOError);
    }
    done += static_cast<size_t>(r);
  }
  return Status::Ok();
}

Status Error(std::string_view reason, std::string_view label, const std::string& what, std::string_view tensor,
             Code code) {
  ErrorContext ctx;
  ctx.file = std::string(label);
  ctx.tensor = std::string(tensor);
  return Status(code, std::string(label) + ": " + what, reason, std::move(ctx));
}

Status FinishCheckpoint(StateDictPickle&& sd, const Source& src, Checkpoint* out) {
  std::vector<uint32_t> order(sd.storages.size());
  std::iota(order.begin(), order.end(), 0u);
  for (const Storage& s : sd.storages) {
    if (s.offset > src.size() || s.nbytes > src.size() - s.offset) {
      return Error(reason::kPickleStorageSize, src.label(),
                   "storage " + util::Quoted(s.key) + " (" + std::to_string(s.nbytes) + " bytes at " +
                       std::to_string(s.offset) + ") lies outside the file (" + std::to_string(src.size()) +
                       " bytes)");
    }
  }
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return sd.storages[a].offset < sd.storages[b].offset; });
  const Storage* prev = nullptr;
  for (uint32_t i : order) {
    const Storage& s = sd.storages[i];
    if (s.nbytes == 0) continue;
    if (prev && prev->offset + prev->nbytes > s.offset) {
      return Error(reason::kPickleStorageSize, src.label(),
                   "storages " + util::Quoted(prev->key) + " and " + util::Quoted(s.key) + " overlap in the file");
    }
    prev = &s;
  }
  out->file_size = src.size();
  out->storages = std::move(sd.storages);
  out->tensors = std::move(sd.tensors);
  return Status::Ok();
}

}  // namespace internal

namespace {

constexpr uint8_t kZipMagic[4] = {'P', 'K', 3, 4};
// pickle.dumps(0x1950a86a20f9469cfc6c, protocol=2): PROTO 2, LONG1 10 bytes.
constexpr uint8_t kLegacyMagic[14] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

Result<Checkpoint> Read(const internal::Source& src, const Limits& limits) {
  uint8_t head[16] = {};
  const size_t n = static_cast<size_t>(std::min<uint64_t>(src.size(), sizeof head));
  HUBLOAD_RETURN_IF_ERROR(src.ReadAt(0, head, n));
  std::span<const uint8_t> prefix(head, n);
  if (n >= 4 && std::memcmp(head, kZipMagic, 4) == 0) return internal::ReadZip(src, limits);
  if (n >= 2 && head[0] == 0x80) return internal::ReadLegacy(src, limits);
  std::string what = "not a torch.save checkpoint (neither a zip archive nor a legacy pickle)";
  std::string_view text(reinterpret_cast<const char*>(head), n);
  if (text.rfind("version http", 0) == 0) {
    what = "a Git LFS pointer, not tensor data (the repo was cloned without git-lfs)";
  } else if (n >= 9 && head[8] == '{') {
    what = "a safetensors file, not a torch.save checkpoint";
  } else if (n == 0) {
    what = "an empty file, not a torch.save checkpoint";
  }
  return internal::Error(reason::kNotTorchCheckpoint, src.label(), what);
}

}  // namespace

uint64_t ElementSize(Dtype d) { return static_cast<uint64_t>(safetensors::DtypeBits(d)) / 8; }

uint64_t Tensor::num_elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) return UINT64_MAX;
  }
  return n;
}

uint64_t Tensor::nbytes() const {
  uint64_t b = 0;
  return __builtin_mul_overflow(num_elements(), ElementSize(dtype), &b) ? UINT64_MAX : b;
}

bool Tensor::is_contiguous() const {
  uint64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 0) return true;
    if (shape[i] != 1 && stride[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

const Tensor* Checkpoint::Find(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

uint64_t Checkpoint::storage_bytes() const {
  uint64_t total = 0;
  for (const auto& s : storages) total += s.nbytes;
  return total;
}

bool LooksLikeTorchCheckpoint(std::span<const uint8_t> prefix) {
  if (prefix.size() >= 4 && std::memcmp(prefix.data(), kZipMagic, 4) == 0) return true;
  return prefix.size() >= sizeof kLegacyMagic && std::memcmp(prefix.data(), kLegacyMagic, sizeof kLegacyMagic) == 0;
}

Result<Checkpoint> ReadCheckpoint(std::span<const uint8_t> bytes, std::string_view label, const Limits& limits) {
  internal::MemorySource src(bytes.data(), bytes.size(), std::string(label));
  return Read(src, limits);
}

Result<Checkpoint> ReadCheckpointFd(int fd, uint64_t size, std::string_view label, const Limits& limits) {
  internal::FdSource src(fd, size, std::string(label));
  return Read(src, limits);
}

Result<Checkpoint> ReadCheckpointFile(const std::string& path, const Limits& limits) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return util::IoError("cannot open", path, errno);
  struct stat st {};
  Result<Checkpoint> r = Status(Code::kInternal, "unreachable");
  if (::fstat(fd, &st) != 0) {
    r = util::IoError("cannot stat", path, errno);
  } else if (!S_ISREG(st.st_mode)) {
    r = internal::Error(reason::kIOError, path, "not a regular file", {}, Code::kIOError);
  } else {
    r = ReadCheckpointFd(fd, static_cast<uint64_t>(st.st_size), path, limits);
  }
  ::close(fd);
  return r;
}

Result<PickleFile> PickleFile::Open(const std::string& path, const Limits& limits) {
  HUBLOAD_ASSIGN_OR_RETURN(auto mapping, safetensors::MappedFile::Open(path));
  return FromMapping(std::move(mapping), limits);
}

Result<PickleFile> PickleFile::FromMapping(std::shared_ptr<safetensors::MappedFile> mapping, const Limits& limits) {
  if (!mapping) return Status(Code::kInvalidArgument, "PickleFile::FromMapping: null mapping");
  PickleFile f;
  HUBLOAD_ASSIGN_OR_RETURN(f.checkpoint_,
                           ReadCheckpoint(std::span<const uint8_t>(mapping->data(), mapping->size()),
                                          mapping->path(), limits));
  f.mapping_ = std::move(mapping);
  return f;
}

std::span<const uint8_t> PickleFile::data(const Storage& s) const {
  if (!mapping_ || s.offset > mapping_->size() || s.nbytes > mapping_->size() - s.offset) return {};
  return std::span<const uint8_t>(mapping_->data() + s.offset, s.nbytes);
}

const std::string& PickleFile::path() const {
  static const std::string kEmpty;
  return mapping_ ? mapping_->path() : kEmpty;
}

Status CheckShardAgainstIndex(const safetensors::Index& index, std::string_view shard_name, const Checkpoint& shard) {
  std::vector<std::string_view> names;
  names.reserve(shard.tensors.size());
  for (const auto& t : shard.tensors) names.push_back(t.name);
  return safetensors::CheckShardNamesAgainstIndex(index, shard_name, names);
}

}  // namespace hubload::pickle
