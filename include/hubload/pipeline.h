// hubload/pipeline.h: fetch-and-load into LibTorch CPU tensors —
// `from_pretrained` in C++ (the torch sinks of the one load driver).
//
// A caller names a model (a Hub repo id, or a local folder / file) with its
// revision, subfolder, variant and dtype (load.h). hubload lists the repo once,
// resolves the weights (resolve.h, loading-semantics.md section A), fetches the
// index, checks that every shard it names exists (B23) and that variant and
// non-variant shards are never mixed (B25), warns about shards the index does
// not name, then downloads the shards into the Hugging Face cache in load
// order (HubClient::DownloadFiles: its connections work on the earliest
// unfinished file first) and hands each tensor to the sink as soon as its
// bytes land:
//
//   plan (listing/folder -> resolve -> index -> shards in load order)
//     -> source (downloads, or local files) -> driver: header once its bytes
//        land (index check), each tensor once its bytes land, shard end once
//        the file is verified -> sink (state dict / module / caller's callbacks)
//
// The same driver serves the device path (device_pipeline.h) and the
// distributed one (distributed.h): the index check, alias restoration, the
// unnamed-shard warning, reasons and timings are the same everywhere, and
// every path fills the same PretrainedInfo (load.h: LoadReportJson).
//
// Provisional tensors: a tensor handed to `on_tensor` before its shard's
// sha256 was checked is provisional; the call returns OK only after every
// shard is verified (a mismatch fails the whole load naming the file, and
// nothing unverified is ever renamed into blobs/). Zero-copy tensors view the
// cache file (or its partial, which becomes the blob by rename; a partial is
// never rewritten in place). The loader never writes the cache: blobs,
// snapshot links and refs are the client's.
//
// Pickle weights (`*.bin`, used only when no safetensors weights of the
// requested variant exist, as diffusers/transformers with use_safetensors=None)
// are read by the restricted reader (pickle.h: the torch.load(weights_only=True)
// allow-list; no pickled code is ever executed) once each shard is verified
// (a zip's directory is at its end), shard by shard like safetensors shards;
// tensors sharing a storage stay shared. The device path refuses them
// (kUnsupported, reason PickleUnsupported) before any download.
//
// Thread safety: every function may be called concurrently from several
// threads with distinct requests and sinks (HubClient is thread-safe). The
// callbacks of one call are invoked as documented on PretrainedCallbacks.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "hubload/cache.h"
#include "hubload/hub.h"
#include "hubload/load.h"
#include "hubload/resolve.h"
#include "hubload/status.h"
#include "hubload/torch_loader.h"

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace hubload {

// PretrainedRequest, PretrainedInfo, PretrainedTimings, TensorRecord: hubload/load.h.

/// Callbacks of the streaming form. All are optional.
struct PretrainedCallbacks {
  /// Every tensor, on the loader thread (one thread, never concurrently with
  /// itself), as soon as its bytes are in the cache (provisional until the
  /// call returns OK), file order within a shard, the earliest readable shard
  /// first. After the last shard, each alias of the checkpoint (metadata
  /// "removed": "kept", huggingface_hub save_torch_state_dict) is delivered
  /// as `removed` with the kept tensor itself (info.aliases names them).
  /// A non-OK return stops the load: it cancels the downloads and is returned
  /// by FetchAndLoad (prefixed with the tensor name).
  std::function<Status(const std::string& name, at::Tensor tensor)> on_tensor;
  /// After every tensor of a weights file was delivered, on the loader thread:
  /// the file (repo-relative, or local path) and its number of tensors.
  std::function<void(const std::string& file, uint64_t num_tensors)> on_shard;
  /// A weights file finished downloading and was verified (or was already
  /// cached), on a download worker thread, before it is queued for loading.
  /// Called for local files too (immediately).
  std::function<void(const std::string& file)> on_file_downloaded;
  /// Aggregate download progress in bytes (done, total), from download worker
  /// threads, possibly concurrently, rate-limited (HubClient::DownloadFiles).
  std::function<void(uint64_t bytes_done, uint64_t bytes_total)> on_progress;
};

/// The streaming form: resolves, downloads and loads `req`, giving every
/// tensor to `cb.on_tensor` as soon as its bytes landed.
///
/// `client` is used only for Hub sources (its ClientOptions give endpoint,
/// token, cache folder, offline mode and download concurrency); local sources
/// never touch the network. Offline mode lists the repo from the cache.
///
/// Errors (one Status; ErrorContext::repo_id / revision / file filled):
///  - kInvalidArgument: empty repo_id, max_shards_in_flight < 1, bad variant.
///  - kUnsupported: device other than "cpu" (reason UnsupportedDevice); pickle
///    `.bin` weights (reason PickleUnsupported, message names the file).
///  - resolution (resolve.h): kNotFound WeightsNotFound / VariantNotFound (lists
///    the variants present) / MissingShards (names every missing shard, checked
///    before any shard download); kInvalidFormat InvalidShardName,
///    VariantMixing, EmptyIndex.
///  - Hub errors of ListFiles / Download / DownloadFiles (hub.h).
///  - kInvalidFormat from the safetensors parser or CheckShardAgainstIndex
///    (names the file and tensor), conversion errors (torch_loader.h).
///  - whatever `cb.on_tensor` returned.
Result<PretrainedInfo> FetchAndLoad(const HubClient& client, const PretrainedRequest& req,
                                    const PretrainedCallbacks& cb);

/// The blocking form returning a state dict.
struct PretrainedStateDict {
  PretrainedInfo info;
  /// Every tensor, in a deterministic order whatever the completion order:
  /// files in `info.files` order (shard names sorted), file order (data
  /// offset) within each file.
  StateDict tensors;
};
/// FetchAndLoad collecting every tensor. Errors: those of FetchAndLoad.
Result<PretrainedStateDict> LoadStateDict(const HubClient& client, const PretrainedRequest& req);

/// The blocking form filling a module: each shard's tensors go to a
/// ModuleLoader (torch_loader.h) as the shard completes; the report is
/// ModuleLoader::Finish()'s (missing / unexpected / mismatched keys).
struct PretrainedModuleLoad {
  PretrainedInfo info;
  LoadReport report;
};
/// `module` must not be used by other threads during the call (it is filled
/// from the loader thread). Errors: those of FetchAndLoad, ModuleLoader's
/// (ShapeMismatch, DuplicateKey, strict MissingKeys / UnexpectedKeys).
Result<PretrainedModuleLoad> LoadModule(const HubClient& client, const PretrainedRequest& req,
                                        torch::nn::Module& module, const ModuleLoadOptions& module_options = {});

// ---------------------------------------------------------------------------
// Local checkpoints (the same driver, no network).

/// A whole checkpoint as a state dict.
struct Checkpoint {
  /// Files read, as given, in load order.
  std::vector<std::string> files;
  /// Tensors in file order, file after file (shards in index order), then
  /// restored aliases.
  StateDict tensors;
  /// Warnings from resolution and loading.
  std::vector<std::string> warnings;
  ResolvedWeights resolved;
};

/// The local checkpoint at `path` as a state dict: LoadStateDict with
/// source kLocal. `path` is a .safetensors file (read as is), a
/// `*.safetensors.index.json` file (its shards next to it), or a folder
/// resolved with ResolveWeights (section A; subfolder, variant and convention
/// from `resolve_options`). Errors: those of LoadStateDict.
Result<Checkpoint> LoadCheckpoint(const std::string& path, const ResolveOptions& resolve_options,
                                  const LoadOptions& load_options);

/// Loads the local checkpoint at `path` into `module` shard by shard: every
/// shard header is read first and passed to ModuleLoader::Expect (so strict /
/// shape errors come before any loading), then each shard is loaded and
/// released before the next — peak memory ≈ the module plus one shard (B35).
/// Errors: those of LoadCheckpoint and ModuleLoader.
Result<LoadReport> LoadIntoModule(torch::nn::Module& module, const std::string& path,
                                  const ResolveOptions& resolve_options, const LoadOptions& load_options,
                                  const ModuleLoadOptions& module_options);

// ---------------------------------------------------------------------------
// diffusers pipelines: `model_index.json` with one component per subfolder.

/// One entry of model_index.json: `"name": ["library", "ClassName"]`.
struct PipelineComponent {
  std::string name;        // also the subfolder ("transformer", "vae")
  std::string library;     // "diffusers", "transformers", ...
  std::string class_name;  // "MochiTransformer3DModel"
};

/// Parses a model_index.json text: every top-level key not starting with '_'
/// whose value is a 2-element array of strings; `[null, null]` entries (absent
/// optional components) are skipped. Sorted by name. Errors: kInvalidFormat
/// (reason InvalidModelIndex) naming `label` when the text is not a JSON object.
Result<std::vector<PipelineComponent>> ParseModelIndex(const std::string& json_text, const std::string& label);

/// The components of the pipeline at `req.repo_id` / `req.revision` (the
/// subfolder, variant and load fields are ignored): downloads (or reads)
/// `model_index.json` only. Errors: kNotFound (reason NotAPipeline) when the
/// repo or folder has no model_index.json, Hub errors, ParseModelIndex's.
Result<std::vector<PipelineComponent>> ListComponents(const HubClient& client, const PretrainedRequest& req);

/// Loads component `name` of a pipeline: checks it is listed in
/// model_index.json, then LoadStateDict with subfolder = name. Errors: those of
/// ListComponents; kNotFound (reason ComponentNotFound) listing the components
/// present; those of LoadStateDict (e.g. WeightsNotFound for a tokenizer).
Result<PretrainedStateDict> LoadComponent(const HubClient& client, const PretrainedRequest& req,
                                          const std::string& name);

/// A whole diffusers pipeline, every component with weights loaded.
struct PretrainedPipeline {
  /// Every component of model_index.json (ParseModelIndex order).
  std::vector<PipelineComponent> components;
  /// Components with weights, by name.
  std::map<std::string, PretrainedStateDict> loaded;
  /// Components whose folder holds no weights (scheduler, tokenizer, ...).
  std::vector<std::string> skipped;
  /// Fallback warnings ("component 'vae' has no 'bf16' variant ...") and the
  /// components' own warnings prefixed with their name.
  std::vector<std::string> warnings;
};

/// diffusers DiffusionPipeline.from_pretrained for the weights: lists the repo
/// (or folder) once, resolves every component of model_index.json first (no
/// weights downloaded yet), then loads the components one after the other
/// (each through FetchAndLoad with subfolder = its name). Variant rule of
/// diffusers `variant_compatible_siblings` (field failure B25): with
/// `req.variant`, a component uses its variant weights when it has them, else
/// its non-variant weights with a warning naming it — never a mix inside one
/// component; with `req.allow_variant_fallback` false such a fallback is an
/// error instead (strict). Errors, all before any weights download: those of
/// ListComponents; kNotFound reason VariantNotFound when no component has the
/// variant at all, or (strict) naming the components without it; resolution
/// errors of a component (prefixed with its name); then those of LoadStateDict.
Result<PretrainedPipeline> LoadPipeline(const HubClient& client, const PretrainedRequest& req);

}  // namespace hubload
