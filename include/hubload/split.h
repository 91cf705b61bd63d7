// hubload/split.h: the sharding plan of a state dict, exactly as
// huggingface_hub's `split_state_dict_into_shards_factory` (serialization/_base.py)
// computes it (loading-semantics.md C.1, C.2), and the lossless byte-level
// reshard of safetensors checkpoints built on it. Torch-free: the split works on
// (name, nbytes, storage id) tuples, so it is testable by hand.
//
// Thread safety: the split functions are pure; ReshardCheckpoint touches only
// the files it names (see there).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hubload/safetensors.h"
#include "hubload/status.h"

namespace hubload {

/// A max_shard_size as given on a command line or in SaveOptions: the one size
/// grammar of hubload/size.h (ParseMemorySize: "10GB" = 10*10^9 bytes, as
/// huggingface_hub's parse_size_to_int; "10GiB" = 10*2^30; plain digits =
/// bytes, like passing an int to huggingface_hub; "10Gb" refused as bits).
/// Errors: those of ParseMemorySize (reason InvalidMemorySize); 0 bytes is
/// refused (reason InvalidSize). Both quote the text.
Result<uint64_t> ParseMaxShardSize(std::string_view text);

/// One state-dict entry for the split.
struct SplitEntry {
  std::string name;
  /// Bytes counted for this entry: huggingface_hub uses the size of the whole
  /// underlying storage (`untyped_storage().nbytes()`).
  uint64_t nbytes = 0;
  /// Entries with the same storage id share storage: only the first (in order)
  /// is sized; the others are put in its shard afterwards. nullopt = never
  /// shared (huggingface_hub's `None`, e.g. meta tensors).
  std::optional<uint64_t> storage_id;
};

/// huggingface_hub `StateDictSplit`.
struct StateDictSplit {
  /// Sum of nbytes of the sized entries (aliases counted once).
  uint64_t total_size = 0;
  /// Shard file name -> entry names, in shard order (file 1 first); names in
  /// each shard in the order they were placed (aliases after the others).
  std::vector<std::pair<std::string, std::vector<std::string>>> filename_to_tensors;
  /// Entry name -> shard file name (the index's weight_map).
  std::map<std::string, std::string> tensor_to_filename;
  /// More than one shard (an index is written only then).
  bool is_sharded = false;
};

/// The huggingface_hub file-name pattern: `_add_variant(weights_name +
/// ".safetensors", variant)` with ".safetensors" replaced by "{suffix}.safetensors".
/// ("model", "") -> "model{suffix}.safetensors";
/// ("model", "fp16") -> "model.fp16{suffix}.safetensors".
std::string ShardFilenamePattern(const std::string& weights_name, const std::string& variant);

/// The index file name of a sharded save, as diffusers/transformers
/// (`_add_variant(name + ".safetensors.index.json", V)`):
/// ("model", "fp16") -> "model.safetensors.index.fp16.json".
std::string IndexFilename(const std::string& weights_name, const std::string& variant);

/// huggingface_hub `split_state_dict_into_shards_factory`, step for step:
/// a single greedy pass in `entries` order; an entry whose storage id was seen
/// before is deferred (alias); an entry larger than `max_shard_size` becomes its
/// own shard immediately (appended before the open shard); otherwise, if it
/// would push the open shard over the limit (strictly greater), the open shard
/// is closed first. Aliases then join the shard of the first entry of their
/// storage. One shard -> `pattern` with suffix "" and is_sharded = false (every
/// entry name mapped to it); more -> suffix "-%05d-of-%05d" (1-based).
/// An empty `entries` gives zero shards (nothing to write).
/// `filename_pattern` must contain "{suffix}" exactly once.
/// Errors: kInvalidArgument for a bad pattern, an empty or duplicate name,
/// or max_shard_size == 0.
Result<StateDictSplit> SplitStateDict(const std::vector<SplitEntry>& entries, uint64_t max_shard_size,
                                      const std::string& filename_pattern);

// ---------------------------------------------------------------------------
// Lossless resharding (`hubload reshard`).

/// The bytes a tensor is stored with after a conversion; `owner` keeps `data` alive.
struct ConvertedTensorBytes {
  std::shared_ptr<const void> owner;
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;
};

/// Converts tensor `info` of `file` to dtype `to` (a fresh buffer of
/// to-sized elements, same shape); errors are returned as they are.
using TensorBytesConverter = std::function<Result<ConvertedTensorBytes>(
    const safetensors::SafetensorsFile& file, const safetensors::TensorInfo& info, safetensors::Dtype to)>;

/// Where ReshardCheckpoint is, for progress displays.
struct ReshardProgress {
  std::string file;              // output shard being written (basename)
  uint64_t file_bytes_done = 0;  // its tensor bytes written so far
  uint64_t file_bytes_total = 0; // its tensor bytes
  uint64_t bytes_done = 0;       // tensor bytes written of every output shard so far
  uint64_t bytes_total = 0;      // tensor bytes of the output (ReshardResult::total_size)
  size_t files_done = 0;         // output shards complete (renamed into place)
  size_t files_total = 0;
};

struct ReshardOptions {
  /// huggingface_hub max_shard_size in bytes (> 0): a shard's tensor bytes stay
  /// within it unless one tensor alone is larger (then it is a shard of its own).
  uint64_t max_shard_size = 10'000'000'000ull;
  /// Output weights-name stem; "" = the source's when it is
  /// "diffusion_pytorch_model", else "model".
  std::string weights_name;
  /// Output variant ("" = none), as ShardFilenamePattern / IndexFilename.
  std::string variant;
  /// nullopt (default): every tensor keeps its dtype and bytes exactly as
  /// stored, whatever the dtype (U16, U64, F8_*, F4 ...). F32, F16 or BF16:
  /// every floating tensor (IsFloatingDtype) of another dtype is stored as that
  /// dtype, through `convert`; other tensors are copied as stored.
  std::optional<safetensors::Dtype> float_dtype;
  /// Required with float_dtype (the CLI passes LibTorch's LoadTensor).
  TensorBytesConverter convert;
  /// Progress (optional), called on the calling thread (calls are serialised):
  /// once before the first byte of each output shard, after every 64 MiB piece
  /// and every tensor written, and once when the shard is in place; not
  /// rate-limited further. Bytes are tensor bytes (headers not counted).
  std::function<void(const ReshardProgress&)> on_progress;
};

/// A resolved source checkpoint (local files), e.g. from the load driver's
/// fetch plan (`hubload reshard` resolves SRC as `hubload load` does).
struct ReshardSource {
  /// Weights files in load order (index order) or the single file; local paths.
  std::vector<std::string> files;
  /// The index file when sharded (every file is checked against it), "" otherwise.
  std::string index_file;
  /// The source's weights-name stem ("model", "diffusion_pytorch_model"): the
  /// default output name.
  std::string weights_name;
};

/// What ReshardCheckpoint wrote (basenames inside the output folder).
struct ReshardResult {
  std::vector<std::string> files;  // shard order
  std::string index_file;          // "" when the output is one file
  uint64_t total_size = 0;         // tensor bytes written
  std::vector<std::string> removed_stale;
};

/// Rewrites the checkpoint `src` into `out_dir` (created if needed), byte for
/// byte: a safetensors-level operation that needs no LibTorch.
///  - Split: SplitStateDict over every tensor in load order (files in `src`
///    order, tensors in file order), sized by their bytes as stored (as
///    converted with float_dtype), names from ShardFilenamePattern; inside a
///    file tensors in the safetensors writer order (SerializeHeader). A
///    checkpoint without tensors still gives one (empty) file.
///  - `__metadata__` of the sources is kept in every output file (one merged
///    map; "format": "pt" added when absent). A key that two source files give
///    different values is an error (kInvalidFormat, reason MetadataConflict)
///    naming the key, both values and both files. With one output file the
///    source index's metadata (but total_size) joins it, as huggingface_hub's
///    save_torch_state_dict does (non-string values as compact JSON; a
///    conflict with a file's value is the same error).
///  - The index (only with more than one output file, written last, indent 2):
///    `metadata` = total_size of the output, then the source index's other
///    metadata values unchanged (JSON values kept as they are), or, for a
///    single-file source, its `__metadata__` but "format" (so that alias
///    entries `removed -> kept` still restore); `weight_map` sorted by name.
///  - Every file goes to a temp name, is fsync'ed and renamed; then stale files
///    of the output weights name and variant are removed as SaveSharded does
///    (B27). `out_dir` may be the source folder: mapped sources stay readable.
///  - Memory: source bytes are written from read-only mappings whose pages are
///    released as they are written (about one 64 MiB piece resident at a time);
///    converted tensors of one output file are held until it is written.
/// Errors: kInvalidArgument (no file, max_shard_size 0, float_dtype not
/// F32/F16/BF16 or without `convert`, bad variant or weights name); those of
/// ReadIndex, SafetensorsFile::Open, CheckShardAgainstIndex, SplitStateDict (a
/// tensor in two files: DuplicateTensor) and the writer (kDiskFull, kIOError);
/// kUnsupported (reason UnsupportedDtype) for a floating tensor float_dtype
/// cannot reach (F4, F6_*, F8_*FNUZ), naming it; the converter's errors
/// (annotated with the file and tensor).
/// Thread safety: touches only `src`'s files and `out_dir`; concurrent calls
/// on distinct output folders are fine.
Result<ReshardResult> ReshardCheckpoint(const ReshardSource& src, const std::string& out_dir,
                                        const ReshardOptions& options);

}  // namespace hubload
