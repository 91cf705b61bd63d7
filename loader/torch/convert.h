// Internal (not installed): exact element conversions for checkpoint dtypes
// LibTorch 1.13 lacks. Torch-free; all inputs are raw little-endian bytes that
// may be unaligned.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hubload::convert {

/// OCP 8-bit floating point formats (OCP "8-bit Floating Point Specification
/// (OFP8)" rev 1.0, and the OCP Microscaling spec for E8M0).
enum class Fp8 { kE4M3FN, kE5M2, kE8M0 };

/// The IEEE float32 bit pattern of an 8-bit code (exact: every value of these
/// formats is a float32). E4M3FN: bias 7, no infinities, S.1111.111 = NaN.
/// E5M2: bias 15, IEEE-style infinities and NaNs. E8M0: unsigned, 2^(code-127),
/// 0xFF = NaN. NaNs become the quiet NaN 0x7FC00000 with the code's sign bit.
uint32_t Fp8ToF32Bits(Fp8 format, uint8_t code);

/// n codes -> n float32 values (bit-exact, via Fp8ToF32Bits).
void Fp8ToF32(Fp8 format, const uint8_t* src, float* dst, size_t n);
/// n codes -> n bfloat16 bit patterns (the upper half of the float32 bits:
/// exact, since every value has at most 3 mantissa bits and an exponent in the
/// float32 range).
void Fp8ToBF16(Fp8 format, const uint8_t* src, uint16_t* dst, size_t n);

/// bfloat16 -> float32 (exact: the bf16 bits become the upper half), n elements
/// read from unaligned `src`. Much faster than a generic cast.
void BF16ToF32(const uint8_t* src, float* dst, size_t n);

/// Unsigned widening: n little-endian elements read from unaligned `src`.
void WidenU16(const uint8_t* src, int32_t* dst, size_t n);
void WidenU32(const uint8_t* src, int64_t* dst, size_t n);
/// U64 -> int64; returns false (and stops) at the first value >= 2^63,
/// storing its index in *bad_index.
bool NarrowU64(const uint8_t* src, int64_t* dst, size_t n, size_t* bad_index);

}  // namespace hubload::convert
