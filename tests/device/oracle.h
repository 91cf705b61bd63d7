// Expected values for the staging conversions, from sources independent of
// loader/device/dtype_rules.h:
//  - fp8 codes: the CPU loader's convert::Fp8ToF32Bits / Fp8ToBF16
//    (loader/torch/convert.cc, compiled into the test binary);
//  - f16: the compiler's IEEE binary16 type (_Float16, GCC's soft-float
//    conversions, round to nearest even);
//  - bf16 rounding: the nearest of the two neighbouring bf16 values computed
//    in double precision, ties to the even one;
//  - NaNs: the documented c10 rules restated (f16 NaN → sign|0x7E00, bf16
//    NaN → 0x7FC0, f16 → f32 keeps sign and payload, quiet bit set).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "hubload/device.h"
#include "loader/torch/convert.h"

namespace hubload::oracle {

using safetensors::Dtype;

inline bool IsNanBits(uint32_t f) { return (f & 0x7FFFFFFFu) > 0x7F800000u; }
inline float AsFloat(uint32_t b) { return std::bit_cast<float>(b); }

inline uint32_t F16ToF32(uint16_t h) {
  if ((h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0)  // NaN: quiet, sign and payload kept
    return (static_cast<uint32_t>(h & 0x8000u) << 16) | 0x7FC00000u | (static_cast<uint32_t>(h & 0x3FFu) << 13);
  _Float16 v = std::bit_cast<_Float16>(h);
  return std::bit_cast<uint32_t>(static_cast<float>(v));
}

inline uint16_t F32ToF16(uint32_t f) {
  if (IsNanBits(f)) return static_cast<uint16_t>(((f >> 16) & 0x8000u) | 0x7E00u);
  _Float16 v = static_cast<_Float16>(AsFloat(f));
  return std::bit_cast<uint16_t>(v);
}

/// Round to nearest even bf16 by comparing the two candidates in double.
inline uint16_t F32ToBF16(uint32_t f) {
  if (IsNanBits(f)) return 0x7FC0u;
  const uint16_t lo = static_cast<uint16_t>(f >> 16);
  if ((f & 0xFFFFu) == 0) return lo;  // exact (also ±inf)
  const uint16_t hi = static_cast<uint16_t>(lo + 1);  // next away from zero (may be ±inf)
  const double x = std::fabs(static_cast<double>(AsFloat(f)));
  const double a = std::fabs(static_cast<double>(AsFloat(static_cast<uint32_t>(lo) << 16)));
  double b;
  if ((hi & 0x7FFFu) == 0x7F80u) {
    b = std::ldexp(1.0, 128);  // "inf" as the next step above the largest finite bf16
  } else {
    b = std::fabs(static_cast<double>(AsFloat(static_cast<uint32_t>(hi) << 16)));
  }
  const double da = x - a, db = b - x;
  if (da < db) return lo;
  if (db < da) return hi;
  return (lo & 1u) ? hi : lo;
}

inline std::optional<convert::Fp8> Fp8Of(Dtype d) {
  if (d == Dtype::F8_E4M3) return convert::Fp8::kE4M3FN;
  if (d == Dtype::F8_E5M2) return convert::Fp8::kE5M2;
  return std::nullopt;
}

inline uint64_t ElemSize(Dtype d) { return static_cast<uint64_t>(safetensors::DtypeBits(d)) / 8; }

/// Element i of little-endian `src` (dtype `s`) converted to `d`, as the CPU
/// loader does it; returned as the little-endian bytes of one `d` element.
inline std::vector<uint8_t> Convert(Dtype d, Dtype s, const uint8_t* src, uint64_t i) {
  uint32_t f = 0;
  uint16_t bf16_exact = 0;
  bool exact_bf16 = false;
  if (auto fp8 = Fp8Of(s)) {
    f = convert::Fp8ToF32Bits(*fp8, src[i]);
    convert::Fp8ToBF16(*fp8, &src[i], &bf16_exact, 1);
    exact_bf16 = true;
  } else if (s == Dtype::BF16) {
    uint16_t v;
    std::memcpy(&v, src + 2 * i, 2);
    float out;
    convert::BF16ToF32(src + 2 * i, &out, 1);
    f = std::bit_cast<uint32_t>(out);
    bf16_exact = v;
    exact_bf16 = true;
  } else if (s == Dtype::F16) {
    uint16_t v;
    std::memcpy(&v, src + 2 * i, 2);
    f = F16ToF32(v);
  } else {
    std::memcpy(&f, src + 4 * i, 4);
  }
  std::vector<uint8_t> out(ElemSize(d));
  if (d == Dtype::F32) {
    std::memcpy(out.data(), &f, 4);
  } else {
    uint16_t h = d == Dtype::F16 ? F32ToF16(f) : (exact_bf16 ? bf16_exact : F32ToBF16(f));
    std::memcpy(out.data(), &h, 2);
  }
  return out;
}

}  // namespace hubload::oracle
