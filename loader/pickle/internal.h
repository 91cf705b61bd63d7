// Private pieces of the torch-free pickle checkpoint reader (not installed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hubload/pickle.h"
#include "hubload/status.h"
#include "util/text.h"

namespace hubload::pickle::internal {

/// Random-access bytes of one checkpoint file. ReadAt fills exactly `n` bytes
/// or fails (a short read is kIOError naming the label).
class Source {
 public:
  virtual ~Source() = default;
  virtual uint64_t size() const = 0;
  virtual Status ReadAt(uint64_t offset, void* dst, size_t n) const = 0;
  virtual const std::string& label() const = 0;
  /// The whole file in memory, or nullptr (read through ReadAt only).
  virtual const uint8_t* memory() const { return nullptr; }
};

/// Bytes in memory (a mapping or a buffer), borrowed.
class MemorySource final : public Source {
 public:
  MemorySource(const uint8_t* data, uint64_t size, std::string label)
      : data_(data), size_(size), label_(std::move(label)) {}
  uint64_t size() const override { return size_; }
  Status ReadAt(uint64_t offset, void* dst, size_t n) const override;
  const std::string& label() const override { return label_; }
  const uint8_t* memory() const override { return data_; }

 private:
  const uint8_t* data_;
  uint64_t size_;
  std::string label_;
};

/// An open file descriptor read with pread (not owned, offset untouched).
class FdSource final : public Source {
 public:
  FdSource(int fd, uint64_t size, std::string label) : fd_(fd), size_(size), label_(std::move(label)) {}
  uint64_t size() const override { return size_; }
  Status ReadAt(uint64_t offset, void* dst, size_t n) const override;
  const std::string& label() const override { return label_; }

 private:
  int fd_;
  uint64_t size_;
  std::string label_;
};

/// A kInvalidFormat (or `code`) Status "<label>: <what>" with reason and
/// ErrorContext file (and tensor when given).
Status Error(std::string_view reason, std::string_view label, const std::string& what,
             std::string_view tensor = {}, Code code = Code::kInvalidFormat);


/// What the unpickler found in a state-dict pickle: storages (offset unset,
/// nbytes = numel x element size) and tensors (geometry checked against that
/// size already).
struct StateDictPickle {
  std::vector<Storage> storages;
  std::vector<Tensor> tensors;
  /// storages[i].key -> i.
  std::unordered_map<std::string, uint32_t> by_key;
};

/// Runs the restricted unpickler over the pickle at `data` (n bytes, which may
/// continue after its STOP: *consumed receives the bytes used) and extracts
/// the state dict. `legacy` accepts the 6-element legacy persistent ids.
/// On failure *truncated (if given) says whether the input ended too early.
Result<StateDictPickle> UnpickleStateDict(const uint8_t* data, size_t n, std::string_view label,
                                          std::string_view where, const Limits& limits, bool legacy,
                                          size_t* consumed,
                                          bool* truncated = nullptr);

/// A plain value of one of the legacy format's small header pickles.
struct PlainValue {
  enum Kind { kNone, kBool, kInt, kBigInt, kFloat, kString, kBytes, kList, kDict, kOther } kind = kNone;
  int64_t i = 0;
  /// kBigInt: little-endian two's complement bytes; kString/kBytes: the bytes.
  std::string bytes;
  /// kList: elements; kDict: alternating key, value.
  std::vector<PlainValue> items;
};

/// Runs the restricted unpickler over one small pickle holding only plain
/// values (no globals) and returns it, nested at most `max_depth` deep.
Result<PlainValue> UnpicklePlain(const uint8_t* data, size_t n, std::string_view label, std::string_view where,
                                 const Limits& limits, size_t* consumed, bool* truncated = nullptr);

/// Legacy format: the description from `src`, whose first byte starts the
/// magic-number pickle.
Result<Checkpoint> ReadLegacy(const Source& src, const Limits& limits);

/// Zip format: the description from `src`.
Result<Checkpoint> ReadZip(const Source& src, const Limits& limits);

/// Checks the tensors' storages against the file (offset/nbytes set, inside
/// the file, not overlapping each other) and moves storages + tensors into `out`.
Status FinishCheckpoint(StateDictPickle&& sd, const Source& src, Checkpoint* out);

}  // namespace hubload::pickle::internal
