// hubload/target_dtype.h: the one target dtype type of a load, shared by the
// CPU loaders (LoadOptions::dtype, hubload/load.h) and the device staging ring
// (StagingOptions::target_dtype, hubload/device.h).
#pragma once

#include <optional>

#include "hubload/safetensors.h"

namespace hubload {

/// Target dtype for floating tensors (torch_dtype of from_pretrained).
/// kAuto keeps the checkpoint dtype (B30: a bf16 checkpoint stays bf16, no
/// silent fp32 upcast). Integer and bool tensors are never converted.
/// Parsing and names: ParseTargetDtype / TargetDtypeName (hubload/load.h).
enum class TargetDtype { kAuto, kF32, kF16, kBF16 };

/// kF32 -> F32, kF16 -> F16, kBF16 -> BF16, kAuto -> nullopt. Pure;
/// thread-safe.
constexpr std::optional<safetensors::Dtype> TargetDtypeToDtype(TargetDtype t) {
  switch (t) {
    case TargetDtype::kF32: return safetensors::Dtype::F32;
    case TargetDtype::kF16: return safetensors::Dtype::F16;
    case TargetDtype::kBF16: return safetensors::Dtype::BF16;
    case TargetDtype::kAuto: break;
  }
  return std::nullopt;
}

}  // namespace hubload
