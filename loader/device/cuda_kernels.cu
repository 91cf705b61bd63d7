// CUDA kernels of the staging path: element conversions with the same rules
// as the host (loader/device/dtype_rules.h, shared source).
#include <cuda_runtime.h>

#include "loader/device/cuda_kernels.h"

namespace hubload::cuda_kernels {

namespace {

using device_rules::Elem;

template <Elem E> struct Raw;
template <> struct Raw<Elem::kF32> { using T = uint32_t; };
template <> struct Raw<Elem::kF16> { using T = uint16_t; };
template <> struct Raw<Elem::kBF16> { using T = uint16_t; };
template <> struct Raw<Elem::kE4M3> { using T = uint8_t; };
template <> struct Raw<Elem::kE5M2> { using T = uint8_t; };

template <Elem S>
__device__ __forceinline__ uint32_t ToF32Bits(typename Raw<S>::T v) {
  if constexpr (S == Elem::kF32) return v;
  else if constexpr (S == Elem::kF16) return device_rules::F16ToF32Bits(v);
  else if constexpr (S == Elem::kBF16) return device_rules::BF16ToF32Bits(v);
  else if constexpr (S == Elem::kE4M3) return device_rules::E4M3ToF32Bits(v);
  else return device_rules::E5M2ToF32Bits(v);
}

template <Elem S, Elem D>
__device__ __forceinline__ typename Raw<D>::T FromF32Bits(uint32_t f) {
  if constexpr (D == Elem::kF32) return f;
  else if constexpr (D == Elem::kF16) return device_rules::F32BitsToF16(f);
  // bf16 target: exact truncation from fp8/bf16 (as the CPU loader), RNE otherwise.
  else if constexpr (S == Elem::kE4M3 || S == Elem::kE5M2 || S == Elem::kBF16) return static_cast<uint16_t>(f >> 16);
  else return device_rules::F32BitsToBF16(f);
}

template <Elem S, Elem D>
__global__ void ConvertKernel(typename Raw<D>::T* __restrict__ dst, const typename Raw<S>::T* __restrict__ src,
                              uint64_t n) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = FromF32Bits<S, D>(ToF32Bits<S>(src[i]));
}

template <Elem S, Elem D>
int Launch(void* dst, const void* src, uint64_t n, cudaStream_t stream) {
  constexpr unsigned kThreads = 256;
  uint64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > 8192) blocks = 8192;  // grid-stride beyond that
  ConvertKernel<S, D><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<typename Raw<D>::T*>(dst), static_cast<const typename Raw<S>::T*>(src), n);
  return static_cast<int>(cudaGetLastError());
}

template <Elem S>
int LaunchTo(void* dst, Elem d, const void* src, uint64_t n, cudaStream_t stream) {
  switch (d) {
    case Elem::kF32: return Launch<S, Elem::kF32>(dst, src, n, stream);
    case Elem::kF16: return Launch<S, Elem::kF16>(dst, src, n, stream);
    case Elem::kBF16: return Launch<S, Elem::kBF16>(dst, src, n, stream);
    default: return static_cast<int>(cudaErrorInvalidValue);
  }
}

}  // namespace

int LaunchConvert(void* dst, Elem dst_elem, const void* src, Elem src_elem, uint64_t count, void* stream) {
  if (count == 0) return 0;
  auto s = static_cast<cudaStream_t>(stream);
  switch (src_elem) {
    case Elem::kF32: return LaunchTo<Elem::kF32>(dst, dst_elem, src, count, s);
    case Elem::kF16: return LaunchTo<Elem::kF16>(dst, dst_elem, src, count, s);
    case Elem::kBF16: return LaunchTo<Elem::kBF16>(dst, dst_elem, src, count, s);
    case Elem::kE4M3: return LaunchTo<Elem::kE4M3>(dst, dst_elem, src, count, s);
    case Elem::kE5M2: return LaunchTo<Elem::kE5M2>(dst, dst_elem, src, count, s);
  }
  return static_cast<int>(cudaErrorInvalidValue);
}

}  // namespace hubload::cuda_kernels
