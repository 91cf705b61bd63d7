// Internal (not installed): the element conversions of the staging path,
// written once for the host (fake backend, Device::kCpu tensors) and the
// device (CUDA kernels in cuda_kernels.cu), so that both give the same bits.
//
// The rules are those of the CPU loader (loader/torch/tensors.cc):
//  - bf16 → f32: the bf16 bits become the upper half (exact).
//  - f16 → f32: exact (IEEE binary16 → binary32); a NaN keeps its sign and
//    payload and is quietened (as x86 F16C and c10's fp16_ieee_to_fp32).
//  - fp8 (OCP E4M3FN, E5M2) → f32: exact, as convert::Fp8ToF32Bits: E4M3FN
//    has no infinities and S.1111.111 is NaN; E5M2 has IEEE infinities/NaNs;
//    NaNs become the quiet NaN 0x7FC00000 with the code's sign.
//  - fp8 → bf16: the upper half of the f32 bits (exact; NaN keeps its sign),
//    as convert::Fp8ToBF16.
//  - anything → f16: via f32, round to nearest even, overflow to ±inf, NaN →
//    sign | 0x7E00 (c10::Half(float)).
//  - anything else → bf16: via f32, round to nearest even, NaN → 0x7FC0
//    without sign (c10::BFloat16's round_to_nearest_even).
// All integer arithmetic: no dependence on the FPU's rounding mode or on
// flush-to-zero.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define HUBLOAD_HD __host__ __device__ inline
#else
#define HUBLOAD_HD inline
#endif

namespace hubload::device_rules {

/// Element kinds the conversions handle (a subset of safetensors::Dtype).
enum class Elem : int { kF32 = 0, kF16 = 1, kBF16 = 2, kE4M3 = 3, kE5M2 = 4 };

HUBLOAD_HD int ElemBytes(Elem e) { return e == Elem::kF32 ? 4 : (e == Elem::kF16 || e == Elem::kBF16) ? 2 : 1; }

/// Position of the highest set bit of a non-zero value below 2^16.
HUBLOAD_HD int HighBit(uint32_t m) {
  int p = 0;
  while (m >> (p + 1)) ++p;
  return p;
}

/// Normalises a subnormal significand `m` (non-zero) of value m * 2^(scale)
/// into f32 bits without sign.
HUBLOAD_HD uint32_t SubnormalToF32Bits(uint32_t m, int scale) {
  int p = HighBit(m);                                   // value = 1.f * 2^(p + scale)
  uint32_t exp32 = static_cast<uint32_t>(p + scale + 127);
  uint32_t frac = (m & ~(1u << p)) << (23 - p);
  return (exp32 << 23) | frac;
}

HUBLOAD_HD uint32_t F16ToF32Bits(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0x1F) return m == 0 ? (sign | 0x7F800000u) : (sign | 0x7FC00000u | (m << 13));
  if (e == 0) return m == 0 ? sign : (sign | SubnormalToF32Bits(m, -24));
  return sign | ((e + 112u) << 23) | (m << 13);
}

HUBLOAD_HD uint32_t BF16ToF32Bits(uint16_t b) { return static_cast<uint32_t>(b) << 16; }

HUBLOAD_HD uint32_t E4M3ToF32Bits(uint8_t c) {
  uint32_t sign = static_cast<uint32_t>(c & 0x80u) << 24;
  uint32_t e = (c >> 3) & 0xFu, m = c & 0x7u;
  if (e == 0xF && m == 0x7) return sign | 0x7FC00000u;
  if (e == 0) return m == 0 ? sign : (sign | SubnormalToF32Bits(m, -9));  // m/8 * 2^-6
  return sign | ((e + 120u) << 23) | (m << 20);                          // bias 7 → 127
}

HUBLOAD_HD uint32_t E5M2ToF32Bits(uint8_t c) {
  uint32_t sign = static_cast<uint32_t>(c & 0x80u) << 24;
  uint32_t e = (c >> 2) & 0x1Fu, m = c & 0x3u;
  if (e == 0x1F) return m == 0 ? (sign | 0x7F800000u) : (sign | 0x7FC00000u);
  if (e == 0) return m == 0 ? sign : (sign | SubnormalToF32Bits(m, -16));  // m/4 * 2^-14
  return sign | ((e + 112u) << 23) | (m << 21);                           // bias 15 → 127
}

/// f32 → f16, round to nearest even.
HUBLOAD_HD uint16_t F32BitsToF16(uint32_t w) {
  uint32_t sign = (w >> 16) & 0x8000u;
  uint32_t a = w & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);  // NaN
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520 rounds to inf
  if (a >= 0x38800000u) {                                             // normal half (>= 2^-14)
    uint32_t r = a + 0xFFFu + ((a >> 13) & 1u);                       // round the 13 dropped bits
    return static_cast<uint16_t>(sign | ((r - (112u << 23)) >> 13));
  }
  if (a <= 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25 (tie to even 0)
  // Subnormal half: q = round(value / 2^-24) = round(mant24 >> shift).
  uint32_t shift = 126u - (a >> 23);  // 14..24
  uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;
  uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

/// f32 → bf16, round to nearest even; NaN → 0x7FC0.
HUBLOAD_HD uint16_t F32BitsToBF16(uint32_t w) {
  if ((w & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;
  return static_cast<uint16_t>((w + 0x7FFFu + ((w >> 16) & 1u)) >> 16);
}

/// Element i of `src` (kind `s`) as f32 bits.
HUBLOAD_HD uint32_t LoadF32Bits(Elem s, const unsigned char* src, uint64_t i) {
  switch (s) {
    case Elem::kF32: {
      const unsigned char* p = src + 4 * i;
      return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
             (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
    }
    case Elem::kF16:
    case Elem::kBF16: {
      const unsigned char* p = src + 2 * i;
      uint16_t v = static_cast<uint16_t>(p[0] | (p[1] << 8));
      return s == Elem::kF16 ? F16ToF32Bits(v) : BF16ToF32Bits(v);
    }
    case Elem::kE4M3: return E4M3ToF32Bits(src[i]);
    case Elem::kE5M2: return E5M2ToF32Bits(src[i]);
  }
  return 0x7FC00000u;
}

/// Converts element i of `src` (kind `s`) and stores it as element i of
/// `dst` (kind `d`, one of kF32/kF16/kBF16), little-endian.
HUBLOAD_HD void ConvertOne(Elem d, unsigned char* dst, Elem s, const unsigned char* src, uint64_t i) {
  uint32_t f = LoadF32Bits(s, src, i);
  if (d == Elem::kF32) {
    unsigned char* p = dst + 4 * i;
    p[0] = static_cast<unsigned char>(f);
    p[1] = static_cast<unsigned char>(f >> 8);
    p[2] = static_cast<unsigned char>(f >> 16);
    p[3] = static_cast<unsigned char>(f >> 24);
    return;
  }
  uint16_t h;
  if (d == Elem::kF16) {
    h = F32BitsToF16(f);
  } else if (s == Elem::kE4M3 || s == Elem::kE5M2 || s == Elem::kBF16) {
    h = static_cast<uint16_t>(f >> 16);  // exact (convert::Fp8ToBF16; bf16 → bf16 unchanged)
  } else {
    h = F32BitsToBF16(f);
  }
  unsigned char* p = dst + 2 * i;
  p[0] = static_cast<unsigned char>(h);
  p[1] = static_cast<unsigned char>(h >> 8);
}

}  // namespace hubload::device_rules
