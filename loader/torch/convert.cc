#include "loader/torch/convert.h"

#include <cstring>

namespace hubload::convert {

uint32_t Fp8ToF32Bits(Fp8 format, uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  switch (format) {
    case Fp8::kE4M3FN: {
      uint32_t e = (code >> 3) & 0xFu, m = code & 0x7u;
      if (e == 0xF && m == 0x7) return sign | 0x7FC00000u;  // NaN (no infinities)
      if (e == 0) {
        if (m == 0) return sign;  // +-0
        // Subnormal m/8 * 2^-6: normalise. m has its top set bit at position p (0..2).
        int p = m >= 4 ? 2 : (m >= 2 ? 1 : 0);
        uint32_t exp32 = static_cast<uint32_t>(127 - 6 - (3 - p));  // value = 1.f * 2^(p-9)
        uint32_t frac = (m & ~(1u << p)) << (23 - p);
        return sign | (exp32 << 23) | frac;
      }
      return sign | ((e - 7 + 127) << 23) | (m << 20);
    }
    case Fp8::kE5M2: {
      uint32_t e = (code >> 2) & 0x1Fu, m = code & 0x3u;
      if (e == 0x1F) return m == 0 ? (sign | 0x7F800000u) : (sign | 0x7FC00000u);
      if (e == 0) {
        if (m == 0) return sign;
        // m/4 * 2^-14
        int p = m >= 2 ? 1 : 0;
        uint32_t exp32 = static_cast<uint32_t>(127 - 14 - (2 - p));
        uint32_t frac = (m & ~(1u << p)) << (23 - p);
        return sign | (exp32 << 23) | frac;
      }
      return sign | ((e - 15 + 127) << 23) | (m << 21);
    }
    case Fp8::kE8M0: {
      if (code == 0xFF) return 0x7FC00000u;
      if (code == 0) return 0x00400000u;  // 2^-127: a float32 subnormal
      return static_cast<uint32_t>(code) << 23;
    }
  }
  return 0x7FC00000u;
}

void Fp8ToF32(Fp8 format, const uint8_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t b = Fp8ToF32Bits(format, src[i]);
    std::memcpy(&dst[i], &b, 4);
  }
}

void Fp8ToBF16(Fp8 format, const uint8_t* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = static_cast<uint16_t>(Fp8ToF32Bits(format, src[i]) >> 16);
}

void BF16ToF32(const uint8_t* src, float* dst, size_t n) {
  constexpr size_t kBlock = 4096;
  uint16_t h[kBlock];
  uint32_t w[kBlock];
  for (size_t i = 0; i < n; i += kBlock) {
    size_t m = n - i < kBlock ? n - i : kBlock;
    std::memcpy(h, src + 2 * i, 2 * m);  // little-endian host (x86-64, aarch64)
    for (size_t k = 0; k < m; ++k) w[k] = static_cast<uint32_t>(h[k]) << 16;
    std::memcpy(dst + i, w, 4 * m);
  }
}

void WidenU16(const uint8_t* src, int32_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = static_cast<int32_t>(src[2 * i] | (src[2 * i + 1] << 8));
}

void WidenU32(const uint8_t* src, int64_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t v = 0;
    for (int b = 3; b >= 0; --b) v = (v << 8) | src[4 * i + b];
    dst[i] = static_cast<int64_t>(v);
  }
}

bool NarrowU64(const uint8_t* src, int64_t* dst, size_t n, size_t* bad_index) {
  for (size_t i = 0; i < n; ++i) {
    uint64_t v = 0;
    for (int b = 7; b >= 0; --b) v = (v << 8) | src[8 * i + b];
    if (v >> 63) {
      if (bad_index) *bad_index = i;
      return false;
    }
    dst[i] = static_cast<int64_t>(v);
  }
  return true;
}

}  // namespace hubload::convert
