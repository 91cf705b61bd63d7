// The CUDA backend on a real GPU: every tensor's bytes on the device equal the
// checkpoint's (copied back with copy_to_host), for every dtype and every
// conversion (expected values: the file bytes, hand computations, oracle.h).
// Skips with the backend's message where there is no GPU or no CUDA build.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "hubload/device.h"
#include "testing/util.h"
#include "tests/device/staging_checks.h"
#include "testing/status_matchers.h"

namespace hubload {
namespace {

using safetensors::Dtype;

std::shared_ptr<DeviceBackend> CudaOrSkip(std::string* why) {
  auto b = MakeCudaBackend();
  if (!b.ok()) {
    *why = "no GPU for the CUDA backend: " + b.status().ToString();
    return nullptr;
  }
  return *b;
}

#define REQUIRE_GPU(var)                              \
  std::string var##_why;                              \
  auto var = CudaOrSkip(&var##_why);                  \
  if (!var) GTEST_SKIP() << var##_why

const Device kCuda0{Device::Kind::kCuda, 0};

TEST(Gpu, BackendBasics) {
  REQUIRE_GPU(b);
  EXPECT_EQ(b->name(), "cuda");
  EXPECT_GE(b->device_count(), 1);
  auto free0 = b->free_memory(0);
  ASSERT_OK(free0);
  EXPECT_GT(*free0, 0u);
  auto p = b->alloc_device(0, 1000);
  ASSERT_OK(p);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % 256, 0u);
  b->free_device(0, *p);
  // An impossible allocation is a clear out-of-memory error, not a crash.
  auto huge = b->alloc_device(0, 1ull << 50);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().reason(), "DeviceOutOfMemory") << huge.status().ToString();
  EXPECT_NE(huge.status().message().find("cudaMalloc"), std::string::npos) << huge.status().message();
  // The backend still works after the failed allocation.
  auto q = b->alloc_device(0, 64);
  ASSERT_OK(q);
  b->free_device(0, *q);
  auto bad = b->alloc_device(b->device_count(), 64);
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
}

TEST(Gpu, HandCheckedConversions) {
  REQUIRE_GPU(b);
  testing_device::ExpectHandCases(*b, 0);
}

TEST(Gpu, EveryDtypeIsCopiedByteExact) {
  REQUIRE_GPU(b);
  StagingOptions o;
  o.buffer_bytes = 1000;  // many pieces per tensor, odd sizes
  o.num_buffers = 4;
  testing_device::ExpectEveryDtypeByteExact(b, kCuda0, o);
  o.buffer_bytes = 16 << 20;  // the default ring: one piece per tensor
  o.num_buffers = 8;
  testing_device::ExpectEveryDtypeByteExact(b, kCuda0, o);
}

TEST(Gpu, EveryConversionMatchesTheOracle) {
  REQUIRE_GPU(b);
  testing_device::ExpectConversionsMatchOracle(b, kCuda0, 4097);   // pieces, element-aligned
  testing_device::ExpectConversionsMatchOracle(b, kCuda0, 1 << 20);  // whole tensors
}

TEST(Gpu, ShardFileThroughPreadOnAllDevices) {
  // A real file read with pread into the pinned ring, tensors spread over
  // every GPU round-robin, 64 KiB buffers.
  REQUIRE_GPU(b);
  testing::TempDir dir;
  std::vector<testing_device::Spec> specs;
  for (int i = 0; i < 12; ++i)
    specs.push_back({"layer." + std::to_string(i) + ".weight", i % 2 ? Dtype::BF16 : Dtype::F32,
                     {static_cast<uint64_t>(1000 + 777 * i)},
                     testing_device::PatternBytes((1000 + 777 * i) * (i % 2 ? 2 : 4), static_cast<uint32_t>(i))});
  testing_device::Shard sh = testing_device::MakeShard(specs);
  const std::string path = dir.str() + "/model.safetensors";
  testing::WriteFileBytes(path, sh.file.data(), sh.file.size());
  int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ShardReader reader = [fd](uint64_t off, void* dst, uint64_t n) -> Status {
    uint64_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd, static_cast<char*>(dst) + done, n - done, static_cast<off_t>(off + done));
      if (r <= 0) return Status(Code::kIOError, "pread failed");
      done += static_cast<uint64_t>(r);
    }
    return Status::Ok();
  };
  StagingOptions o;
  o.buffer_bytes = 64 << 10;
  o.num_buffers = 4;
  auto loader = StagingLoader::Create(b, o);
  ASSERT_OK(loader);
  DeviceStateDict dict(b);
  const int n = b->device_count();
  int k = 0;
  auto place = [&](const std::string&) { return Device{Device::Kind::kCuda, k++ % n}; };
  Status st = (*loader)->LoadShard(path, sh.header, reader, place, &dict);
  ::close(fd);
  ASSERT_OK(st);
  for (const auto& info : sh.header.tensors) {
    const DeviceTensor* t = dict.Find(info.name);
    ASSERT_NE(t, nullptr);
    auto back = dict.CopyToHost(*t);
    ASSERT_OK(back);
    EXPECT_TRUE(*back == sh.Bytes(info.name)) << info.name;
  }
  EXPECT_EQ((*loader)->stats().bytes_read, sh.header.data_size());
}

TEST(Gpu, OutOfMemoryDuringLoadFreesWhatWasAllocated) {
  REQUIRE_GPU(b);
  auto free_before = b->free_memory(0);
  ASSERT_OK(free_before);
  // A header that claims a tensor larger than the GPU: built by hand (no data
  // behind it is read, since the allocation fails first).
  safetensors::Header h;
  h.data_start = 8;
  safetensors::TensorInfo small{"small", Dtype::U8, {4096}, 0, 4096};
  const uint64_t huge_elems = (*free_before + (64ull << 30)) / 4;
  safetensors::TensorInfo huge{"huge", Dtype::F32, {huge_elems}, 4096, 4096 + huge_elems * 4};
  h.tensors = {small, huge};
  h.file_size = 8 + huge.end;
  std::vector<uint8_t> bytes(4096, 7);
  ShardReader reader = [&](uint64_t off, void* dst, uint64_t n) -> Status {
    if (off < 8 || off - 8 + n > bytes.size()) return Status(Code::kIOError, "read past the test data");
    std::memcpy(dst, bytes.data() + (off - 8), n);
    return Status::Ok();
  };
  StagingOptions o;
  o.buffer_bytes = 1 << 20;
  o.num_buffers = 2;
  auto loader = StagingLoader::Create(b, o);
  ASSERT_OK(loader);
  DeviceStateDict dict(b);
  Status st = (*loader)->LoadShard("huge.safetensors", h, reader, [](const std::string&) { return kCuda0; }, &dict);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.reason(), "DeviceOutOfMemory") << st.ToString();
  EXPECT_NE(st.message().find("huge"), std::string::npos) << st.message();
  EXPECT_TRUE(dict.tensors().empty());
}

}  // namespace
}  // namespace hubload
