// DeviceStateDict: tensors in device (or host) memory, freed through the
// backend that allocated them.
#include <cstdlib>
#include <cstring>

#include "hubload/device.h"
#include "hubload/reasons.h"
#include "loader/device/internal.h"

namespace hubload {

namespace {
Status TensorError(const std::string& tensor, const std::string& message, std::string_view reason) {
  Status st(Code::kInvalidArgument, message, reason);
  st.mutable_context().tensor = tensor;
  return st;
}
}  // namespace

DeviceStateDict& DeviceStateDict::operator=(DeviceStateDict&& o) noexcept {
  if (this != &o) {
    FreeAll();
    backend_ = std::move(o.backend_);
    tensors_ = std::move(o.tensors_);
    o.tensors_.clear();
  }
  return *this;
}

DeviceStateDict::~DeviceStateDict() { FreeAll(); }

void DeviceStateDict::FreeAll() {
  for (DeviceTensor& t : tensors_) {
    if (!t.data || !t.alias_of.empty()) continue;  // an alias shares its kept tensor's memory
    if (t.device.kind == Device::Kind::kCpu) {
      std::free(t.data);
    } else if (backend_) {
      backend_->free_device(t.device.index, t.data);
    }
    t.data = nullptr;
  }
  tensors_.clear();
}

const DeviceTensor* DeviceStateDict::Find(std::string_view name) const {
  for (const DeviceTensor& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

Result<std::vector<uint8_t>> DeviceStateDict::CopyToHost(const DeviceTensor& t) const {
  std::vector<uint8_t> out(t.bytes);
  if (t.bytes == 0) return out;
  if (!t.data)
    return TensorError(t.name, "tensor '" + t.name + "' has no data", reason::kInvalidTensor);
  if (t.device.kind == Device::Kind::kCpu) {
    std::memcpy(out.data(), t.data, t.bytes);
    return out;
  }
  if (!backend_)
    return TensorError(t.name,
                       "tensor '" + t.name + "' is on " + device_internal::DeviceName(t.device) +
                           " but the state dict has no backend",
                       reason::kNoBackend);
  Status st = backend_->copy_to_host(out.data(), t.data, t.bytes, t.device.index);
  if (!st.ok()) {
    st = st.WithPrefix("copying tensor '" + t.name + "' from " + device_internal::DeviceName(t.device));
    st.mutable_context().tensor = t.name;
    return st;
  }
  return out;
}

}  // namespace hubload
