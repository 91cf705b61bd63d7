// hubload/device.h: device placement and the staging path to accelerator
// memory (torch-free, CUDA-free header; the CUDA backend is compiled by nvcc
// into hubload_device when the toolkit is found, see MakeCudaBackend).
//
// Three parts:
//  1. Device names and memory sizes as accelerate/diffusers spell them
//     ("cpu", "cuda:0", 0, "disk"; "10GB", "10GiB").
//  2. device_map planning (accelerate infer_auto_device_map /
//     get_balanced_memory; diffusers `device_map="balanced"`): from the
//     checkpoint's tensor sizes alone, before anything is loaded.
//  3. A DeviceBackend seam (CUDA runtime, or a fake backend on the CPU for
//     tests) and the StagingLoader: a ring of reusable pinned staging buffers,
//     copies on >= 2 streams ordered by events, so that reading shard bytes
//     overlaps the host-to-device copies; optional dtype conversion on the
//     device.
//
// Thread safety: free functions are thread-safe. A DeviceBackend may be used
// from several threads (each implementation says so). A StagingLoader is used
// by one thread at a time. DeviceStateDict is a value owning device buffers.
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
#include "hubload/size.h"
#include "hubload/status.h"
#include "hubload/target_dtype.h"

namespace hubload {

using safetensors::Dtype;

// ---------------------------------------------------------------------------
// 1. Devices and sizes
// ---------------------------------------------------------------------------

struct Device {
  enum class Kind { kCpu, kCuda, kDisk };
  Kind kind = Kind::kCpu;
  int index = 0;  // CUDA ordinal; 0 for cpu/disk

  /// Parses "cpu", "cuda" (= cuda:0), "cuda:N", "N" (an ordinal, as
  /// accelerate's device_map values), "disk". kInvalidArgument naming the
  /// text otherwise.
  static Result<Device> Parse(std::string_view text);
  /// "cpu", "cuda:N", "disk".
  std::string ToString() const;
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

// ParseMemorySize (sizes such as "10GB", "1.5GiB"): hubload/size.h, included above.

/// Parses a max_memory spec "0=10GB,1=10GB,cpu=30GB" (keys: ordinals,
/// "cuda:N", "cuda", "cpu", "disk"; sizes as ParseMemorySize) into
/// Device::ToString() keys → bytes ("0" and "cuda:0" both give "cuda:0").
/// Errors: kInvalidArgument (reasons InvalidMaxMemory: empty spec, an entry
/// without '=', a device given twice; InvalidDevice; InvalidMemorySize),
/// naming the spec and the entry. Thread-safe (pure).
Result<std::map<std::string, uint64_t>> ParseMaxMemory(std::string_view spec);

// ---------------------------------------------------------------------------
// 2. device_map planning
// ---------------------------------------------------------------------------

/// One tensor as the planner sees it: its name in the state dict and the
/// bytes it will occupy on the device (after any dtype conversion).
struct TensorFootprint {
  std::string name;
  uint64_t bytes = 0;
};

struct DeviceMapOptions {
  enum class Strategy {
    kExplicit,      // explicit_map only (a dict of module prefix → device)
    kAuto,          // accelerate "auto" (= balanced over the GPUs, then cpu, then disk)
    kBalanced,      // accelerate "balanced" / diffusers "balanced"
    kBalancedLow0,  // accelerate "balanced_low_0" (GPU 0 kept as empty as possible)
    kSequential,    // fill GPU 0, then GPU 1, ..., then cpu, then disk
  };
  Strategy strategy = Strategy::kAuto;
  /// Module prefix ("" = the whole model, "text_model.encoder.layers.0") →
  /// device, for kExplicit. Every tensor must be covered by some prefix
  /// (longest dotted-prefix match); a tensor left out is an error naming it,
  /// and so is an entry that matches no tensor (a typo is never a no-op).
  std::vector<std::pair<std::string, Device>> explicit_map;
  /// Device::ToString() → bytes the plan may use there. GPUs absent from
  /// this map get `available` from the backend (free memory); "cpu" absent
  /// means unlimited; "disk" is used only when listed.
  std::map<std::string, uint64_t> max_memory;
  /// Modules that must not be split across devices (accelerate
  /// no_split_module_classes, expressed on names): dotted prefixes where a
  /// segment "*" matches any one name segment ("model.layers.*").
  std::vector<std::string> no_split_modules;
};

/// Parses a device_map as the CLI and accelerate spell it: "auto",
/// "balanced", "balanced_low_0", "sequential" (a Strategy), or an explicit
/// map "PREFIX=DEVICE,PREFIX=DEVICE,..." (kExplicit; PREFIX may be empty for
/// the whole model, DEVICE as Device::Parse: "0", "cuda:1", "cpu", "disk").
/// Only `strategy` and `explicit_map` are set. Errors: kInvalidArgument
/// (reason InvalidDeviceMap) naming the entry; InvalidDevice. Thread-safe.
Result<DeviceMapOptions> ParseDeviceMap(std::string_view spec);

/// "explicit", "auto", "balanced", "balanced_low_0", "sequential".
const char* StrategyName(DeviceMapOptions::Strategy strategy);

struct DeviceMapPlan {
  /// Module prefix → device, coarsest prefixes that hold, in checkpoint
  /// order (what accelerate's infer_auto_device_map returns).
  std::vector<std::pair<std::string, Device>> device_map;
  /// Bytes placed per device (Device::ToString() keys).
  std::map<std::string, uint64_t> bytes_per_device;
  /// Device of a tensor: longest dotted-prefix match in device_map (a
  /// prefix P matches N when P is "", P == N, or N starts with P + ".");
  /// cpu when nothing matches (never the case for a plan of PlanDeviceMap
  /// asked about one of its tensors). Thread-safe (const).
  Device DeviceOf(std::string_view tensor_name) const;
};

/// Computes a device_map from the checkpoint's sizes before loading, as
/// accelerate's infer_auto_device_map (+ get_balanced_memory for the
/// balanced strategies) does from a model's parameter sizes.
///
/// `tensors`: every tensor in checkpoint order (shards in index order, file
/// order within a shard) with its size on the device in bytes.
/// `gpu_free_bytes[i]`: free memory of cuda:i in bytes (from a backend, or
/// given by tests); GPUs beyond it do not exist.
///
/// Module tree: a tensor "a.b.weight" lies in modules "a" and "a.b";
/// children are ordered by first appearance in `tensors`.
/// Devices, in placement order: cuda:0..N-1 (only the GPUs max_memory lists,
/// when it lists any), then cpu, then disk (only when max_memory lists it).
/// Limits: a GPU's limit is its free memory, or min(max_memory, free) when
/// listed; cpu is unlimited unless listed; disk has the listed limit.
///  - kSequential: each GPU is filled up to its limit.
///  - kAuto / kBalanced: as get_balanced_memory, every GPU but the last is
///    capped at total/num_gpus + buffer, buffer = floor(1.25 * max(largest
///    no-split module, mean size of the innermost modules)); the last GPU
///    keeps its whole limit (GPUs with limit 0 do not count).
///  - kBalancedLow0: the same over GPUs 1..N-1 (total/(N-1) + buffer), and
///    GPU 0 gets only what does not fit on the others: min(its limit,
///    max(0, total - sum of the other GPUs' limits)) (accelerate: "only puts
///    on GPU 0 what does not fit on the others"). With one GPU: as kBalanced.
/// Placement (infer_auto_device_map): starting from the whole model, the
/// front item goes to the current device when it fits in what is left
/// there; otherwise a module is replaced by its children (tensors and
/// submodules, checkpoint order), unless it is a tensor or matches a
/// no_split_modules pattern (or is also a tensor's name), in which case the
/// current device is closed and the item tried on the next one; earlier
/// devices are never revisited.
/// Difference from accelerate: no room for the largest layer is reserved on
/// GPU 0 and cpu (accelerate keeps it for moving offloaded layers back at
/// run time; hubload only places weights), and disk is not added implicitly.
///  - kExplicit: each tensor goes to the device of the longest matching
///    prefix of `explicit_map`; the per-device limits above are checked too.
/// Output: `device_map` lists coarsest prefixes (a module all of whose
/// tensors share a device is one entry; "" when the whole model does), in
/// checkpoint order; `bytes_per_device` sums the tensors per device (only
/// devices that received a tensor).
///
/// Errors (all kInvalidArgument): DuplicateTensor, InvalidTensorName (a name
/// starting with '.'), UnknownDevice (max_memory or explicit_map names a GPU
/// >= gpu_free_bytes.size()), InvalidDevice (a bad max_memory key),
/// InvalidNoSplit (empty pattern), InvalidDeviceMap (empty explicit map, a
/// prefix given twice), DeviceMapEntryUnmatched (explicit map: an entry
/// whose prefix matches no tensor name; the message names every such entry
/// and the closest module prefix of a tensor), UncoveredTensor (explicit map:
/// the message names the tensor), DoesNotFit (the model cannot be placed within the limits:
/// the message names the first module or tensor that fits nowhere, its
/// size, and the space left on every device). Thread-safe (pure).
Result<DeviceMapPlan> PlanDeviceMap(const std::vector<TensorFootprint>& tensors, const DeviceMapOptions& options,
                                    const std::vector<uint64_t>& gpu_free_bytes);

// ---------------------------------------------------------------------------
// 3. Backends and staging
// ---------------------------------------------------------------------------

/// The accelerator runtime behind the staging loader. Handles (streams,
/// events) are opaque integers owned by the backend. Sizes are in bytes,
/// devices are ordinals 0..device_count()-1.
/// Errors: kInternal with the runtime's message (reason "DeviceOutOfMemory"
/// when an allocation does not fit, "CudaError" for other CUDA failures);
/// kInvalidArgument for an unknown device, stream or event handle or a
/// pointer outside device memory (reasons InvalidDevice, InvalidStream,
/// InvalidEvent, InvalidDevicePointer); kUnsupported (reason
/// UnsupportedConversion) for a conversion convert_async does not do.
/// The free_* / destroy_* calls ignore null pointers and unknown handles.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  /// "cuda" or "fake".
  virtual std::string name() const = 0;
  /// Number of devices (0 when none).
  virtual int device_count() const = 0;
  /// Free bytes on device `device` right now.
  virtual Result<uint64_t> free_memory(int device) const = 0;
  /// Device memory of `bytes` bytes (alignment >= 256).
  virtual Result<void*> alloc_device(int device, uint64_t bytes) = 0;
  virtual void free_device(int device, void* ptr) = 0;
  /// Page-locked host memory (cudaHostAlloc), reused by the staging ring.
  virtual Result<void*> alloc_pinned(uint64_t bytes) = 0;
  virtual void free_pinned(void* ptr) = 0;
  virtual Result<uint64_t> create_stream(int device) = 0;
  virtual void destroy_stream(uint64_t stream) = 0;
  /// Enqueues a host → device copy of `bytes` on `stream` (cudaMemcpyAsync).
  /// `src` must stay untouched until an event recorded after it completes.
  virtual Status copy_to_device_async(void* dst, const void* src, uint64_t bytes, uint64_t stream) = 0;
  /// Enqueues an element conversion on the device: `count` elements of
  /// `src_dtype` at device address `src` → `dst_dtype` at `dst`. Supported:
  /// BF16/F16/F8_E4M3/F8_E5M2/F32 → F32/F16/BF16 (round to nearest even;
  /// same rules as the CPU loader). kUnsupported otherwise.
  virtual Status convert_async(void* dst, Dtype dst_dtype, const void* src, Dtype src_dtype, uint64_t count,
                               uint64_t stream) = 0;
  /// Records an event after the work enqueued so far on `stream`.
  virtual Result<uint64_t> record_event(uint64_t stream) = 0;
  /// Blocks the calling thread until `event` completed.
  virtual Status wait_event(uint64_t event) = 0;
  /// True when `event` completed (non-blocking).
  virtual Result<bool> event_done(uint64_t event) = 0;
  virtual void destroy_event(uint64_t event) = 0;
  /// Synchronous device → host copy (tests, reports); waits first for all
  /// work queued on `device` (every stream), then copies.
  virtual Status copy_to_host(void* dst, const void* src, uint64_t bytes, int device) = 0;
};

/// The CUDA runtime backend (cudart linked statically). Errors: kUnsupported
/// reason "BuiltWithoutCuda" when hubload was configured without nvcc;
/// kUnsupported reason "NoCudaDevice" (message has cudaGetErrorString) when
/// the driver or a device is missing. The backend is thread-safe: every call
/// selects its device (cudaSetDevice) first; streams are non-blocking; pinned
/// memory is portable (cudaHostAllocPortable); conversions run as small
/// kernels with the integer rules of the CPU loader (bit-identical results).
Result<std::shared_ptr<DeviceBackend>> MakeCudaBackend();

/// Options of the CPU-memory stand-in for a GPU (MakeFakeDeviceBackend):
/// devices are heap regions with a byte budget; "async" copies run on a
/// worker thread per stream in enqueue order, optionally slowed down.
/// alloc_device beyond the budget fails like CUDA's out-of-memory (kInternal,
/// reason "DeviceOutOfMemory"). The backend class itself (with its operation
/// log for tests) is internal: loader/device/fake_backend.h.
struct FakeDeviceOptions {
  int devices = 1;
  uint64_t memory_per_device = 1ull << 30;  // bytes
  /// Simulated copy bandwidth, bytes/s (0 = as fast as memcpy).
  uint64_t copy_bytes_per_s = 0;
};
/// A host-memory backend posing as `options.devices` GPUs (`hubload load
/// --device-backend fake`; with devices = 0 the host-only backend the device
/// path uses when no tensor goes to a GPU). Thread-safe.
std::shared_ptr<DeviceBackend> MakeFakeDeviceBackend(FakeDeviceOptions options = {});

/// A tensor in device memory, owned by a DeviceStateDict.
struct DeviceTensor {
  std::string name;
  Dtype dtype = Dtype::F32;       // dtype on the device (after conversion)
  std::vector<uint64_t> shape;     // outermost first, as in the checkpoint
  Device device;
  void* data = nullptr;           // device pointer (host pointer for Device cpu; null when bytes == 0)
  uint64_t bytes = 0;             // bytes at `data` (after conversion)
  Dtype source_dtype = Dtype::F32;  // dtype in the checkpoint
  /// Non-empty: an alias restored from the checkpoint metadata ("removed":
  /// "kept", huggingface_hub save_torch_state_dict): this entry is the
  /// removed name and shares `data` with the tensor named here, which owns it.
  std::string alias_of;
};

/// Tensors on devices plus the backend that frees them. Move-only. On
/// destruction (or move-assignment over it) device tensors are freed with
/// backend()->free_device and Device::kCpu tensors with std::free (so code
/// that appends cpu tensors allocates them with std::malloc/aligned_alloc);
/// alias entries (DeviceTensor::alias_of) are not freed on their own.
/// Not synchronised: one thread at a time.
class DeviceStateDict {
 public:
  DeviceStateDict() = default;
  explicit DeviceStateDict(std::shared_ptr<DeviceBackend> backend) : backend_(std::move(backend)) {}
  DeviceStateDict(DeviceStateDict&&) noexcept = default;
  DeviceStateDict& operator=(DeviceStateDict&&) noexcept;
  DeviceStateDict(const DeviceStateDict&) = delete;
  DeviceStateDict& operator=(const DeviceStateDict&) = delete;
  ~DeviceStateDict();
  /// Tensors in load order.
  std::vector<DeviceTensor>& tensors() { return tensors_; }
  const std::vector<DeviceTensor>& tensors() const { return tensors_; }
  /// The tensor called `name` (linear search), or nullptr.
  const DeviceTensor* Find(std::string_view name) const;
  DeviceBackend* backend() const { return backend_.get(); }
  /// Bytes of a tensor copied back to the host (tests, reports), via
  /// backend()->copy_to_host (which waits for queued work). Errors:
  /// kInvalidArgument (NoBackend, InvalidTensor), the backend's, naming the tensor.
  Result<std::vector<uint8_t>> CopyToHost(const DeviceTensor& t) const;

 private:
  void FreeAll();
  std::shared_ptr<DeviceBackend> backend_;
  std::vector<DeviceTensor> tensors_;
};

struct StagingOptions {
  /// Size of one pinned staging buffer, bytes (fastsafetensors uses 16 MiB).
  /// At least 8; a converted tensor is cut into pieces of whole elements.
  uint64_t buffer_bytes = 16ull << 20;
  /// Buffers in the ring (>= 2). Reading blocks when all are in flight.
  int num_buffers = 8;
  /// Copy streams per device (>= 2); the k-th piece the loader stages goes
  /// through ring buffer k % num_buffers on stream k % num_streams.
  int num_streams = 2;
  /// Convert floating-point tensors (BF16/F16/F8_E4M3/F8_E5M2/F32) to this
  /// dtype on the device (a device scratch buffer per ring slot receives the
  /// raw piece; DeviceBackend::convert_async writes the tensor); kAuto keeps
  /// the checkpoint dtype. Other dtypes (F64, F8_E8M0, integers, ...) are
  /// copied as they are. The device pipeline sets it from the request's
  /// LoadOptions::dtype (one knob).
  TargetDtype target_dtype = TargetDtype::kAuto;
};

/// Reads `bytes` bytes at `offset` of a shard into `dst`; the staging loader
/// calls it on the thread that called LoadShard, in increasing offsets, with
/// `dst` a pinned ring buffer (or host tensor memory for Device::kCpu). A
/// non-OK Status stops the load; LoadShard returns it with its code and
/// reason, the message prefixed with the tensor and shard.
using ShardReader = std::function<Status(uint64_t offset, void* dst, uint64_t bytes)>;

struct StagingStats {
  uint64_t bytes_read = 0;        // shard bytes read into staging buffers
  uint64_t bytes_copied = 0;      // bytes sent host → device
  uint64_t buffer_waits = 0;      // times reading waited for a free buffer
  double read_s = 0, wait_s = 0;  // time reading / waiting for buffers
};

/// Moves shards into device memory through a ring of pinned buffers.
class StagingLoader {
 public:
  /// Allocates the ring (num_buffers × buffer_bytes pinned). Streams (and,
  /// when converting, the device scratch buffers) are created on first use
  /// of each device and kept until the loader is destroyed. Errors:
  /// kInvalidArgument reason InvalidOptions (null backend, buffer_bytes < 8,
  /// num_buffers < 2, num_streams < 2); the
  /// backend's allocation errors.
  static Result<std::unique_ptr<StagingLoader>> Create(std::shared_ptr<DeviceBackend> backend,
                                                       StagingOptions options);
  ~StagingLoader();
  /// Loads every tensor of one validated safetensors header (`header`, as
  /// parsed from the shard; tensor offsets are relative to header.data_start,
  /// `reader` offsets to the start of the shard file) to the device `place`
  /// returns for its name (Device::kCpu: a host copy). Reads through
  /// `reader` in file order, chunking tensors larger than a buffer; returns
  /// after every copy completed. Appends to `out`, which must have been
  /// created with this loader's backend. Errors name the shard `label` and
  /// the tensor (ErrorContext::tensor set): kInvalidArgument (InvalidDevice:
  /// a GPU the backend does not have; UnsupportedDevice: "disk"),
  /// kInvalidFormat (TensorInvalidInfo: offsets outside header.file_size),
  /// kInternal from the backend (DeviceOutOfMemory, CudaError), reader
  /// errors as returned. On error the queued copies are waited for and the
  /// tensors this call added are freed and removed from `out` (earlier
  /// shards stay). Stats accumulate over calls.
  Status LoadShard(const std::string& label, const safetensors::Header& header, const ShardReader& reader, const std::function<Device(const std::string&)>& place,
                   DeviceStateDict* out);
  const StagingStats& stats() const;

 private:
  StagingLoader() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hubload
