// The CLI side of the main job: `hubload demo-model` and `hubload load REPO_ID`
// against an in-process `hubload serve`.
#include <gtest/gtest.h>

#include "testing/report.h"

#include <nlohmann/json.hpp>
#include <set>

#include "hubload/safetensors.h"
#include "tests/pipeline/fixtures.h"
#include "testing/status_matchers.h"

namespace hubload::pipeline_test {
namespace {

using hubload::testing::HubloadBin;
using hubload::testing::ReadFileBytes;
using hubload::testing::RunCommand;
using hubload::testing::Sha256Hex;
using hubload::testing::TempDir;

std::map<std::string, std::string> TreeHashes(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    auto b = ReadFileBytes(e.path());
    out[fs::relative(e.path(), root).string()] = Sha256Hex(b.data(), b.size());
  }
  return out;
}

TEST(PipelineCliTest, DemoModelIsDeterministicDiffusersLayout) {
  TempDir a, b;
  std::string out, err;
  ASSERT_EQ(RunCommand(HubloadBin() + " demo-model " + a.str() + "/m --size-mb 12 --seed 3", &out, &err), 0) << err;
  ASSERT_EQ(RunCommand(HubloadBin() + " demo-model " + b.str() + "/m --size-mb 12 --seed 3", &out, &err), 0) << err;
  auto ha = TreeHashes(a.path() / "m"), hb = TreeHashes(b.path() / "m");
  EXPECT_EQ(ha, hb);  // same seed, same bytes
  for (const char* f : {"model_index.json", "transformer/diffusion_pytorch_model.safetensors.index.json",
                        "transformer/diffusion_pytorch_model.safetensors.index.fp16.json",
                        "text_encoder/model.safetensors", "scheduler/scheduler_config.json"})
    EXPECT_TRUE(ha.count(f)) << f;
  // Every weights file is a valid safetensors file; the dtypes required are present.
  std::set<std::string> dtypes32, dtypes16;
  int shards32 = 0, shards16 = 0;
  for (const auto& [rel, h] : ha) {
    if (rel.size() < 12 || rel.substr(rel.size() - 12) != ".safetensors") continue;
    auto hdr = safetensors::ReadMetadata((a.path() / "m" / rel).string());
    ASSERT_OK(hdr) << rel << ": " << hdr.status().ToString();
    bool fp16 = rel.find(".fp16-") != std::string::npos;
    if (rel.rfind("transformer/", 0) == 0) (fp16 ? shards16 : shards32)++;
    for (const auto& t : hdr->tensors) (fp16 ? dtypes16 : dtypes32).insert(safetensors::DtypeName(t.dtype));
  }
  EXPECT_GE(shards32, 2);
  EXPECT_GE(shards16, 2);
  EXPECT_TRUE(dtypes32.count("F32") && dtypes32.count("BF16") && dtypes32.count("I64"));
  EXPECT_TRUE(dtypes16.count("F16") && dtypes16.count("I64"));
  EXPECT_FALSE(dtypes16.count("F32"));
}

TEST(PipelineCliTest, LoadByRepoIdPrintsTheJsonReport) {
  TempDir src, cache;
  std::vector<RawTensor> s1 = {MakeTensor("a.weight", "F32", {8, 4}, 91), MakeTensor("a.ids", "I64", {6}, 92)};
  std::vector<RawTensor> s2 = {MakeTensor("b.weight", "BF16", {4, 4}, 93)};
  WriteSharded(src.path() / "transformer", "diffusion_pytorch_model.safetensors.index.json",
               {{"diffusion_pytorch_model-00001-of-00002.safetensors", s1},
                {"diffusion_pytorch_model-00002-of-00002.safetensors", s2}});
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/cli", src.path());
  std::string out, err;
  int rc = RunCommand(HubloadBin() + " --endpoint " + store.url() + " --cache-dir " + cache.str() +
                          " load org/cli --subfolder transformer --json",
                      &out, &err);
  ASSERT_EQ(rc, 0) << err;
  nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["schema"], "hubload.load/1");
  ASSERT_TRUE(j["tensors"].is_array()) << out;
  EXPECT_EQ(j["tensors"].size(), 3u);
  nlohmann::json by_name = testing::TensorsByName(j);
  for (const auto& t : {s1[0], s1[1], s2[0]}) {
    SCOPED_TRACE(t.name);
    ASSERT_TRUE(by_name.contains(t.name));
    EXPECT_EQ(by_name[t.name]["dtype"], t.dtype);
    EXPECT_EQ(by_name[t.name]["source_dtype"], t.dtype);
    EXPECT_EQ(by_name[t.name]["device"], "cpu");
    EXPECT_EQ(by_name[t.name]["bytes"], t.bytes.size());
    EXPECT_EQ(by_name[t.name]["sha256"], Sha256Hex(t.bytes.data(), t.bytes.size()));
  }
  // Checkpoint order: shard 1's tensors (file order) before shard 2's.
  EXPECT_EQ(j["tensors"][2]["name"], "b.weight");
  EXPECT_EQ(j["tensors"][2]["file"], "transformer/diffusion_pytorch_model-00002-of-00002.safetensors");
  for (const char* k : {"time_to_first_tensor_s", "download_s", "load_s", "total_s"})
    EXPECT_TRUE(j["timings"].contains(k)) << k;
  EXPECT_EQ(j["files"].size(), 2u);

  // A missing repo is a one-line error naming it, exit code 1.
  rc = RunCommand(HubloadBin() + " --endpoint " + store.url() + " --cache-dir " + cache.str() + " load org/absent",
                  &out, &err);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find("org/absent"), std::string::npos) << err;
}

}  // namespace
}  // namespace hubload::pipeline_test
