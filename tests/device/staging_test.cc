// StagingLoader with the fake device: bytes, conversions, piece cutting, ring
// ordering, back-pressure, stream alternation, errors and cleanup. Expected
// values are the shard's own bytes, hand computations, or oracle.h.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "hubload/device.h"
#include "loader/device/fake_backend.h"
#include "tests/device/staging_checks.h"
#include "testing/status_matchers.h"

namespace hubload {
namespace {

using safetensors::Dtype;
using testing_device::Everything;
using testing_device::MakeShard;
using testing_device::MemoryReader;
using testing_device::PatternBytes;
using testing_device::Shard;
using testing_device::Spec;

const Device kCuda0{Device::Kind::kCuda, 0};
const Device kCuda1{Device::Kind::kCuda, 1};
const Device kCpu{Device::Kind::kCpu, 0};

std::shared_ptr<FakeDeviceBackend> Fake(int devices = 1, uint64_t memory = 64 << 20, uint64_t rate = 0) {
  return std::make_shared<FakeDeviceBackend>(
      FakeDeviceOptions{.devices = devices, .memory_per_device = memory, .copy_bytes_per_s = rate});
}

StagingOptions Opts(uint64_t buffer_bytes, int buffers = 4, int streams = 2) {
  StagingOptions o;
  o.buffer_bytes = buffer_bytes;
  o.num_buffers = buffers;
  o.num_streams = streams;
  return o;
}

std::vector<uint8_t> F32Bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST(Staging, EveryDtypeIsCopiedByteExact) {
  auto b = Fake();
  testing_device::ExpectEveryDtypeByteExact(b, kCuda0, Opts(1000));  // tensors of up to 24 KB: many pieces
}

TEST(Staging, EveryDtypeByteExactThroughOneBigBuffer) {
  auto b = Fake();
  testing_device::ExpectEveryDtypeByteExact(b, kCuda0, Opts(1 << 20, 2, 2));
}

TEST(Staging, EveryConversionMatchesTheOracle) {
  auto b = Fake(1, 256 << 20);
  // 4097-byte buffers: F32 pieces of 4096 bytes, 16-bit pieces of 4096, fp8 of 4097.
  testing_device::ExpectConversionsMatchOracle(b, kCuda0, 4097);
}

TEST(Staging, TensorLargerThanABufferIsCutIntoPieces) {
  auto b = Fake();
  Shard sh = MakeShard({{"big", Dtype::U8, {1000}, PatternBytes(1000, 5)}});
  auto loader = StagingLoader::Create(b, Opts(64, 3));
  ASSERT_OK(loader);
  DeviceStateDict dict(b);
  ASSERT_OK((*loader)->LoadShard("s", sh.header, MemoryReader(sh), Everything(kCuda0), &dict));
  auto back = dict.CopyToHost(dict.tensors().at(0));
  ASSERT_OK(back);
  EXPECT_EQ(*back, sh.Bytes("big"));
  std::vector<uint64_t> sizes;
  for (const auto& e : b->log())
    if (e.op == FakeDeviceEvent::Op::kCopy) sizes.push_back(e.bytes);
  ASSERT_EQ(sizes.size(), 16u);  // 15 × 64 + 40
  uint64_t total = 0;
  for (uint64_t s : sizes) total += s;
  EXPECT_EQ(total, 1000u);
  EXPECT_EQ(std::count(sizes.begin(), sizes.end(), 64u), 15);
  EXPECT_EQ(std::count(sizes.begin(), sizes.end(), 40u), 1);
  EXPECT_EQ((*loader)->stats().bytes_read, 1000u);
  EXPECT_EQ((*loader)->stats().bytes_copied, 1000u);
}

TEST(Staging, ConvertedPiecesHoldWholeElements) {
  // 70-byte buffers and F32 → F16: pieces of 68 bytes (17 elements), never
  // a split element. Values 0..99 are exact in half precision: k → the half
  // with exponent floor(log2 k) and the remaining bits as mantissa.
  auto b = Fake();
  std::vector<float> v(100);
  for (int i = 0; i < 100; ++i) v[i] = static_cast<float>(i);
  Shard sh = MakeShard({{"w", Dtype::F32, {10, 10}, F32Bytes(v)}});
  StagingOptions o = Opts(70, 2);
  o.target_dtype = TargetDtype::kF16;
  auto loader = StagingLoader::Create(b, o);
  ASSERT_OK(loader);
  DeviceStateDict dict(b);
  Status st = (*loader)->LoadShard("s", sh.header, MemoryReader(sh), Everything(kCuda0), &dict);
  ASSERT_OK(st);
  const DeviceTensor& t = dict.tensors().at(0);
  EXPECT_EQ(t.dtype, Dtype::F16);
  EXPECT_EQ(t.source_dtype, Dtype::F32);
  EXPECT_EQ(t.bytes, 200u);
  auto back = dict.CopyToHost(t);
  ASSERT_OK(back);
  std::vector<uint16_t> h(100);
  std::memcpy(h.data(), back->data(), 200);
  EXPECT_EQ(h[0], 0x0000);
  EXPECT_EQ(h[1], 0x3C00);   // 1.0
  EXPECT_EQ(h[2], 0x4000);   // 2.0
  EXPECT_EQ(h[3], 0x4200);   // 3.0 = 1.5 * 2
  EXPECT_EQ(h[17], 0x4C40);  // 17 = 1.0625 * 16: exponent 19, mantissa 64
  EXPECT_EQ(h[99], 0x5630);  // 99 = 1.546875 * 64: exponent 21, mantissa 560
  for (int i = 0; i < 100; ++i) {
    // Independent check of the rest: the half's value equals i.
    uint16_t bits = h[i];
    int e = (bits >> 10) & 31, m = bits & 1023;
    double val = e == 0 ? m / 1024.0 / 16384.0 : (1 + m / 1024.0) * std::ldexp(1.0, e - 15);
    EXPECT_EQ(val, i) << "element " << i;
  }
  for (const auto& e : b->log()) {
    if (e.op == FakeDeviceEvent::Op::kCopy || e.op == FakeDeviceEvent::Op::kConvert) {
      EXPECT_EQ(e.bytes % 4, 0u) << "a piece split an F32 element";
      EXPECT_LE(e.bytes, 68u);
    }
  }
}

TEST(Staging, RingBufferIsNeverRefilledBeforeItsCopyCompleted) {
  // Slow device (1 MB/s: a 4 KiB piece takes 4 ms): the reader, much faster,
  // runs into buffers whose copies are still queued. Each time the reader is
  // handed a buffer, every earlier copy out of that buffer must already have
  // executed (the fake device logs a copy when it has run).
  auto b = Fake(1, 64 << 20, 1 << 20);
  Shard sh = MakeShard({{"a", Dtype::F32, {4096}, PatternBytes(16384, 1)},
                        {"b", Dtype::BF16, {8192}, PatternBytes(16384, 2)},
                        {"c", Dtype::U8, {100}, PatternBytes(100, 3)}});
  auto loader = StagingLoader::Create(b, Opts(4096, 3));
  ASSERT_OK(loader);
  std::map<const void*, uint64_t> reads_into;
  int violations = 0;
  ShardReader inner = MemoryReader(sh);
  ShardReader checking = [&](uint64_t off, void* dst, uint64_t n) {
    uint64_t done = 0;
    for (const auto& e : b->log())
      if (e.op == FakeDeviceEvent::Op::kCopy && e.host_src == dst) ++done;
    if (done != reads_into[dst]) ++violations;
    ++reads_into[dst];
    return inner(off, dst, n);
  };
  DeviceStateDict dict(b);
  ASSERT_OK((*loader)->LoadShard("s", sh.header, checking, Everything(kCuda0), &dict));
  EXPECT_EQ(violations, 0);
  EXPECT_EQ(reads_into.size(), 3u);  // the three ring buffers, each reused
  for (auto& [buf, n] : reads_into) EXPECT_GE(n, 2u);
  for (const char* name : {"a", "b", "c"}) {
    auto back = dict.CopyToHost(*dict.Find(name));
    ASSERT_OK(back);
    EXPECT_EQ(*back, sh.Bytes(name)) << name;
  }
}

TEST(Staging, BackPressureBoundsBytesInFlight) {
  auto b = Fake(1, 64 << 20, 1 << 20);  // 1 MB/s
  Shard sh = MakeShard({{"w", Dtype::U8, {40000}, PatternBytes(40000, 9)}});
  StagingOptions o = Opts(2048, 4);
  auto loader = StagingLoader::Create(b, o);
  ASSERT_OK(loader);
  DeviceStateDict dict(b);
  ASSERT_OK((*loader)->LoadShard("s", sh.header, MemoryReader(sh), Everything(kCuda0), &dict));
  const auto& stats = (*loader)->stats();
  EXPECT_GT(stats.buffer_waits, 0u);
  EXPECT_GT(stats.wait_s, 0.0);
  EXPECT_LE(b->max_inflight_bytes(), 4u * 2048u);
  EXPECT_GT(b->max_inflight_bytes(), 2048u);  // more than one piece was queued at once
  auto back = dict.CopyToHost(dict.tensors().at(0));
  ASSERT_OK(back);
  EXPECT_EQ(*back, sh.Bytes("w"));
}

TEST(Staging, PiecesAlternateOverTheStreams) {
  auto b = Fake();
  Shard sh = MakeShard({{"w", Dtype::U8, {1000}, PatternBytes(1000, 4)}});
  auto loader = StagingLoader::Create(b, Opts(100, 4, 3));
  ASSERT_OK(loader);
  DeviceStateDict dict(b);
  ASSERT_OK((*loader)->LoadShard("s", sh.header, MemoryReader(sh), Everything(kCuda0), &dict));
  // kRecord entries are logged when the loader records them: enqueue order.
  std::vector<uint64_t> record_streams;
  std::set<uint64_t> copy_streams;
  for (const auto& e : b->log()) {
    if (e.op == FakeDeviceEvent::Op::kRecord) record_streams.push_back(e.stream);
    if (e.op == FakeDeviceEvent::Op::kCopy) copy_streams.insert(e.stream);
  }
  ASSERT_EQ(record_streams.size(), 10u);
  EXPECT_EQ(copy_streams.size(), 3u);
  for (size_t i = 0; i + 1 < record_streams.size(); ++i)
    EXPECT_NE(record_streams[i], record_streams[i + 1]) << "pieces " << i << " and " << i + 1;
  for (size_t i = 3; i < record_streams.size(); ++i) EXPECT_EQ(record_streams[i], record_streams[i - 3]);
}

TEST(Staging, ReaderErrorNamesShardAndTensorAndFreesEverything) {
  auto b = Fake(1, 1 << 20);
  Shard sh = MakeShard({{"first", Dtype::F32, {100}, PatternBytes(400, 1)},
                        {"second.weight", Dtype::F32, {100}, PatternBytes(400, 2)}});
  const uint64_t second_begin = sh.header.data_start + sh.header.Find("second.weight")->begin;
  ShardReader inner = MemoryReader(sh);
  ShardReader failing = [&](uint64_t off, void* dst, uint64_t n) -> Status {
    if (off + n > second_begin + 100) return Status(Code::kIOError, "disk on fire", "ReadFailed");
    return inner(off, dst, n);
  };
  auto loader = StagingLoader::Create(b, Opts(64));
  ASSERT_OK(loader);
  DeviceStateDict dict(b);
  Status st = (*loader)->LoadShard("model-00002.safetensors", sh.header, failing, Everything(kCuda0), &dict);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kIOError);
  EXPECT_EQ(st.reason(), "ReadFailed");
  EXPECT_NE(st.message().find("second.weight"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("model-00002.safetensors"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("disk on fire"), std::string::npos) << st.message();
  EXPECT_EQ(st.context().tensor, "second.weight");
  EXPECT_TRUE(dict.tensors().empty());
  EXPECT_EQ(*b->free_memory(0), 1u << 20);
}

TEST(Staging, OutOfDeviceMemoryIsClearAndKeepsEarlierShards) {
  auto b = Fake(1, 1000);
  Shard first = MakeShard({{"x", Dtype::U8, {200}, PatternBytes(200, 1)}});
  Shard second = MakeShard({{"a", Dtype::U8, {300}, PatternBytes(300, 2)},
                            {"b", Dtype::U8, {300}, PatternBytes(300, 3)},
                            {"c", Dtype::U8, {300}, PatternBytes(300, 4)}});
  auto loader = StagingLoader::Create(b, Opts(128));
  ASSERT_OK(loader);
  DeviceStateDict dict(b);
  ASSERT_OK((*loader)->LoadShard("one", first.header, MemoryReader(first), Everything(kCuda0), &dict));
  Status st = (*loader)->LoadShard("two", second.header, MemoryReader(second), Everything(kCuda0), &dict);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kInternal);
  EXPECT_EQ(st.reason(), "DeviceOutOfMemory");
  EXPECT_NE(st.message().find("'c'"), std::string::npos) << st.message();  // 200 + 300 + 300 + 300 > 1000
  EXPECT_NE(st.message().find("two"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("out of memory"), std::string::npos) << st.message();
  ASSERT_EQ(dict.tensors().size(), 1u);  // shard "one" stays
  EXPECT_EQ(dict.tensors()[0].name, "x");
  EXPECT_EQ(*b->free_memory(0), 800u);
  auto back = dict.CopyToHost(dict.tensors()[0]);
  ASSERT_OK(back);
  EXPECT_EQ(*back, first.Bytes("x"));
}

TEST(Staging, CpuPlacementReadsStraightIntoHostMemory) {
  auto b = Fake();
  std::vector<float> v = {1.0f, -2.0f, 0.5f, 65504.0f};
  Shard sh = MakeShard({{"gpu.w", Dtype::F32, {4}, F32Bytes(v)},
                        {"cpu.w", Dtype::F32, {4}, F32Bytes(v)},
                        {"cpu.ids", Dtype::I64, {3}, PatternBytes(24, 8)}});
  StagingOptions o = Opts(4096);
  o.target_dtype = TargetDtype::kBF16;
  auto loader = StagingLoader::Create(b, o);
  ASSERT_OK(loader);
  DeviceStateDict dict(b);
  auto place = [](const std::string& name) { return name.rfind("cpu.", 0) == 0 ? kCpu : kCuda0; };
  ASSERT_OK((*loader)->LoadShard("s", sh.header, MemoryReader(sh), place, &dict));
  // 1.0 → 0x3F80, -2.0 → 0xC000, 0.5 → 0x3F00, 65504 = 0x477FE000 → 0x4780 (rounds up: low half 0xE000 > 0x8000).
  const uint16_t want[] = {0x3F80, 0xC000, 0x3F00, 0x4780};
  for (const char* name : {"gpu.w", "cpu.w"}) {
    const DeviceTensor* t = dict.Find(name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->dtype, Dtype::BF16);
    ASSERT_EQ(t->bytes, 8u);
    auto back = dict.CopyToHost(*t);
    ASSERT_OK(back);
    EXPECT_EQ(std::memcmp(back->data(), want, 8), 0) << name;
  }
  const DeviceTensor* cpu = dict.Find("cpu.w");
  EXPECT_TRUE(cpu->device == kCpu);
  EXPECT_EQ(std::memcmp(cpu->data, want, 8), 0);  // host memory, readable in place
  const DeviceTensor* ids = dict.Find("cpu.ids");
  EXPECT_EQ(ids->dtype, Dtype::I64);
  EXPECT_EQ(std::memcmp(ids->data, sh.Bytes("cpu.ids").data(), 24), 0);
  // Only the GPU tensor went through the device.
  uint64_t copied = 0;
  for (const auto& e : b->log())
    if (e.op == FakeDeviceEvent::Op::kCopy) copied += e.bytes;
  EXPECT_EQ(copied, 16u);
  EXPECT_EQ((*loader)->stats().bytes_copied, 16u);
  EXPECT_EQ((*loader)->stats().bytes_read, 16u + 16u + 24u);
}

TEST(Staging, TwoDevicesAndExactMemoryAccounting) {
  auto b = Fake(2, 1 << 20);
  Shard sh = MakeShard({{"l0.w", Dtype::F16, {300}, PatternBytes(600, 1)},
                        {"l1.w", Dtype::F16, {500}, PatternBytes(1000, 2)},
                        {"l1.b", Dtype::I8, {7}, PatternBytes(7, 3)}});
  {
    auto loader = StagingLoader::Create(b, Opts(256));
    ASSERT_OK(loader);
    DeviceStateDict dict(b);
    auto place = [](const std::string& n) { return n.rfind("l1.", 0) == 0 ? kCuda1 : kCuda0; };
    ASSERT_OK((*loader)->LoadShard("s", sh.header, MemoryReader(sh), place, &dict));
    EXPECT_EQ(*b->free_memory(0), (1u << 20) - 600u);
    EXPECT_EQ(*b->free_memory(1), (1u << 20) - 1007u);
    EXPECT_TRUE(dict.Find("l1.w")->device == kCuda1);
    EXPECT_TRUE(dict.Find("l0.w")->device == kCuda0);
    for (const char* name : {"l0.w", "l1.w", "l1.b"}) {
      auto back = dict.CopyToHost(*dict.Find(name));
      ASSERT_OK(back);
      EXPECT_EQ(*back, sh.Bytes(name)) << name;
    }
    // Moving the dict moves ownership; the moved-to dict frees on destruction.
    DeviceStateDict moved(std::move(dict));
    EXPECT_EQ(moved.tensors().size(), 3u);
    DeviceStateDict other(b);
    other = std::move(moved);
    EXPECT_EQ(*b->free_memory(1), (1u << 20) - 1007u);
  }
  EXPECT_EQ(*b->free_memory(0), 1u << 20);
  EXPECT_EQ(*b->free_memory(1), 1u << 20);
}

TEST(Staging, ConversionScratchIsFreedWithTheLoader) {
  auto b = Fake(1, 1 << 20);
  Shard sh = MakeShard({{"w", Dtype::BF16, {64}, PatternBytes(128, 1)}});
  StagingOptions o = Opts(1024, 3);
  o.target_dtype = TargetDtype::kF32;
  {
    auto loader = StagingLoader::Create(b, o);
    ASSERT_OK(loader);
    DeviceStateDict dict(b);
    ASSERT_OK((*loader)->LoadShard("s", sh.header, MemoryReader(sh), Everything(kCuda0), &dict));
    EXPECT_EQ(dict.tensors()[0].bytes, 256u);
    // bf16 → f32 is exact: each f32 is the bf16 bits shifted up by 16.
    auto back = dict.CopyToHost(dict.tensors()[0]);
    ASSERT_OK(back);
    auto src = sh.Bytes("w");
    for (int i = 0; i < 64; ++i) {
      uint32_t got;
      std::memcpy(&got, back->data() + 4 * i, 4);
      EXPECT_EQ(got, (static_cast<uint32_t>(src[2 * i]) << 16) | (static_cast<uint32_t>(src[2 * i + 1]) << 24));
    }
  }
  EXPECT_EQ(*b->free_memory(0), 1u << 20);
}

TEST(Staging, EmptyAndScalarTensors) {
  auto b = Fake();
  Shard sh = MakeShard({{"empty", Dtype::F32, {0, 4}, {}}, {"scalar", Dtype::I32, {}, {1, 2, 3, 4}}});
  auto loader = StagingLoader::Create(b, Opts(64));
  ASSERT_OK(loader);
  DeviceStateDict dict(b);
  ASSERT_OK((*loader)->LoadShard("s", sh.header, MemoryReader(sh), Everything(kCuda0), &dict));
  const DeviceTensor* e = dict.Find("empty");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->bytes, 0u);
  EXPECT_EQ(e->shape, (std::vector<uint64_t>{0, 4}));
  const DeviceTensor* s = dict.Find("scalar");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->shape.empty());
  auto back = dict.CopyToHost(*s);
  ASSERT_OK(back);
  EXPECT_EQ(*back, (std::vector<uint8_t>{1, 2, 3, 4}));
}

TEST(Staging, InvalidOptionsAndPlacements) {
  auto b = Fake();
  struct Bad {
    StagingOptions o;
    const char* what;
  };
  // A non-floating target dtype is not representable (StagingOptions::target_dtype is a TargetDtype).
  StagingOptions one_buffer = Opts(64, 1), one_stream = Opts(64, 4, 1), tiny = Opts(4);
  for (const Bad& c : {Bad{one_buffer, "num_buffers"}, Bad{one_stream, "num_streams"}, Bad{tiny, "buffer_bytes"}}) {
    auto l = StagingLoader::Create(b, c.o);
    ASSERT_FALSE(l.ok()) << c.what;
    EXPECT_EQ(l.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(l.status().reason(), "InvalidOptions");
    EXPECT_NE(l.status().message().find(c.what), std::string::npos) << l.status().message();
  }
  EXPECT_FALSE(StagingLoader::Create(nullptr, Opts(64)).ok());

  Shard sh = MakeShard({{"layer.w", Dtype::U8, {10}, PatternBytes(10, 1)}});
  auto loader = StagingLoader::Create(b, Opts(64));
  ASSERT_OK(loader);
  DeviceStateDict dict(b);
  Status st =
      (*loader)->LoadShard("s", sh.header, MemoryReader(sh), Everything(Device{Device::Kind::kCuda, 3}), &dict);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_EQ(st.reason(), "InvalidDevice");
  EXPECT_NE(st.message().find("layer.w"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("cuda:3"), std::string::npos) << st.message();
  st = (*loader)->LoadShard("s", sh.header, MemoryReader(sh), Everything(Device{Device::Kind::kDisk, 0}), &dict);
  EXPECT_EQ(st.reason(), "UnsupportedDevice");
  DeviceStateDict foreign(Fake());
  st = (*loader)->LoadShard("s", sh.header, MemoryReader(sh), Everything(kCuda0), &foreign);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_TRUE(dict.tensors().empty());
  EXPECT_TRUE(foreign.tensors().empty());
}

TEST(Staging, StatsAccumulateOverShards) {
  auto b = Fake();
  Shard one = MakeShard({{"a", Dtype::F32, {25}, PatternBytes(100, 1)}});
  Shard two = MakeShard({{"b", Dtype::F32, {50}, PatternBytes(200, 2)}});
  auto loader = StagingLoader::Create(b, Opts(64));
  ASSERT_OK(loader);
  DeviceStateDict dict(b);
  ASSERT_OK((*loader)->LoadShard("1", one.header, MemoryReader(one), Everything(kCuda0), &dict));
  ASSERT_OK((*loader)->LoadShard("2", two.header, MemoryReader(two), Everything(kCuda0), &dict));
  EXPECT_EQ((*loader)->stats().bytes_read, 300u);
  EXPECT_EQ((*loader)->stats().bytes_copied, 300u);
  ASSERT_EQ(dict.tensors().size(), 2u);
  EXPECT_EQ(dict.tensors()[0].name, "a");
  EXPECT_EQ(dict.tensors()[1].name, "b");
}

TEST(Staging, CudaBackendIsCleanlyUnavailableWithoutAGpu) {
  auto cuda = MakeCudaBackend();
  if (cuda.ok()) GTEST_SKIP() << "a CUDA device is present (" << (*cuda)->device_count() << "); see gpu_test.cc";
  EXPECT_EQ(cuda.status().code(), Code::kUnsupported);
  EXPECT_TRUE(cuda.status().reason() == "NoCudaDevice" || cuda.status().reason() == "BuiltWithoutCuda")
      << cuda.status().ToString();
  EXPECT_FALSE(cuda.status().message().empty());
}

}  // namespace
}  // namespace hubload
