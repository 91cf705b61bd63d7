// MakeCudaBackend when hubload was configured without CUDA
// (HUBLOAD_WITH_CUDA=OFF or no nvcc found): the staging path still works with
// FakeDeviceBackend and for Device::kCpu placements.
#include "hubload/device.h"
#include "hubload/reasons.h"

namespace hubload {

Result<std::shared_ptr<DeviceBackend>> MakeCudaBackend() {
  return Status(Code::kUnsupported,
                "hubload was built without CUDA (configure with -DHUBLOAD_WITH_CUDA=ON and nvcc from a CUDA "
                "toolkit to load to GPUs)",
                reason::kBuiltWithoutCuda);
}

}  // namespace hubload
