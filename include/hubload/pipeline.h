// hubload/pipeline.h: fetch-and-load — `from_pretrained` in C++.
//
// A caller names a model (a Hub repo id, or a local folder / file) with its
// revision, subfolder, variant and dtype. hubload lists the repo once, resolves
// the weights (resolve.h, loading-semantics.md section A), fetches the index (or
// the single file), checks that every shard it names exists in the listing
// (field failure B23) and that variant and non-variant shards are never mixed
// (B25), then downloads the shards concurrently into the Hugging Face cache
// (HubClient::DownloadFiles) and loads each shard the moment it is complete and
// verified, in completion order, while the others are still arriving:
//
//   ListFiles ─► ResolveWeights ─► index ─► ShardPaths ─► DownloadFiles ──┐
//                                                   (worker threads)       │ on_file_done
//                           bounded completion queue (max_shards_in_flight)◄┘
//                                      │
//                      loader thread: mmap + ParseHeader + CheckShardAgainstIndex
//                                      │  LoadTensor (zero-copy or converted)
//                                      ▼
//                     sink: state dict / ModuleLoader / caller's on_tensor
//
// A local folder or file goes through the same loader (no network, files taken
// in load order). The first error anywhere (download, format, conversion, the
// caller's sink) sets the cancel flag of DownloadFiles, stops the loader,
// drains the queue and is returned as one Status whose ErrorContext names the
// repo_id, revision and file. The cache is written only by HubClient, whose
// blobs and snapshot pointers appear only after size + sha256 checks, so a
// cancelled load never leaves a half-written file visible in the cache (only a
// resumable blobs/<etag>.incomplete partial).
//
// Granularity: whole shards (a shard is loaded once fully downloaded and
// verified); there is no header-first streaming of partial shards.
//
// Memory: tensors that are zero-copy views keep their shard's read-only mapping
// alive (pages are backed by the cache file, not anonymous memory); converted
// tensors own fresh memory and their shard's mapping is released as soon as
// the shard is processed. At most `max_shards_in_flight` downloaded shards wait
// for the loader; download workers block (they do not buffer) when the queue
// is full.
//
// Pickle weights (`*.bin`) are never unpickled (no pickled code is ever
// executed): they resolve, then fail with kUnsupported naming the file and
// suggesting a conversion to safetensors, before anything is downloaded.
//
// Thread safety: every function may be called concurrently from several
// threads with distinct requests and sinks (HubClient is thread-safe). The
// callbacks of one call are invoked as documented on PipelineCallbacks.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "hubload/cache.h"
#include "hubload/hub.h"
#include "hubload/resolve.h"
#include "hubload/status.h"
#include "hubload/torch_loader.h"

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace hubload {

/// What to load and how (diffusers/transformers `from_pretrained` arguments).
struct PretrainedRequest {
  /// Hub repo id ("org/name") or a local path (a folder, a `.safetensors`
  /// file or a `*.safetensors.index.json` file). See `source`.
  std::string repo_id;
  /// Where `repo_id` points to.
  ///  kAuto: a local path when `repo_id` names an existing file or folder
  ///   (as diffusers/transformers `os.path.isdir` first), else a Hub repo id.
  ///  kHub / kLocal: forced.
  enum class Source { kAuto, kHub, kLocal } source = Source::kAuto;
  /// Branch, tag, "refs/pr/N" or 40-hex commit (Hub only).
  std::string revision = "main";
  RepoType repo_type = RepoType::kModel;
  /// Component folder ("transformer", "unet", "" = root).
  std::string subfolder;
  /// Weights variant ("fp16", "bf16", "" = none).
  std::string variant;
  /// Variant absent but non-variant weights present: false = error listing the
  /// variants present (diffusers ModelMixin, transformers); true = load the
  /// non-variant weights with a warning (never mixing the two).
  bool allow_variant_fallback = false;
  /// Weights names looked for (ResolveOptions::Convention).
  ResolveOptions::Convention convention = ResolveOptions::Convention::kAuto;
  /// dtype, keep_in_fp32 modules, force_copy (torch_loader.h).
  LoadOptions load;
  /// Target device. The functions of this header load to "cpu" (or "")
  /// only; anything else is kUnsupported (reason UnsupportedDevice) here.
  /// GPUs ("cuda", "cuda:N") and accelerate-style device_map placements go
  /// through FetchAndLoadToDevice (device_pipeline.h), which uses this field
  /// when DeviceLoadOptions::device is empty.
  std::string device = "cpu";
  /// Downloaded shards allowed to wait for the loader (queue capacity, >= 1).
  /// Download concurrency itself is ClientOptions::max_workers.
  int max_shards_in_flight = 2;
  /// true (default): load each shard as soon as it is downloaded. false: the
  /// same library downloads every shard first, then loads them (the baseline
  /// of the overlap benchmark).
  bool overlap = true;
};

/// Where time went, in seconds, measured with a steady clock from the start
/// of the call.
struct PretrainedTimings {
  /// Until the first tensor was handed to the sink (0 when there is none).
  double time_to_first_tensor_s = 0;
  /// Until the last weights file was downloaded and verified (listing,
  /// index and shards included; 0 for local paths).
  double download_s = 0;
  /// Busy time of the loader: opening, validating and creating tensors and
  /// running the sink, summed over files (overlaps download_s).
  double load_s = 0;
  /// Whole call.
  double total_s = 0;
};

/// What a load read, besides the tensors.
struct PretrainedInfo {
  /// "hub" or "local".
  std::string source;
  std::string repo_id;   // as requested
  std::string revision;  // as requested ("" for local paths)
  std::string commit;    // 40-hex commit listed ("" for local paths)
  /// Snapshot folder (<cache>/models--org--name/snapshots/<commit>) or the
  /// local folder the files were read from.
  std::string root;
  ResolvedWeights resolved;
  /// The index file (repo-relative for the Hub, local path otherwise); "" for
  /// single-file weights.
  std::string index_file;
  /// Weights files, repo-relative for the Hub, local paths otherwise, in index
  /// order (sorted shard names) or the single file.
  std::vector<std::string> files;
  /// The same files in the order the loader processed them (completion order).
  std::vector<std::string> load_order;
  /// Local paths of `files` (snapshot pointers for the Hub), same order.
  std::vector<std::string> local_files;
  uint64_t num_tensors = 0;
  /// Bytes of the weights files (headers included).
  uint64_t weights_bytes = 0;
  std::vector<std::string> warnings;
  PretrainedTimings timings;
};

/// Callbacks of the streaming form. All are optional.
struct PretrainedCallbacks {
  /// Every tensor, on the loader thread (one thread, never concurrently with
  /// itself), shard by shard in completion order, file order within a shard.
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
/// tensor to `cb.on_tensor` as soon as its shard is verified.
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
