// Internal (not installed): the CUDA conversion kernels, behind a plain
// interface so that the backend (cuda_backend.cc) is ordinary C++.
#pragma once

#include <cstdint>

#include "loader/device/dtype_rules.h"

namespace hubload::cuda_kernels {

/// Enqueues the conversion of `count` elements of kind `src_elem` at device
/// address `src` into `dst_elem` (kF32/kF16/kBF16) at `dst` on `stream` (a
/// cudaStream_t). Addresses must be aligned to their element size. Returns
/// the cudaError_t of the launch (0 = cudaSuccess).
int LaunchConvert(void* dst, device_rules::Elem dst_elem, const void* src, device_rules::Elem src_elem,
                  uint64_t count, void* stream);

}  // namespace hubload::cuda_kernels
