// hubload/safetensors.h: the safetensors container format: parse and validate
// headers, map files read-only, write files atomically, read sharded index
// files (`*.safetensors.index.json`). No LibTorch; no third-party types here.
//
// Format (huggingface/safetensors README + `safetensors/src/tensor.rs`):
//   u64 little-endian N | N bytes of UTF-8 JSON header | data section.
// The header maps tensor names to {"dtype", "shape", "data_offsets":[begin,end]}
// (offsets in bytes, relative to the data section, which starts at byte 8+N of
// the file), plus an optional "__metadata__" object of string -> string.
//
// Errors: every failure is a Status with Code::kInvalidFormat (bad input),
// kNotFound / kIOError / kDiskFull (file system) or kInvalidArgument (caller
// misuse). Format errors carry a stable `reason` (listed on each function) and a
// message naming the file label, the tensor (when one is at fault) and the rule
// broken; ErrorContext::file and ::tensor are filled in.
//
// Thread safety: all free functions are pure or touch only the files named in
// their arguments; they may be called concurrently. Header, TensorInfo and Index
// are plain values. MappedFile and SafetensorsFile are immutable after Open and
// may be read from any number of threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hubload/status.h"

namespace hubload::safetensors {

/// Element types, in the safetensors Rust `Dtype` enum order (increasing
/// alignment; loading-semantics.md E.2). The writer sorts by this order.
enum class Dtype {
  BOOL,
  F4,
  F6_E2M3,
  F6_E3M2,
  U8,
  I8,
  F8_E5M2,
  F8_E4M3,  // the "fn" variant (torch.float8_e4m3fn)
  F8_E8M0,
  F8_E4M3FNUZ,
  F8_E5M2FNUZ,
  I16,
  U16,
  F16,
  BF16,
  I32,
  U32,
  F32,
  C64,
  F64,
  I64,
  U64,
};

/// Number of Dtype values (U64 + 1).
inline constexpr int kNumDtypes = static_cast<int>(Dtype::U64) + 1;

/// The exact header spelling of `d` ("F32", "BF16", "F8_E4M3", ...).
const char* DtypeName(Dtype d);
/// Inverse of DtypeName; exact, case-sensitive match. nullopt for anything else.
std::optional<Dtype> DtypeFromName(std::string_view name);
/// Bits per element (Rust `Dtype::bitsize()`): 4 for F4, 6 for F6_*, 8..64 otherwise.
int DtypeBits(Dtype d);

/// One tensor entry of a header.
struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::F32;
  /// Dimensions, outermost first (row-major). Empty = 0-d scalar (1 element).
  std::vector<uint64_t> shape;
  /// data_offsets: byte range [begin, end) relative to the data section start.
  uint64_t begin = 0;
  uint64_t end = 0;

  /// Product of shape (1 for a 0-d tensor). Overflow-free on a parsed Header.
  uint64_t num_elements() const;
  /// end - begin, in bytes (== num_elements() * DtypeBits(dtype) / 8 once validated).
  uint64_t nbytes() const;
};

/// A parsed, fully validated header.
struct Header {
  /// "__metadata__" entries (empty when absent or null).
  std::map<std::string, std::string> metadata;
  /// Tensors in file order: sorted by (begin, end), ties by name.
  std::vector<TensorInfo> tensors;
  /// N: length of the JSON header in bytes (including any padding).
  uint64_t header_len = 0;
  /// 8 + N: file offset of the data section.
  uint64_t data_start = 0;
  /// Total file size in bytes (== data_start + end of the last tensor).
  uint64_t file_size = 0;

  /// The tensor called `name`, or nullptr. O(log n) (binary search on a sorted
  /// name index built by ParseHeader; a linear scan on a hand-built Header).
  const TensorInfo* Find(std::string_view name) const;
  /// Sum of all tensors' nbytes() = size of the data section.
  uint64_t data_size() const;

  /// Internal: indices into `tensors` sorted by name (filled by ParseHeader).
  std::vector<uint32_t> by_name;
};

/// Upper bound on N (Rust `MAX_HEADER_SIZE`): 100,000,000 bytes.
inline constexpr uint64_t kMaxHeaderSize = 100'000'000;

/// Given the first bytes of a file of `file_size` bytes, returns how many bytes
/// (8 + N) are needed to parse its header. `bytes` must hold
/// min(8, file_size) bytes at least (fewer -> kInvalidArgument).
/// Errors (kInvalidFormat): GitLfsPointer, HtmlPage (recognised from the
/// available prefix), HeaderTooSmall, HeaderTooLarge, InvalidHeaderLength
/// (message says "truncated" when 8+N > file_size).
Result<uint64_t> PeekHeaderLength(const uint8_t* bytes, size_t n_bytes_available,
                                  uint64_t file_size, std::string_view file_label);

/// Parses and validates the header of a safetensors file of `file_size` bytes,
/// whose first `n_bytes_available` bytes are `bytes` (a prefix of at least 8+N
/// bytes suffices: the data section is never read). `file_label` names the file
/// in messages (a repo path or local path).
///
/// Checks, in order (loading-semantics.md E.1; reasons are Status::reason()):
///   GitLfsPointer (text "version https://git-lfs.github.com/spec/v1"),
///   HtmlPage (starts with "<!DOCTYPE" or "<html", any case, after whitespace),
///   HeaderTooSmall (file < 8 bytes), HeaderTooLarge (N > kMaxHeaderSize),
///   InvalidHeaderLength (8+N > file size: "truncated"),
///   InvalidHeaderUtf8, InvalidHeaderJson (not JSON, not an object, nesting
///   deeper than 64, wrong field types, bad shape/data_offsets, metadata values
///   not strings), UnknownDtype, DuplicateTensor (same key twice in the JSON),
///   then per tensor in (begin,end) order: InvalidOffset (first begin != 0, hole,
///   overlap, end < begin), ValidationOverflow (shape product or bits overflow
///   u64), MisalignedSlice (elements*bits % 8 != 0), TensorInvalidInfo
///   (end-begin != elements*bits/8); finally MetadataIncompleteBuffer
///   (8+N+last_end != file_size: "trailing bytes" or "truncated").
/// Leading/trailing JSON whitespace in the header is accepted (as the Rust
/// parser does). Unknown fields inside a tensor entry are ignored (as Rust).
/// kInvalidArgument if fewer than 8+N bytes (or 8) are available.
Result<Header> ParseHeader(const uint8_t* bytes, size_t n_bytes_available, uint64_t file_size,
                           std::string_view file_label);

/// Reads and validates only the header of the file at `path` (two pread()s; the
/// data section is not read or mapped). Errors: kNotFound, kIOError, and those
/// of ParseHeader (the label is `path`).
Result<Header> ReadMetadata(const std::string& path);

/// A read-only memory mapping of a whole file (mmap PROT_READ, MAP_SHARED).
/// The mapping stays valid while any shared_ptr copy lives, even if the file
/// is replaced by rename (WriteFile never truncates in place).
class MappedFile {
 public:
  /// Maps `path`. An empty file gives size() == 0 and data() == nullptr.
  /// Errors: kNotFound, kIOError (open/fstat/mmap failure, not a regular file).
  static Result<std::shared_ptr<MappedFile>> Open(const std::string& path);
  /// Maps `size` bytes of the open descriptor `fd` (not taken over: the
  /// caller may close it afterwards; the mapping stays valid). `size` may
  /// exceed the file's current length (a download still being written):
  /// reading a page past the current end of file raises SIGBUS, so callers
  /// read only bytes known to be written. `label` is reported by path().
  /// Errors: kIOError (mmap failure).
  static Result<std::shared_ptr<MappedFile>> FromFd(int fd, uint64_t size, std::string label);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
};

/// A mapped and validated safetensors file: zero-copy views of its tensors.
class SafetensorsFile {
 public:
  /// Maps `path` and validates its header (ParseHeader over the mapping).
  /// Errors: those of MappedFile::Open and ParseHeader.
  static Result<SafetensorsFile> Open(const std::string& path);
  /// A file from a mapping and a header already parsed from its bytes (the
  /// streaming loader parses the header as soon as its bytes land, before the
  /// rest of the file exists). `header.file_size` must not exceed the mapping.
  /// Errors: kInvalidArgument when it does.
  static Result<SafetensorsFile> FromParts(std::shared_ptr<MappedFile> mapping, Header header);

  const Header& header() const { return header_; }
  /// The bytes of `t` inside the mapping (t must come from header(); a range
  /// outside the file gives an empty span). Valid while mapping() lives.
  /// Not necessarily aligned to the element size (foreign files may have
  /// unpadded headers): copy before reinterpreting if alignment matters.
  std::span<const uint8_t> data(const TensorInfo& t) const;
  /// data(*header().Find(name)), or an empty span with *found = false.
  std::span<const uint8_t> data(std::string_view name, bool* found = nullptr) const;
  const std::shared_ptr<MappedFile>& mapping() const { return mapping_; }

 private:
  std::shared_ptr<MappedFile> mapping_;
  Header header_;
};

/// One tensor handed to the writer. `data` points at nbytes bytes,
/// little-endian, row-major; it may be null when nbytes == 0.
struct TensorToWrite {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<uint64_t> shape;
  const void* data = nullptr;
  uint64_t nbytes = 0;
};

/// Validates `*tensors`, sorts them into the writer order of the Rust
/// `serialize` (`prepare`): dtype descending in Dtype enum order, then name
/// ascending; and returns the complete file prefix: 8-byte LE length N followed
/// by the JSON header ("__metadata__" first when `metadata` is non-empty, then
/// the tensors with contiguous data_offsets, compact JSON starting with '{'),
/// padded with spaces so that N % 8 == 0. The data section is then the tensors'
/// bytes concatenated in the new order of `*tensors`.
/// Errors (kInvalidArgument): name "__metadata__" or not valid UTF-8, DuplicateTensor,
/// size mismatch (nbytes != elements*bits/8, or elements*bits not a multiple of
/// 8), null data with nbytes > 0, overflow. (An empty name is accepted, as by
/// the reader and the Rust writer.)
Result<std::string> SerializeHeader(std::vector<TensorToWrite>* tensors,
                                    const std::map<std::string, std::string>& metadata);

/// Writes a safetensors file atomically: a temp file "<path>.tmp.XXXXXX" in the
/// same directory receives SerializeHeader's prefix and the data, is fsync'ed and
/// renamed over `path`, then the directory is fsync'ed. On failure the temp file
/// is removed and `path` is untouched. A reader that has `path` mapped keeps its
/// old view. Default metadata {"format":"pt"} as safetensors.torch.save_file.
/// Errors: those of SerializeHeader, kDiskFull (ENOSPC/EDQUOT/EFBIG), kIOError.
Status WriteFile(const std::string& path, std::vector<TensorToWrite> tensors,
                 const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

/// A sharded checkpoint index (`model.safetensors.index.json`,
/// loading-semantics.md B).
struct Index {
  /// Tensor name -> shard file basename.
  std::map<std::string, std::string> weight_map;
  /// metadata.total_size when present (bytes of tensor data, headers excluded).
  std::optional<uint64_t> total_size;
  /// Every other metadata field, stringified: strings as is, other JSON values
  /// as compact JSON text (numbers "123", true/false, nested objects).
  std::map<std::string, std::string> metadata;
  /// Unique shard names, sorted ascending (as diffusers'
  /// `sorted(set(weight_map.values()))`).
  std::vector<std::string> shards;
  /// Shard name -> its tensor names (sorted ascending).
  std::map<std::string, std::vector<std::string>> tensors_by_shard;
};

/// True when `name` is a plain shard basename ending in `suffix` (".safetensors";
/// ".bin" for the shards of a `pytorch_model.bin.index.json`): longer than the
/// suffix, no '/', '\\', NUL, no "..", not "." or "..", no drive prefix like "C:".
bool IsValidShardName(std::string_view name, std::string_view suffix = ".safetensors");

/// Parses an index. Errors (kInvalidFormat, reasons): InvalidIndexJson (not
/// JSON, not an object, nesting deeper than 64, weight_map missing or not an
/// object, a weight_map value not a string, metadata present but not an object
/// or null), InvalidShardName (see IsValidShardName; message names the tensor),
/// InvalidTotalSize (total_size not a non-negative integer; an integral float
/// like 1.0e9 is accepted), DuplicateTensor (a weight_map key appears twice).
/// Shard names must end in `shard_suffix` (".bin" for a pickle index).
Result<Index> ParseIndex(std::string_view json_text, std::string_view file_label,
                         std::string_view shard_suffix = ".safetensors");

/// Reads `path` and ParseIndex()es it (label = path). Errors: kNotFound,
/// kIOError, and those of ParseIndex.
Result<Index> ReadIndex(const std::string& path, std::string_view shard_suffix = ".safetensors");

/// Checks that shard `shard_name` agrees with the index: every tensor the index
/// puts in that shard is in `shard_header` (reason IndexTensorMissing), and every
/// tensor of the shard is listed by the index for this shard (reasons
/// IndexTensorUnlisted: not in weight_map; IndexTensorInOtherShard: the index
/// puts it in another shard). kInvalidFormat, message names shard and tensor.
/// (Recommended extra check 6 in loading-semantics.md B; no HF reader does it.)
Status CheckShardAgainstIndex(const Index& index, std::string_view shard_name,
                              const Header& shard_header);

/// As CheckShardAgainstIndex for a shard whose tensor names are `names` (in
/// file order), whatever its format (pickle::CheckShardAgainstIndex uses it).
Status CheckShardNamesAgainstIndex(const Index& index, std::string_view shard_name,
                                   std::span<const std::string_view> names);

/// The lenient form of CheckShardNamesAgainstIndex (the index is the
/// authority, field failure B49; PretrainedRequest::lenient_index): the
/// names of the shard's tensors that the index does not map to this shard
/// (not in weight_map, or mapped to another shard), in file order, for the
/// caller to skip and name in a warning; empty when the shard agrees. Still
/// errors, as CheckShardNamesAgainstIndex: a tensor the index maps here that
/// the shard lacks (IndexTensorMissing), a shard the index does not name.
/// Thread-safe (reads only).
Result<std::vector<std::string>> ShardTensorsNotMappedHere(const Index& index, std::string_view shard_name,
                                                            std::span<const std::string_view> names);

/// One problem found by CheckIndexAgainstShards.
struct IndexProblem {
  std::string reason;   // reason::kIndexTensorMissing, kIndexTensorUnlisted, kIndexTensorInOtherShard,
                        // kIndexTensorStoredTwice, kIndexShardMissing, kIndexShardUnreadable
  std::string shard;    // shard basename
  std::string tensor;   // "" for a problem of the whole shard
  std::string message;  // one line naming the shard, the tensor and the rule broken
};

/// What CheckIndexAgainstShards needs of one shard the index names.
struct ShardTensors {
  std::string shard;  // basename, as in weight_map
  /// false: the file is absent (every tensor the index puts there is then one
  /// kIndexShardMissing problem for the shard, not one per tensor).
  bool present = true;
  /// Set when the file exists but cannot be read: one kIndexShardUnreadable problem.
  std::string unreadable;
  /// (tensor name, data bytes) in file order.
  std::vector<std::pair<std::string, uint64_t>> tensors;
};

struct IndexCheck {
  std::vector<IndexProblem> problems;  // shard order of `shards`, then tensor order
  /// Sum of the data bytes of every tensor of the readable shards (a tensor
  /// stored twice counts twice, as its bytes are on disk twice).
  uint64_t tensor_bytes = 0;
  /// TotalSizeWarning(index, tensor_bytes) when every shard was read, else "".
  std::string total_size_warning;
};

/// The whole-checkpoint cross-check of an index with its shards, the rules of
/// CheckShardNamesAgainstIndex applied to every shard at once and every
/// problem collected (not only the first): listed-but-absent tensors, a
/// tensor in the wrong shard, a tensor stored in several shards, tensors no
/// index entry lists, shards absent or unreadable. `inspect INDEX` reports
/// them all; `load` stops at the first (CheckShardNamesAgainstIndex, shard by
/// shard as they land). Pure function; thread-safe.
IndexCheck CheckIndexAgainstShards(const Index& index, const std::vector<ShardTensors>& shards);

/// "" when index.total_size is absent or equals `tensor_bytes` (the sum of
/// the tensors' data bytes); else one line naming both numbers (reason
/// kTotalSizeMismatch). transformers reads total_size only as metadata, so
/// a mismatch is a warning for load.
std::string TotalSizeWarning(const Index& index, uint64_t tensor_bytes);

}  // namespace hubload::safetensors
