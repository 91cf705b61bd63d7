// The CUDA runtime backend (cudart linked statically). Compiled only when
// hubload is configured with HUBLOAD_WITH_CUDA; cuda_stub.cc otherwise.
//
// Streams are non-blocking (cudaStreamNonBlocking) so that they never wait
// for the legacy default stream; events are created without timing and with
// blocking synchronisation. Every
// call sets the device it works on first (cudaSetDevice is per host thread).
#include <cuda_runtime_api.h>

#include <map>
#include <mutex>

#include "hubload/device.h"
#include "hubload/reasons.h"
#include "loader/device/cuda_kernels.h"
#include "loader/device/internal.h"

namespace hubload {

namespace {

Status CudaError(cudaError_t e, const std::string& what) {
  (void)cudaGetLastError();  // clear the (non-sticky) error of this thread
  const bool oom = e == cudaErrorMemoryAllocation;
  return Status(Code::kInternal,
                what + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e),
                oom ? "DeviceOutOfMemory" : "CudaError");
}

class CudaBackend final : public DeviceBackend {
 public:
  explicit CudaBackend(int devices) : devices_(devices) {}

  ~CudaBackend() override {
    for (auto& [id, e] : events_) cudaEventDestroy(e.event);
    for (auto& [id, s] : streams_) cudaStreamDestroy(s.stream);
  }

  std::string name() const override { return "cuda"; }
  int device_count() const override { return devices_; }

  Result<uint64_t> free_memory(int device) const override {
    HUBLOAD_RETURN_IF_ERROR(SetDevice(device));
    size_t free_b = 0, total_b = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess) return CudaError(e, "cudaMemGetInfo on cuda:" + std::to_string(device));
    return static_cast<uint64_t>(free_b);
  }

  Result<void*> alloc_device(int device, uint64_t bytes) override {
    HUBLOAD_RETURN_IF_ERROR(SetDevice(device));
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes);  // 256-byte aligned (CUDA guarantees)
    if (e != cudaSuccess)
      return CudaError(e, "cudaMalloc of " + std::to_string(bytes) + " bytes on cuda:" + std::to_string(device));
    return p;
  }

  void free_device(int device, void* ptr) override {
    if (!ptr || !SetDevice(device).ok()) return;
    if (cudaFree(ptr) != cudaSuccess) (void)cudaGetLastError();
  }

  Result<void*> alloc_pinned(uint64_t bytes) override {
    void* p = nullptr;
    // Portable: usable for copies to every device, not only the current one.
    cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (e != cudaSuccess) return CudaError(e, "cudaHostAlloc of " + std::to_string(bytes) + " bytes");
    return p;
  }

  void free_pinned(void* ptr) override {
    if (ptr && cudaFreeHost(ptr) != cudaSuccess) (void)cudaGetLastError();
  }

  Result<uint64_t> create_stream(int device) override {
    HUBLOAD_RETURN_IF_ERROR(SetDevice(device));
    cudaStream_t s = nullptr;
    cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess) return CudaError(e, "cudaStreamCreate on cuda:" + std::to_string(device));
    std::lock_guard<std::mutex> lk(mu_);
    uint64_t id = next_id_++;
    streams_[id] = StreamInfo{s, device};
    return id;
  }

  void destroy_stream(uint64_t stream) override {
    StreamInfo s;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = streams_.find(stream);
      if (it == streams_.end()) return;
      s = it->second;
      streams_.erase(it);
    }
    if (SetDevice(s.device).ok() && cudaStreamDestroy(s.stream) != cudaSuccess) (void)cudaGetLastError();
  }

  Status copy_to_device_async(void* dst, const void* src, uint64_t bytes, uint64_t stream) override {
    HUBLOAD_ASSIGN_OR_RETURN(StreamInfo s, Stream(stream));
    HUBLOAD_RETURN_IF_ERROR(SetDevice(s.device));
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s.stream);
    if (e != cudaSuccess)
      return CudaError(e, "cudaMemcpyAsync of " + std::to_string(bytes) + " bytes to cuda:" + std::to_string(s.device));
    return Status::Ok();
  }

  Status convert_async(void* dst, Dtype dst_dtype, const void* src, Dtype src_dtype, uint64_t count,
                       uint64_t stream) override {
    HUBLOAD_RETURN_IF_ERROR(device_internal::CheckConversion(dst_dtype, src_dtype));
    HUBLOAD_ASSIGN_OR_RETURN(StreamInfo s, Stream(stream));
    HUBLOAD_RETURN_IF_ERROR(SetDevice(s.device));
    int e = cuda_kernels::LaunchConvert(dst, *device_internal::ConvertibleElem(dst_dtype), src,
                                        *device_internal::ConvertibleElem(src_dtype), count, s.stream);
    if (e != 0)
      return CudaError(static_cast<cudaError_t>(e), std::string("conversion kernel ") +
                                                        safetensors::DtypeName(src_dtype) + " -> " +
                                                        safetensors::DtypeName(dst_dtype));
    return Status::Ok();
  }

  Result<uint64_t> record_event(uint64_t stream) override {
    HUBLOAD_ASSIGN_OR_RETURN(StreamInfo s, Stream(stream));
    HUBLOAD_RETURN_IF_ERROR(SetDevice(s.device));
    cudaEvent_t ev = nullptr;
    // Blocking sync: a waiting loader thread sleeps instead of spinning (the
    // download threads share the CPU); the copy engine keeps the other queued
    // pieces going meanwhile.
    cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming | cudaEventBlockingSync);
    if (e != cudaSuccess) return CudaError(e, "cudaEventCreate");
    e = cudaEventRecord(ev, s.stream);
    if (e != cudaSuccess) {
      cudaEventDestroy(ev);
      return CudaError(e, "cudaEventRecord");
    }
    std::lock_guard<std::mutex> lk(mu_);
    uint64_t id = next_id_++;
    events_[id] = EventInfo{ev, s.device};
    return id;
  }

  Status wait_event(uint64_t event) override {
    HUBLOAD_ASSIGN_OR_RETURN(EventInfo ev, Event(event));
    cudaError_t e = cudaEventSynchronize(ev.event);
    if (e != cudaSuccess) return CudaError(e, "cudaEventSynchronize on cuda:" + std::to_string(ev.device));
    return Status::Ok();
  }

  Result<bool> event_done(uint64_t event) override {
    HUBLOAD_ASSIGN_OR_RETURN(EventInfo ev, Event(event));
    cudaError_t e = cudaEventQuery(ev.event);
    if (e == cudaSuccess) return true;
    if (e == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    return CudaError(e, "cudaEventQuery on cuda:" + std::to_string(ev.device));
  }

  void destroy_event(uint64_t event) override {
    cudaEvent_t ev = nullptr;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = events_.find(event);
      if (it == events_.end()) return;
      ev = it->second.event;
      events_.erase(it);
    }
    if (cudaEventDestroy(ev) != cudaSuccess) (void)cudaGetLastError();
  }

  Status copy_to_host(void* dst, const void* src, uint64_t bytes, int device) override {
    HUBLOAD_RETURN_IF_ERROR(SetDevice(device));
    // Non-blocking streams do not synchronise with cudaMemcpy: wait for them.
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) return CudaError(e, "cudaDeviceSynchronize on cuda:" + std::to_string(device));
    e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess)
      return CudaError(e, "cudaMemcpy of " + std::to_string(bytes) + " bytes from cuda:" + std::to_string(device));
    return Status::Ok();
  }

 private:
  struct StreamInfo {
    cudaStream_t stream = nullptr;
    int device = 0;
  };
  struct EventInfo {
    cudaEvent_t event = nullptr;
    int device = 0;
  };

  Status SetDevice(int device) const {
    if (device < 0 || device >= devices_)
      return Status(Code::kInvalidArgument,
                    "cuda:" + std::to_string(device) + " does not exist (" + std::to_string(devices_) + " device(s))",
                    reason::kInvalidDevice);
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) return CudaError(e, "cudaSetDevice(" + std::to_string(device) + ")");
    return Status::Ok();
  }

  Result<StreamInfo> Stream(uint64_t id) const {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = streams_.find(id);
    if (it == streams_.end())
      return Status(Code::kInvalidArgument, "unknown CUDA stream handle " + std::to_string(id), reason::kInvalidStream);
    return it->second;
  }

  Result<EventInfo> Event(uint64_t id) const {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = events_.find(id);
    if (it == events_.end())
      return Status(Code::kInvalidArgument, "unknown CUDA event handle " + std::to_string(id), reason::kInvalidEvent);
    return it->second;
  }

  const int devices_;
  mutable std::mutex mu_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, StreamInfo> streams_;
  std::map<uint64_t, EventInfo> events_;
};

}  // namespace

Result<std::shared_ptr<DeviceBackend>> MakeCudaBackend() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return Status(Code::kUnsupported,
                  std::string("no usable CUDA device: cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " +
                      cudaGetErrorString(e),
                  reason::kNoCudaDevice);
  }
  if (n <= 0) return Status(Code::kUnsupported, "no CUDA device: cudaGetDeviceCount returned 0", reason::kNoCudaDevice);
  return std::shared_ptr<DeviceBackend>(std::make_shared<CudaBackend>(n));
}

}  // namespace hubload
