// LoadModule: a torch::nn::Module filled shard by shard from a repo id.
#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include "hubload/pipeline.h"
#include "tests/pipeline/fixtures.h"
#include "testing/status_matchers.h"

namespace hubload::pipeline_test {
namespace {

using hubload::testing::TempDir;

std::string Bytes(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel()) * c.element_size());
}

struct Embed : torch::nn::Module {
  Embed() {
    weight = register_parameter("weight", torch::zeros({4, 3}));
    position_ids = register_buffer("position_ids", torch::zeros({5}, torch::kLong));
  }
  torch::Tensor weight, position_ids;
};
struct Head : torch::nn::Module {
  Head() { weight = register_parameter("weight", torch::zeros({2, 3})); }
  torch::Tensor weight;
};
struct Net : torch::nn::Module {
  Net() {
    embed = register_module("embed", std::make_shared<Embed>());
    head = register_module("head", std::make_shared<Head>());
    extra = register_parameter("extra", torch::zeros({2}));
  }
  std::shared_ptr<Embed> embed;
  std::shared_ptr<Head> head;
  torch::Tensor extra;
};

TEST(PipelineModuleTest, FillsModuleFromRepoIdWithKeyReport) {
  TempDir src, cache;
  RawTensor ew = MakeTensor("embed.weight", "F32", {4, 3}, 81);
  RawTensor ep = MakeTensor("embed.position_ids", "I64", {5}, 82);
  RawTensor hw = MakeTensor("head.weight", "F32", {2, 3}, 83);
  RawTensor un = MakeTensor("unused.w", "F32", {1}, 84);
  WriteSharded(src.path(), "model.safetensors.index.json",
               {{"model-00001-of-00002.safetensors", {ew, ep}}, {"model-00002-of-00002.safetensors", {hw, un}}});
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/module", src.path());
  HubClient client = MakeClient(store.url(), cache.str());

  Net net;
  PretrainedRequest req;
  req.repo_id = "org/module";
  ModuleLoadOptions mo;
  mo.mode = ModuleLoadMode::kCopy;
  auto r = LoadModule(client, req, net, mo);
  ASSERT_OK(r);
  EXPECT_EQ(r->report.missing, std::vector<std::string>{"extra"});
  EXPECT_EQ(r->report.unexpected, std::vector<std::string>{"unused.w"});
  EXPECT_TRUE(r->report.mismatched.empty());
  EXPECT_EQ(r->report.loaded_tensors, 3u);
  EXPECT_TRUE(Bytes(net.embed->weight) == ew.bytes);
  EXPECT_TRUE(Bytes(net.embed->position_ids) == ep.bytes);
  EXPECT_TRUE(Bytes(net.head->weight) == hw.bytes);
  EXPECT_EQ(r->info.num_tensors, 4u);

  // strict: the missing key fails the load.
  Net strict_net;
  ModuleLoadOptions so;
  so.strict = true;
  auto s = LoadModule(client, req, strict_net, so);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(s.status().context().repo_id, "org/module");
}

}  // namespace
}  // namespace hubload::pipeline_test
