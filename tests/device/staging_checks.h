// Checks shared by the fake-backend tests and the GPU tests: the same
// shards, the same expected bytes (file bytes, hand-computed values, or
// oracle.h), run against any DeviceBackend.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "hubload/device.h"
#include "hubload/safetensors.h"
#include "tests/device/oracle.h"
#include "testing/status_matchers.h"

namespace hubload::testing_device {

using safetensors::Dtype;

/// One tensor of a test shard: raw little-endian bytes.
struct Spec {
  std::string name;
  Dtype dtype;
  std::vector<uint64_t> shape;
  std::vector<uint8_t> bytes;
};

/// A shard held in memory: file bytes and its parsed header.
struct Shard {
  std::vector<uint8_t> file;
  safetensors::Header header;
  std::vector<uint8_t> Bytes(const std::string& name) const {
    const auto* t = header.Find(name);
    if (!t) return {};
    auto first = file.begin() + static_cast<std::ptrdiff_t>(header.data_start + t->begin);
    return {first, first + static_cast<std::ptrdiff_t>(t->nbytes())};
  }
};

inline Shard MakeShard(const std::vector<Spec>& specs) {
  std::vector<safetensors::TensorToWrite> ts;
  for (const Spec& s : specs) ts.push_back({s.name, s.dtype, s.shape, s.bytes.data(), s.bytes.size()});
  auto prefix = safetensors::SerializeHeader(&ts, {});
  EXPECT_OK(prefix);
  Shard sh;
  if (!prefix.ok()) return sh;
  sh.file.assign(prefix->begin(), prefix->end());
  for (const auto& t : ts) {
    const auto* p = static_cast<const uint8_t*>(t.data);
    sh.file.insert(sh.file.end(), p, p + t.nbytes);
  }
  auto h = safetensors::ParseHeader(sh.file.data(), sh.file.size(), sh.file.size(), "test.safetensors");
  EXPECT_OK(h);
  if (h.ok()) sh.header = std::move(*h);
  return sh;
}

/// A reader over an in-memory shard.
inline ShardReader MemoryReader(const Shard& sh) {
  return [&sh](uint64_t offset, void* dst, uint64_t n) -> Status {
    if (offset > sh.file.size() || n > sh.file.size() - offset)
      return Status(Code::kIOError, "read past the end of the test shard");
    std::memcpy(dst, sh.file.data() + offset, n);
    return Status::Ok();
  };
}

/// Deterministic pseudo-random bytes.
inline std::vector<uint8_t> PatternBytes(uint64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

/// Every safetensors dtype, with a shape whose bits are a whole number of
/// bytes (F4: 2 per byte; F6: 4 per 3 bytes).
inline std::vector<Spec> EveryDtypeSpecs(uint64_t elements_hint) {
  std::vector<Spec> specs;
  for (int i = 0; i < safetensors::kNumDtypes; ++i) {
    Dtype d = static_cast<Dtype>(i);
    const uint64_t n = elements_hint / 8 * 8 + 8;  // a multiple of 8: whole bytes for 4- and 6-bit types
    const uint64_t bytes = n * static_cast<uint64_t>(safetensors::DtypeBits(d)) / 8;
    specs.push_back({std::string("t.") + safetensors::DtypeName(d), d, {2, n / 2},
                     PatternBytes(bytes, 1000u + static_cast<uint32_t>(i))});
  }
  specs.push_back({"t.scalar", Dtype::F64, {}, PatternBytes(8, 7)});
  specs.push_back({"t.empty", Dtype::F32, {0, 3}, {}});
  return specs;
}

inline std::function<Device(const std::string&)> Everything(Device d) {
  return [d](const std::string&) { return d; };
}

/// Loads a shard of every dtype to `device` without conversion and compares
/// every tensor copied back with the file bytes.
inline void ExpectEveryDtypeByteExact(const std::shared_ptr<DeviceBackend>& backend, Device device,
                                      StagingOptions options) {
  Shard sh = MakeShard(EveryDtypeSpecs(3000));
  auto loader = StagingLoader::Create(backend, options);
  ASSERT_OK(loader);
  DeviceStateDict dict(backend);
  Status st = (*loader)->LoadShard("every-dtype.safetensors", sh.header, MemoryReader(sh), Everything(device), &dict);
  ASSERT_OK(st);
  ASSERT_EQ(dict.tensors().size(), sh.header.tensors.size());
  for (const auto& info : sh.header.tensors) {
    const DeviceTensor* t = dict.Find(info.name);
    ASSERT_NE(t, nullptr) << info.name;
    EXPECT_EQ(t->dtype, info.dtype) << info.name;
    EXPECT_EQ(t->source_dtype, info.dtype) << info.name;
    EXPECT_EQ(t->shape, info.shape) << info.name;
    EXPECT_EQ(t->bytes, info.nbytes()) << info.name;
    EXPECT_TRUE(t->device == device) << info.name;
    auto back = dict.CopyToHost(*t);
    ASSERT_OK(back);
    EXPECT_TRUE(*back == sh.Bytes(info.name)) << info.name << " differs from the file bytes";
  }
}

/// The values each source dtype is tested with: every code of the 8- and
/// 16-bit types; for F32 the special values and a spread sample.
inline std::vector<uint8_t> ConversionInput(Dtype s) {
  std::vector<uint8_t> v;
  auto put32 = [&v](uint32_t x) {
    for (int k = 0; k < 4; ++k) v.push_back(static_cast<uint8_t>(x >> (8 * k)));
  };
  switch (s) {
    case Dtype::F8_E4M3:
    case Dtype::F8_E5M2:
      for (int c = 0; c < 256; ++c) v.push_back(static_cast<uint8_t>(c));
      break;
    case Dtype::F16:
    case Dtype::BF16:
      for (uint32_t c = 0; c < 65536; ++c) {
        v.push_back(static_cast<uint8_t>(c));
        v.push_back(static_cast<uint8_t>(c >> 8));
      }
      break;
    default: {
      const uint32_t specials[] = {0x00000000u, 0x80000000u, 0x3F800000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u,
                                   0xFFC00001u, 0x7F7FFFFFu, 0x00000001u, 0x807FFFFFu, 0x477FE000u, 0x477FF000u,
                                   0x477FEFFFu, 0x33000000u, 0x33000001u, 0x33800000u, 0x38800000u, 0x387FFFFFu,
                                   0x3F808000u, 0x3F818000u, 0x3F801000u, 0x3F803000u};
      for (uint32_t x : specials) put32(x);
      for (uint64_t x = 0; x < (1ull << 32); x += 65521) put32(static_cast<uint32_t>(x));  // ~65k spread values
      for (uint32_t e = 0; e < 256; ++e)                                                    // every exponent, ties
        for (uint32_t low : {0x0000u, 0x1000u, 0x8000u, 0x8001u, 0x7FFFu, 0x18000u, 0xFFFFu, 0x3000u})
          put32((e << 23) | low);
      break;
    }
  }
  return v;
}

/// For every supported (source, target) pair: one tensor of ConversionInput
/// values staged through small buffers (so tensors are cut into pieces) and
/// converted by the backend; every element is compared with the oracle.
inline void ExpectConversionsMatchOracle(const std::shared_ptr<DeviceBackend>& backend, Device device,
                                         uint64_t buffer_bytes) {
  const Dtype sources[] = {Dtype::BF16, Dtype::F16, Dtype::F8_E4M3, Dtype::F8_E5M2, Dtype::F32};
  const Dtype targets[] = {Dtype::F32, Dtype::F16, Dtype::BF16};
  std::vector<Spec> specs;
  for (Dtype s : sources) {
    auto bytes = ConversionInput(s);
    uint64_t n = bytes.size() / oracle::ElemSize(s);
    specs.push_back({std::string("src.") + safetensors::DtypeName(s), s, {n}, std::move(bytes)});
  }
  specs.push_back({"int.I32", Dtype::I32, {5}, PatternBytes(20, 3)});  // not converted
  Shard sh = MakeShard(specs);
  for (Dtype target : targets) {
    StagingOptions opt;
    opt.buffer_bytes = buffer_bytes;
    opt.num_buffers = 3;
    opt.target_dtype = target == Dtype::F32 ? TargetDtype::kF32 : target == Dtype::F16 ? TargetDtype::kF16 : TargetDtype::kBF16;
    auto loader = StagingLoader::Create(backend, opt);
    ASSERT_OK(loader);
    DeviceStateDict dict(backend);
    Status st = (*loader)->LoadShard("conv.safetensors", sh.header, MemoryReader(sh), Everything(device), &dict);
    ASSERT_OK(st);
    for (Dtype s : sources) {
      const std::string name = std::string("src.") + safetensors::DtypeName(s);
      SCOPED_TRACE(name + " -> " + safetensors::DtypeName(target));
      const DeviceTensor* t = dict.Find(name);
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(t->source_dtype, s);
      EXPECT_EQ(t->dtype, target);
      auto src = sh.Bytes(name);
      const uint64_t n = src.size() / oracle::ElemSize(s);
      ASSERT_EQ(t->bytes, n * oracle::ElemSize(target));
      auto back = dict.CopyToHost(*t);
      ASSERT_OK(back);
      int reported = 0;
      uint64_t mismatches = 0;
      const uint64_t w = oracle::ElemSize(target);
      for (uint64_t i = 0; i < n; ++i) {
        std::vector<uint8_t> want =
            s == target ? std::vector<uint8_t>(src.begin() + static_cast<std::ptrdiff_t>(i * w),
                                               src.begin() + static_cast<std::ptrdiff_t>((i + 1) * w))
                        : oracle::Convert(target, s, src.data(), i);
        if (std::memcmp(want.data(), back->data() + i * w, w) != 0) {
          ++mismatches;
          if (reported++ < 5) {
            uint64_t in = 0, got = 0, exp = 0;
            std::memcpy(&in, src.data() + i * oracle::ElemSize(s), oracle::ElemSize(s));
            std::memcpy(&got, back->data() + i * w, w);
            std::memcpy(&exp, want.data(), w);
            ADD_FAILURE() << "element " << i << ": input 0x" << std::hex << in << " gave 0x" << got << ", expected 0x"
                          << exp;
          }
        }
      }
      EXPECT_EQ(mismatches, 0u);
    }
    const DeviceTensor* ints = dict.Find("int.I32");
    ASSERT_NE(ints, nullptr);
    EXPECT_EQ(ints->dtype, Dtype::I32);
    auto back = dict.CopyToHost(*ints);
    ASSERT_OK(back);
    EXPECT_TRUE(*back == sh.Bytes("int.I32"));
  }
}

/// A conversion checked by hand (values from the OCP FP8 tables and IEEE
/// binary16/bfloat16 arithmetic done on paper).
struct HandCase {
  Dtype src;
  uint32_t in;
  Dtype dst;
  uint32_t out;
  const char* why;
};

inline const std::vector<HandCase>& HandCases() {
  static const std::vector<HandCase> cases = {
      {Dtype::BF16, 0x3F80, Dtype::F32, 0x3F800000, "bf16 1.0"},
      {Dtype::BF16, 0xC049, Dtype::F32, 0xC0490000, "bf16 -3.140625"},
      {Dtype::BF16, 0x0001, Dtype::F32, 0x00010000, "smallest bf16 subnormal"},
      {Dtype::BF16, 0x7F80, Dtype::F32, 0x7F800000, "bf16 +inf"},
      {Dtype::F32, 0x3F800000, Dtype::BF16, 0x3F80, "1.0 exact"},
      {Dtype::F32, 0x3F808000, Dtype::BF16, 0x3F80, "1+2^-8: tie, even is down"},
      {Dtype::F32, 0x3F818000, Dtype::BF16, 0x3F82, "1+3*2^-8: tie, even is up"},
      {Dtype::F32, 0x3F808001, Dtype::BF16, 0x3F81, "just above the tie"},
      {Dtype::F32, 0x3F807FFF, Dtype::BF16, 0x3F80, "just below the tie"},
      {Dtype::F32, 0x7F7FFFFF, Dtype::BF16, 0x7F80, "FLT_MAX rounds to inf"},
      {Dtype::F32, 0xFF800000, Dtype::BF16, 0xFF80, "-inf"},
      {Dtype::F32, 0xFFC00000, Dtype::BF16, 0x7FC0, "NaN: c10's 0x7FC0"},
      {Dtype::F32, 0x00008000, Dtype::BF16, 0x0000, "subnormal tie to even 0"},
      {Dtype::F32, 0x00018000, Dtype::BF16, 0x0002, "subnormal tie to even 2"},
      {Dtype::F32, 0x3F800000, Dtype::F16, 0x3C00, "1.0"},
      {Dtype::F32, 0xC0000000, Dtype::F16, 0xC000, "-2.0"},
      {Dtype::F32, 0x477FE000, Dtype::F16, 0x7BFF, "65504, the largest half"},
      {Dtype::F32, 0x477FEFFF, Dtype::F16, 0x7BFF, "just below 65520"},
      {Dtype::F32, 0x477FF000, Dtype::F16, 0x7C00, "65520: tie, even is inf"},
      {Dtype::F32, 0x33800000, Dtype::F16, 0x0001, "2^-24, the smallest half"},
      {Dtype::F32, 0x33000000, Dtype::F16, 0x0000, "2^-25: tie to even 0"},
      {Dtype::F32, 0x33000001, Dtype::F16, 0x0001, "just above 2^-25"},
      {Dtype::F32, 0x33C00000, Dtype::F16, 0x0002, "1.5*2^-24: tie to even 2"},
      {Dtype::F32, 0x38800000, Dtype::F16, 0x0400, "2^-14, the smallest normal half"},
      {Dtype::F32, 0x3F801000, Dtype::F16, 0x3C00, "1+2^-11: tie, even is down"},
      {Dtype::F32, 0x3F803000, Dtype::F16, 0x3C02, "1+3*2^-11: tie, even is up"},
      {Dtype::F32, 0xFF800000, Dtype::F16, 0xFC00, "-inf"},
      {Dtype::F32, 0x7FC00000, Dtype::F16, 0x7E00, "NaN"},
      {Dtype::F32, 0xFFC00000, Dtype::F16, 0xFE00, "-NaN keeps its sign"},
      {Dtype::F16, 0x3C00, Dtype::F32, 0x3F800000, "half 1.0"},
      {Dtype::F16, 0x0001, Dtype::F32, 0x33800000, "half 2^-24"},
      {Dtype::F16, 0x03FF, Dtype::F32, 0x387FC000, "largest half subnormal 1023*2^-24"},
      {Dtype::F16, 0x7BFF, Dtype::F32, 0x477FE000, "65504"},
      {Dtype::F16, 0xFC00, Dtype::F32, 0xFF800000, "-inf"},
      {Dtype::F16, 0x7C01, Dtype::F32, 0x7FC02000, "signalling NaN: quietened, payload kept"},
      {Dtype::F16, 0x3C04, Dtype::BF16, 0x3F80, "1+2^-8: tie, even is down"},
      {Dtype::F16, 0x3C0C, Dtype::BF16, 0x3F82, "1+3*2^-8: tie, even is up"},
      {Dtype::BF16, 0x4780, Dtype::F16, 0x7C00, "65536 overflows to inf"},
      {Dtype::BF16, 0x477F, Dtype::F16, 0x7BF8, "65280"},
      {Dtype::BF16, 0x3380, Dtype::F16, 0x0001, "2^-24"},
      {Dtype::F8_E4M3, 0x00, Dtype::F32, 0x00000000, "e4m3 +0"},
      {Dtype::F8_E4M3, 0x80, Dtype::F32, 0x80000000, "e4m3 -0"},
      {Dtype::F8_E4M3, 0x01, Dtype::F32, 0x3B000000, "e4m3 smallest subnormal 2^-9"},
      {Dtype::F8_E4M3, 0x07, Dtype::F32, 0x3C600000, "e4m3 largest subnormal 7*2^-9"},
      {Dtype::F8_E4M3, 0x08, Dtype::F32, 0x3C800000, "e4m3 smallest normal 2^-6"},
      {Dtype::F8_E4M3, 0x38, Dtype::F32, 0x3F800000, "e4m3 1.0"},
      {Dtype::F8_E4M3, 0x78, Dtype::F32, 0x43800000, "e4m3 256 (exponent 15 is finite)"},
      {Dtype::F8_E4M3, 0x7E, Dtype::F32, 0x43E00000, "e4m3 448, the largest"},
      {Dtype::F8_E4M3, 0xFE, Dtype::F32, 0xC3E00000, "e4m3 -448"},
      {Dtype::F8_E4M3, 0x7F, Dtype::F32, 0x7FC00000, "e4m3 NaN"},
      {Dtype::F8_E4M3, 0xFF, Dtype::F32, 0xFFC00000, "e4m3 -NaN"},
      {Dtype::F8_E5M2, 0x3C, Dtype::F32, 0x3F800000, "e5m2 1.0"},
      {Dtype::F8_E5M2, 0x7B, Dtype::F32, 0x47600000, "e5m2 57344, the largest"},
      {Dtype::F8_E5M2, 0x7C, Dtype::F32, 0x7F800000, "e5m2 +inf"},
      {Dtype::F8_E5M2, 0xFC, Dtype::F32, 0xFF800000, "e5m2 -inf"},
      {Dtype::F8_E5M2, 0x7D, Dtype::F32, 0x7FC00000, "e5m2 NaN"},
      {Dtype::F8_E5M2, 0x01, Dtype::F32, 0x37800000, "e5m2 smallest subnormal 2^-16"},
      {Dtype::F8_E5M2, 0x03, Dtype::F32, 0x38400000, "e5m2 3*2^-16"},
      {Dtype::F8_E5M2, 0x04, Dtype::F32, 0x38800000, "e5m2 smallest normal 2^-14"},
      {Dtype::F8_E4M3, 0x38, Dtype::BF16, 0x3F80, "e4m3 1.0 to bf16"},
      {Dtype::F8_E4M3, 0x01, Dtype::BF16, 0x3B00, "e4m3 2^-9 to bf16"},
      {Dtype::F8_E4M3, 0x7F, Dtype::BF16, 0x7FC0, "e4m3 NaN to bf16"},
      {Dtype::F8_E4M3, 0xFF, Dtype::BF16, 0xFFC0, "e4m3 -NaN to bf16 keeps the sign (exact path)"},
      {Dtype::F8_E4M3, 0x01, Dtype::F16, 0x1800, "e4m3 2^-9 is a normal half"},
      {Dtype::F8_E4M3, 0x7E, Dtype::F16, 0x5F00, "e4m3 448 to half"},
      {Dtype::F8_E4M3, 0xFF, Dtype::F16, 0xFE00, "e4m3 -NaN to half"},
      {Dtype::F8_E5M2, 0x7B, Dtype::F16, 0x7B00, "e5m2 is the top byte of a half"},
      {Dtype::F8_E5M2, 0x01, Dtype::F16, 0x0100, "e5m2 subnormal to half"},
      {Dtype::F8_E5M2, 0x7C, Dtype::F16, 0x7C00, "e5m2 inf to half"},
      {Dtype::F8_E5M2, 0xFD, Dtype::F16, 0xFE00, "e5m2 -NaN to half (canonical)"},
      {Dtype::F8_E5M2, 0x3C, Dtype::BF16, 0x3F80, "e5m2 1.0 to bf16"},
      {Dtype::F8_E5M2, 0x7C, Dtype::BF16, 0x7F80, "e5m2 inf to bf16"},
      {Dtype::F8_E5M2, 0x01, Dtype::BF16, 0x3780, "e5m2 2^-16 to bf16"},
  };
  return cases;
}

/// Runs every hand case through backend->convert_async on `device` (copy
/// in, convert, event, copy back).
inline void ExpectHandCases(DeviceBackend& backend, int device) {
  auto stream = backend.create_stream(device);
  ASSERT_OK(stream);
  for (const HandCase& c : HandCases()) {
    SCOPED_TRACE(c.why);
    const uint64_t in_size = oracle::ElemSize(c.src), out_size = oracle::ElemSize(c.dst);
    auto src = backend.alloc_device(device, in_size);
    auto dst = backend.alloc_device(device, out_size);
    ASSERT_TRUE(src.ok() && dst.ok());
    uint8_t in[4];
    std::memcpy(in, &c.in, 4);  // little-endian host: the low bytes are the element
    ASSERT_OK(backend.copy_to_device_async(*src, in, in_size, *stream));
    Status st = backend.convert_async(*dst, c.dst, *src, c.src, 1, *stream);
    ASSERT_OK(st);
    auto ev = backend.record_event(*stream);
    ASSERT_OK(ev);
    ASSERT_OK(backend.wait_event(*ev));
    backend.destroy_event(*ev);
    uint32_t out = 0;
    ASSERT_OK(backend.copy_to_host(&out, *dst, out_size, device));
    EXPECT_EQ(out, c.out) << std::hex << "input 0x" << c.in << " gave 0x" << out << ", expected 0x" << c.out;
    backend.free_device(device, *src);
    backend.free_device(device, *dst);
  }
  backend.destroy_stream(*stream);
}

}  // namespace hubload::testing_device
