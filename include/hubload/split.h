// hubload/split.h: the sharding plan of a state dict, exactly as
// huggingface_hub's `split_state_dict_into_shards_factory` (serialization/_base.py)
// and `parse_size_to_int` compute it (loading-semantics.md C.1, C.2). Torch-free:
// it works on (name, nbytes, storage id) tuples, so it is testable by hand.
//
// Thread safety: pure functions on values; call from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hubload/status.h"

namespace hubload {

/// huggingface_hub `parse_size_to_int`: strips whitespace, the last two
/// characters (upper-cased) must be KB, MB, GB or TB (decimal: 10^3 .. 10^12),
/// the rest is a decimal number (fractions allowed: "1.5GB"); the result is
/// truncated toward zero: "5GB" = 5,000,000,000 bytes.
/// Stricter than Python: negative, NaN and infinite values are refused.
/// Errors: kInvalidArgument (reason InvalidSize) naming the text and the rule
/// ("KiB", "10B", "abc", "" are refused as in huggingface_hub).
Result<uint64_t> ParseSizeToInt(std::string_view text);

/// A max_shard_size given on a command line: plain digits = bytes (like passing
/// an int to huggingface_hub), anything else goes through ParseSizeToInt.
/// Errors: those of ParseSizeToInt; 0 is refused.
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

}  // namespace hubload
