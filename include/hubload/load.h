// hubload/load.h: the torch-free vocabulary of fetch-and-load — what to load
// (PretrainedRequest, the `from_pretrained` arguments), how (LoadOptions, the
// one target-dtype type), and what a load read (PretrainedInfo, with one
// record per tensor), plus the one JSON report every load path prints.
//
// The CPU (pipeline.h), device (device_pipeline.h) and distributed
// (distributed.h) loads all run the same driver and fill the same
// PretrainedInfo; LoadReportJson renders it with one versioned schema.
//
// Thread safety: plain values; LoadReportJson is pure.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hubload/cache.h"
#include "hubload/resolve.h"
#include "hubload/target_dtype.h"
#include "hubload/status.h"

namespace hubload {

// TargetDtype (the one target dtype type, also used by the device staging
// ring) and TargetDtypeToDtype: hubload/target_dtype.h.

/// "auto", "fp32"/"float32"/"F32", "fp16"/"float16"/"F16",
/// "bf16"/"bfloat16"/"BF16" -> TargetDtype (transformers torch_dtype spellings).
/// Errors: kInvalidArgument (reason InvalidDtype) quoting the text.
Result<TargetDtype> ParseTargetDtype(const std::string& text);
/// "auto", "fp32", "fp16", "bf16".
const char* TargetDtypeName(TargetDtype d);

/// How tensors are materialised (diffusers/transformers torch_dtype,
/// keep_in_fp32_modules).
struct LoadOptions {
  TargetDtype dtype = TargetDtype::kAuto;
  /// Module names kept in float32 whenever a floating tensor is converted:
  /// an entry matches tensor `n` iff it equals one whole dot-separated
  /// component of `n` (diffusers `m in n.split(".")`: "norm" matches
  /// "layers.0.norm.weight" but not "final_norm.weight"; dotted entries never
  /// match). Applied identically on the single-file and sharded paths (B32).
  /// It acts on floating tensors whose dtype is being chosen: every floating
  /// tensor under fp32/fp16/bf16, and under kAuto only float8 tensors (which
  /// must be decoded: fp32 instead of bf16); other tensors keep their dtype.
  std::vector<std::string> keep_in_fp32;
  /// Always copy into fresh, writable, aligned memory, even when a zero-copy
  /// view would do.
  bool force_copy = false;
  /// Threads that convert or copy one large tensor (chunks of 1 MiB, see
  /// hubload/torch_loader.h LoadTensor): 0 = the calling thread plus every
  /// thread of the shared worker pool (one per core); n >= 1 = at most n (the
  /// calling thread counts as one; 1 = the calling thread alone), e.g. to
  /// leave cores to other work (while a pipeline load downloads, see
  /// PretrainedRequest::yield_cpu_to_downloads: at most n threads of the
  /// load's own, the calling thread waiting). Not in huggingface_hub /
  /// transformers (torch.set_num_threads is the nearest).
  size_t conversion_threads = 0;
};

/// What to load and how (diffusers/transformers `from_pretrained` arguments).
/// Where a load stands, for a progress display (PretrainedRequest::progress).
struct LoadProgress {
  /// Weights bytes downloaded (or found cached) so far and their total, as
  /// HubClient::DownloadFiles' on_progress counts them; total is at least the
  /// listed weights size. Both 0 for local checkpoints (nothing downloaded).
  uint64_t bytes_downloaded = 0;
  uint64_t bytes_total = 0;
  /// The weights file this update is about (repo-relative) and its bytes
  /// downloaded / size (size 0 when unknown); file empty for an aggregate or
  /// shard update.
  std::string file;
  uint64_t file_bytes_done = 0;
  uint64_t file_bytes_total = 0;
  /// Weights files whose every tensor reached the sink, out of the plan's.
  uint64_t shards_loaded = 0;
  uint64_t shards_total = 0;
};

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
  /// true: pickle `.bin` weights are refused (kUnsupported, reason
  /// PickleUnsupported, naming the file) before anything is downloaded, as
  /// transformers `use_safetensors=True`. false (default): safetensors are
  /// preferred and `.bin` weights are read by the restricted pickle reader
  /// (pickle.h) on the CPU paths, as `use_safetensors=None`.
  bool require_safetensors = false;
  /// How a sharded checkpoint's index rules over its shards (field failure
  /// B49). false (default, stricter than transformers): a shard holding a
  /// tensor the index does not map to it fails the load (IndexTensorUnlisted,
  /// IndexTensorInOtherShard, naming shard and tensor). true: the mapped shard
  /// wins; the other tensors of a shard (stale or unindexed copies) are not
  /// loaded and are named in one warning per shard. Both: a tensor the index
  /// maps to a shard that lacks it fails (IndexTensorMissing).
  bool lenient_index = false;
  /// dtype, keep_in_fp32 modules, force_copy.
  LoadOptions load;
  /// Target device. The CPU functions (pipeline.h) load to "cpu" (or "")
  /// only; anything else is kUnsupported (reason UnsupportedDevice) there.
  /// GPUs ("cuda", "cuda:N") and accelerate-style device_map placements go
  /// through FetchAndLoadToDevice (device_pipeline.h), which uses this field
  /// when DeviceLoadOptions::device is empty.
  std::string device = "cpu";
  /// Verified shards allowed to wait for the loader (>= 1); download workers
  /// finishing a later shard wait while this many are pending. The shard the
  /// loader needs next never waits. Download concurrency itself is the
  /// client's (ClientOptions).
  int max_shards_in_flight = 2;
  /// true (default): load each shard, and each tensor of it, as its bytes
  /// land. false: download every shard first, then load them (the baseline of
  /// the overlap benchmark).
  bool overlap = true;
  /// true (default): while this load's downloads are in flight (for
  /// distributed ranks: while their node's leader writes a shard), the
  /// conversions and copies of tensors of 1 MiB or more (LoadOptions::dtype,
  /// force_copy) run on threads of the load's own (half the cores, at least
  /// 1, at most load.conversion_threads when set) whose nice value is raised
  /// by 10, the loader thread only waiting, so the download threads get the
  /// CPU when they need it; once every file is downloaded and verified, and
  /// for loads with nothing to download, they run as load.conversion_threads
  /// says. Only the CPU share changes, never the bytes. false: always as
  /// load.conversion_threads says. Not in huggingface_hub or transformers
  /// (measured: bench/README.md "Conversions yield the CPU to downloads").
  bool yield_cpu_to_downloads = true;
  /// Fill TensorRecord::sha256 and ::sum for every tensor (costs one pass
  /// over the loaded bytes; the device path copies them back from the device).
  bool digests = false;
  /// Optional progress of the whole load (every path: CPU, device,
  /// distributed): called after each download progress step (rate-limited by
  /// the download, about 10 calls/s, plus per-file steps) and once per loaded
  /// shard. Calls come from download workers and the loader thread but never
  /// overlap (the driver serialises them); keep them short. As the bars of
  /// huggingface_hub's snapshot_download (tqdm), plus the shard count.
  std::function<void(const LoadProgress&)> progress;
};

/// One tensor as it was loaded: the row of the report.
struct TensorRecord {
  std::string name;
  /// Weights file holding it (repo-relative for the Hub, local path otherwise).
  std::string file;
  /// safetensors spelling of the checkpoint dtype ("BF16") and of the loaded one.
  std::string source_dtype;
  std::string dtype;
  std::vector<int64_t> shape;
  /// Bytes as loaded (after any dtype conversion).
  uint64_t bytes = 0;
  /// "cpu", "cuda:0", "disk" (left in the file), or "" when a rank filter skipped it.
  std::string device = "cpu";
  /// Lower-case hex sha256 of the contiguous little-endian bytes as loaded,
  /// and their float64 sum (bool true = 1); only with PretrainedRequest::digests.
  std::string sha256;
  std::optional<double> sum;
};

/// Where time went, in seconds from the start of the call (steady clock).
struct PretrainedTimings {
  /// Until the fetch plan was complete (listing, index, headers when read).
  double plan_s = 0;
  /// Until the first tensor was handed to the sink (0 when there is none).
  double time_to_first_tensor_s = 0;
  /// Until the first shard was complete in its sink (0 when there is none).
  double time_to_first_shard_s = 0;
  /// Until the last weights file was downloaded and verified (0 for local paths).
  double download_s = 0;
  /// Busy time of the loader: reading, validating and creating tensors and
  /// running the sink, summed over files (overlaps download_s).
  double load_s = 0;
  /// Whole call.
  double total_s = 0;
};

/// Path-specific parts of the report (filled by the device and distributed loads).
struct LoadReportExtra {
  /// Device loads: backend ("cuda", "fake", "host"), the placement (module
  /// prefix -> device, "" = the whole model) and bytes per device.
  std::string backend;
  std::vector<std::pair<std::string, std::string>> device_map;
  std::vector<std::pair<std::string, uint64_t>> bytes_per_device;
  /// Staging counters (name -> value) of the device path.
  std::vector<std::pair<std::string, uint64_t>> staging;
  /// The placement strategy ("device", "auto", "sequential", ...), whether
  /// the load stopped after planning, and the free bytes per GPU planned with.
  std::string strategy;
  bool plan_only = false;
  std::vector<uint64_t> gpu_free_bytes;
  /// Tensors planned on "disk": left in their file at this absolute offset.
  struct DiskTensor {
    std::string name, file;
    uint64_t offset = 0, bytes = 0;
  };
  std::vector<DiskTensor> disk_tensors;
  /// Distributed loads: this rank, the job size, and the bytes this rank
  /// downloaded from the Hub / received from other nodes.
  std::optional<int> rank;
  int world_size = 0;
  uint64_t bytes_downloaded = 0;
  uint64_t bytes_received = 0;
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
  /// Weights files, repo-relative for the Hub, local paths otherwise, in load
  /// order (index order: sorted shard names) or the single file.
  std::vector<std::string> files;
  /// The same files in the order the loader finished them.
  std::vector<std::string> load_order;
  /// Local paths of `files` (snapshot pointers for the Hub), same order.
  std::vector<std::string> local_files;
  uint64_t num_tensors = 0;
  /// Bytes of the weights files (headers included).
  uint64_t weights_bytes = 0;
  /// Every tensor, checkpoint order (files in `files` order, file order within each).
  std::vector<TensorRecord> tensors;
  /// Dropped alias name -> kept name, restored from the checkpoint's metadata
  /// (huggingface_hub save_torch_state_dict "removed -> kept" entries).
  std::vector<std::pair<std::string, std::string>> aliases;
  std::vector<std::string> warnings;
  PretrainedTimings timings;
  LoadReportExtra extra;
};

/// The report schema version written as `"schema"`.
inline constexpr const char* kLoadReportSchema = "hubload.load/1";

/// The one JSON report of `hubload load --json` (CPU, device and distributed):
///   {"schema":"hubload.load/1","source","repo_id","revision","commit","root",
///    "index_file","files":[...],"load_order":[...],"weights_bytes",
///    "tensors":[{"name","file","source_dtype","dtype","shape","bytes","device",
///                "sha256"?,"sum"?}...],
///    "aliases":{removed:kept},"timings":{"plan_s",...,"total_s"},"warnings":[...],
///    "device":{"backend","strategy","plan_only","gpu_free_bytes","device_map",
///              "bytes_per_device","disk_tensors":[{"name","file","offset","bytes"}],
///              "staging"}?,
///    "distributed":{"rank","world_size","bytes_downloaded","bytes_received"}?}
/// `sha256`/`sum` appear only when computed; a NaN or infinite sum is null.
/// `indent` < 0: one line. Never fails.
std::string LoadReportJson(const PretrainedInfo& info, int indent = -1);

/// A short human summary: tensor and file counts, bytes per loaded dtype and
/// device, timings, warnings. Never fails.
std::string LoadSummaryText(const PretrainedInfo& info);

}  // namespace hubload
