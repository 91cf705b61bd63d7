// Internal (not installed): helpers shared by the device backends and the
// staging loader.
#pragma once

#include <optional>
#include <string>

#include "hubload/device.h"
#include "hubload/reasons.h"
#include "loader/device/dtype_rules.h"

namespace hubload::device_internal {

/// The conversion kind of a checkpoint dtype, or nullopt when the staging
/// path copies it unchanged (everything but BF16/F16/F8_E4M3/F8_E5M2/F32).
inline std::optional<device_rules::Elem> ConvertibleElem(Dtype d) {
  switch (d) {
    case Dtype::F32: return device_rules::Elem::kF32;
    case Dtype::F16: return device_rules::Elem::kF16;
    case Dtype::BF16: return device_rules::Elem::kBF16;
    case Dtype::F8_E4M3: return device_rules::Elem::kE4M3;
    case Dtype::F8_E5M2: return device_rules::Elem::kE5M2;
    default: return std::nullopt;
  }
}

/// True for the conversion targets F32/F16/BF16.
inline bool IsConversionTarget(Dtype d) { return d == Dtype::F32 || d == Dtype::F16 || d == Dtype::BF16; }

/// kUnsupported "UnsupportedConversion" unless src → dst is one of the
/// conversions DeviceBackend::convert_async supports.
inline Status CheckConversion(Dtype dst, Dtype src) {
  if (ConvertibleElem(src) && IsConversionTarget(dst)) return Status::Ok();
  return Status(Code::kUnsupported,
                std::string("no device conversion from ") + safetensors::DtypeName(src) + " to " +
                    safetensors::DtypeName(dst) + " (supported: BF16/F16/F8_E4M3/F8_E5M2/F32 -> F32/F16/BF16)",
                reason::kUnsupportedConversion);
}

/// "cpu", "cuda:N", "disk" (the same spelling as Device::ToString, kept here
/// so that messages do not depend on the planning code).
inline std::string DeviceName(const Device& d) {
  switch (d.kind) {
    case Device::Kind::kCpu: return "cpu";
    case Device::Kind::kCuda: return "cuda:" + std::to_string(d.index);
    case Device::Kind::kDisk: return "disk";
  }
  return "?";
}

/// Converts `count` elements on the host with the device rules.
inline void ConvertOnHost(void* dst, Dtype dst_dtype, const void* src, Dtype src_dtype, uint64_t count) {
  auto d = *ConvertibleElem(dst_dtype);
  auto s = *ConvertibleElem(src_dtype);
  auto* out = static_cast<unsigned char*>(dst);
  const auto* in = static_cast<const unsigned char*>(src);
  for (uint64_t i = 0; i < count; ++i) device_rules::ConvertOne(d, out, s, in, i);
}

}  // namespace hubload::device_internal
