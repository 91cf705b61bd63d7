// hubload/torch_loader.h: safetensors -> LibTorch tensors, the dtype policy,
// loading into torch::nn::Module (assign / copy), and sharded saves.
// The only public hubload header that includes LibTorch (ATen core only; the
// other torch headers, pipeline.h, torch_pickle.h and upload_torch.h, include
// it; the Module type is forward-declared, include <torch/nn/module.h> to use it).
//
// Semantics: loading-semantics.md sections C and D; field failures B23, B27,
// B30, B32–B35. Errors are Status values, never exceptions: every c10::Error
// raised inside LibTorch is caught and returned as kInternal / kInvalidArgument.
//
// Thread safety: free functions may run concurrently on different files and
// state dicts. A ModuleLoader is used from one thread at a time. Zero-copy
// tensors may be read from any thread.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "hubload/dtype_policy.h"
#include "hubload/load.h"
#include "hubload/resolve.h"
#include "hubload/safetensors.h"
#include "hubload/status.h"

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace hubload {

/// An ordered state dict: (tensor name, tensor) in file / insertion order.
using StateDict = std::vector<std::pair<std::string, at::Tensor>>;

// TargetDtype, ParseTargetDtype and LoadOptions: hubload/load.h (torch-free);
// the dtype policy as a table over safetensors dtypes (LoadedSafetensorsDtype,
// AddDtypeConversions for report warnings): hubload/dtype_policy.h.

/// The LibTorch dtype of LoadedSafetensorsDtype(d, name, options) (see there:
/// BOOL U8 I8 I16 I32 I64 F16 BF16 F32 F64 C64 as stored; F8_E4M3/F8_E5M2/
/// F8_E8M0 decoded exactly to bfloat16 under kAuto or to the target floating
/// dtype; U16 -> int32, U32 -> int64, U64 -> int64 when every value is < 2^63;
/// F4, F6_*, F8_*FNUZ: kUnsupported naming the tensor).
Result<at::ScalarType> LoadedDtype(safetensors::Dtype d, const std::string& name, const LoadOptions& options);

/// One tensor of an opened file as a LibTorch CPU tensor. Zero-copy view of the
/// mapping (which stays alive as long as the tensor or any view of it does) when
/// no conversion is needed, the data is aligned for its dtype and !force_copy;
/// otherwise a fresh contiguous tensor. Zero-copy tensors are READ-ONLY memory
/// (the mapping is PROT_READ): writing to them faults — use force_copy (or
/// ModuleLoadMode::kCopy) for tensors that will be modified in place.
///
/// A fresh tensor (conversion, copy) gets the dtype of hubload/dtype_policy.h,
/// with the bits LibTorch's own `.to()` gives: widening to f32 exact, f32 -> f16
/// / bf16 round to nearest even, f64 via f32 (as c10), NaN kept as NaN (f16
/// sign|0x7E00, bf16 0x7FC0, f16 -> f32 keeps sign and payload); in 1 MiB chunks of source
/// bytes on the calling thread plus the shared worker pool (every core; at
/// most options.conversion_threads threads when it is >= 1);
/// tensors from 2 MiB up live on transparent-huge-page memory (an anonymous
/// mapping freed with the tensor's storage; 4 KiB pages where the kernel's THP
/// mode is "never"). The source pages of the mapping are released from the
/// process once converted (the file stays in the page cache), so peak memory is
/// about the output plus a chunk per thread.
/// Errors: kUnsupported (dtype; U64 value >= 2^63), kInvalidFormat (reason
/// TensorOutOfRange: info not from this file), kInternal (LibTorch).
Result<at::Tensor> LoadTensor(const safetensors::SafetensorsFile& file, const safetensors::TensorInfo& info,
                              const LoadOptions& options);

/// LoadTensor for a tensor whose bytes are read from an open file descriptor
/// (e.g. a partial download whose header and this tensor's bytes have landed):
/// `offset` is the absolute file offset of the tensor's first byte
/// (header.data_start + info.begin), info.nbytes() bytes are read with pread
/// (the descriptor's file position is not used or moved). Same dtype policy as
/// LoadTensor; the result is always a fresh contiguous CPU tensor (huge pages
/// from 2 MiB up), converted in 1 MiB chunks on the calling thread plus the
/// shared worker pool (as LoadTensor, options.conversion_threads); no byte of the file is mapped. `label` names the file
/// in errors. Thread-safe (concurrent calls on one descriptor are fine).
/// Errors: kInvalidArgument (fd < 0, offset + size overflows, info's byte
/// count does not match its shape), kIOError (pread failed), kInvalidFormat
/// (reason TensorOutOfRange: the file ends before the tensor's last byte),
/// kUnsupported (dtype; U64 value >= 2^63), kInternal (LibTorch).
Result<at::Tensor> LoadTensorFromFd(int fd, uint64_t offset, const safetensors::TensorInfo& info,
                                    const LoadOptions& options, const std::string& label);

/// Every tensor of `file`, in file order (by data offset).
Result<StateDict> LoadTensors(const safetensors::SafetensorsFile& file, const LoadOptions& options);

/// Calls `fn(name, tensor)` for each tensor in file order, one at a time (only
/// the current converted tensor is alive unless `fn` keeps it). Stops at the
/// first error (its own or fn's) and returns it, prefixed with the tensor name.
Status ForEachTensor(const safetensors::SafetensorsFile& file, const LoadOptions& options,
                     const std::function<Status(const std::string&, at::Tensor)>& fn);

// ---------------------------------------------------------------------------
// Loading into modules.

enum class ModuleLoadMode {
  /// The module's parameters and buffers become the loaded tensors
  /// (Tensor::set_data under NoGradGuard): zero-copy views of the mapping or
  /// freshly converted tensors; the constructor's values are discarded and no
  /// second copy of the weights exists. Parameter dtypes follow LoadOptions
  /// (kAuto: the checkpoint dtype). Zero-copy parameters are read-only memory.
  kAssign,
  /// Values are copied into the module's existing tensors (which keep their
  /// dtype, device and identity), for callers holding references to them.
  kCopy,
};

struct ModuleLoadOptions {
  ModuleLoadMode mode = ModuleLoadMode::kAssign;
  /// Missing or unexpected keys (after the ignore lists) make Finish() fail
  /// (kInvalidArgument, reason MissingKeys / UnexpectedKeys), like torch strict.
  bool strict = false;
  /// A checkpoint tensor whose shape differs from the module's: false = error
  /// (kInvalidArgument, reason ShapeMismatch, naming tensor, both shapes and the
  /// shard) before anything of that shard is loaded; true = skip it, keep the
  /// module's value, list it in LoadReport::mismatched.
  bool ignore_mismatched_sizes = false;
  /// ECMAScript regexes searched (std::regex_search, as Python re.search) in
  /// unexpected / missing key names; matches are dropped from the report
  /// (diffusers/transformers `_keys_to_ignore_on_load_unexpected` / `_missing`).
  std::vector<std::string> ignore_unexpected_regex;
  std::vector<std::string> ignore_missing_regex;
  /// Buffers that are not part of the state dict (PyTorch `persistent=False`;
  /// LibTorch C++ has no such flag): full dotted names. They keep their
  /// constructed values, are never reported missing, and a checkpoint key with
  /// that name is reported unexpected.
  std::vector<std::string> non_persistent_buffers;
};

struct MismatchedKey {
  std::string name;
  std::vector<int64_t> checkpoint_shape;
  std::vector<int64_t> model_shape;
  std::string shard;  // label of the shard it came from ("" when not given)
};

/// diffusers/transformers `output_loading_info` (missing_keys, unexpected_keys,
/// mismatched_keys), sorted by name.
struct LoadReport {
  std::vector<std::string> missing;     // module keys never loaded (ties resolved)
  std::vector<std::string> unexpected;  // checkpoint keys the module lacks
  std::vector<MismatchedKey> mismatched;
  std::vector<std::string> warnings;
  uint64_t loaded_tensors = 0;
};

/// Incremental loader: feed shards in any order, one at a time; each shard's
/// tensors are placed into the module and released by the loader when
/// AddTensors returns (the caller may then drop the shard's mapping).
/// Tied parameters (the same tensor registered under several names, or exact
/// aliases of one storage) count as loaded when any of their names is loaded
/// and stay shared afterwards. Works under NoGradGuard.
class ModuleLoader {
 public:
  /// `module` must outlive the loader.
  ModuleLoader(torch::nn::Module& module, ModuleLoadOptions options = {});
  ~ModuleLoader();
  ModuleLoader(const ModuleLoader&) = delete;
  ModuleLoader& operator=(const ModuleLoader&) = delete;

  /// One checkpoint key for Expect: name, shape, and the shard holding it.
  struct ExpectedKey {
    std::string name;
    std::vector<int64_t> shape;
    std::string shard;
  };
  /// Optional, before any AddTensors: declares every checkpoint key with its
  /// shape (e.g. from all shard headers). With `strict`, missing/unexpected keys
  /// fail here, before any tensor is touched; shape mismatches fail here unless
  /// ignore_mismatched_sizes, naming tensor, both shapes and the shard (B34;
  /// hub `load_torch_model` checks keys up front too). `label` names the
  /// checkpoint in strict errors.
  Status Expect(const std::vector<ExpectedKey>& keys, const std::string& label = "");

  /// Loads one shard's tensors. `shard_label` names it in errors/mismatches.
  /// Checks every shape of the batch first: on a mismatch error nothing of the
  /// batch is loaded. Errors: kInvalidArgument (ShapeMismatch, DuplicateKey),
  /// kInternal (LibTorch error).
  Status AddTensors(StateDict&& tensors, const std::string& shard_label = "");

  /// Computes the report. Errors with `strict` as described above; also
  /// kInvalidArgument if called twice.
  Result<LoadReport> Finish();

 private:
  struct Impl;
  Impl* impl_;
};

// LoadCheckpoint / LoadIntoModule (local checkpoints through the load driver): hubload/pipeline.h.

/// Named parameters then buffers of `module` (torch state_dict order per
/// submodule is not reproduced: parameters first, then buffers), without
/// `non_persistent_buffers`. Tied names appear once per name.
StateDict ModuleStateDict(torch::nn::Module& module, const std::vector<std::string>& non_persistent_buffers = {});

// ---------------------------------------------------------------------------
// Saving.

struct SaveOptions {
  /// Bytes, or a size text in the one grammar of hubload/size.h ("10GB" =
  /// 10^10 bytes, as huggingface_hub; "10GiB" = 10*2^30; "10Gb" refused).
  std::variant<uint64_t, std::string> max_shard_size = std::string("10GB");
  std::string variant;
  /// Weights-name stem: "model" (transformers) or "diffusion_pytorch_model" (diffusers).
  std::string weights_name = "model";
  /// Extra metadata: written into the index metadata when sharded, into each
  /// file's __metadata__ when not (huggingface_hub save_torch_state_dict).
  std::map<std::string, std::string> metadata;
  /// Declared ties, alias name -> target name (transformers' tied weights,
  /// e.g. {"lm_head.weight": "embed_tokens.weight"}). A tied pair that is one
  /// storage keeps the target's name; a pair in two storages with equal dtype,
  /// shape and values is saved once, as the target; one whose values differ
  /// is saved twice with a warning (never dropped). Names absent from the
  /// state dict are ignored.
  std::map<std::string, std::string> tied;
};

/// What SaveSharded wrote.
struct SaveResult {
  std::vector<std::string> files;  // basenames, shard order
  std::string index_file;          // basename; empty when not sharded
  uint64_t total_size = 0;
  /// Dropped alias name -> kept name (tensors sharing storage are stored once).
  std::map<std::string, std::string> aliases;
  std::vector<std::string> removed_stale;  // basenames of stale files deleted
  /// Also logged (spdlog warn): tensors sharing a storage without a declared
  /// tie, declared ties whose tensors differ.
  std::vector<std::string> warnings;
};

/// huggingface_hub `save_torch_state_dict` (safetensors path): tensors that are
/// exact aliases of one storage are stored once (the tie target of
/// options.tied, else the alphabetically first name with a warning; the
/// others recorded as `removed -> kept` in the index metadata, or in
/// __metadata__ when unsharded); partially overlapping views are refused
/// (kInvalidArgument, reason SharedTensorOverlap); views and channels-last
/// tensors are written as their logical row-major bytes. Split with
/// SplitStateDict in state-dict order, names from ShardFilenamePattern; sizes
/// are the bytes written (stricter than huggingface_hub, which counts a view's
/// whole storage: field failure B51), tensors of one storage in one shard;
/// `{"format":"pt"}` metadata in every file, the index (IndexFilename; indent 2)
/// only with more than one shard. `dir` is created if needed. Every file is
/// written to a temp name and renamed; the index is written last. Then stale
/// files of the same weights name AND variant are removed: exactly
/// `{stem}.safetensors`, `{stem}-NNNNN-of-NNNNN.safetensors` and the index name
/// (stem = weights name with the variant), when not part of this save. Other
/// variants' files and unrelated files are never touched (B27).
/// Errors: kInvalidArgument (bad size text (ParseMaxShardSize), names), kUnsupported (dtype
/// without a safetensors equivalent, e.g. quantized), kDiskFull, kIOError.
Result<SaveResult> SaveSharded(const StateDict& state_dict, const std::string& dir, const SaveOptions& options);

// ---------------------------------------------------------------------------
// Summaries (hubload load --json).

/// Per-tensor summary as printed by `hubload load --json`.
struct TensorSummary {
  std::string dtype;             // safetensors spelling of the loaded dtype ("BF16", "I64")
  std::vector<int64_t> shape;
  double sum = 0;                // float64 sum of all elements as loaded (bool true = 1)
  std::string sha256;            // lower-case hex of the contiguous little-endian bytes
};
/// Errors: kUnsupported for a dtype without a safetensors name (complex128 ...).
Result<TensorSummary> SummarizeTensor(const at::Tensor& t);

/// The safetensors dtype of a LibTorch dtype, or kUnsupported.
Result<safetensors::Dtype> SafetensorsDtype(at::ScalarType t);

}  // namespace hubload
