// hubload/pickle.h: legacy PyTorch checkpoints (`pytorch_model.bin`,
// `diffusion_pytorch_model.bin`, `*.pt`) read WITHOUT running pickled code.
// Torch-free: the reader only builds a description of the state dict (names,
// dtypes, shapes, strides, storage offsets and the byte range of every
// storage in the file); include/hubload/torch_pickle.h turns it into tensors.
//
// Formats (as torch/serialization.py writes them, PyTorch 1.6 .. 2.x):
//  - zip (default since 1.6): a STORED (uncompressed) zip archive holding
//    `<archive>/data.pkl` (the pickle), `<archive>/data/<key>` (one entry per
//    storage, raw little-endian bytes, 64-byte aligned by PyTorch's writer),
//    `<archive>/version`, optionally `<archive>/byteorder` ("little"/"big").
//    `<archive>` is the folder of the archive's first entry (PyTorchStreamReader).
//    Zip parsing uses libminizip (unzGetCurrentFileZStreamPos64 gives each
//    entry's data offset, which zero-copy needs); zip64 is supported.
//  - legacy (`_use_new_zipfile_serialization=False`, and every file written by
//    PyTorch < 1.6): five pickles in a row — magic number
//    0x1950a86a20f9469cfc6c, protocol version 1001, sys_info (must say
//    little_endian), the state dict, the sorted list of storage keys — then for
//    each key in that order an int64 element count and the storage bytes.
//
// The unpickler (protocols 2 to 5) knows only the opcodes a state dict needs
// and only these globals, a subset of torch.load(weights_only=True)'s
// allow-list (torch/_weights_only_unpickler.py):
//   collections.OrderedDict; torch._utils._rebuild_tensor,
//   _rebuild_tensor_v2, _rebuild_tensor_v3, _rebuild_parameter,
//   _rebuild_parameter_with_state; torch._tensor._rebuild_from_type_v2 with
//   torch.Tensor / torch.nn.parameter.Parameter and an empty state;
//   torch.Size; _codecs.encode (bytes under protocol 2); the storage classes
//   torch.{Float,Double,Half,BFloat16,Long,Int,Short,Char,Byte,Bool,
//   ComplexFloat}Storage (also under torch.cuda), torch.UntypedStorage /
//   torch.storage.UntypedStorage; the dtypes torch.float32, float64, float16,
//   bfloat16, int64, int32, int16, int8, uint8, bool, complex64, uint16,
//   uint32, uint64, float8_e4m3fn, float8_e5m2, float8_e8m0fnu,
//   float8_e4m3fnuz, float8_e5m2fnuz.
// Any other GLOBAL / STACK_GLOBAL (os.system, builtins.eval, posix.system, an
// unknown class) is refused when the opcode is read, with an error naming the
// file and the global; nothing is ever imported or called. Globals that
// weights_only allows but hubload does not load (quantized, sparse, nested,
// meta tensors, torch.device, complex128, ...) are kUnsupported naming them.
// BUILD is accepted only on a dict/OrderedDict with a dict state (the state
// dict's `_metadata` attribute, which is read and dropped); REDUCE only on the
// callables above; NEWOBJ, INST, OBJ, EXT*, sets and out-of-band buffers are
// refused. Persistent ids must be ('storage', <storage class>, key, location,
// numel) (+ a None view_metadata in the legacy format).
//
// Accepted result: a dict or OrderedDict whose keys are strings (valid UTF-8)
// and whose values are tensors or Parameters — a flat state dict, as
// transformers and diffusers write (they never nest). Any other value is
// refused (reason PickleNotStateDict) naming the key.
//
// Checks: every storage key a tensor uses exists in the archive (zip) or in
// the key list (legacy); every storage's byte length equals numel x element
// size of its storage class; every tensor's storage_offset + extent of
// size/stride lies inside its storage; storages do not overlap each other.
// Bytes are never read beyond the zip directory, data.pkl and (legacy) the
// pickles and 8-byte size fields: no per-element work, no CRC check.
//
// Errors are Status values (no exception escapes): kInvalidFormat for
// malformed or refused input, kUnsupported for valid torch data hubload does
// not load, kNotFound / kIOError for the file system; every message names the
// file label (and the tensor or global at fault); ErrorContext::file is set.
// Reasons (include/hubload/reasons.h, "pickle" group): NotTorchCheckpoint,
// ZipMalformed, ZipUnsupported, PickleMalformed, PickleOpcode,
// PickleUnsafeGlobal, PickleUnsupportedGlobal, PickleLimit,
// PickleNotStateDict, PickleStorageMissing, PickleStorageSize,
// PickleTensorOutOfRange, PickleUnsupportedTensor.
//
// Thread safety: free functions are pure or touch only the file/fd given;
// they may run concurrently. Checkpoint is a plain value; PickleFile is
// immutable after Open and may be read from any number of threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hubload/safetensors.h"
#include "hubload/status.h"

namespace hubload::pickle {

/// Bounds on what one checkpoint may make the reader allocate or do. A file
/// that exceeds one is refused (kInvalidFormat, reason PickleLimit) naming
/// the limit; nothing larger than the input is ever allocated.
struct Limits {
  /// Size of the pickle (`data.pkl`, or the legacy pickle stream) in bytes.
  uint64_t max_pickle_bytes = 1ull << 30;
  /// MARK nesting (open tuples/lists/dicts being built).
  uint32_t max_depth = 64;
  /// Values on the unpickler stack at once.
  uint64_t max_stack = 1ull << 24;
  /// Values built in total (the description of one tensor takes ~20).
  uint64_t max_objects = 1ull << 26;
  /// Memo entries (BINPUT / LONG_BINPUT / MEMOIZE).
  uint64_t max_memo = 1ull << 24;
  /// Bytes of one string or bytes value (tensor names, storage keys).
  uint64_t max_string_bytes = 64ull << 20;
  /// Dimensions of one tensor.
  uint32_t max_dims = 64;
  /// Entries of the zip archive.
  uint64_t max_zip_entries = 1ull << 20;
};

enum class Format { kZip, kLegacy };

/// One storage (a contiguous buffer several tensors may view).
struct Storage {
  /// The persistent-id key ("0", "1", ... in zip files; a number in legacy ones).
  std::string key;
  /// Element type of the storage class (torch.FloatStorage -> F32;
  /// UntypedStorage -> U8, then numel counts bytes).
  safetensors::Dtype dtype = safetensors::Dtype::U8;
  /// Elements, as pickled.
  uint64_t numel = 0;
  /// Absolute byte offset of the storage's first byte in the file.
  uint64_t offset = 0;
  /// Bytes (numel x element size; equals the zip entry's / legacy record's size).
  uint64_t nbytes = 0;
  /// Device tag as pickled ("cpu", "cuda:0"); informational, tensors load on CPU.
  std::string location;
};

/// One state-dict entry: a strided view of a storage.
struct Tensor {
  std::string name;
  /// Element type (the storage class's, or _rebuild_tensor_v3's dtype argument).
  safetensors::Dtype dtype = safetensors::Dtype::F32;
  /// Sizes, outermost first; empty for a 0-d tensor (1 element).
  std::vector<uint64_t> shape;
  /// Strides in elements, one per dimension.
  std::vector<uint64_t> stride;
  /// Offset of element [0,...,0] from the storage start, in elements of `dtype`.
  uint64_t storage_offset = 0;
  /// Index into Checkpoint::storages.
  uint32_t storage = 0;
  bool requires_grad = false;
  /// Pickled as a torch.nn.Parameter (_rebuild_parameter).
  bool is_parameter = false;

  /// Product of shape (1 for 0-d). Overflow-free on a Checkpoint from the reader.
  uint64_t num_elements() const;
  /// num_elements() x element size, in bytes (the size of a contiguous copy).
  uint64_t nbytes() const;
  /// True when the strides are the row-major strides of shape (dims of size 1
  /// are ignored, as torch's is_contiguous does).
  bool is_contiguous() const;
};

/// The description of one checkpoint file.
struct Checkpoint {
  Format format = Format::kZip;
  /// Zip: the archive folder name ("archive", "pytorch_model", ...); legacy: "".
  std::string archive;
  /// Zip: the `version` record (0 when absent); legacy: the protocol (1001).
  int64_t version = 0;
  uint64_t file_size = 0;
  /// Storages in order of first use by a tensor.
  std::vector<Storage> storages;
  /// Tensors in pickle (= state dict insertion) order. A tensor object stored
  /// under two names appears twice, with the same storage and geometry.
  std::vector<Tensor> tensors;
  /// Non-fatal notes (e.g. an entry without storage use).
  std::vector<std::string> warnings;

  /// The tensor called `name`, or nullptr. Linear scan.
  const Tensor* Find(std::string_view name) const;
  /// Sum of the storages' bytes (each shared storage once).
  uint64_t storage_bytes() const;
};

/// True when `prefix` (the first bytes of a file, at least 16 available for a
/// reliable answer) starts like a torch.save file: a zip local header
/// "PK\x03\x04" or the legacy magic-number pickle.
bool LooksLikeTorchCheckpoint(std::span<const uint8_t> prefix);

/// Reads the description of the checkpoint held in `bytes` (e.g. a mapping
/// of the whole file). `label` names it in errors. The bytes are read, never
/// kept: offsets in the result are relative to bytes.data().
/// Errors: see the file comment; a file that is neither format is
/// kInvalidFormat reason NotTorchCheckpoint (saying when it is a Git LFS
/// pointer or a safetensors file instead).
Result<Checkpoint> ReadCheckpoint(std::span<const uint8_t> bytes, std::string_view label,
                                  const Limits& limits = {});

/// As ReadCheckpoint, from an open file descriptor of a file of `size` bytes
/// (pread only: the fd's offset is not used or moved; the storages are not
/// read). Errors also: kIOError for a failed or short read (the file shrank).
Result<Checkpoint> ReadCheckpointFd(int fd, uint64_t size, std::string_view label, const Limits& limits = {});

/// As ReadCheckpointFd on the file at `path` (label = path).
/// Errors also: kNotFound, kIOError (open/fstat, not a regular file).
Result<Checkpoint> ReadCheckpointFile(const std::string& path, const Limits& limits = {});

/// A mapped checkpoint: its description plus the read-only mapping the
/// storages live in (what torch_pickle.h makes tensors from).
class PickleFile {
 public:
  /// Maps `path` (safetensors::MappedFile) and reads its description.
  /// Errors: those of MappedFile::Open and ReadCheckpoint.
  static Result<PickleFile> Open(const std::string& path, const Limits& limits = {});
  /// Reads the description of an existing mapping (label = its path).
  static Result<PickleFile> FromMapping(std::shared_ptr<safetensors::MappedFile> mapping,
                                        const Limits& limits = {});

  const Checkpoint& checkpoint() const { return checkpoint_; }
  const std::shared_ptr<safetensors::MappedFile>& mapping() const { return mapping_; }
  /// The bytes of `s` (a storage of checkpoint()) inside the mapping; valid
  /// while mapping() lives. Not necessarily aligned (legacy files never are).
  std::span<const uint8_t> data(const Storage& s) const;
  const std::string& path() const;

 private:
  std::shared_ptr<safetensors::MappedFile> mapping_;
  Checkpoint checkpoint_;
};

/// Checks shard `shard_name` of a `.bin` index (safetensors::ReadIndex(path,
/// ".bin")) against its description, with the rules and reasons of
/// safetensors::CheckShardAgainstIndex (IndexTensorMissing,
/// IndexTensorUnlisted, IndexTensorInOtherShard).
Status CheckShardAgainstIndex(const safetensors::Index& index, std::string_view shard_name,
                              const Checkpoint& shard);

/// Writes every tensor of `file` as one safetensors file `out_path`
/// (safetensors::WriteFile, metadata {"format": "pt"}): each name its own
/// row-major little-endian copy of the view as Python sees it — the bytes of
/// `t.contiguous()` — so tied weights are written under each name, as the
/// usual `save_file({k: v.contiguous() ...})` conversion script does (it
/// clones shared tensors). Contiguous views are written straight from the
/// mapping; strided ones are gathered. Errors: kInvalidFormat
/// (PickleTensorOutOfRange, PickleStorageMissing), those of WriteFile.
/// Thread-safe for distinct `out_path`s.
Status ConvertToSafetensors(const PickleFile& file, const std::string& out_path);

/// Element size in bytes of a dtype the reader produces (DtypeBits / 8).
uint64_t ElementSize(safetensors::Dtype d);

}  // namespace hubload::pickle
