// Internal (loader/device; used by tests and benches, not installed): the
// fake device backend class behind MakeFakeDeviceBackend (hubload/device.h),
// with the operation log tests check ordering and back-pressure against.
// Thread-safe (one mutex; stream work runs on its worker).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hubload/device.h"

namespace hubload {

struct FakeDeviceEvent {
  enum class Op { kCopy, kConvert, kRecord, kComplete } op;
  uint64_t stream = 0;
  const void* host_src = nullptr;  // kCopy: the staging buffer copied from
  uint64_t bytes = 0;
  uint64_t event = 0;  // kRecord/kComplete
};
// Log entries: kCopy and kConvert (bytes = source bytes) when the stream's
// worker has executed them; kRecord when record_event is called (so in the
// caller's enqueue order); kComplete when the worker reaches that event.
class FakeDeviceBackend : public DeviceBackend {
 public:
  explicit FakeDeviceBackend(FakeDeviceOptions options = {});
  ~FakeDeviceBackend() override;
  /// Every operation so far, in the order the fake device executed it
  /// (kRecord: in the order record_event was called).
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

}  // namespace hubload
