// FakeDeviceBackend: memory budget, ordering of stream work and events,
// conversions (hand-checked values and exhaustive comparisons with
// independent oracles: the CPU loader's fp8 decoder, the compiler's
// _Float16, a double-precision bf16 rounding).
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "hubload/device.h"
#include "loader/device/fake_backend.h"
#include "tests/device/oracle.h"
#include "tests/device/staging_checks.h"
#include "testing/status_matchers.h"

namespace hubload {
namespace {

using safetensors::Dtype;

TEST(FakeBackend, MemoryBudgetAndOutOfMemory) {
  FakeDeviceBackend b(FakeDeviceOptions{.devices = 2, .memory_per_device = 1000, .copy_bytes_per_s = 0});
  EXPECT_EQ(b.name(), "fake");
  EXPECT_EQ(b.device_count(), 2);
  auto p = b.alloc_device(0, 600);
  ASSERT_OK(p);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % 256, 0u);
  EXPECT_EQ(*b.free_memory(0), 400u);
  EXPECT_EQ(*b.free_memory(1), 1000u);  // budgets are per device
  auto q = b.alloc_device(0, 401);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), Code::kInternal);
  EXPECT_EQ(q.status().reason(), "DeviceOutOfMemory");
  EXPECT_NE(q.status().message().find("out of memory"), std::string::npos) << q.status().message();
  EXPECT_NE(q.status().message().find("401"), std::string::npos) << q.status().message();
  auto r = b.alloc_device(0, 400);  // exactly what is left
  ASSERT_OK(r);
  EXPECT_EQ(*b.free_memory(0), 0u);
  b.free_device(0, *p);
  b.free_device(0, *r);
  EXPECT_EQ(*b.free_memory(0), 1000u);
  auto bad = b.alloc_device(2, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
}

TEST(FakeBackend, CopyEventAndReadBack) {
  FakeDeviceBackend b;
  auto s = b.create_stream(0);
  ASSERT_OK(s);
  auto dev = b.alloc_device(0, 1000);
  auto pinned = b.alloc_pinned(1000);
  ASSERT_TRUE(dev.ok() && pinned.ok());
  auto data = testing_device::PatternBytes(1000, 42);
  std::memcpy(*pinned, data.data(), data.size());
  ASSERT_OK(b.copy_to_device_async(*dev, *pinned, 1000, *s));
  auto ev = b.record_event(*s);
  ASSERT_OK(ev);
  ASSERT_OK(b.wait_event(*ev));
  EXPECT_TRUE(*b.event_done(*ev));
  std::vector<uint8_t> back(1000);
  ASSERT_OK(b.copy_to_host(back.data(), *dev, 1000, 0));
  EXPECT_EQ(back, data);
  // The log: the copy executed before the event completed, both on our
  // stream (kRecord is logged when record_event is called, which may come
  // before or after the copy ran).
  auto log = b.log();
  ASSERT_EQ(log.size(), 3u);
  std::vector<FakeDeviceEvent> executed;
  for (const auto& e : log) {
    if (e.op == FakeDeviceEvent::Op::kRecord) {
      EXPECT_EQ(e.event, *ev);
      EXPECT_EQ(e.stream, *s);
    } else {
      executed.push_back(e);
    }
  }
  ASSERT_EQ(executed.size(), 2u);
  EXPECT_EQ(executed[0].op, FakeDeviceEvent::Op::kCopy);
  EXPECT_EQ(executed[0].host_src, *pinned);
  EXPECT_EQ(executed[0].bytes, 1000u);
  EXPECT_EQ(executed[0].stream, *s);
  EXPECT_EQ(executed[1].op, FakeDeviceEvent::Op::kComplete);
  EXPECT_EQ(executed[1].event, *ev);
  EXPECT_EQ(b.max_inflight_bytes(), 1000u);
  b.destroy_event(*ev);
  EXPECT_FALSE(b.event_done(*ev).ok());
  b.free_device(0, *dev);
  b.free_pinned(*pinned);
  b.destroy_stream(*s);
}

TEST(FakeBackend, StreamRunsItsWorkInOrder) {
  // Slowed copies: a later small copy on the same stream still lands after an
  // earlier big one to the same place.
  FakeDeviceBackend b(FakeDeviceOptions{.devices = 1, .memory_per_device = 1 << 20, .copy_bytes_per_s = 10 << 20});
  auto s = b.create_stream(0);
  auto dev = b.alloc_device(0, 4096);
  ASSERT_TRUE(s.ok() && dev.ok());
  std::vector<uint8_t> big(4096, 0xAA), small(16, 0x55);
  ASSERT_OK(b.copy_to_device_async(*dev, big.data(), big.size(), *s));
  ASSERT_OK(b.copy_to_device_async(*dev, small.data(), small.size(), *s));
  auto ev = b.record_event(*s);
  ASSERT_OK(ev);
  ASSERT_OK(b.wait_event(*ev));
  std::vector<uint8_t> back(4096);
  ASSERT_OK(b.copy_to_host(back.data(), *dev, back.size(), 0));
  EXPECT_EQ(back[0], 0x55);
  EXPECT_EQ(back[15], 0x55);
  EXPECT_EQ(back[16], 0xAA);
  EXPECT_EQ(b.max_inflight_bytes(), 4096u + 16u);
  b.free_device(0, *dev);
}

TEST(FakeBackend, RejectsBadArguments) {
  FakeDeviceBackend b(FakeDeviceOptions{.devices = 1, .memory_per_device = 4096, .copy_bytes_per_s = 0});
  auto s = b.create_stream(0);
  auto dev = b.alloc_device(0, 64);
  ASSERT_TRUE(s.ok() && dev.ok());
  uint8_t host[128] = {};
  // Past the end of the allocation (capacity is 256 bytes).
  Status st = b.copy_to_device_async(static_cast<uint8_t*>(*dev) + 200, host, 100, *s);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_EQ(st.reason(), "InvalidDevicePointer");
  // A host pointer is not device memory.
  st = b.copy_to_device_async(host, host, 8, *s);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  st = b.copy_to_device_async(*dev, host, 8, 9999);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_EQ(st.reason(), "InvalidStream");
  st = b.convert_async(*dev, Dtype::I32, *dev, Dtype::F32, 1, *s);
  EXPECT_EQ(st.code(), Code::kUnsupported);
  EXPECT_EQ(st.reason(), "UnsupportedConversion");
  st = b.convert_async(*dev, Dtype::F32, *dev, Dtype::F64, 1, *s);
  EXPECT_EQ(st.code(), Code::kUnsupported);
  EXPECT_FALSE(b.create_stream(1).ok());
  EXPECT_FALSE(b.wait_event(12345).ok());
  b.free_device(0, *dev);
}

TEST(FakeBackend, HandCheckedConversions) {
  FakeDeviceBackend b;
  testing_device::ExpectHandCases(b, 0);
}

// The host rules the fake backend (and the CUDA kernels) use, against
// independent oracles over every 8- and 16-bit code.
TEST(FakeBackend, EveryFp8CodeMatchesTheCpuLoader) {
  FakeDeviceBackend b;
  auto s = b.create_stream(0);
  auto src = b.alloc_device(0, 256);
  auto f32 = b.alloc_device(0, 256 * 4);
  auto bf16 = b.alloc_device(0, 256 * 2);
  ASSERT_TRUE(s.ok() && src.ok() && f32.ok() && bf16.ok());
  std::vector<uint8_t> codes(256);
  for (int i = 0; i < 256; ++i) codes[i] = static_cast<uint8_t>(i);
  for (auto [d, fmt] :
       {std::pair{Dtype::F8_E4M3, convert::Fp8::kE4M3FN}, std::pair{Dtype::F8_E5M2, convert::Fp8::kE5M2}}) {
    ASSERT_OK(b.copy_to_device_async(*src, codes.data(), 256, *s));
    ASSERT_OK(b.convert_async(*f32, Dtype::F32, *src, d, 256, *s));
    ASSERT_OK(b.convert_async(*bf16, Dtype::BF16, *src, d, 256, *s));
    std::vector<uint32_t> got32(256);
    std::vector<uint16_t> got16(256);
    ASSERT_OK(b.copy_to_host(got32.data(), *f32, 256 * 4, 0));
    ASSERT_OK(b.copy_to_host(got16.data(), *bf16, 256 * 2, 0));
    for (int c = 0; c < 256; ++c) {
      uint8_t code = static_cast<uint8_t>(c);
      uint16_t want16 = 0;
      convert::Fp8ToBF16(fmt, &code, &want16, 1);
      EXPECT_EQ(got32[c], convert::Fp8ToF32Bits(fmt, code)) << safetensors::DtypeName(d) << " code " << c;
      EXPECT_EQ(got16[c], want16) << safetensors::DtypeName(d) << " code " << c;
    }
  }
}

TEST(FakeBackend, EveryHalfCodeMatchesTheCompilersFloat16) {
  FakeDeviceBackend b;
  auto s = b.create_stream(0);
  auto src = b.alloc_device(0, 65536 * 2);
  auto f32 = b.alloc_device(0, 65536 * 4);
  auto bf16 = b.alloc_device(0, 65536 * 2);
  ASSERT_TRUE(s.ok() && src.ok() && f32.ok() && bf16.ok());
  std::vector<uint16_t> codes(65536);
  for (uint32_t i = 0; i < 65536; ++i) codes[i] = static_cast<uint16_t>(i);
  ASSERT_OK(b.copy_to_device_async(*src, codes.data(), 65536 * 2, *s));
  ASSERT_OK(b.convert_async(*f32, Dtype::F32, *src, Dtype::F16, 65536, *s));
  ASSERT_OK(b.convert_async(*bf16, Dtype::BF16, *src, Dtype::F16, 65536, *s));
  std::vector<uint32_t> got32(65536);
  std::vector<uint16_t> got16(65536);
  ASSERT_OK(b.copy_to_host(got32.data(), *f32, 65536 * 4, 0));
  ASSERT_OK(b.copy_to_host(got16.data(), *bf16, 65536 * 2, 0));
  int bad = 0;
  for (uint32_t h = 0; h < 65536 && bad < 10; ++h) {
    uint32_t want = oracle::F16ToF32(static_cast<uint16_t>(h));
    if (got32[h] != want || got16[h] != oracle::F32ToBF16(want)) {
      ++bad;
      ADD_FAILURE() << std::hex << "half 0x" << h << ": f32 0x" << got32[h] << " (want 0x" << want << "), bf16 0x"
                    << got16[h] << " (want 0x" << oracle::F32ToBF16(want) << ")";
    }
  }
}

TEST(FakeBackend, FloatToHalfAndBfloat16MatchOraclesOnASpreadSample) {
  // 2^32 / 4093 ≈ 1M values covering every exponent, plus the tie cases.
  FakeDeviceBackend b(FakeDeviceOptions{.devices = 1, .memory_per_device = 64 << 20, .copy_bytes_per_s = 0});
  std::vector<uint32_t> in;
  for (uint64_t x = 0; x < (1ull << 32); x += 4093) in.push_back(static_cast<uint32_t>(x));
  for (uint32_t e = 0; e < 512; ++e)
    for (uint32_t low : {0x0FFFu, 0x1000u, 0x1001u, 0x3000u, 0x7FFFu, 0x8000u, 0x8001u, 0x18000u})
      in.push_back((e << 23) | low);
  const uint64_t n = in.size();
  auto s = b.create_stream(0);
  auto src = b.alloc_device(0, n * 4);
  auto f16 = b.alloc_device(0, n * 2);
  auto bf16 = b.alloc_device(0, n * 2);
  ASSERT_TRUE(s.ok() && src.ok() && f16.ok() && bf16.ok());
  ASSERT_OK(b.copy_to_device_async(*src, in.data(), n * 4, *s));
  ASSERT_OK(b.convert_async(*f16, Dtype::F16, *src, Dtype::F32, n, *s));
  ASSERT_OK(b.convert_async(*bf16, Dtype::BF16, *src, Dtype::F32, n, *s));
  std::vector<uint16_t> got_h(n), got_b(n);
  ASSERT_OK(b.copy_to_host(got_h.data(), *f16, n * 2, 0));
  ASSERT_OK(b.copy_to_host(got_b.data(), *bf16, n * 2, 0));
  int bad = 0;
  for (uint64_t i = 0; i < n && bad < 10; ++i) {
    if (got_h[i] != oracle::F32ToF16(in[i]) || got_b[i] != oracle::F32ToBF16(in[i])) {
      ++bad;
      ADD_FAILURE() << std::hex << "f32 0x" << in[i] << ": f16 0x" << got_h[i] << " (want 0x"
                    << oracle::F32ToF16(in[i]) << "), bf16 0x" << got_b[i] << " (want 0x"
                    << oracle::F32ToBF16(in[i]) << ")";
    }
  }
}

}  // namespace
}  // namespace hubload
