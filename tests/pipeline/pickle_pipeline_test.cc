// Legacy `.bin` checkpoints through the load driver (issue 16): by repo id
// from `hubload serve` and from a local folder, compared with the bytes
// python3-torch dumped for the same tensors (tests/pickle/make_fixtures.py).
#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include <map>

#include "hubload/pipeline.h"
#include "tests/pickle/fixtures.h"
#include "tests/pipeline/fixtures.h"
#include "testing/report.h"
#include "testing/status_matchers.h"

namespace hubload::pipeline_test {
namespace {

using hubload::testing::PythonFixtures;
using hubload::testing::TempDir;

std::string Contiguous(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel()) * c.element_size());
}

/// The sharded fixture (two .bin shards + index) copied into `dir`.
std::map<std::string, hubload::testing::ExpectedTensor> CopySharded(const PythonFixtures& fx, const fs::path& dir) {
  fs::create_directories(dir);
  std::map<std::string, hubload::testing::ExpectedTensor> want;
  for (const char* f : {"pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"}) {
    fs::copy_file(fx.Path(f), dir / f);
    for (auto& e : fx.Manifest(f)) want[e.name] = e;
  }
  fs::copy_file(fx.Path("pytorch_model.bin.index.json"), dir / "pytorch_model.bin.index.json");
  return want;
}

TEST(PicklePipeline, ShardedBinLoadsByRepoIdAndLocally) {
  HUBLOAD_PYTHON_FIXTURES(fx);
  TempDir src, cache;
  auto want = CopySharded(*fx, src.path());
  ASSERT_FALSE(want.empty());
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/bin-only", src.path());
  HubClient client = MakeClient(store.url(), cache.str());
  for (bool hub : {true, false}) {
    SCOPED_TRACE(hub ? "hub" : "local");
    PretrainedRequest req;
    req.repo_id = hub ? "org/bin-only" : src.str();
    req.digests = true;
    auto sd = LoadStateDict(client, req);
    ASSERT_OK(sd);
    EXPECT_EQ(sd->info.resolved.weights_file, "pytorch_model.bin.index.json");
    EXPECT_EQ(sd->info.files.size(), 2u);
    ASSERT_EQ(sd->tensors.size(), want.size());
    for (const auto& [name, t] : sd->tensors) {
      SCOPED_TRACE(name);
      ASSERT_TRUE(want.count(name));
      EXPECT_EQ(Contiguous(t), want[name].data);
      std::vector<int64_t> shape(want[name].shape.begin(), want[name].shape.end());
      EXPECT_EQ(t.sizes().vec(), shape);
    }
    // One report for pickle shards too: every tensor with its digest.
    ASSERT_EQ(sd->info.tensors.size(), want.size());
    for (const auto& r : sd->info.tensors)
      EXPECT_EQ(r.sha256, hubload::testing::Sha256Hex(want[r.name].data.data(), want[r.name].data.size())) << r.name;
  }
}

TEST(PicklePipeline, SafetensorsWinWhenBothArePresent) {
  HUBLOAD_PYTHON_FIXTURES(fx);
  TempDir src, cache;
  fs::copy_file(fx->Path("model.bin"), src.path() / "pytorch_model.bin");
  RawTensor w = MakeTensor("w", "F32", {4}, 5);
  WriteText(src.path() / "model.safetensors", SafetensorsBytes({w}));
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/both", src.path());
  HubClient client = MakeClient(store.url(), cache.str());
  PretrainedRequest req;
  req.repo_id = "org/both";
  auto sd = LoadStateDict(client, req);
  ASSERT_OK(sd);
  EXPECT_EQ(sd->info.files, std::vector<std::string>{"model.safetensors"});
  ASSERT_EQ(sd->tensors.size(), 1u);
  EXPECT_EQ(Contiguous(sd->tensors[0].second), w.bytes);
  EXPECT_EQ(store.server().RequestCount("pytorch_model.bin"), 0u);  // never fetched
}

TEST(PicklePipeline, TiedStoragesStaySharedAndHostileBinIsRefused) {
  HUBLOAD_PYTHON_FIXTURES(fx);
  TempDir src;
  fs::copy_file(fx->Path("same_object.bin"), src.path() / "pytorch_model.bin");
  auto sd = LoadCheckpoint(src.str(), {}, {});
  ASSERT_OK(sd);
  std::map<std::string, at::Tensor> by(sd->tensors.begin(), sd->tensors.end());
  ASSERT_TRUE(by.count("a") && by.count("b") && by.count("c"));
  EXPECT_EQ(by["a"].data_ptr(), by["b"].data_ptr());
  EXPECT_EQ(by["a"].storage().data(), by["c"].storage().data());  // c = a[1]: a view of the same storage
  // A torch.save-style zip whose data.pkl calls posix.system is refused, naming
  // the file and the global; nothing runs (the zip is written by Python's zipfile).
  TempDir bad;
  const std::string marker = bad.str() + "/ran";
  const std::string bin = bad.str() + "/pytorch_model.bin";
  std::string out, err;
  const std::string script =
      "import zipfile,sys; z=zipfile.ZipFile(sys.argv[1],'w',zipfile.ZIP_STORED); "
      "cmd=('touch '+sys.argv[2]).encode(); "
      "z.writestr('archive/data.pkl', b'\\x80\\x02cposix\\nsystem\\nX'+len(cmd).to_bytes(4,'little')+cmd+b'\\x85R.'); "
      "z.writestr('archive/version', '3\\n'); z.close()";
  ASSERT_EQ(hubload::testing::RunCommand("/usr/bin/python3 -c \"" + script + "\" '" + bin + "' '" + marker + "'", &out,
                                         &err),
            0)
      << err;
  auto r = LoadCheckpoint(bad.str(), {}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("posix"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("pytorch_model.bin"), std::string::npos) << r.status().ToString();
  EXPECT_FALSE(fs::exists(marker));
}


TEST(PicklePipeline, InspectAndLoadFromTheCli) {
  HUBLOAD_PYTHON_FIXTURES(fx);
  TempDir dir;
  fs::copy_file(fx->Path("model.bin"), dir.path() / "pytorch_model.bin");
  auto want = fx->Manifest("model.bin");
  ASSERT_FALSE(want.empty());
  std::string out, err;
  ASSERT_EQ(hubload::testing::RunCommand(hubload::testing::HubloadBin() + " inspect '" + dir.str() +
                                             "/pytorch_model.bin' --json",
                                         &out, &err),
            0)
      << err;
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["format"], "zip");
  ASSERT_EQ(j["tensors"].size(), want.size());
  for (const auto& e : want) {
    SCOPED_TRACE(e.name);
    EXPECT_EQ(j["tensors"][e.name]["dtype"], e.dtype);
    EXPECT_EQ(j["tensors"][e.name]["shape"].get<std::vector<uint64_t>>(), e.shape);
    EXPECT_EQ(j["tensors"][e.name]["stride"].get<std::vector<uint64_t>>(), e.stride);
    EXPECT_EQ(j["tensors"][e.name]["storage_offset"], e.storage_offset);
  }
  ASSERT_EQ(hubload::testing::RunCommand(hubload::testing::HubloadBin() + " load '" + dir.str() + "' --json", &out, &err),
            0)
      << err;
  nlohmann::json r = hubload::testing::TensorsByName(nlohmann::json::parse(out, nullptr, false));
  ASSERT_EQ(r.size(), want.size()) << out;
  for (const auto& e : want)
    EXPECT_EQ(r[e.name]["sha256"], hubload::testing::Sha256Hex(e.data.data(), e.data.size())) << e.name;
}

}  // namespace
}  // namespace hubload::pipeline_test
