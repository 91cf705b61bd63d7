// `hubload inspect` and `hubload reshard` run as subprocesses on real and bad files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "safetensors/cli_run.h"
#include "safetensors/independent.h"
#include "testing/util.h"

using namespace hubload::testing;

namespace {

TEST(HubloadInspect, JsonMatchesRawHeader) {
  auto root = SharedDataDir();
  if (root.empty()) GTEST_SKIP() << "shared data absent";
  for (const char* rel : {"safetensors/run-ai__runai-model-streamer__test.safetensors",
                          "safetensors/Astrodata-project__astrodata__model.safetensors",
                          "safetensors/huggingface__safetensors__overall.safetensors"}) {
    SCOPED_TRACE(rel);
    std::string out, err;
    int rc = RunCommand(Q(Bin()) + " inspect --json " + Q((root / rel).string()), &out, &err);
    ASSERT_EQ(rc, 0) << err;
    auto j = nlohmann::json::parse(out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << out;
    RawHeader raw = DecodeRaw(ReadFileBytes(root / rel));
    ASSERT_TRUE(raw.ok);
    nlohmann::json expect_tensors = raw.json;
    expect_tensors.erase("__metadata__");
    EXPECT_EQ(j.at("tensors"), expect_tensors);
    EXPECT_EQ(j.at("metadata"), raw.has_metadata ? raw.json.at("__metadata__") : nlohmann::json::object());
  }
}

TEST(HubloadInspect, TextListsTensors) {
  auto root = SharedDataDir();
  if (root.empty()) GTEST_SKIP() << "shared data absent";
  std::string out, err;
  auto p = root / "safetensors/huggingface__candle__jfk-codes.safetensors";
  ASSERT_EQ(RunCommand(Q(Bin()) + " inspect " + Q(p.string()), &out, &err), 0) << err;
  RawHeader raw = DecodeRaw(ReadFileBytes(p));
  ASSERT_EQ(raw.tensors.size(), 1u);
  const auto& [name, t] = *raw.tensors.begin();
  EXPECT_NE(out.find(name + "  I64  [1, 2, 828]"), std::string::npos) << out;
  EXPECT_NE(out.find(std::to_string(t.end - t.begin) + " bytes"), std::string::npos) << out;
}

TEST(HubloadInspect, IndexJson) {
  auto root = SharedDataDir();
  if (root.empty()) GTEST_SKIP() << "shared data absent";
  auto p = root / "index/SD3.5-Large-transformer/diffusion_pytorch_model.safetensors.index.json";
  std::string out, err;
  ASSERT_EQ(RunCommand(Q(Bin()) + " inspect --json " + Q(p.string()), &out, &err), 0) << err;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  auto bytes = ReadFileBytes(p);
  auto src = nlohmann::json::parse(std::string(bytes.begin(), bytes.end()), nullptr, false);
  EXPECT_EQ(j.at("weight_map"), src.at("weight_map"));
  EXPECT_EQ(j.at("total_size"), src.at("metadata").at("total_size"));
  EXPECT_EQ(j.at("shards").size(), 2u);
}

TEST(HubloadInspect, BadFileFailsWithOneLine) {
  TempDir tmp;
  struct Case {
    std::string name, bytes, reason;
  };
  std::vector<Case> cases = {
      {"short.safetensors", std::string("\x05\x00\x00", 3), "HeaderTooSmall"},
      {"lfs.safetensors", "version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 1\n", "GitLfsPointer"},
      {"bad.safetensors", std::string("\x04\x00\x00\x00\x00\x00\x00\x00[1] ", 12), "InvalidHeaderJson"},
      {"bad.safetensors.index.json", "{\"weight_map\": {\"a\": \"../evil.safetensors\"}}", "InvalidShardName"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto p = tmp.path() / c.name;
    WriteFileBytes(p, c.bytes);
    std::string out, err;
    int rc = RunCommand(Q(Bin()) + " inspect " + Q(p.string()), &out, &err);
    EXPECT_GE(rc, 1);
    EXPECT_LE(rc, 127);
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    EXPECT_NE(err.find(c.reason), std::string::npos) << err;
    EXPECT_NE(err.find(p.string()), std::string::npos) << err;
    EXPECT_TRUE(out.empty()) << out;
  }
}

// `hubload reshard` with the default --dtype auto: a real file with U16/U32/F64/I8 tensors and a
// custom __metadata__ comes back byte for byte (the loader would widen U16/U32; reshard must not).
TEST(HubloadReshard, RealFileKeepsEveryDtypeAndItsMetadata) {
  auto root = SharedDataDir();
  if (root.empty()) GTEST_SKIP() << "shared data absent";
  auto p = root / "safetensors/huggingface__safetensors__overall.safetensors";
  RawHeader src = DecodeRaw(ReadFileBytes(p));
  ASSERT_TRUE(src.ok);
  TempDir tmp;
  std::string out, err;
  ASSERT_EQ(RunCommand(Q(Bin()) + " reshard " + Q(p.string()) + " " + Q(tmp.str()) + " --max-shard-size 0.1KiB", &out,
                       &err),
            0)
      << out << err;
  EXPECT_NE(out.find("wrote model.safetensors.index.json"), std::string::npos) << out;
  auto index = nlohmann::json::parse(ReadFileBytes(tmp.path() / "model.safetensors.index.json"));
  std::set<std::string> files;
  for (auto& [name, file] : index.at("weight_map").items()) files.insert(file.get<std::string>());
  ASSERT_GT(files.size(), 1u);
  auto src_bytes = ReadFileBytes(p);
  size_t seen = 0;
  for (const auto& f : files) {
    auto bytes = ReadFileBytes(tmp.path() / f);
    RawHeader h = DecodeRaw(bytes);
    ASSERT_TRUE(h.ok) << f;
    auto meta = src.metadata;
    meta["format"] = "pt";
    EXPECT_EQ(h.metadata, meta) << f;
    for (const auto& [name, t] : h.tensors) {
      SCOPED_TRACE(name);
      const RawTensor& s = src.tensors.at(name);
      EXPECT_EQ(t.dtype, s.dtype);
      EXPECT_EQ(t.shape, s.shape);
      ASSERT_EQ(t.end - t.begin, s.end - s.begin);
      EXPECT_TRUE(std::equal(bytes.begin() + 8 + h.n + t.begin, bytes.begin() + 8 + h.n + t.end,
                             src_bytes.begin() + 8 + src.n + s.begin));
      ++seen;
    }
  }
  EXPECT_EQ(seen, src.tensors.size());
  EXPECT_TRUE(std::any_of(src.tensors.begin(), src.tensors.end(), [](const auto& kv) { return kv.second.dtype == "U16"; }));
  // The one size grammar: 1GiB is 2^30 bytes, a lowercase b reads as bits and is refused, quoting the text.
  ASSERT_EQ(RunCommand(Q(Bin()) + " reshard " + Q(p.string()) + " " + Q(tmp.str() + "/one") + " --max-shard-size 1GiB",
                       &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("wrote model.safetensors\n"), std::string::npos) << out;
  EXPECT_EQ(RunCommand(Q(Bin()) + " reshard " + Q(p.string()) + " " + Q(tmp.str() + "/two") + " --max-shard-size 1Gb",
                       &out, &err),
            2);  // a usage error (the option's value is refused before anything runs)
  EXPECT_NE(err.find("'1Gb'"), std::string::npos) << err;
}

// `load --json` lists every widening the CPU load does as a report warning, tensor names counted per
// conversion (issue 20): U32 -> I64 and float8 -> BF16, the values decoded exactly. The file is written
// byte by byte here; the expected warnings are typed by hand from the dtype rules (LibTorch 1.13 has no
// uint32 or float8), the sums worked out by hand from the bytes.
TEST(HubloadLoad, JsonWarnsAboutU32AndFloat8Widening) {
  TempDir tmp;
  // u32: 7, 4000000000 (LE); e4m3: 0x38 = 1.0, 0x40 = 2.0, 0x3C = 1.5, 0x30 = 0.5 and 0x38, 0xB8 = -1.0;
  // e5m2: 0x3C = 1.0, 0x40 = 2.0, 0x3E = 1.5.
  std::vector<uint8_t> data = {7, 0, 0, 0, 0x00, 0x28, 0x6B, 0xEE,  // ids (U32, 8 bytes)
                               0x38, 0x40, 0x3C, 0x30,              // q8a (F8_E4M3, 4)
                               0x38, 0xB8,                          // q8b (F8_E4M3, 2)
                               0x3C, 0x40, 0x3E,                    // q5 (F8_E5M2, 3)
                               0, 0, 0x80, 0x3F};                   // w (F32 1.0, 4 bytes)
  const std::string header =
      R"({"ids":{"dtype":"U32","shape":[2],"data_offsets":[0,8]},)"
      R"("q8a":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[8,12]},)"
      R"("q8b":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[12,14]},)"
      R"("q5":{"dtype":"F8_E5M2","shape":[3],"data_offsets":[14,17]},)"
      R"("w":{"dtype":"F32","shape":[1],"data_offsets":[17,21]}})";
  auto bytes = BuildFile(header, data);
  WriteFileBytes(tmp.path() / "model.safetensors", bytes.data(), bytes.size());
  std::string out, err;
  ASSERT_EQ(RunCommand(Q(Bin()) + " load " + Q((tmp.path() / "model.safetensors").string()) + " --json", &out, &err), 0)
      << err;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  std::set<std::string> warnings;
  for (auto& w : j["warnings"]) warnings.insert(w.get<std::string>());
  EXPECT_EQ(warnings, (std::set<std::string>{
                          "dtype conversion: 1 tensor U32 -> I64 (LibTorch 1.13 has no uint32): ids",
                          "dtype conversion: 2 tensors F8_E4M3 -> BF16 (LibTorch 1.13 has no float8; decoded "
                          "exactly): q8a, q8b",
                          "dtype conversion: 1 tensor F8_E5M2 -> BF16 (LibTorch 1.13 has no float8; decoded "
                          "exactly): q5",
                      }));
  std::map<std::string, std::pair<std::string, double>> loaded;  // name -> (dtype, sum)
  for (auto& t : j["tensors"]) loaded[t["name"]] = {t["dtype"], t["sum"].get<double>()};
  using P = std::pair<std::string, double>;
  EXPECT_EQ(loaded["ids"], (P{"I64", 4000000007.0}));
  EXPECT_EQ(loaded["q8a"], (P{"BF16", 5.0}));
  EXPECT_EQ(loaded["q8b"], (P{"BF16", 0.0}));
  EXPECT_EQ(loaded["q5"], (P{"BF16", 4.5}));
  EXPECT_EQ(loaded["w"], (P{"F32", 1.0}));
}

// A U64 value >= 2^63 cannot be loaded as int64: the error names the tensor once.
TEST(HubloadLoad, U64OutOfRangeNamesTheTensorOnce) {
  TempDir tmp;
  std::vector<uint8_t> data = {0, 0, 0, 0, 0, 0, 0, 0x80};  // 2^63, little-endian
  auto bytes = BuildFile(R"({"c.u64":{"dtype":"U64","shape":[1],"data_offsets":[0,8]}})", data);
  WriteFileBytes(tmp.path() / "model.safetensors", bytes.data(), bytes.size());
  std::string out, err;
  EXPECT_EQ(RunCommand(Q(Bin()) + " load " + Q(tmp.str()), &out, &err), 1) << err;
  EXPECT_NE(err.find(">= 2^63"), std::string::npos) << err;
  size_t n = 0;
  for (size_t p = err.find("'c.u64'"); p != std::string::npos; p = err.find("'c.u64'", p + 1)) ++n;
  EXPECT_EQ(n, 1u) << err;
}

}  // namespace
