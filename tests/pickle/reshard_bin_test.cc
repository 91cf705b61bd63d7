// `hubload reshard pytorch_model.bin OUT` (issue 16): torch.save files written
// at test time by Debian's python3-torch (write_bin.py: zip and legacy
// formats, fp32/fp16/bf16/f64/i64/i8/bool, strided views, a storage offset,
// tied weights, 0-d and empty tensors) become safetensors shards holding
// exactly the bytes of each tensor's t.contiguous() as Python computed them.
// The output is read back with the raw reader of tests/safetensors
// (independent of hubload's reader).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "safetensors/independent.h"
#include "testing/util.h"

namespace hubload::testing {
namespace {

namespace fs = std::filesystem;

std::string Q(const std::string& s) { return "'" + s + "'"; }

std::string ToHex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s.push_back(d[p[i] >> 4]);
    s.push_back(d[p[i] & 15]);
  }
  return s;
}

// Every tensor of the safetensors files in `dir`: name -> {dtype, shape, hex}.
nlohmann::json ReadOutput(const fs::path& dir, size_t* files) {
  nlohmann::json got = nlohmann::json::object();
  *files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".safetensors") continue;
    ++*files;
    auto bytes = ReadFileBytes(e.path());
    RawHeader h = DecodeRaw(bytes);
    EXPECT_TRUE(h.ok) << e.path();
    if (!h.ok) continue;
    EXPECT_EQ(h.metadata, (std::map<std::string, std::string>{{"format", "pt"}})) << e.path();
    for (const auto& [name, t] : h.tensors) {
      EXPECT_FALSE(got.contains(name)) << name << " written twice";
      got[name] = {{"dtype", t.dtype}, {"shape", t.shape},
                   {"hex", ToHex(bytes.data() + 8 + h.n + t.begin, t.end - t.begin)}};
    }
  }
  return got;
}

class ReshardBin : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string out, err;
    int rc = RunCommand("/usr/bin/python3 " + Q(std::string(HUBLOAD_TEST_SOURCE_DIR) + "/tests/pickle/write_bin.py") +
                            " " + Q(tmp_.str()),
                        &out, &err);
    if (rc == 3 || rc == 127) GTEST_SKIP() << "python3-torch is not installed: " << err;
    ASSERT_EQ(rc, 0) << err;
    expected_ = nlohmann::json::parse(ReadFileBytes(tmp_.path() / "expected.json"));
  }
  TempDir tmp_;
  nlohmann::json expected_;
};

TEST_F(ReshardBin, ZipAndLegacyFilesGiveThePythonTensorsExactly) {
  for (const std::string src : {"pytorch_model.bin", "legacy/pytorch_model.bin"}) {
    SCOPED_TRACE(src);
    const fs::path out = tmp_.path() / ("out-" + std::to_string(src.size()));
    std::string o, e;
    ASSERT_EQ(RunCommand(Q(HubloadBin()) + " reshard " + Q((tmp_.path() / src).string()) + " " + Q(out.string()) +
                             " --max-shard-size 100B",
                         &o, &e),
              0)
        << o << e;
    size_t files = 0;
    nlohmann::json got = ReadOutput(out, &files);
    EXPECT_GT(files, 1u);
    EXPECT_EQ(got, expected_);
    auto index = nlohmann::json::parse(ReadFileBytes(out / "model.safetensors.index.json"));
    std::set<std::string> listed;
    for (auto& [name, file] : index["weight_map"].items()) listed.insert(name);
    std::set<std::string> want;
    for (auto& [name, v] : expected_.items()) want.insert(name);
    EXPECT_EQ(listed, want);
    // No temporary folder is left behind.
    for (const auto& en : fs::directory_iterator(out))
      EXPECT_NE(en.path().filename().string().rfind(".hubload-reshard", 0), 0u) << en.path();
  }
}

TEST_F(ReshardBin, OneFileByDefault) {
  const fs::path out = tmp_.path() / "one";
  std::string o, e;
  ASSERT_EQ(RunCommand(Q(HubloadBin()) + " reshard " + Q((tmp_.path() / "pytorch_model.bin").string()) + " " +
                           Q(out.string()),
                       &o, &e),
            0)
      << o << e;
  ASSERT_TRUE(fs::exists(out / "model.safetensors")) << o;
  size_t files = 0;
  EXPECT_EQ(ReadOutput(out, &files), expected_);
  EXPECT_EQ(files, 1u);
}

}  // namespace
}  // namespace hubload::testing
