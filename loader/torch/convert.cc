#include "loader/torch/convert.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string_view>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "hubload/reasons.h"
#include "util/file_io.h"
#include "util/worker_pool.h"

namespace hubload::convert {
using safetensors::Dtype;

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
  size_t i = 0;
  unsigned char* out = reinterpret_cast<unsigned char*>(dst);
#if defined(__SSE2__)
  const __m128i zero = _mm_setzero_si128();
  for (; i + 8 <= n; i += 8) {  // 8 bf16 -> two groups of 4 f32: the bf16 bits in the upper halves
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 4 * i), _mm_unpacklo_epi16(zero, v));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 4 * i + 16), _mm_unpackhi_epi16(zero, v));
  }
#endif
  for (; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);  // little-endian host (x86-64, aarch64)
    uint32_t w = static_cast<uint32_t>(h) << 16;
    std::memcpy(out + 4 * i, &w, 4);
  }
}

namespace {

// ---- per-element rules, branch-free so that fixed-size blocks vectorise ----

inline uint32_t Select(uint32_t mask, uint32_t a, uint32_t b) { return (a & mask) | (b & ~mask); }
inline uint32_t MaskIf(bool c) { return 0u - static_cast<uint32_t>(c); }

inline uint32_t F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t a = h & 0x7FFFu;
  const uint32_t o = (a << 13) + (112u << 23);  // rebias 15 -> 127
  const uint32_t exp = a & 0x7C00u;
  const uint32_t infnan = (o + (112u << 23)) | (MaskIf(a > 0x7C00u) & 0x400000u);  // NaN: quiet, payload kept
  // Subnormal m * 2^-24: (2^-14 * (1 + m/1024)) - 2^-14, exact.
  const uint32_t sub = std::bit_cast<uint32_t>(std::bit_cast<float>(o + (1u << 23)) - std::bit_cast<float>(113u << 23));
  return sign | Select(MaskIf(exp == 0x7C00u), infnan, Select(MaskIf(exp == 0), sub, o));
}

inline uint16_t F32ToF16(uint32_t w) {
  const uint32_t sign = (w >> 16) & 0x8000u;
  const uint32_t a = w & 0x7FFFFFFFu;
  const uint32_t normal = (a + 0xFFFu + ((a >> 13) & 1u) - (112u << 23)) >> 13;  // round the 13 dropped bits
  // Below 2^-14: a + 0.5f rounds a to a multiple of 2^-24 (the ulp of 0.5f), to nearest even.
  const uint32_t sub = std::bit_cast<uint32_t>(std::bit_cast<float>(a) + 0.5f) - 0x3F000000u;
  uint32_t r = Select(MaskIf(a >= 0x38800000u), normal, sub);
  r = Select(MaskIf(a >= 0x477FF000u), 0x7C00u, r);  // >= 65520 rounds to inf
  r = Select(MaskIf(a > 0x7F800000u), 0x7E00u, r);   // NaN
  return static_cast<uint16_t>(sign | r);
}

inline uint16_t F32ToBF16(uint32_t w) {
  const uint32_t r = (w + 0x7FFFu + ((w >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>(Select(MaskIf((w & 0x7FFFFFFFu) > 0x7F800000u), 0x7FC0u, r));
}

inline uint32_t F64ToF32(uint64_t d) { return std::bit_cast<uint32_t>(static_cast<float>(std::bit_cast<double>(d))); }

// Elements go through aligned blocks of fixed length, whose loop GCC vectorises at -O2.
template <typename In, typename Out, typename F>
void Blocks(const uint8_t* src, uint8_t* dst, size_t n, F f) {
  constexpr size_t kB = 256;
  alignas(64) In in[kB];
  alignas(64) Out out[kB];
  for (size_t i = 0; i < n; i += kB) {
    const size_t m = std::min(kB, n - i);
    std::memcpy(in, src + i * sizeof(In), m * sizeof(In));
    if (m == kB) {
      for (size_t k = 0; k < kB; ++k) out[k] = f(in[k]);
    } else {
      for (size_t k = 0; k < m; ++k) out[k] = f(in[k]);
    }
    std::memcpy(dst + i * sizeof(Out), out, m * sizeof(Out));
  }
}

enum class Kind { kF16, kBF16, kF32, kF64, kFp8, kOther };

Kind KindOf(Dtype d) {
  switch (d) {
    case Dtype::F16: return Kind::kF16;
    case Dtype::BF16: return Kind::kBF16;
    case Dtype::F32: return Kind::kF32;
    case Dtype::F64: return Kind::kF64;
    case Dtype::F8_E4M3:
    case Dtype::F8_E5M2:
    case Dtype::F8_E8M0: return Kind::kFp8;
    default: return Kind::kOther;
  }
}

int Fp8Index(Dtype d) { return d == Dtype::F8_E4M3 ? 0 : d == Dtype::F8_E5M2 ? 1 : 2; }

// Every fp8 code decoded once: f32 bits, bf16 (exact) and f16 (rounded) patterns.
struct Fp8Tables {
  uint32_t f32[3][256];
  uint16_t bf16[3][256];
  uint16_t f16[3][256];
  Fp8Tables() {
    const Fp8 formats[3] = {Fp8::kE4M3FN, Fp8::kE5M2, Fp8::kE8M0};
    for (int f = 0; f < 3; ++f)
      for (int c = 0; c < 256; ++c) {
        f32[f][c] = Fp8ToF32Bits(formats[f], static_cast<uint8_t>(c));
        bf16[f][c] = static_cast<uint16_t>(f32[f][c] >> 16);
        f16[f][c] = F32ToF16(f32[f][c]);
      }
  }
};
const Fp8Tables& Tables() {
  static const Fp8Tables t;
  return t;
}

// A float source as f32 bits (exact for f16/bf16, rounded for f64), one block at a time, then stored as `to`.
template <typename In, typename Load>
void FromFloat(Dtype to, const uint8_t* src, uint8_t* dst, size_t n, Load load) {
  switch (to) {
    case Dtype::F32: Blocks<In, uint32_t>(src, dst, n, [&](In v) { return load(v); }); return;
    case Dtype::F16: Blocks<In, uint16_t>(src, dst, n, [&](In v) { return F32ToF16(load(v)); }); return;
    default: Blocks<In, uint16_t>(src, dst, n, [&](In v) { return F32ToBF16(load(v)); }); return;
  }
}

bool NarrowU64(const uint8_t* src, uint8_t* dst, size_t n, size_t* bad_index) {
  uint64_t high = 0;
  Blocks<uint64_t, uint64_t>(src, dst, n, [&](uint64_t v) {
    high |= v;
    return v;
  });
  if (!(high >> 63)) return true;
  for (size_t i = 0; i < n; ++i) {
    uint64_t v;
    std::memcpy(&v, src + 8 * i, 8);
    if (v >> 63) {
      if (bad_index) *bad_index = i;
      return false;
    }
  }
  return false;
}

}  // namespace

bool CanConvert(Dtype from, Dtype to) {
  if (from == to) return true;
  if (from == Dtype::U16) return to == Dtype::I32;
  if (from == Dtype::U32 || from == Dtype::U64) return to == Dtype::I64;
  return KindOf(from) != Kind::kOther && (to == Dtype::F32 || to == Dtype::F16 || to == Dtype::BF16);
}

uint64_t BytesOf(Dtype d, uint64_t n) { return (n * static_cast<uint64_t>(safetensors::DtypeBits(d)) + 7) / 8; }

bool ConvertElements(Dtype from, Dtype to, const uint8_t* src, uint8_t* dst, size_t n, size_t* bad_index) {
  if (n == 0) return true;
  if (from == to) {
    std::memcpy(dst, src, BytesOf(from, n));
    return true;
  }
  switch (from) {
    case Dtype::U16: Blocks<uint16_t, uint32_t>(src, dst, n, [](uint16_t v) { return uint32_t{v}; }); return true;
    case Dtype::U32: Blocks<uint32_t, uint64_t>(src, dst, n, [](uint32_t v) { return uint64_t{v}; }); return true;
    case Dtype::U64: return NarrowU64(src, dst, n, bad_index);
    default: break;
  }
  switch (KindOf(from)) {
    case Kind::kBF16:
      if (to == Dtype::F32) {
        BF16ToF32(src, reinterpret_cast<float*>(dst), n);
        return true;
      }
      FromFloat<uint16_t>(to, src, dst, n, [](uint16_t v) { return static_cast<uint32_t>(v) << 16; });
      return true;
    case Kind::kF16: FromFloat<uint16_t>(to, src, dst, n, [](uint16_t v) { return F16ToF32(v); }); return true;
    case Kind::kF32: FromFloat<uint32_t>(to, src, dst, n, [](uint32_t v) { return v; }); return true;
    case Kind::kF64: FromFloat<uint64_t>(to, src, dst, n, [](uint64_t v) { return F64ToF32(v); }); return true;
    case Kind::kFp8: {
      const Fp8Tables& t = Tables();
      const int f = Fp8Index(from);
      if (to == Dtype::F32) {
        Blocks<uint8_t, uint32_t>(src, dst, n, [&](uint8_t c) { return t.f32[f][c]; });
      } else {
        const uint16_t* table = to == Dtype::F16 ? t.f16[f] : t.bf16[f];
        Blocks<uint8_t, uint16_t>(src, dst, n, [&](uint8_t c) { return table[c]; });
      }
      return true;
    }
    case Kind::kOther: break;
  }
  return true;  // REQUIRES violated: nothing converted
}

// ---------------------------------------------------------------------------
// Chunked driver.

namespace {

Status TensorError(Code code, std::string_view reason, const std::string& file, const std::string& tensor,
                   const std::string& message) {
  Status st(code, message, reason);
  st.mutable_context().file = file;
  st.mutable_context().tensor = tensor;
  return st;
}

Status Truncated(const std::string& file, const std::string& tensor, uint64_t at) {
  return TensorError(Code::kInvalidFormat, reason::kTensorOutOfRange, file, tensor,
                     "'" + file + "': tensor '" + tensor + "' lies outside the file (it ends before byte " +
                         std::to_string(at) + " of the tensor's data)");
}

Status PreadAll(int fd, uint8_t* buf, uint64_t n, uint64_t off, const std::string& file, const std::string& tensor,
                uint64_t tensor_off) {
  uint64_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, buf + got, static_cast<size_t>(std::min<uint64_t>(n - got, 1ull << 30)),
                        static_cast<off_t>(off + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      Status st = util::IoError("cannot read tensor '" + tensor + "' from", file, errno);
      st.mutable_context().tensor = tensor;
      return st;
    }
    if (r == 0) return Truncated(file, tensor, tensor_off + got + 1);
    got += static_cast<uint64_t>(r);
  }
  return Status::Ok();
}

// The pages of a file mapping that hold [p, p + n) are dropped from this process. Pages shared
// with a neighbouring chunk go too: a thread still reading one faults it in again from the
// page cache (the mapping is MAP_SHARED and read-only, so no byte changes).
void ReleaseMapped(const uint8_t* p, uint64_t n) {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t a = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + n + page - 1) & ~(page - 1);
  if (b > a) ::madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);
}

std::vector<uint8_t>& ChunkBuffer() {
  thread_local std::vector<uint8_t> buf;
  if (buf.size() < kChunkBytes) buf.resize(kChunkBytes);
  return buf;
}

}  // namespace

Status ConvertChunked(const Source& src, Dtype from, Dtype to, uint64_t n, uint8_t* dst, const std::string& file,
                      const std::string& tensor, size_t max_threads) {
  if (n == 0) return Status::Ok();
  const bool copy = from == to;
  // Chunks in elements; a byte copy (any dtype, sub-byte ones too) works in bytes.
  const uint64_t in_size = copy ? 1 : BytesOf(from, 1);
  const uint64_t out_size = copy ? 1 : BytesOf(to, 1);
  const uint64_t count = copy ? BytesOf(from, n) : n;
  const uint64_t per_chunk = kChunkBytes / in_size;
  const uint64_t chunks = (count + per_chunk - 1) / per_chunk;

  std::mutex mu;
  Status first_error;
  uint64_t bad_element = UINT64_MAX;
  std::atomic<bool> failed{false};
  auto fail = [&](Status st) {
    std::lock_guard<std::mutex> lock(mu);
    if (first_error.ok()) first_error = std::move(st);
    failed.store(true, std::memory_order_relaxed);
  };
  auto run = [&](size_t c) {
    if (failed.load(std::memory_order_relaxed)) return;
    const uint64_t begin = c * per_chunk;
    const uint64_t m = std::min(per_chunk, count - begin);
    const uint8_t* in = nullptr;
    uint8_t* out = dst + begin * out_size;
    if (src.bytes) {
      in = src.bytes + begin * in_size;
    } else if (copy) {  // straight into the output
      Status st = PreadAll(src.fd, out, m, src.offset + begin, file, tensor, begin);
      if (!st.ok()) fail(std::move(st));
      return;
    } else {
      std::vector<uint8_t>& buf = ChunkBuffer();
      Status st =
          PreadAll(src.fd, buf.data(), m * in_size, src.offset + begin * in_size, file, tensor, begin * in_size);
      if (!st.ok()) {
        fail(std::move(st));
        return;
      }
      in = buf.data();
    }
    size_t bad = 0;
    if (copy) {
      std::memcpy(out, in, static_cast<size_t>(m));
    } else if (!ConvertElements(from, to, in, out, static_cast<size_t>(m), &bad)) {
      std::lock_guard<std::mutex> lock(mu);
      bad_element = std::min<uint64_t>(bad_element, begin + bad);
      failed.store(true, std::memory_order_relaxed);
    }
    if (src.bytes && src.release_pages) ReleaseMapped(in, m * in_size);
  };
  if (chunks < 2) {  // not worth a hand-over, routed or not
    run(0);
  } else {
    bool caller_helps = true;
    util::WorkerPool& pool = util::WorkerPool::ForThisThread(&caller_helps);
    pool.ParallelFor(static_cast<size_t>(chunks), max_threads, run, nullptr, caller_helps);
  }
  if (!first_error.ok()) return first_error;
  if (bad_element != UINT64_MAX)
    return TensorError(Code::kUnsupported, reason::kUnsupportedDtype, file, tensor,
                       "tensor '" + tensor + "' of '" + file + "' has dtype U64 and holds a value >= 2^63 at element " +
                           std::to_string(bad_element) + " (U64 is loaded as int64 only when every value fits)");
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Output memory.

namespace {
constexpr uint64_t kHugePage = 2ull << 20;
uint64_t PageRound(uint64_t bytes) {
  static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}
}  // namespace

void* AllocateOutput(uint64_t bytes) {
  if (bytes == 0) return nullptr;
  const uint64_t len = PageRound(bytes);
  const uint64_t span = len + kHugePage;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  // Keep the 2 MiB-aligned part: huge pages need aligned 2 MiB ranges.
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) & ~(kHugePage - 1);
  if (aligned > start) ::munmap(raw, aligned - start);
  const uintptr_t end = start + span, used_end = aligned + len;
  if (end > used_end) ::munmap(reinterpret_cast<void*>(used_end), end - used_end);
#if defined(MADV_HUGEPAGE)
  ::madvise(reinterpret_cast<void*>(aligned), len, MADV_HUGEPAGE);  // EINVAL without THP: 4 KiB pages
#endif
  return reinterpret_cast<void*>(aligned);
}

void FreeOutput(void* p, uint64_t bytes) {
  if (p && bytes) ::munmap(p, PageRound(bytes));
}

}  // namespace hubload::convert
