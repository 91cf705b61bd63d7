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
#include "hubload/status.h"

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

/// Parses a memory size as accelerate's convert_file_size_to_int: "10GB" =
/// 10 * 10^9 bytes, "10GiB" = 10 * 2^30, units B/KB/MB/GB/TB and
/// KiB/MiB/GiB/TiB (case-insensitive), decimals allowed ("1.5GB"), a plain
/// integer is bytes. kInvalidArgument naming the text otherwise.
Result<uint64_t> ParseMemorySize(std::string_view text);

/// Parses a max_memory spec "0=10GB,1=10GB,cpu=30GB" (keys: ordinals,
/// "cuda:N", "cpu", "disk") into Device::ToString() keys → bytes.
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
  /// (longest dotted-prefix match); a tensor left out is an error naming it.
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

struct DeviceMapPlan {
  /// Module prefix → device, coarsest prefixes that hold, in checkpoint
  /// order (what accelerate's infer_auto_device_map returns).
  std::vector<std::pair<std::string, Device>> device_map;
  /// Bytes placed per device (Device::ToString() keys).
  std::map<std::string, uint64_t> bytes_per_device;
  /// Device of a tensor: longest dotted-prefix match in device_map.
  Device DeviceOf(std::string_view tensor_name) const;
};

/// Computes a device_map from the checkpoint's sizes before loading.
/// `gpu_free_bytes[i]` is the free memory of cuda:i (from a backend, or
/// given by tests); GPUs beyond it do not exist.
/// Errors: kInvalidArgument (bad options: unknown device, a tensor no
/// explicit prefix covers); kInvalidArgument reason "DoesNotFit" when the model cannot be placed within
/// the limits, naming the first module that does not fit, its size and the
/// space left per device.
Result<DeviceMapPlan> PlanDeviceMap(const std::vector<TensorFootprint>& tensors, const DeviceMapOptions& options,
                                    const std::vector<uint64_t>& gpu_free_bytes);

// ---------------------------------------------------------------------------
// 3. Backends and staging
// ---------------------------------------------------------------------------

/// The accelerator runtime behind the staging loader. Handles (streams,
/// events) are opaque integers owned by the backend. Every method returns
/// kInternal/kUnsupported with the runtime's message on failure.
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
  /// Synchronous device → host copy (tests, reports).
  virtual Status copy_to_host(void* dst, const void* src, uint64_t bytes, int device) = 0;
};

/// The CUDA runtime backend (cudart linked statically). Errors: kUnsupported
/// reason "BuiltWithoutCuda" when hubload was configured without nvcc;
/// kUnsupported reason "NoCudaDevice" (message has cudaGetErrorString) when
/// the driver or a device is missing. Thread-safe.
Result<std::shared_ptr<DeviceBackend>> MakeCudaBackend();

/// A CPU-memory stand-in for tests and for planning on machines without a
/// GPU: devices are heap regions with a byte budget; "async" copies run on a
/// worker thread per stream in enqueue order, optionally slowed down; it
/// records every operation so tests can check ordering and back-pressure.
struct FakeDeviceOptions {
  int devices = 1;
  uint64_t memory_per_device = 1ull << 30;  // bytes
  /// Simulated copy bandwidth, bytes/s (0 = as fast as memcpy).
  uint64_t copy_bytes_per_s = 0;
};
struct FakeDeviceEvent {
  enum class Op { kCopy, kConvert, kRecord, kComplete } op;
  uint64_t stream = 0;
  const void* host_src = nullptr;  // kCopy: the staging buffer copied from
  uint64_t bytes = 0;
  uint64_t event = 0;  // kRecord/kComplete
};
class FakeDeviceBackend : public DeviceBackend {
 public:
  explicit FakeDeviceBackend(FakeDeviceOptions options = {});
  ~FakeDeviceBackend() override;
  /// Every operation so far, in the order the fake device executed it.
  std::vector<FakeDeviceEvent> log() const;
  /// Most staging-buffer bytes that were enqueued and not yet completed at any
  /// moment (back-pressure checks).
  uint64_t max_inflight_bytes() const;
  // DeviceBackend:
  std::string name() const override;
  int device_count() const override;
  Result<uint64_t> free_memory(int device) const override;
  Result<void*> alloc_device(int device, uint64_t bytes) override;
  void free_device(int device, void* ptr) override;
  Result<void*> alloc_pinned(uint64_t bytes) override;
  void free_pinned(void* ptr) override;
  Result<uint64_t> create_stream(int device) override;
  void destroy_stream(uint64_t stream) override;
  Status copy_to_device_async(void* dst, const void* src, uint64_t bytes, uint64_t stream) override;
  Status convert_async(void* dst, Dtype dst_dtype, const void* src, Dtype src_dtype, uint64_t count,
                       uint64_t stream) override;
  Result<uint64_t> record_event(uint64_t stream) override;
  Status wait_event(uint64_t event) override;
  Result<bool> event_done(uint64_t event) override;
  void destroy_event(uint64_t event) override;
  Status copy_to_host(void* dst, const void* src, uint64_t bytes, int device) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A tensor in device memory, owned by a DeviceStateDict.
struct DeviceTensor {
  std::string name;
  Dtype dtype = Dtype::F32;       // dtype on the device (after conversion)
  std::vector<uint64_t> shape;     // outermost first, as in the checkpoint
  Device device;
  void* data = nullptr;           // device pointer (host pointer for Device cpu)
  uint64_t bytes = 0;
  Dtype source_dtype = Dtype::F32;  // dtype in the checkpoint
};

/// Tensors on devices plus the backend that frees them. Move-only.
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
  const DeviceTensor* Find(std::string_view name) const;
  DeviceBackend* backend() const { return backend_.get(); }
  /// Bytes of a tensor copied back to the host (tests, reports).
  Result<std::vector<uint8_t>> CopyToHost(const DeviceTensor& t) const;

 private:
  void FreeAll();
  std::shared_ptr<DeviceBackend> backend_;
  std::vector<DeviceTensor> tensors_;
};

struct StagingOptions {
  /// Size of one pinned staging buffer, bytes (fastsafetensors uses 16 MiB).
  uint64_t buffer_bytes = 16ull << 20;
  /// Buffers in the ring (>= 2). Reading blocks when all are in flight.
  int num_buffers = 8;
  /// Copy streams per device (>= 2); buffers are assigned round-robin.
  int num_streams = 2;
  /// Convert floating-point tensors (BF16/F16/F8_E4M3/F8_E5M2/F32) to this
  /// dtype on the device; nullopt keeps the checkpoint dtype. Other dtypes
  /// are copied as they are.
  std::optional<Dtype> target_dtype;
};

/// Reads `bytes` bytes at `offset` of a shard into `dst`; the staging loader
/// calls it from its own thread, in increasing offsets. Errors are returned
/// as they are (named by the caller).
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
  /// Allocates the ring (num_buffers × buffer_bytes pinned) and the streams.
  static Result<std::unique_ptr<StagingLoader>> Create(std::shared_ptr<DeviceBackend> backend,
                                                       StagingOptions options);
  ~StagingLoader();
  /// Loads every tensor of one validated safetensors header (`header`, as
  /// parsed from the shard; tensor offsets are relative to header.data_start,
  /// `reader` offsets to the start of the shard file) to the device `place`
  /// returns for its name (Device::kCpu: a host copy). Reads through
  /// `reader` in file order, chunking tensors larger than a buffer; returns
  /// after every copy completed. Appends to `out`. Errors name the shard
  /// `label` and the tensor (kInvalidFormat, kInternal from the backend,
  /// reader errors).
  Status LoadShard(const std::string& label, const safetensors::Header& header, const ShardReader& reader, const std::function<Device(const std::string&)>& place,
                   DeviceStateDict* out);
  const StagingStats& stats() const;

 private:
  StagingLoader() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hubload
