// The chunked converter behind LoadTensor / LoadTensorFromFd: every floating
// conversion bit-exact against independent oracles (tests/device/oracle.h:
// the compiler's _Float16 and a nearest-of-two bf16 rounding in double;
// python3-torch's own .to() where it is installed), exhaustive over 16-bit
// inputs and over every f16 rounding boundary of f32, through several chunks
// and threads; the fd entry point; huge-page outputs; source pages released.
#include <ATen/ATen.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "device/oracle.h"
#include "hubload/reasons.h"
#include "hubload/torch_loader.h"
#include "loader/torch/internal.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace hubload {
namespace {
namespace fs = std::filesystem;
using safetensors::Dtype;
using testing::TempDir;

template <typename T>
std::vector<uint8_t> Bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// One tensor file; returns the opened file.
safetensors::SafetensorsFile WriteAndOpen(const std::string& path, const std::string& name, Dtype d,
                                          const std::vector<uint8_t>& bytes) {
  uint64_t n = bytes.size() * 8 / safetensors::DtypeBits(d);
  Status st = safetensors::WriteFile(path, {{name, d, {n}, bytes.data(), bytes.size()}});
  EXPECT_OK(st);
  auto f = safetensors::SafetensorsFile::Open(path);
  EXPECT_OK(f);
  return std::move(f).value();
}

at::Tensor MustLoad(const safetensors::SafetensorsFile& f, TargetDtype to) {
  LoadOptions o;
  o.dtype = to;
  auto t = LoadTensor(f, f.header().tensors.at(0), o);
  EXPECT_OK(t);
  return t.ok() ? *t : at::Tensor();
}

std::vector<uint16_t> All16() {
  std::vector<uint16_t> v(65536);
  for (uint32_t i = 0; i < 65536; ++i) v[i] = static_cast<uint16_t>(i);
  return v;
}

// Every f32 rounding case of f16: for each f16 value, its exact value, the midpoint to the next
// one and one f32 ulp either side; plus every upper half with assorted lower halves.
std::vector<uint32_t> F32Cases() {
  std::vector<uint32_t> v;
  for (uint32_t h = 0; h < 0x7C00; ++h) {
    const double a = oracle::AsFloat(oracle::F16ToF32(static_cast<uint16_t>(h)));
    const double b = h + 1 < 0x7C00 ? oracle::AsFloat(oracle::F16ToF32(static_cast<uint16_t>(h + 1))) : 65536.0;
    const uint32_t mid = std::bit_cast<uint32_t>(static_cast<float>((a + b) / 2));  // exact in f32
    for (uint32_t w : {std::bit_cast<uint32_t>(static_cast<float>(a)), mid - 1, mid, mid + 1})
      for (uint32_t sign : {0u, 0x80000000u}) v.push_back(w | sign);
  }
  for (uint32_t hi = 0; hi < 65536; ++hi)
    for (uint32_t lo : {0x0000u, 0x0001u, 0x0FFFu, 0x1000u, 0x1001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu})
      v.push_back((hi << 16) | lo);
  return v;
}

// Element i of `t` (contiguous, CPU) as raw little-endian bits.
uint32_t Bits(const at::Tensor& t, size_t i) {
  uint32_t b = 0;
  std::memcpy(&b, static_cast<const uint8_t*>(t.data_ptr()) + i * t.element_size(), t.element_size());
  return b;
}

// LoadTensor(from -> to) of `src` compared element by element with the oracle's Convert.
void CheckAgainstOracle(Dtype from, const std::vector<uint8_t>& src, TargetDtype target, Dtype to) {
  TempDir dir;
  auto file = WriteAndOpen(dir.str() + "/x.safetensors", "x", from, src);
  at::Tensor t = MustLoad(file, target);
  ASSERT_TRUE(t.defined());
  ASSERT_EQ(t.element_size(), safetensors::DtypeBits(to) / 8);
  const size_t n = src.size() * 8 / safetensors::DtypeBits(from);
  ASSERT_EQ(static_cast<size_t>(t.numel()), n);
  size_t bad = 0;
  for (size_t i = 0; i < n && bad < 10; ++i) {
    std::vector<uint8_t> want = oracle::Convert(to, from, src.data(), i);
    uint32_t w = 0;
    std::memcpy(&w, want.data(), want.size());
    if (Bits(t, i) != w) {
      ++bad;
      ADD_FAILURE() << safetensors::DtypeName(from) << " -> " << safetensors::DtypeName(to) << " element " << i
                    << ": got 0x" << std::hex << Bits(t, i) << " want 0x" << w;
    }
  }
}

TEST(Convert, Every16BitValueExact) {
  const auto src = Bytes(All16());
  CheckAgainstOracle(Dtype::F16, src, TargetDtype::kF32, Dtype::F32);
  CheckAgainstOracle(Dtype::F16, src, TargetDtype::kBF16, Dtype::BF16);
  CheckAgainstOracle(Dtype::BF16, src, TargetDtype::kF32, Dtype::F32);
  CheckAgainstOracle(Dtype::BF16, src, TargetDtype::kF16, Dtype::F16);
}

TEST(Convert, F32RoundsToNearestEvenAtEveryHalfBoundary) {
  const auto src = Bytes(F32Cases());
  ASSERT_GT(src.size(), 2 * (1u << 20));  // several chunks, so several threads
  CheckAgainstOracle(Dtype::F32, src, TargetDtype::kF16, Dtype::F16);
  CheckAgainstOracle(Dtype::F32, src, TargetDtype::kBF16, Dtype::BF16);
}

TEST(Convert, NanStaysNanWithTheDocumentedBits) {
  // f32 NaNs with payloads and signs; c10's rules: f16 sign|0x7E00, bf16 0x7FC0.
  std::vector<uint32_t> nans = {0x7FC00000u, 0x7F800001u, 0x7FA00000u, 0xFFC00000u, 0xFF800001u, 0x7FFFFFFFu};
  TempDir dir;
  auto file = WriteAndOpen(dir.str() + "/n.safetensors", "n", Dtype::F32, Bytes(nans));
  at::Tensor h = MustLoad(file, TargetDtype::kF16), b = MustLoad(file, TargetDtype::kBF16);
  for (size_t i = 0; i < nans.size(); ++i) {
    EXPECT_EQ(Bits(h, i), ((nans[i] >> 16) & 0x8000u) | 0x7E00u) << i;
    EXPECT_EQ(Bits(b, i), 0x7FC0u) << i;
  }
  // f16 NaNs widen with sign and payload kept, quiet bit set.
  std::vector<uint16_t> hn = {0x7C01, 0x7E00, 0xFC01, 0x7FFF};
  auto f16 = WriteAndOpen(dir.str() + "/h.safetensors", "h", Dtype::F16, Bytes(hn));
  at::Tensor w = MustLoad(f16, TargetDtype::kF32);
  for (size_t i = 0; i < hn.size(); ++i)
    EXPECT_EQ(Bits(w, i), (static_cast<uint32_t>(hn[i] & 0x8000u) << 16) | 0x7FC00000u |
                              (static_cast<uint32_t>(hn[i] & 0x3FFu) << 13))
        << i;
}

TEST(Convert, F64GoesThroughF32AsC10) {
  std::mt19937_64 rng(13);
  std::vector<double> v = {0.0,
                           -0.0,
                           1.0,
                           65504.0,
                           65520.0,
                           1e-8,
                           5.960464477539063e-08,
                           1e300,
                           -1e-300,
                           std::ldexp(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40), 0),  // rounds differently once
                           INFINITY,
                           -INFINITY};
  for (int i = 0; i < 50000; ++i)
    v.push_back(std::ldexp(static_cast<double>(rng() >> 11), -53) * std::ldexp(1.0, static_cast<int>(rng() % 80) - 40));
  TempDir dir;
  auto file = WriteAndOpen(dir.str() + "/d.safetensors", "d", Dtype::F64, Bytes(v));
  at::Tensor f = MustLoad(file, TargetDtype::kF32), h = MustLoad(file, TargetDtype::kF16),
             b = MustLoad(file, TargetDtype::kBF16);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint32_t w = std::bit_cast<uint32_t>(static_cast<float>(v[i]));
    ASSERT_EQ(Bits(f, i), w) << v[i];
    ASSERT_EQ(Bits(h, i), oracle::F32ToF16(w)) << v[i];
    ASSERT_EQ(Bits(b, i), oracle::F32ToBF16(w)) << v[i];
  }
}

TEST(Convert, Fp8ToEveryTargetAsTheCodeTables) {
  std::vector<uint8_t> codes(256 * 40);  // 10 KiB: many blocks
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i * 7);
  for (Dtype d : {Dtype::F8_E4M3, Dtype::F8_E5M2}) {
    CheckAgainstOracle(d, codes, TargetDtype::kF32, Dtype::F32);
    CheckAgainstOracle(d, codes, TargetDtype::kF16, Dtype::F16);
    CheckAgainstOracle(d, codes, TargetDtype::kBF16, Dtype::BF16);
  }
}

// E8M0 (2^(c-127), 0xFF = NaN) -> f16 rounds like any f32 value: the scale computed here by ldexp.
TEST(Convert, E8M0ToF16RoundsTheScale) {
  std::vector<uint8_t> codes(256 * 9);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i);
  TempDir dir;
  auto file = WriteAndOpen(dir.str() + "/s.safetensors", "s", Dtype::F8_E8M0, codes);
  at::Tensor h = MustLoad(file, TargetDtype::kF16);
  for (size_t i = 0; i < codes.size(); ++i) {
    const int c = codes[i];
    const uint32_t f = c == 255 ? 0x7FC00000u : std::bit_cast<uint32_t>(static_cast<float>(std::ldexp(1.0, c - 127)));
    ASSERT_EQ(Bits(h, i), oracle::F32ToF16(f)) << "code " << c;
  }
  EXPECT_EQ(Bits(h, 127), 0x3C00u);  // 2^0
  EXPECT_EQ(Bits(h, 142), 0x7800u);  // 2^15, the largest power of two in f16
  EXPECT_EQ(Bits(h, 143), 0x7C00u);  // 2^16 overflows to inf
  EXPECT_EQ(Bits(h, 103), 0x0001u);  // 2^-24, the smallest subnormal
  EXPECT_EQ(Bits(h, 102), 0x0000u);  // 2^-25: a tie, to even zero
}

// python3-torch's own conversions of the same inputs (16-bit: all values; f32: the boundary
// set; f64: a sample), compared bit for bit; NaN inputs are left out (their bits differ between
// LibTorch's vector and scalar loops; the rule is checked above).
TEST(Convert, MatchesPythonTorch) {
  const char* py = "/usr/bin/python3";
  std::string out, err;
  if (testing::RunCommand(std::string(py) + " -c 'import torch' 2>&1", &out, &err) != 0)
    GTEST_SKIP() << "python3-torch not installed at " << py << ": " << out;
  TempDir dir;
  struct Case {
    Dtype from;
    const char* torch_from;
    std::vector<uint8_t> bytes;
  };
  std::vector<uint16_t> h16;
  for (uint16_t x : All16())
    if ((x & 0x7C00) != 0x7C00 || (x & 0x3FF) == 0) h16.push_back(x);  // f16 non-NaN
  std::vector<uint16_t> b16;
  for (uint16_t x : All16())
    if ((x & 0x7F80) != 0x7F80 || (x & 0x7F) == 0) b16.push_back(x);  // bf16 non-NaN
  std::vector<uint32_t> f32;
  for (uint32_t w : F32Cases())
    if ((w & 0x7FFFFFFFu) <= 0x7F800000u) f32.push_back(w);
  std::mt19937_64 rng(7);
  std::vector<uint64_t> f64;
  for (int i = 0; i < 100000; ++i) {
    uint64_t b = rng();
    b = (b & 0x800FFFFFFFFFFFFFull) | (static_cast<uint64_t>(1023 - 60 + rng() % 120) << 52);
    f64.push_back(b);
  }
  std::vector<Case> cases = {{Dtype::F16, "float16", Bytes(h16)},
                             {Dtype::BF16, "bfloat16", Bytes(b16)},
                             {Dtype::F32, "float32", Bytes(f32)},
                             {Dtype::F64, "float64", Bytes(f64)}};
  const std::string script = dir.str() + "/conv.py";
  {
    std::ofstream s(script);
    s << "import sys, torch\n"
         "args = sys.argv[1:]\n"
         "for src, dt, out in zip(args[0::3], args[1::3], args[2::3]):\n"
         "    x = torch.frombuffer(bytearray(open(src, 'rb').read()), dtype=getattr(torch, dt))\n"
         "    for name, to, view in (('f32', torch.float32, torch.int32), ('f16', torch.float16, torch.int16),\n"
         "                           ('bf16', torch.bfloat16, torch.int16)):\n"
         "        open(out + '.' + name, 'wb').write(x.to(to).view(view).numpy().tobytes())\n";
  }
  std::string cmd = std::string(py) + " " + script;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string raw = dir.str() + "/in" + std::to_string(i) + ".bin";
    testing::WriteFileBytes(raw, cases[i].bytes.data(), cases[i].bytes.size());
    cmd += " " + raw + " " + cases[i].torch_from + " " + dir.str() + "/ref" + std::to_string(i);
  }
  ASSERT_EQ(testing::RunCommand(cmd, &out, &err), 0) << out << err;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    SCOPED_TRACE(safetensors::DtypeName(c.from));
    auto file = WriteAndOpen(dir.str() + "/c" + std::to_string(i) + ".safetensors", "c", c.from, c.bytes);
    for (auto [suffix, target] : {std::pair{".f32", TargetDtype::kF32}, std::pair{".f16", TargetDtype::kF16},
                                  std::pair{".bf16", TargetDtype::kBF16}}) {
      SCOPED_TRACE(suffix);
      auto want = testing::ReadFileBytes(dir.str() + "/ref" + std::to_string(i) + suffix);
      at::Tensor t = MustLoad(file, target);
      ASSERT_EQ(want.size(), static_cast<size_t>(t.numel()) * t.element_size());
      const uint8_t* got = static_cast<const uint8_t*>(t.data_ptr());
      size_t first_bad = want.size();
      for (size_t k = 0; k < want.size(); ++k)
        if (got[k] != want[k]) {
          first_bad = k;
          break;
        }
      EXPECT_EQ(first_bad, want.size()) << "first differing byte (element " << first_bad / t.element_size() << ")";
    }
  }
}

TEST(Convert, Unsigned64BeyondInt64NamesTheElementAcrossChunks) {
  std::vector<uint64_t> v(600000, 5);  // 4.8 MB: five chunks
  v[450001] = 1ull << 63;
  TempDir dir;
  auto file = WriteAndOpen(dir.str() + "/u.safetensors", "big_u64", Dtype::U64, Bytes(v));
  auto t = LoadTensor(file, file.header().tensors.at(0), {});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), Code::kUnsupported);
  EXPECT_NE(t.status().message().find("element 450001"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("big_u64"), std::string::npos) << t.status().message();
}

// Heap bytes (the pickle path hands them over) are converted without touching them: only a file
// mapping's pages may be dropped after conversion.
TEST(Convert, HeapSourceBytesAreLeftIntact) {
  std::vector<uint16_t> heap(4u << 20, 0x4040);  // 8 MiB of bf16 3.0: several chunks
  safetensors::TensorInfo info;
  info.name = "heap";
  info.dtype = Dtype::BF16;
  info.shape = {heap.size()};
  info.end = heap.size() * 2;
  LoadOptions o;
  o.dtype = TargetDtype::kF32;
  auto t = internal::TensorFromBytes(
      info, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(heap.data()), heap.size() * 2), nullptr, o,
      "heap");
  ASSERT_OK(t);
  EXPECT_EQ(t->sum().item<double>(), 3.0 * heap.size());
  EXPECT_TRUE(std::all_of(heap.begin(), heap.end(), [](uint16_t v) { return v == 0x4040; }));
}

// LoadOptions::conversion_threads bounds the threads of one conversion (the
// pipeline uses 1 while downloads are in flight); every bound gives the same
// bits: bf16 -> f32 is the 16 bits shifted up, written out here by hand.
TEST(Convert, ConversionThreadsKeepTheBits) {
  std::vector<uint16_t> src(3u << 20);  // 6 MiB of bf16: six chunks
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>((i * 2654435761u) >> 7);
  std::vector<uint32_t> want(src.size());
  for (size_t i = 0; i < src.size(); ++i) want[i] = static_cast<uint32_t>(src[i]) << 16;
  safetensors::TensorInfo info;
  info.name = "w";
  info.dtype = Dtype::BF16;
  info.shape = {src.size()};
  info.end = src.size() * 2;
  for (size_t threads : {size_t{1}, size_t{2}, size_t{0}, size_t{64}}) {
    SCOPED_TRACE(threads);
    LoadOptions o;
    o.dtype = TargetDtype::kF32;
    o.conversion_threads = threads;
    auto t = internal::TensorFromBytes(
        info, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(src.data()), src.size() * 2), nullptr, o,
        "mem");
    ASSERT_OK(t);
    ASSERT_EQ(t->scalar_type(), at::kFloat);
    ASSERT_EQ(static_cast<size_t>(t->numel()), want.size());
    EXPECT_EQ(std::memcmp(t->data_ptr(), want.data(), want.size() * 4), 0);
  }
}

TEST(LoadTensorFromFd, SameTensorsAsLoadTensorAndTheFilePositionUntouched) {
  TempDir dir;
  const std::string path = dir.str() + "/m.safetensors";
  std::vector<uint16_t> bf(3'000'000);  // 6 MB: chunks, threads and a huge-page output
  for (size_t i = 0; i < bf.size(); ++i) bf[i] = static_cast<uint16_t>(i * 2654435761u >> 16);
  std::vector<uint16_t> u16 = {0, 1, 65535, 40000};
  std::vector<int32_t> i32 = {-1, 2, -3};
  ASSERT_OK(safetensors::WriteFile(path, {{"bf", Dtype::BF16, {1000, 3000}, bf.data(), bf.size() * 2},
                                            {"u16", Dtype::U16, {4}, u16.data(), 8},
                                            {"i32", Dtype::I32, {3}, i32.data(), 12}})
                  );
  auto file = safetensors::SafetensorsFile::Open(path);
  ASSERT_OK(file);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::lseek(fd, 5, SEEK_SET), 5);
  for (TargetDtype target : {TargetDtype::kAuto, TargetDtype::kF32, TargetDtype::kF16}) {
    LoadOptions o;
    o.dtype = target;
    for (const auto& info : file->header().tensors) {
      SCOPED_TRACE(info.name);
      auto a = LoadTensor(*file, info, o);
      auto b = LoadTensorFromFd(fd, file->header().data_start + info.begin, info, o, path);
      ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
      EXPECT_EQ(a->scalar_type(), b->scalar_type());
      EXPECT_EQ(a->sizes(), b->sizes());
      ASSERT_EQ(a->numel() * a->element_size(), b->numel() * b->element_size());
      EXPECT_EQ(std::memcmp(a->data_ptr(), b->data_ptr(), a->numel() * a->element_size()), 0);
      b->fill_(0);  // fresh, writable memory
    }
  }
  EXPECT_EQ(::lseek(fd, 0, SEEK_CUR), 5);
  // The same-dtype copy equals the file's bytes.
  auto raw = testing::ReadFileBytes(path);
  const auto& bfi = *file->header().Find("bf");
  auto c = LoadTensorFromFd(fd, file->header().data_start + bfi.begin, bfi, {}, path);
  ASSERT_OK(c);
  EXPECT_EQ(std::memcmp(c->data_ptr(), raw.data() + file->header().data_start + bfi.begin, bfi.nbytes()), 0);
  // Huge-page outputs are 2 MiB aligned (AllocateOutput); small ones come from the allocator.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c->data_ptr()) % (2u << 20), 0u);

  // Bytes beyond the end of the file, a bad descriptor.
  auto past = LoadTensorFromFd(fd, raw.size() - 100, bfi, {}, path);
  ASSERT_FALSE(past.ok());
  EXPECT_TRUE(past.status().Is(reason::kTensorOutOfRange)) << past.status().ToString();
  EXPECT_NE(past.status().message().find(path), std::string::npos);
  EXPECT_NE(past.status().message().find("'bf'"), std::string::npos);
  EXPECT_EQ(LoadTensorFromFd(-1, 0, bfi, {}, path).status().code(), Code::kInvalidArgument);
  ::close(fd);
}

long RssFileKb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("RssFile:", 0) == 0) return std::atol(line.c_str() + 8);
  return -1;
}

TEST(Convert, SourcePagesOfTheMappingAreReleasedOnceConverted) {
  TempDir dir;
  std::vector<uint16_t> bf(32u << 20, 0x3F80);  // 64 MiB of bf16 ones
  auto file = WriteAndOpen(dir.str() + "/big.safetensors", "w", Dtype::BF16, Bytes(bf));
  bf.clear();
  bf.shrink_to_fit();
  const long before = RssFileKb();
  if (before < 0) GTEST_SKIP() << "no RssFile in /proc/self/status";
  at::Tensor t = MustLoad(file, TargetDtype::kF32);
  ASSERT_TRUE(t.defined());
  const long grown_kb = RssFileKb() - before;
  EXPECT_LT(grown_kb, 8 * 1024) << "mapped source pages still resident after conversion";
  EXPECT_EQ(t.sum().item<double>(), static_cast<double>(32u << 20));
  // Zero-copy views of the same file still read the right bytes afterwards.
  auto view = LoadTensor(file, file.header().tensors.at(0), {});
  ASSERT_OK(view);
  EXPECT_EQ(view->to(at::kFloat).sum().item<double>(), static_cast<double>(32u << 20));
}

// `hubload reshard --dtype fp16`: floating tensors converted as the oracle rounds them, every
// other tensor (U16 here, which `load` would widen) byte for byte as stored.
TEST(ReshardCli, ExplicitDtypeConvertsFloatingTensorsOnly) {
  TempDir dir;
  std::vector<uint16_t> bf = {0x3F80, 0x4049, 0xC2F7, 0x0001, 0x7F80};
  std::vector<uint32_t> f32 = {0x3F800001u, 0x477FF000u, 0x33000001u, 0xFFC00000u};
  std::vector<uint8_t> e4 = {0x00, 0x38, 0x7E, 0xFE, 0x7F};
  std::vector<uint16_t> u16 = {0, 65535, 40000};
  ASSERT_OK(safetensors::WriteFile(dir.str() + "/model.safetensors",
                                     {{"bf", Dtype::BF16, {5}, bf.data(), 10},
                                      {"f32", Dtype::F32, {4}, f32.data(), 16},
                                      {"e4", Dtype::F8_E4M3, {5}, e4.data(), 5},
                                      {"u16", Dtype::U16, {3}, u16.data(), 6}},
                                     {{"format", "pt"}, {"origin", "test"}})
                  );
  std::string out, err;
  ASSERT_EQ(testing::RunCommand(testing::HubloadBin() + " reshard '" + dir.str() + "/model.safetensors' '" + dir.str() +
                                    "/out' --dtype fp16",
                                &out, &err),
            0)
      << out << err;
  auto bytes = testing::ReadFileBytes(dir.path() / "out" / "model.safetensors");
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  auto h = nlohmann::json::parse(std::string(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(n)));
  EXPECT_EQ(h["__metadata__"], (nlohmann::json{{"format", "pt"}, {"origin", "test"}}));
  auto data = [&](const std::string& name) {
    uint64_t b = h[name]["data_offsets"][0], e = h[name]["data_offsets"][1];
    return std::vector<uint8_t>(bytes.begin() + 8 + n + b, bytes.begin() + 8 + n + e);
  };
  auto halves = [&](const std::string& name) {
    auto d = data(name);
    std::vector<uint16_t> v(d.size() / 2);
    std::memcpy(v.data(), d.data(), d.size());
    return v;
  };
  EXPECT_EQ(h["bf"]["dtype"], "F16");
  EXPECT_EQ(h["f32"]["dtype"], "F16");
  EXPECT_EQ(h["e4"]["dtype"], "F16");
  EXPECT_EQ(h["u16"]["dtype"], "U16");
  for (size_t i = 0; i < bf.size(); ++i) EXPECT_EQ(halves("bf")[i], oracle::F32ToF16(uint32_t{bf[i]} << 16)) << i;
  for (size_t i = 0; i < f32.size(); ++i) EXPECT_EQ(halves("f32")[i], oracle::F32ToF16(f32[i])) << i;
  // E4M3 values fit f16 exactly: 0, 1.0, 448, -448, NaN.
  const std::vector<uint16_t> e4_want = {0x0000, 0x3C00, 0x5F00, 0xDF00, 0x7E00};
  EXPECT_EQ(halves("e4"), e4_want);
  EXPECT_EQ(data("u16"), std::vector<uint8_t>({0, 0, 0xFF, 0xFF, 0x40, 0x9C}));
}

}  // namespace
}  // namespace hubload
