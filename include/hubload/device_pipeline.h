// hubload/device_pipeline.h: fetch-and-load to devices — `from_pretrained(...,
// device_map=...)` (diffusers/transformers via accelerate) in C++.
//
//   ListFiles ─► ResolveWeights ─► index ─► ShardPaths            (as pipeline.h)
//       ─► every shard's safetensors header (HubClient::ReadRange: 8 bytes, then
//          the N header bytes; nothing is downloaded yet) ─► CheckShardAgainstIndex
//       ─► sizes on the device (target dtype) ─► PlanDeviceMap ─► [plan_only: stop]
//       ─► DownloadFiles (concurrent) ─► completion queue ─► one loader thread:
//          StagingLoader::LoadShard(pread on the cached file, place = plan.DeviceOf)
//
// A local folder, `.safetensors` file or index goes through the same steps
// (headers read with two pread()s, no network). The plan is computed from the
// headers alone, before any shard byte is fetched, so an impossible placement
// (DoesNotFit) costs two small requests per shard and no download.
//
// Placement: `DeviceLoadOptions::device_map` (accelerate strategies or an
// explicit map, device.h) or, without it, every tensor on
// `DeviceLoadOptions::device`. Tensors planned on "disk" are not loaded: they
// stay in the cached file and are listed in DeviceLoadResult::disk_tensors
// (file, byte offset, size) for the caller to map when needed.
//
// Errors: the first error anywhere (download, format, header mismatch, backend,
// staging) cancels the downloads, frees the tensors loaded so far and is
// returned as one Status whose ErrorContext names repo_id, revision and file.
// The cache is written only by HubClient (verified blobs only).
//
// This header is torch-free (PretrainedRequest is in load.h). The load runs
// the same driver as the CPU path (pipeline.h): the shards are downloaded in
// load order and each one is streamed to its devices while its bytes land.
//
// Thread safety: FetchAndLoadToDevice may run concurrently with distinct
// requests; the backend must then be thread-safe (both hubload backends are).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hubload/device.h"
#include "hubload/hub.h"
#include "hubload/load.h"
#include "hubload/resolve.h"
#include "hubload/safetensors.h"
#include "hubload/status.h"

namespace hubload {

struct DeviceLoadOptions {
  /// Target when `device_map` is not set: "cpu", "cuda", "cuda:N" (Device::Parse
  /// spellings); "" = `PretrainedRequest::device`.
  std::string device;
  /// accelerate-style placement over several devices (device.h). Set:
  /// PlanDeviceMap decides every tensor's device; `device` is ignored.
  std::optional<DeviceMapOptions> device_map;
  /// The accelerator runtime. Null: MakeCudaBackend(); when that fails
  /// (no CUDA build, no driver, no device) the load still runs when no tensor
  /// goes to a GPU (host memory through a host-only backend; a device_map
  /// then plans for zero GPUs, with a warning), and is a kUnsupported error
  /// (reason NoCudaDevice, suggesting plan_only) otherwise. With `plan_only`
  /// and no CUDA, the plan is made for the GPUs that max_memory, the explicit
  /// map or `device` name (limits from max_memory, else unlimited), with a
  /// warning.
  std::shared_ptr<DeviceBackend> backend;
  /// Staging ring (device.h). Its `target_dtype` is ignored here: the
  /// conversion target is `PretrainedRequest::load.dtype`, as on the CPU path
  /// (kAuto = keep the checkpoint dtype; unlike the CPU loader, float8
  /// tensors stay float8 under kAuto).
  /// With a target dtype, num_buffers x buffer_bytes of each GPU's free
  /// memory are kept out of the plan (the loader's conversion scratch).
  StagingOptions staging;
  /// Stop after planning: nothing is downloaded or loaded (only the index and
  /// the shard headers are read).
  bool plan_only = false;
};

/// One tensor as planned: where it goes and in what form.
struct PlannedTensor {
  std::string name;
  /// Weights file holding it (repo-relative for the Hub, local path otherwise).
  std::string file;
  Dtype source_dtype = Dtype::F32;  // in the checkpoint
  Dtype dtype = Dtype::F32;         // on the device (after target_dtype)
  std::vector<uint64_t> shape;
  uint64_t bytes = 0;               // on the device
  Device device;
};

/// A tensor planned on "disk": left in its (cached) weights file.
struct DiskTensor {
  std::string name;
  std::string file;        // repo-relative (Hub) or local path
  std::string local_path;  // the file to read (snapshot pointer or local path)
  Dtype dtype = Dtype::F32;
  std::vector<uint64_t> shape;
  uint64_t offset = 0;     // absolute byte offset of the data in the file
  uint64_t bytes = 0;
};

struct DeviceLoadResult {
  /// What every load path reports (load.h): source, repo_id, revision,
  /// commit, resolved weights, files, load order, one TensorRecord per tensor
  /// (device and loaded dtype filled; sha256 with PretrainedRequest::digests,
  /// copied back from the device), warnings, timings, and `extra` (backend,
  /// device_map, bytes_per_device, staging counters) for LoadReportJson.
  PretrainedInfo info;
  /// Backend used ("cuda", "fake", "host" when only host memory was needed;
  /// "" for plan_only without a backend).
  std::string backend;
  /// Free bytes per GPU the plan was made with.
  std::vector<uint64_t> gpu_free_bytes;
  DeviceMapPlan plan;
  /// Every tensor in checkpoint order (files in index order, file order within each).
  std::vector<PlannedTensor> planned;
  /// The loaded tensors (empty with plan_only), in load order.
  DeviceStateDict tensors;
  /// Tensors planned on "disk" (not loaded), checkpoint order.
  std::vector<DiskTensor> disk_tensors;
  /// Staging counters summed over shards.
  StagingStats staging;
};

/// Bytes each tensor of `header` takes on a device, in file order: under
/// `target_dtype`, BF16/F16/F8_E4M3/F8_E5M2/F32 tensors take
/// num_elements x the target's size (the StagingOptions conversion rule),
/// every other tensor its checkpoint size. Thread-safe (pure).
std::vector<TensorFootprint> DeviceFootprints(const safetensors::Header& header, std::optional<Dtype> target_dtype);

/// Resolves `req` (Hub repo or local path, as FetchAndLoad in pipeline.h),
/// reads every shard header before downloading, plans the placement, then
/// downloads the shards concurrently and loads each one as it lands.
///
/// Uses from `req`: repo_id, source, revision, repo_type, subfolder, variant,
/// allow_variant_fallback, convention, load.dtype, device (see
/// DeviceLoadOptions::device), max_shards_in_flight, overlap.
///
/// Errors (ErrorContext repo_id / revision / file filled):
///  - kInvalidArgument: empty repo_id, max_shards_in_flight < 1, a bad device
///    string (InvalidDevice), PlanDeviceMap's errors (DoesNotFit, UncoveredTensor,
///    UnknownDevice, ...).
///  - kUnsupported: `req.load.keep_in_fp32` (reason UnsupportedOption: the
///    device path converts every floating tensor alike); pickle `.bin`
///    weights (PickleUnsupported); a GPU needed and no CUDA (NoCudaDevice).
///  - resolution and Hub errors as FetchAndLoad; ReadRange's errors while
///    reading headers; kInvalidFormat from ParseHeader / CheckShardAgainstIndex,
///    or HeaderChanged when a downloaded shard's header differs from the one
///    planned with.
///  - StagingLoader / backend errors (out of device memory, copy failures).
Result<DeviceLoadResult> FetchAndLoadToDevice(const HubClient& client, const PretrainedRequest& req,
                                              const DeviceLoadOptions& options);

}  // namespace hubload
