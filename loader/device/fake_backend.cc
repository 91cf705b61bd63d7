// FakeDeviceBackend: device memory in the host heap with a byte budget per
// device, one worker thread per stream executing the enqueued operations in
// order, events that complete when their stream reaches them, optional
// throttling of copies, and a log of everything for the tests.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "hubload/device.h"
#include "hubload/reasons.h"
#include "loader/device/fake_backend.h"
#include "loader/device/internal.h"

namespace hubload {

namespace {

uint64_t RoundUp(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

struct Op {
  FakeDeviceEvent::Op kind = FakeDeviceEvent::Op::kCopy;
  std::function<void()> work;
  const void* host_src = nullptr;
  uint64_t bytes = 0;
  uint64_t event = 0;
};

struct Stream {
  uint64_t id = 0;
  int device = 0;
  std::deque<Op> queue;
  bool busy = false;
  bool stop = false;
  std::condition_variable cv;
  std::thread worker;
};

struct Allocation {
  int device = 0;
  uint64_t bytes = 0;     // as requested (counted against the budget)
  uint64_t capacity = 0;  // as allocated (>= 256, a multiple of 256)
};

}  // namespace

struct FakeDeviceBackend::Impl {
  FakeDeviceOptions options;
  mutable std::mutex mu;
  std::condition_variable done_cv;  // an operation completed
  std::vector<uint64_t> used;       // bytes allocated per device
  std::map<uintptr_t, Allocation> device_allocs;
  std::set<void*> pinned;
  std::map<uint64_t, std::unique_ptr<Stream>> streams;
  std::map<uint64_t, bool> events;  // id → completed
  uint64_t next_id = 1;
  std::vector<FakeDeviceEvent> log;
  uint64_t inflight = 0, max_inflight = 0;

  Status BadDevice(int device) const {
    return Status(Code::kInvalidArgument,
                  "fake device " + std::to_string(device) + " does not exist (" + std::to_string(options.devices) +
                      " device(s))",
                  reason::kInvalidDevice);
  }

  // The allocation holding [p, p + bytes), or nullptr. Caller holds mu.
  const Allocation* Find(const void* p, uint64_t bytes) const {
    auto a = reinterpret_cast<uintptr_t>(p);
    auto it = device_allocs.upper_bound(a);
    if (it == device_allocs.begin()) return nullptr;
    --it;
    if (a - it->first > it->second.capacity || bytes > it->second.capacity - (a - it->first)) return nullptr;
    return &it->second;
  }

  Status OutsideDeviceMemory(const char* what, const void* p, uint64_t bytes) const {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%p", p);
    return Status(Code::kInvalidArgument,
                  std::string(what) + ": " + std::to_string(bytes) + " bytes at " + buf +
                      " are not inside one fake device allocation",
                  reason::kInvalidDevicePointer);
  }

  Stream* FindStream(uint64_t id) const {
    auto it = streams.find(id);
    return it == streams.end() ? nullptr : it->second.get();
  }

  void Worker(Stream* s) {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      s->cv.wait(lk, [&] { return s->stop || !s->queue.empty(); });
      if (s->queue.empty()) return;  // stop requested and drained
      Op op = std::move(s->queue.front());
      s->queue.pop_front();
      s->busy = true;
      lk.unlock();
      if (op.kind == FakeDeviceEvent::Op::kCopy && options.copy_bytes_per_s > 0) {
        const double secs = static_cast<double>(op.bytes) / static_cast<double>(options.copy_bytes_per_s);
        auto ns = static_cast<int64_t>(secs * 1e9);
        std::this_thread::sleep_for(std::chrono::nanoseconds(ns));
      }
      if (op.work) op.work();
      lk.lock();
      if (op.kind == FakeDeviceEvent::Op::kCopy) inflight -= op.bytes;
      if (op.kind == FakeDeviceEvent::Op::kComplete) {
        auto it = events.find(op.event);
        if (it != events.end()) it->second = true;
      }
      log.push_back(FakeDeviceEvent{op.kind, s->id, op.host_src, op.bytes, op.event});
      s->busy = false;
      done_cv.notify_all();
    }
  }

  // Caller holds lk; returns when no stream of `device` has pending work.
  void DrainDevice(std::unique_lock<std::mutex>& lk, int device) {
    done_cv.wait(lk, [&] {
      for (auto& [id, s] : streams)
        if (s->device == device && (s->busy || !s->queue.empty())) return false;
      return true;
    });
  }
};

FakeDeviceBackend::FakeDeviceBackend(FakeDeviceOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  impl_->used.assign(static_cast<size_t>(std::max(options.devices, 0)), 0);
}

FakeDeviceBackend::~FakeDeviceBackend() {
  std::vector<std::unique_ptr<Stream>> streams;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    for (auto& [id, s] : impl_->streams) {
      s->stop = true;
      s->cv.notify_all();
    }
  }
  // Join outside the lock (the workers take it), then free what was left.
  for (auto& [id, s] : impl_->streams)
    if (s->worker.joinable()) s->worker.join();
  for (auto& [addr, a] : impl_->device_allocs) std::free(reinterpret_cast<void*>(addr));
  for (void* p : impl_->pinned) std::free(p);
}

std::vector<FakeDeviceEvent> FakeDeviceBackend::log() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->log;
}

uint64_t FakeDeviceBackend::max_inflight_bytes() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->max_inflight;
}

std::string FakeDeviceBackend::name() const { return "fake"; }

int FakeDeviceBackend::device_count() const { return std::max(impl_->options.devices, 0); }

Result<uint64_t> FakeDeviceBackend::free_memory(int device) const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  if (device < 0 || device >= device_count()) return impl_->BadDevice(device);
  return impl_->options.memory_per_device - impl_->used[static_cast<size_t>(device)];
}

Result<void*> FakeDeviceBackend::alloc_device(int device, uint64_t bytes) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  if (device < 0 || device >= device_count()) return impl_->BadDevice(device);
  uint64_t& used = impl_->used[static_cast<size_t>(device)];
  const uint64_t budget = impl_->options.memory_per_device;
  if (bytes > budget - used) {
    return Status(Code::kInternal,
                  "out of memory on fake device " + std::to_string(device) + ": cannot allocate " +
                      std::to_string(bytes) + " bytes (" + std::to_string(used) + " of " + std::to_string(budget) +
                      " bytes in use)",
                  reason::kDeviceOutOfMemory);
  }
  const uint64_t capacity = RoundUp(std::max<uint64_t>(bytes, 1), 256);
  void* p = std::aligned_alloc(256, capacity);
  if (!p) return Status(Code::kInternal, "host heap exhausted allocating fake device memory",
                        reason::kDeviceOutOfMemory);
  used += bytes;
  impl_->device_allocs[reinterpret_cast<uintptr_t>(p)] = Allocation{device, bytes, capacity};
  return p;
}

void FakeDeviceBackend::free_device(int device, void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lk(impl_->mu);
  auto it = impl_->device_allocs.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == impl_->device_allocs.end()) return;  // not ours: ignored, as cudaFree would report
  impl_->used[static_cast<size_t>(it->second.device)] -= it->second.bytes;
  impl_->device_allocs.erase(it);
  std::free(ptr);
}

Result<void*> FakeDeviceBackend::alloc_pinned(uint64_t bytes) {
  void* p = std::aligned_alloc(4096, RoundUp(std::max<uint64_t>(bytes, 1), 4096));
  if (!p) return Status(Code::kInternal, "cannot allocate " + std::to_string(bytes) + " bytes of host memory");
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->pinned.insert(p);
  return p;
}

void FakeDeviceBackend::free_pinned(void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lk(impl_->mu);
  if (impl_->pinned.erase(ptr)) std::free(ptr);
}

Result<uint64_t> FakeDeviceBackend::create_stream(int device) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  if (device < 0 || device >= device_count()) return impl_->BadDevice(device);
  uint64_t id = impl_->next_id++;
  auto s = std::make_unique<Stream>();
  s->id = id;
  s->device = device;
  Stream* raw = s.get();
  impl_->streams[id] = std::move(s);
  raw->worker = std::thread([this, raw] { impl_->Worker(raw); });
  return id;
}

void FakeDeviceBackend::destroy_stream(uint64_t stream) {
  std::unique_ptr<Stream> s;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    auto it = impl_->streams.find(stream);
    if (it == impl_->streams.end()) return;
    s = std::move(it->second);
    impl_->streams.erase(it);
    s->stop = true;
    s->cv.notify_all();
  }
  s->worker.join();  // the worker drains its queue first
}

Status FakeDeviceBackend::copy_to_device_async(void* dst, const void* src, uint64_t bytes, uint64_t stream) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  Stream* s = impl_->FindStream(stream);
  if (!s) return Status(Code::kInvalidArgument, "unknown fake stream " + std::to_string(stream),
                        reason::kInvalidStream);
  if (!impl_->Find(dst, bytes)) return impl_->OutsideDeviceMemory("copy_to_device_async destination", dst, bytes);
  Op op;
  op.kind = FakeDeviceEvent::Op::kCopy;
  op.host_src = src;
  op.bytes = bytes;
  op.work = [dst, src, bytes] {
    if (bytes) std::memcpy(dst, src, bytes);
  };
  impl_->inflight += bytes;
  impl_->max_inflight = std::max(impl_->max_inflight, impl_->inflight);
  s->queue.push_back(std::move(op));
  s->cv.notify_all();
  return Status::Ok();
}

Status FakeDeviceBackend::convert_async(void* dst, Dtype dst_dtype, const void* src, Dtype src_dtype, uint64_t count,
                                        uint64_t stream) {
  HUBLOAD_RETURN_IF_ERROR(device_internal::CheckConversion(dst_dtype, src_dtype));
  std::lock_guard<std::mutex> lk(impl_->mu);
  Stream* s = impl_->FindStream(stream);
  if (!s) return Status(Code::kInvalidArgument, "unknown fake stream " + std::to_string(stream),
                        reason::kInvalidStream);
  const uint64_t src_bytes = count * static_cast<uint64_t>(safetensors::DtypeBits(src_dtype) / 8);
  const uint64_t dst_bytes = count * static_cast<uint64_t>(safetensors::DtypeBits(dst_dtype) / 8);
  if (!impl_->Find(src, src_bytes)) return impl_->OutsideDeviceMemory("convert_async source", src, src_bytes);
  if (!impl_->Find(dst, dst_bytes)) return impl_->OutsideDeviceMemory("convert_async destination", dst, dst_bytes);
  Op op;
  op.kind = FakeDeviceEvent::Op::kConvert;
  op.bytes = src_bytes;
  op.work = [=] { device_internal::ConvertOnHost(dst, dst_dtype, src, src_dtype, count); };
  s->queue.push_back(std::move(op));
  s->cv.notify_all();
  return Status::Ok();
}

Result<uint64_t> FakeDeviceBackend::record_event(uint64_t stream) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  Stream* s = impl_->FindStream(stream);
  if (!s) return Status(Code::kInvalidArgument, "unknown fake stream " + std::to_string(stream),
                        reason::kInvalidStream);
  uint64_t id = impl_->next_id++;
  impl_->events[id] = false;
  impl_->log.push_back(FakeDeviceEvent{FakeDeviceEvent::Op::kRecord, stream, nullptr, 0, id});
  Op op;
  op.kind = FakeDeviceEvent::Op::kComplete;
  op.event = id;
  s->queue.push_back(std::move(op));
  s->cv.notify_all();
  return id;
}

Status FakeDeviceBackend::wait_event(uint64_t event) {
  std::unique_lock<std::mutex> lk(impl_->mu);
  if (!impl_->events.count(event))
    return Status(Code::kInvalidArgument, "unknown fake event " + std::to_string(event), reason::kInvalidEvent);
  impl_->done_cv.wait(lk, [&] {
    auto it = impl_->events.find(event);
    return it == impl_->events.end() || it->second;
  });
  return Status::Ok();
}

Result<bool> FakeDeviceBackend::event_done(uint64_t event) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  auto it = impl_->events.find(event);
  if (it == impl_->events.end())
    return Status(Code::kInvalidArgument, "unknown fake event " + std::to_string(event), reason::kInvalidEvent);
  return it->second;
}

void FakeDeviceBackend::destroy_event(uint64_t event) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->events.erase(event);
}

Status FakeDeviceBackend::copy_to_host(void* dst, const void* src, uint64_t bytes, int device) {
  std::unique_lock<std::mutex> lk(impl_->mu);
  if (device < 0 || device >= device_count()) return impl_->BadDevice(device);
  const Allocation* a = impl_->Find(src, bytes);
  if (!a || a->device != device) return impl_->OutsideDeviceMemory("copy_to_host source", src, bytes);
  impl_->DrainDevice(lk, device);  // as cudaMemcpy after the device's queued work
  if (bytes) std::memcpy(dst, src, bytes);
  return Status::Ok();
}

}  // namespace hubload

namespace hubload {
std::shared_ptr<DeviceBackend> MakeFakeDeviceBackend(FakeDeviceOptions options) {
  return std::make_shared<FakeDeviceBackend>(options);
}
}  // namespace hubload
