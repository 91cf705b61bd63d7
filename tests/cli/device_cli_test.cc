// `hubload load --device / --device-map / --plan-only`: the device pipeline
// through the CLI, on a small sharded model written byte by byte here
// (tests/pipeline/fixtures.h, independent of hubload's writer). Expected plans
// are worked out by hand in the comments; loaded bytes are checked against the
// sha256 of the tensors' bytes sliced out of the files on disk. The fake device
// backend (--device-backend fake) runs the whole path without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "tests/pipeline/fixtures.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace hubload::device_cli_test {
namespace {

namespace fs = std::filesystem;
using hubload::pipeline_test::MakeTensor;
using hubload::pipeline_test::RawTensor;
using hubload::pipeline_test::ServedStore;
using hubload::pipeline_test::WriteSharded;
using hubload::testing::HubloadBin;
using hubload::testing::ReadFileBytes;
using hubload::testing::RunCommand;
using hubload::testing::Sha256Hex;
using hubload::testing::TempDir;
using json = nlohmann::ordered_json;  // keeps the printed order of device_map

// Shard 1: embed.weight F32[10] = 40 B, layers.0.a F32[5] = 20 B, layers.0.b 20 B.
// Shard 2: layers.1.a 20 B, layers.1.b 20 B, head.weight 20 B.       Total 140 B.
// F32 values are k/64 with |k| <= 128: exactly representable in bf16.
const char* kShard1 = "model-00001-of-00002.safetensors";
const char* kShard2 = "model-00002-of-00002.safetensors";

void WriteModel(const fs::path& dir) {
  WriteSharded(dir, "model.safetensors.index.json",
               {{kShard1,
                 {MakeTensor("embed.weight", "F32", {10}, 1), MakeTensor("layers.0.a.weight", "F32", {5}, 2),
                  MakeTensor("layers.0.b.weight", "F32", {5}, 3)}},
                {kShard2,
                 {MakeTensor("layers.1.a.weight", "F32", {5}, 4), MakeTensor("layers.1.b.weight", "F32", {5}, 5),
                  MakeTensor("head.weight", "F32", {5}, 6)}}});
}

/// Every tensor's bytes as stored in `file`, decoded here from the raw file
/// (u64 header length, JSON header, data section).
std::map<std::string, std::vector<uint8_t>> TensorBytesOf(const fs::path& file) {
  std::vector<uint8_t> b = ReadFileBytes(file);
  std::map<std::string, std::vector<uint8_t>> out;
  if (b.size() < 8) return out;
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(b[i]) << (8 * i);
  json h = json::parse(std::string(b.begin() + 8, b.begin() + 8 + static_cast<std::ptrdiff_t>(n)));
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    uint64_t begin = it.value()["data_offsets"][0], end = it.value()["data_offsets"][1];
    out[it.key()] = std::vector<uint8_t>(b.begin() + static_cast<std::ptrdiff_t>(8 + n + begin),
                                         b.begin() + static_cast<std::ptrdiff_t>(8 + n + end));
  }
  return out;
}

/// Absolute byte offset of every tensor's data in `file` (same independent decoding).
std::map<std::string, uint64_t> DataOffsetsOf(const fs::path& file) {
  std::vector<uint8_t> b = ReadFileBytes(file);
  std::map<std::string, uint64_t> out;
  if (b.size() < 8) return out;
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(b[i]) << (8 * i);
  json h = json::parse(std::string(b.begin() + 8, b.begin() + 8 + static_cast<std::ptrdiff_t>(n)));
  for (auto it = h.begin(); it != h.end(); ++it)
    if (it.key() != "__metadata__") out[it.key()] = 8 + n + it.value()["data_offsets"][0].get<uint64_t>();
  return out;
}

std::map<std::string, std::vector<uint8_t>> ModelBytes(const fs::path& dir) {
  auto a = TensorBytesOf(dir / kShard1);
  auto b = TensorBytesOf(dir / kShard2);
  a.insert(b.begin(), b.end());
  return a;
}

/// device_map of the JSON report as (prefix, device) pairs in printed order.
std::vector<std::pair<std::string, std::string>> MapOf(const json& j) {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = j["device"]["device_map"].begin(); it != j["device"]["device_map"].end(); ++it)
    out.emplace_back(it.key(), it.value().get<std::string>());
  return out;
}

std::map<std::string, std::string> TensorDevices(const json& j) {
  std::map<std::string, std::string> out;
  for (const auto& t : j["tensors"]) out[t["name"]] = t["device"];
  return out;
}

struct CliRun {
  int rc = -1;
  std::string out, err;
};
CliRun Hubload(const std::string& args) {
  CliRun r;
  r.rc = RunCommand(HubloadBin() + " " + args, &r.out, &r.err);
  return r;
}
CliRun Load(const std::string& args) { return Hubload("load " + args); }

using Pairs = std::vector<std::pair<std::string, std::string>>;
using Bytes = std::map<std::string, uint64_t>;

TEST(DeviceCli, PlanOnlyNeedsNoGpuAndFollowsMaxMemory) {
  TempDir d;
  WriteModel(d.path() / "m");
  // auto with one GPU limited to 70 B (hypothetical without CUDA; min(70 B, free) with a GPU):
  // embed (40) -> cuda:0; layers (80) splits; layers.0 (40 > 30 left) splits: layers.0.a (20) -> cuda:0 (60),
  // layers.0.b (20 > 10) -> cpu; layers.1 and head -> cpu (80 B).
  CliRun r = Load((d.path() / "m").string() + " --device-map auto --max-memory 0=70B,cpu=1000B --plan-only --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(MapOf(j), (Pairs{{"embed", "cuda:0"},
                             {"layers.0.a", "cuda:0"},
                             {"layers.0.b", "cpu"},
                             {"layers.1", "cpu"},
                             {"head", "cpu"}}));
  EXPECT_EQ(j["device"]["bytes_per_device"].get<Bytes>(), (Bytes{{"cuda:0", 60}, {"cpu", 80}}));
  EXPECT_EQ(j["device"]["strategy"], "auto");
  EXPECT_EQ(j["device"]["plan_only"], true);
  ASSERT_EQ(j["tensors"].size(), 6u);
  for (const auto& t : j["tensors"]) EXPECT_FALSE(t.contains("sha256")) << t;  // nothing was loaded
  EXPECT_EQ(j["tensors"][0]["name"], "embed.weight");                          // checkpoint order
  EXPECT_EQ(j["tensors"][5]["name"], "head.weight");
}

TEST(DeviceCli, FakeGpusLoadEveryTensorWithTheFilesBytes) {
  TempDir d;
  WriteModel(d.path() / "m");
  // sequential on two fake GPUs of 60 B: embed (40) -> cuda:0; layers.0 splits: .a (20) -> cuda:0 (60, full),
  // .b -> cuda:1 (20); layers.1 (40) -> cuda:1 (60, full); head (20) -> cpu.
  CliRun r = Load((d.path() / "m").string() +
               " --device-map sequential --device-backend fake --fake-gpus 2 --fake-gpu-memory 60B --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(MapOf(j), (Pairs{{"embed", "cuda:0"},
                             {"layers.0.a", "cuda:0"},
                             {"layers.0.b", "cuda:1"},
                             {"layers.1", "cuda:1"},
                             {"head", "cpu"}}));
  EXPECT_EQ(j["device"]["bytes_per_device"].get<Bytes>(), (Bytes{{"cuda:0", 60}, {"cuda:1", 60}, {"cpu", 20}}));
  EXPECT_EQ(TensorDevices(j), (std::map<std::string, std::string>{{"embed.weight", "cuda:0"},
                                                                  {"layers.0.a.weight", "cuda:0"},
                                                                  {"layers.0.b.weight", "cuda:1"},
                                                                  {"layers.1.a.weight", "cuda:1"},
                                                                  {"layers.1.b.weight", "cuda:1"},
                                                                  {"head.weight", "cpu"}}));
  EXPECT_EQ(j["device"]["backend"], "fake");
  auto bytes = ModelBytes(d.path() / "m");
  ASSERT_EQ(bytes.size(), 6u);
  ASSERT_EQ(j["tensors"].size(), 6u);
  for (const auto& t : j["tensors"]) {
    const std::string name = t["name"];
    SCOPED_TRACE(name);
    ASSERT_TRUE(bytes.count(name));
    EXPECT_EQ(t["dtype"], "F32");
    EXPECT_EQ(t["bytes"], bytes[name].size());
    EXPECT_EQ(t["sha256"], Sha256Hex(bytes[name].data(), bytes[name].size()));
  }
}

TEST(DeviceCli, SingleFakeGpuDevice) {
  TempDir d;
  WriteModel(d.path() / "m");
  CliRun r = Load((d.path() / "m").string() + " --device cuda:0 --device-backend fake --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(MapOf(j), (Pairs{{"", "cuda:0"}}));
  EXPECT_EQ(j["device"]["bytes_per_device"].get<Bytes>(), (Bytes{{"cuda:0", 140}}));
  auto bytes = ModelBytes(d.path() / "m");
  for (const auto& t : j["tensors"])
    EXPECT_EQ(t["sha256"], Sha256Hex(bytes[t["name"]].data(), bytes[t["name"]].size())) << t["name"];
}

TEST(DeviceCli, Bf16ConversionOnFakeGpus) {
  TempDir d;
  WriteModel(d.path() / "m");
  // As bf16 every tensor halves: embed 20, layer tensors 10, head 10 (70 B). Each fake GPU has
  // 60 B + the loader's conversion scratch (8 buffers x 16 MiB = 134217728 B), which the plan keeps free.
  // sequential: embed (20) + layers (40) fill cuda:0 (60); head (10) -> cuda:1.
  CliRun r = Load((d.path() / "m").string() +
               " --dtype bf16 --device-map sequential --device-backend fake --fake-gpus 2 --fake-gpu-memory "
               "134217788B --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(MapOf(j), (Pairs{{"embed", "cuda:0"}, {"layers", "cuda:0"}, {"head", "cuda:1"}}));
  EXPECT_EQ(j["device"]["bytes_per_device"].get<Bytes>(), (Bytes{{"cuda:0", 60}, {"cuda:1", 10}}));
  // The values are exact in bf16: the bf16 bytes are the upper halves of the f32 values.
  auto bytes = ModelBytes(d.path() / "m");
  for (const auto& t : j["tensors"]) {
    const std::string name = t["name"];
    SCOPED_TRACE(name);
    EXPECT_EQ(t["dtype"], "BF16");
    EXPECT_EQ(t["source_dtype"], "F32");
    const auto& f32 = bytes[name];
    std::vector<uint8_t> bf16;
    for (size_t i = 0; i + 4 <= f32.size(); i += 4) {
      bf16.push_back(f32[i + 2]);  // little-endian: bytes 2 and 3 are the upper half
      bf16.push_back(f32[i + 3]);
    }
    EXPECT_EQ(t["bytes"], bf16.size());
    EXPECT_EQ(t["sha256"], Sha256Hex(bf16.data(), bf16.size()));
  }
}

TEST(DeviceCli, DiskTensorsStayInTheFile) {
  TempDir d;
  WriteModel(d.path() / "m");
  // cuda:0 60 B, cpu 20 B, disk listed: embed (40) and layers.0.a (20) fill cuda:0; layers.0.b (20) fills
  // cpu; layers.1 and head go to disk (60 B) and are not loaded.
  CliRun r = Load((d.path() / "m").string() +
                  " --device-map sequential --max-memory 0=60B,cpu=20B,disk=1000B --device-backend fake --fake-gpus 1 "
                  "--fake-gpu-memory 1KiB --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(MapOf(j), (Pairs{{"embed", "cuda:0"},
                             {"layers.0.a", "cuda:0"},
                             {"layers.0.b", "cpu"},
                             {"layers.1", "disk"},
                             {"head", "disk"}}));
  EXPECT_EQ(j["device"]["bytes_per_device"].get<Bytes>(), (Bytes{{"cuda:0", 60}, {"cpu", 20}, {"disk", 60}}));
  auto bytes = ModelBytes(d.path() / "m");
  for (const auto& t : j["tensors"]) {
    const std::string name = t["name"];
    SCOPED_TRACE(name);
    if (t["device"] == "disk") {
      EXPECT_FALSE(t.contains("sha256"));
    } else {
      EXPECT_EQ(t["sha256"], Sha256Hex(bytes[name].data(), bytes[name].size()));
    }
  }
  auto offsets = DataOffsetsOf(d.path() / "m" / kShard2);
  ASSERT_EQ(j["device"]["disk_tensors"].size(), 3u);
  const char* names[] = {"layers.1.a.weight", "layers.1.b.weight", "head.weight"};
  for (size_t i = 0; i < 3; ++i) {
    const auto& t = j["device"]["disk_tensors"][i];
    EXPECT_EQ(t["name"], names[i]);
    EXPECT_EQ(t["file"], (d.path() / "m" / kShard2).string());
    EXPECT_EQ(t["offset"], offsets[names[i]]);
    EXPECT_EQ(t["bytes"], 20u);
  }
}

TEST(DeviceCli, TablePrintsThePlanWithNoSplitModules) {
  TempDir d;
  WriteModel(d.path() / "m");
  // "layers.*" stays whole: embed (40) -> cuda:0 (20 left); layers.0 (40) -> cuda:1 (20 left);
  // layers.1 (40) -> cpu; head (20) -> cpu (cuda:1 is closed).
  CliRun r = Load((d.path() / "m").string() +
               " --device-map sequential --no-split 'layers.*' --device-backend fake --fake-gpus 2 "
               "--fake-gpu-memory 60B --plan-only");
  ASSERT_EQ(r.rc, 0) << r.err;
  for (const char* line : {R"(\n\s+embed\s+cuda:0\n)", R"(\n\s+layers\.0\s+cuda:1\n)", R"(\n\s+layers\.1\s+cpu\n)",
                           R"(\n\s+head\s+cpu\n)", R"(\n\s+cuda:0\s+40 B \(40 B\)\n)", R"(\n\s+cuda:1\s+40 B)",
                           R"(\n\s+cpu\s+60 B)", R"(plan only: 6 tensors in 2 file\(s\))"})
    EXPECT_TRUE(std::regex_search(r.out, std::regex(line))) << line << " not in:\n" << r.out;
}

struct FailCase {
  std::string args;                   // after `hubload load`
  std::vector<std::string> mentions;  // each must be on stderr
};
// Every case fails with `rc`; a failure of the load itself (rc 1) is one line on stderr.
void ExpectLoadFailures(const std::vector<FailCase>& cases, int rc) {
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    CliRun r = Load(c.args);
    EXPECT_EQ(r.rc, rc) << r.out << r.err;
    if (rc == 1) {
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
    for (const auto& s : c.mentions) EXPECT_NE(r.err.find(s), std::string::npos) << s << " not in: " << r.err;
  }
}

TEST(DeviceCli, ErrorsAreOneLineExit1) {
  TempDir d;
  WriteModel(d.path() / "m");
  const std::string m = (d.path() / "m").string();
  ExpectLoadFailures({
      // cuda:0 has 50 B, cpu 10 B: embed (40) -> cuda:0, layers.0.a (20) fits neither 10 B left nor cpu.
      {m + " --device-map sequential --max-memory cpu=10B --device-backend fake --fake-gpus 1 --fake-gpu-memory "
           "50B --plan-only",
       {"DoesNotFit", "'layers.0.a' (20 B)", "cuda:0 10 B left of 50 B", "cpu 10 B left of 10 B"}},
      {m + " --device-map embed=cpu,layers=cpu --plan-only", {"UncoveredTensor", "'head.weight'"}},
      // A typo ("layer" for "layers") matches no tensor: named, with the closest module, even though "" covers all.
      {m + " --device-map layer.0=0,=cpu --device-backend fake --fake-gpus 1 --fake-gpu-memory 1KiB",
       {"DeviceMapEntryUnmatched", "'layer.0' -> cuda:0", "closest module: 'layers.0'"}},
      {m + " --device cuda:3 --device-backend fake --fake-gpus 2 --plan-only", {"UnknownDevice", "cuda:3"}},
  }, 1);
  // A size outside the one grammar is a usage error (exit 2) quoting the text (tests/cli/size_errors_test.cc).
  CliRun r = Load(m + " --device-map auto --max-memory 0=10Gb --plan-only");
  EXPECT_EQ(r.rc, 2) << r.out << r.err;
  for (const std::string s : {"--max-memory", "'10Gb'", "bits"})
    EXPECT_NE(r.err.find(s), std::string::npos) << s << " not in: " << r.err;
}

// A value refused by its own grammar (not by the model or the machine) is a usage error: exit 2, one line
// naming the option and the text.
TEST(DeviceCli, RefusedOptionValuesAreUsageErrors) {
  TempDir d;
  WriteModel(d.path() / "m");
  const std::string m = (d.path() / "m").string();
  ExpectLoadFailures({
      {m + " --device tpu", {"--device", "'tpu'"}},
      {m + " --device cuda:x --plan-only", {"--device", "'cuda:x'"}},
      {m + " --device-map bogus --plan-only", {"--device-map", "'bogus'"}},
      {m + " --device-map everywhere --plan-only", {"--device-map", "'everywhere'"}},
      {m + " --device-map a=b --plan-only", {"--device-map", "'b'"}},
      {m + " --max-memory 0=1GB", {"--max-memory", "--device-map"}},
      {m + " --no-split 'layers.*' --plan-only", {"--no-split", "--device-map"}},
  }, 2);
}

TEST(DeviceCli, UnknownBackendIsAUsageError) {
  TempDir d;
  WriteModel(d.path() / "m");
  CliRun r = Load((d.path() / "m").string() + " --device-backend tpu");
  EXPECT_EQ(r.rc, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--device-backend"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tpu"), std::string::npos) << r.err;
}

TEST(DeviceCli, CudaWithoutAGpuSuggestsPlanOnly) {
  TempDir d;
  WriteModel(d.path() / "m");
  const std::string m = (d.path() / "m").string();
  CliRun probe = Load(m + " --device cuda:0 --plan-only --json");
  ASSERT_EQ(probe.rc, 0) << probe.err;
  if (json::parse(probe.out)["backend"] == "cuda") GTEST_SKIP() << "a CUDA device is present: the load would succeed";
  CliRun r = Load(m + " --device cuda:0");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("NoCudaDevice"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--plan-only"), std::string::npos) << r.err;
}

TEST(DeviceCli, HubRepoHeadersAreReadBeforeAnyShardDownload) {
  TempDir src, cache;
  WriteModel(src.path());
  ServedStore store;
  ASSERT_OK(store);
  const std::string commit = store.AddRepo("org/dev", src.path());
  const std::string base = "--endpoint " + store.url() + " --cache-dir " + cache.str() + " load org/dev ";
  const fs::path snapshot = cache.path() / "models--org--dev" / "snapshots" / commit;

  CliRun plan = Hubload(base +
                     "--device-map sequential --device-backend fake --fake-gpus 2 --fake-gpu-memory 60B "
                     "--plan-only --json");
  ASSERT_EQ(plan.rc, 0) << plan.err;
  json j = json::parse(plan.out);
  EXPECT_EQ(j["commit"], commit);
  EXPECT_EQ(MapOf(j), (Pairs{{"embed", "cuda:0"},
                             {"layers.0.a", "cuda:0"},
                             {"layers.0.b", "cuda:1"},
                             {"layers.1", "cuda:1"},
                             {"head", "cpu"}}));
  // Planning read the index and the shard headers only.
  EXPECT_FALSE(fs::exists(snapshot / kShard1));
  EXPECT_FALSE(fs::exists(snapshot / kShard2));

  CliRun load =
      Hubload(base + "--device-map sequential --device-backend fake --fake-gpus 2 --fake-gpu-memory 60B --json");
  ASSERT_EQ(load.rc, 0) << load.err;
  j = json::parse(load.out);
  EXPECT_TRUE(fs::exists(snapshot / kShard1));
  EXPECT_TRUE(fs::exists(snapshot / kShard2));
  auto bytes = ModelBytes(src.path());
  ASSERT_EQ(j["tensors"].size(), 6u);
  for (const auto& t : j["tensors"]) {
    const std::string name = t["name"];
    EXPECT_EQ(t["sha256"], Sha256Hex(bytes[name].data(), bytes[name].size())) << name;
  }
}

}  // namespace
}  // namespace hubload::device_cli_test
