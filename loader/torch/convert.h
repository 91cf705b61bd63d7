// Internal (not installed): exact element conversions between checkpoint
// dtypes, a chunked two-core driver that reads the source from a mapping or
// a file descriptor, and huge-page output memory. Torch-free; all inputs are
// raw little-endian bytes that may be unaligned.
//
// Rounding rules (the same bits as loader/device/dtype_rules.h and c10):
//  - widening to f32 is exact (bf16: upper half; f16: IEEE, a NaN keeps sign
//    and payload and is quietened; fp8: Fp8ToF32Bits); f64 -> f32 as a C++
//    cast (round to nearest even).
//  - -> f16: from f32, round to nearest even, overflow to +-inf, NaN ->
//    sign | 0x7E00 (c10::Half(float)); -> bf16: from f32, round to nearest
//    even, NaN -> 0x7FC0 (c10::BFloat16); fp8 and bf16 -> bf16 are exact.
//    f64 -> f16/bf16 goes through f32, as c10 does.
//  - Subnormal f16 results use one float addition: they assume the default
//    floating-point rounding mode (round to nearest), as LibTorch's own
//    conversions do. Flush-to-zero settings change no result except f64 -> f32
//    (a C++ cast, as LibTorch's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "hubload/safetensors.h"
#include "hubload/status.h"

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
/// read from unaligned `src` (SSE2 on x86-64).
void BF16ToF32(const uint8_t* src, float* dst, size_t n);

/// True when ConvertElements handles `from` -> `to`: from == to (any dtype, a
/// byte copy), {F16, BF16, F32, F64, F8_E4M3, F8_E5M2, F8_E8M0} -> {F32, F16,
/// BF16}, U16 -> I32, U32 -> I64, U64 -> I64.
bool CanConvert(safetensors::Dtype from, safetensors::Dtype to);

/// Bytes of `n` elements of `d` (sub-byte dtypes rounded up).
uint64_t BytesOf(safetensors::Dtype d, uint64_t n);

/// Converts n elements of `from` at unaligned `src` into n elements of `to` at
/// unaligned `dst` (the buffers do not overlap). REQUIRES: CanConvert(from, to).
/// Returns false only for U64 -> I64 when a value is >= 2^63: then *bad_index
/// (if given) is its element index and dst is partly written.
bool ConvertElements(safetensors::Dtype from, safetensors::Dtype to, const uint8_t* src, uint8_t* dst, size_t n,
                     size_t* bad_index = nullptr);

/// Where the source elements of ConvertChunked are.
struct Source {
  /// The elements in memory (any alignment).
  const uint8_t* bytes = nullptr;
  /// `bytes` lie in a read-only MAP_SHARED file mapping: the pages of a
  /// converted chunk are then released (MADV_DONTNEED) once converted, so the
  /// source does not stay resident (the file's pages stay in the page cache;
  /// later reads of the mapping fault them in again). Never for heap or
  /// anonymous memory, whose released pages would read back as zeros.
  bool release_pages = false;
  /// Without `bytes`: the elements are read with pread(fd, offset + ...) into
  /// a reused per-thread buffer (or straight into dst when from == to).
  int fd = -1;
  uint64_t offset = 0;
};

/// Source bytes per chunk of ConvertChunked (a multiple of every element size).
inline constexpr uint64_t kChunkBytes = 1ull << 20;

/// Converts `n` elements of `from` into `dst` (BytesOf(to, n) bytes) in chunks
/// of kChunkBytes source bytes, claimed in turn by the calling thread and the
/// threads of util::WorkerPool::Shared() (sources under two chunks stay on
/// the calling thread); `max_threads` >= 1 bounds the threads (the caller
/// counts as one), 0 = the caller and every pool thread. While a
/// util::PoolRoute of the calling thread is active (the pipeline's loader
/// while downloads are in flight) the chunks of sources of two chunks or more
/// go to the route's pool instead, at most `max_threads` of its threads, and
/// the caller only waits.
/// REQUIRES: CanConvert(from, to).
/// `file` and `tensor` name the source in errors.
/// Errors: kIOError (pread failed, util::IoError), kInvalidFormat (reason
/// TensorOutOfRange: the file ended before the tensor's last byte),
/// kUnsupported (reason UnsupportedDtype: a U64 value >= 2^63, naming the
/// element index).
Status ConvertChunked(const Source& src, safetensors::Dtype from, safetensors::Dtype to, uint64_t n, uint8_t* dst,
                      const std::string& file, const std::string& tensor, size_t max_threads = 0);

/// Outputs from this size up get AllocateOutput memory (smaller ones the
/// ordinary allocator's).
inline constexpr uint64_t kHugeOutputBytes = 2ull << 20;

/// `bytes` (> 0) of fresh zeroed memory for a large output: an anonymous
/// private mapping aligned to 2 MiB, advised MADV_HUGEPAGE (transparent huge
/// pages where the kernel's THP mode is "madvise" or "always"; 4 KiB pages
/// otherwise, silently). nullptr when the mapping fails. Release with
/// FreeOutput(p, bytes). Thread-safe.
void* AllocateOutput(uint64_t bytes);
void FreeOutput(void* p, uint64_t bytes);

}  // namespace hubload::convert
