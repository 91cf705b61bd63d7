// hubload/resolve.h: which weight files of a repo (or local folder) to read —
// loading-semantics.md section A. Torch-free; works on a plain file listing so
// that the same rules serve a local folder and a Hub repo (before download).
//
// Thread safety: pure functions on values; call from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hubload/safetensors.h"
#include "hubload/status.h"

namespace hubload {

/// How to pick the weights of one model (one component folder).
struct ResolveOptions {
  /// Folder inside the repo holding the model ("unet", "text_encoder"; "" = repo
  /// root). Leading/trailing '/' are ignored. Only `<subfolder>/<name>` is looked
  /// at (stricter than diffusers, which lets a stray root file shadow it).
  std::string subfolder;
  /// Variant ("fp16", "bf16", "ema"; "" = none). Inserted before the last dot
  /// of the weights name as diffusers/transformers `_add_variant`. Must not
  /// contain '/', '\\' or whitespace (kInvalidArgument otherwise).
  std::string variant;
  /// When the variant is absent but non-variant weights exist: false (default,
  /// as diffusers ModelMixin and transformers) = error; true = use the
  /// non-variant weights and add a warning (as diffusers pipelines).
  bool allow_variant_fallback = false;
  /// Which weights names to look for.
  ///  kDiffusers: `diffusion_pytorch_model.*`, index first (diffusers order:
  ///   variant index, legacy variant index, single safetensors, then — when
  ///   allow_pickle — `.bin` index and single `.bin`; the `.bin` index is always
  ///   probed, fixing diffusers issue #14811).
  ///  kTransformers: `model.safetensors` / `pytorch_model.bin`, single file first
  ///   (transformers order: single safetensors, safetensors index, `.bin`, `.bin` index).
  ///  kAuto: the diffusers names (diffusers order), then the transformers names
  ///   in the same index-first order.
  enum class Convention { kDiffusers, kTransformers, kAuto } convention = Convention::kAuto;
  /// Accept pickle `.bin` weights when no safetensors weights exist (as
  /// diffusers' allow_pickle). The CPU loaders read them with the restricted
  /// pickle reader (pickle.h); the device path reports kUnsupported for them.
  bool allow_pickle = true;
};

/// The outcome of ResolveWeights.
struct ResolvedWeights {
  enum Kind { kSingleFile, kSharded } kind = kSingleFile;
  /// The single weights file, or the index file; path relative to the repo
  /// root, subfolder included, '/'-separated (e.g. "unet/diffusion_pytorch_model.fp16.safetensors").
  std::string weights_file;
  /// Weights-name stem: "diffusion_pytorch_model", "model" or "pytorch_model".
  std::string weights_name;
  /// The variant actually used ("" when none, including after a fallback).
  std::string variant_used;
  /// True when a legacy diffusers variant index (`name.safetensors.V.index.json`)
  /// was chosen (deprecated naming; a warning is added too).
  bool legacy_variant_names = false;
  /// True for `.bin` (pickle) weights.
  bool is_pickle = false;
  /// The subfolder, normalised (no leading/trailing '/').
  std::string subfolder;
  /// Human-readable warnings (fallbacks, legacy names, shadowed files).
  std::vector<std::string> warnings;
};

/// `subfolder` without its leading and trailing '/' ("/unet/" -> "unet"; "" and
/// "/" -> ""), as ResolveWeights reads ResolveOptions::subfolder. Nothing else
/// is checked or changed (ValidateRepoPath judges the result). No errors; pure
/// and thread-safe. Source: diffusers / transformers join the subfolder with
/// os.path.join, where a trailing '/' is harmless.
std::string NormaliseSubfolder(std::string_view subfolder);

/// Picks the weights of one model from `repo_files`: every file path in the
/// repo or local folder, relative to its root, '/'-separated (order irrelevant).
///
/// Errors:
///  - kInvalidArgument (reason InvalidVariant): variant contains '/', '\\', whitespace.
///  - kNotFound (reason VariantNotFound): a variant was asked, no weights with it
///    exist and fallback is off; the message lists the variants present in the
///    folder ("(none)" for non-variant weights).
///  - kNotFound (reason WeightsNotFound): no weights at all; the message lists the
///    names looked for and the folder.
/// Source: diffusers ModelMixin.from_pretrained / _fetch_index_file(_legacy),
/// transformers _get_resolved_checkpoint_files (loading-semantics.md A.2–A.5).
Result<ResolvedWeights> ResolveWeights(const std::vector<std::string>& repo_files,
                                       const ResolveOptions& options);

/// The shard files of a sharded resolution, as repo-relative paths
/// (`<subfolder>/<shard>`), sorted by shard name, each once (diffusers
/// `sorted(set(weight_map.values()))`).
///
/// Checks, all before anything is loaded or downloaded:
///  - every shard name is a plain basename (no '/', '\\', "..", drive) with the
///    extension of the index family (.safetensors / .bin) — kInvalidFormat,
///    reason InvalidShardName (diffusers PR #14182, hub _load_sharded_checkpoint);
///  - no variant / non-variant mixing (field failure B25): with a variant every
///    shard name carries it (`name.V-0000i-of-0000N.ext`, legacy
///    `name-0000i-of-0000N.V.ext`, or `name.V.ext`); without a variant no shard
///    is a variant shard of the weights name — kInvalidFormat, reason VariantMixing;
///  - every shard is in `repo_files` (field failure B23) — kNotFound, reason
///    MissingShards, the message names every missing shard.
/// An index naming no shard at all is kInvalidFormat (reason EmptyIndex).
Result<std::vector<std::string>> ShardPaths(const ResolvedWeights& resolved,
                                            const safetensors::Index& index,
                                            const std::vector<std::string>& repo_files);

/// `_add_variant`: inserts `.V` before the last dot of `name` ("" = unchanged).
/// "model.safetensors" + "fp16" -> "model.fp16.safetensors";
/// "model.safetensors.index.json" + "fp16" -> "model.safetensors.index.fp16.json".
std::string AddVariant(const std::string& name, const std::string& variant);

/// One weights file name of the Hugging Face conventions, parsed: the one
/// grammar resolution, saving, stale-file cleanup and inspect all use.
struct WeightsFileName {
  enum class Kind { kSingle, kShard, kIndex } kind = Kind::kSingle;
  /// Weights-name stem before the first '.': "model", "diffusion_pytorch_model",
  /// "pytorch_model", or any other (e.g. "consolidated").
  std::string stem;
  /// "" when none.
  std::string variant;
  /// `.bin` (pickle) rather than `.safetensors`.
  bool pickle = false;
  /// Deprecated variant placement: `stem-NNNNN-of-NNNNN.V.ext` or `stem.ext.V.index.json`.
  bool legacy_variant = false;
  /// kShard: 1-based index and count (1 <= shard <= num_shards).
  int shard = 0;
  int num_shards = 0;
};

/// Parses a basename (no '/') of one of the forms (ext = safetensors | bin;
/// stem and V have no '.', V no '-NNNNN-of-' part):
///   stem.ext, stem.V.ext                               (kSingle)
///   stem-NNNNN-of-MMMMM.ext, stem.V-NNNNN-of-MMMMM.ext (kShard; transformers/diffusers)
///   stem-NNNNN-of-MMMMM.V.ext                          (kShard, legacy diffusers variant)
///   stem.ext.index.json, stem.ext.index.V.json         (kIndex)
///   stem.ext.V.index.json                              (kIndex, legacy diffusers variant)
/// NNNNN and MMMMM are 5 digits with 1 <= NNNNN <= MMMMM ("00000-of-" is not a
/// shard). nullopt for anything else. Pure.
std::optional<WeightsFileName> ParseWeightsFileName(std::string_view basename);

/// Every file path (relative, '/'-separated, sorted) under local folder `root`,
/// following symlinks (a Hub cache snapshot is made of symlinks). Hidden folders
/// (".git", ".cache") are skipped. Errors: kNotFound, kIOError.
Result<std::vector<std::string>> ListLocalFiles(const std::string& root);

}  // namespace hubload
