// Loading into torch::nn::Module: a real transformer block round trip, and the
// field failures B23 (into a module), B33, B34, B35.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "hubload/pipeline.h"
#include "hubload/torch_loader.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace hubload {
namespace {
namespace fs = std::filesystem;
using testing::TempDir;

// A parameter holder registering a given tensor (used to tie weights by name).
struct TiedImpl : torch::nn::Module {
  explicit TiedImpl(torch::Tensor w) { weight = register_parameter("weight", std::move(w)); }
  torch::Tensor weight;
};
TORCH_MODULE(Tied);

// A small transformer block: embeddings, attention, layer norms, MLP, tied output projection,
// a persistent buffer and a non-persistent one.
struct BlockImpl : torch::nn::Module {
  BlockImpl() {
    embed = register_module("embed", torch::nn::Embedding(50, 16));
    ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({16})));
    attn = register_module("attn", torch::nn::MultiheadAttention(torch::nn::MultiheadAttentionOptions(16, 2)));
    ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({16})));
    fc1 = register_module("fc1", torch::nn::Linear(16, 32));
    fc2 = register_module("fc2", torch::nn::Linear(32, 16));
    head = register_module("head", Tied(embed->weight));
    scale = register_buffer("scale", torch::rand({50}) + 0.5);
    positions = register_buffer("positions", torch::arange(8, torch::kLong));  // non-persistent
  }
  torch::Tensor forward(const torch::Tensor& ids) {
    auto x = embed(ids);  // [B, T, 16]
    auto h = ln1(x).transpose(0, 1);
    auto a = std::get<0>(attn(h, h, h)).transpose(0, 1);
    x = x + a;
    x = x + fc2(torch::gelu(fc1(ln2(x))));
    return torch::matmul(x, head->weight.t()) * scale + positions.index({torch::indexing::Slice(0, 1)}).to(x.dtype());
  }
  torch::nn::Embedding embed{nullptr};
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::MultiheadAttention attn{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  Tied head{nullptr};
  torch::Tensor scale, positions;
};
TORCH_MODULE(Block);

const std::vector<std::string> kNonPersistent = {"positions"};

TEST(ModuleRoundTrip, TransformerBlockShardedAssignAndCopyBitIdentical) {
  TempDir dir;
  torch::manual_seed(1);
  Block original;
  original->eval();
  auto ids = torch::randint(0, 50, {2, 8}, torch::kLong);
  torch::Tensor want;
  {
    torch::NoGradGuard ng;
    want = original->forward(ids);
  }
  StateDict sd = ModuleStateDict(*original, kNonPersistent);
  SaveOptions so;
  so.max_shard_size = uint64_t{2000};
  auto saved = SaveSharded(sd, dir.str(), so);
  ASSERT_OK(saved);
  EXPECT_GE(saved->files.size(), 3u);
  EXPECT_EQ(saved->index_file, "model.safetensors.index.json");
  EXPECT_EQ(saved->aliases, (std::map<std::string, std::string>{{"head.weight", "embed.weight"}}));
  // A bf16 variant beside it.
  StateDict half;
  for (auto& [n, t] : sd) half.emplace_back(n, t.is_floating_point() ? t.to(torch::kBFloat16) : t);
  SaveOptions vo = so;
  vo.variant = "bf16";
  auto vsaved = SaveSharded(half, dir.str(), vo);
  ASSERT_OK(vsaved);
  EXPECT_EQ(vsaved->index_file, "model.safetensors.index.bf16.json");
  EXPECT_TRUE(vsaved->removed_stale.empty());

  for (auto mode : {ModuleLoadMode::kAssign, ModuleLoadMode::kCopy}) {
    SCOPED_TRACE(mode == ModuleLoadMode::kAssign ? "assign" : "copy");
    torch::manual_seed(2);
    Block fresh;
    fresh->eval();
    auto positions_before = fresh->positions.clone();
    ModuleLoadOptions mo;
    mo.mode = mode;
    mo.strict = true;
    mo.non_persistent_buffers = kNonPersistent;
    auto report = LoadIntoModule(*fresh, dir.str(), {}, {}, mo);
    ASSERT_OK(report);
    EXPECT_TRUE(report->missing.empty());
    EXPECT_TRUE(report->unexpected.empty());
    EXPECT_TRUE(report->mismatched.empty());
    // The tie survives: one storage for embed and head.
    EXPECT_EQ(fresh->head->weight.data_ptr(), fresh->embed->weight.data_ptr());
    EXPECT_TRUE(torch::equal(fresh->positions, positions_before));
    torch::NoGradGuard ng;
    auto got = fresh->forward(ids);
    EXPECT_TRUE(torch::equal(got, want));  // bit-identical
    if (mode == ModuleLoadMode::kAssign) {
      EXPECT_TRUE(fresh->fc1->weight.requires_grad());
    }
  }
  // The variant loads too (copy mode converts into the fp32 parameters).
  torch::manual_seed(3);
  Block fresh;
  ModuleLoadOptions mo;
  mo.mode = ModuleLoadMode::kCopy;
  mo.strict = true;
  mo.non_persistent_buffers = kNonPersistent;
  ResolveOptions ro;
  ro.variant = "bf16";
  auto report = LoadIntoModule(*fresh, dir.str(), ro, {}, mo);
  ASSERT_OK(report);
  EXPECT_EQ(fresh->fc1->weight.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(fresh->fc1->weight, original->fc1->weight.to(torch::kBFloat16).to(torch::kFloat)));
  EXPECT_FALSE(torch::equal(fresh->fc1->weight, original->fc1->weight));  // really the rounded copy
}

// --- B33 ----------------------------------------------------------------------

struct SmallImpl : torch::nn::Module {
  SmallImpl() {
    embed = register_module("embed", torch::nn::Embedding(6, 4));
    lm_head = register_module("lm_head", Tied(embed->weight));
    auto l0 = std::make_shared<torch::nn::Module>();
    w = l0->register_parameter("w", torch::randn({4, 4}));
    b = l0->register_parameter("b", torch::randn({4}));
    register_module("l0", l0);
  }
  torch::nn::Embedding embed{nullptr};
  Tied lm_head{nullptr};
  torch::Tensor w, b;
};
TORCH_MODULE(Small);

void Save(const std::string& path, const StateDict& sd) {
  auto r = SaveSharded(sd, path, {});
  ASSERT_OK(r);
}

void FillNaN(torch::nn::Module& m) {
  torch::NoGradGuard ng;
  for (auto& p : m.parameters()) p.fill_(NAN);
}

TEST(FieldFailures, B33_MissingUnexpectedTied) {
  TempDir dir;
  StateDict a = {{"embed.weight", torch::arange(24, torch::kFloat).reshape({6, 4})},
                 {"l0.w", torch::ones({4, 4})},
                 {"l0.b", torch::full({4}, 2.0)}};
  Save(dir.str() + "/A", a);
  StateDict b(a.begin(), a.begin() + 2);
  Save(dir.str() + "/B", b);
  StateDict c = a;
  c.emplace_back("l0.w_old", torch::zeros({2}));
  Save(dir.str() + "/C", c);

  for (auto mode : {ModuleLoadMode::kAssign, ModuleLoadMode::kCopy}) {
    ModuleLoadOptions mo;
    mo.mode = mode;
    {  // A: tied head absent from the checkpoint is legal.
      Small m;
      FillNaN(*m);
      auto r = LoadIntoModule(*m, dir.str() + "/A", {}, {}, mo);
      ASSERT_OK(r);
      EXPECT_TRUE(r->missing.empty());
      EXPECT_TRUE(r->unexpected.empty());
      EXPECT_TRUE(r->warnings.empty());
      EXPECT_EQ(m->lm_head->weight.data_ptr(), m->embed->weight.data_ptr());
      EXPECT_TRUE(torch::equal(m->lm_head->weight, a[0].second));
    }
    {  // B: l0.b missing.
      Small m;
      FillNaN(*m);
      auto r = LoadIntoModule(*m, dir.str() + "/B", {}, {}, mo);
      ASSERT_OK(r);
      EXPECT_EQ(r->missing, std::vector<std::string>{"l0.b"});
      for (auto& p : m->named_parameters()) {
        bool has_nan = torch::isnan(p.value()).any().item<bool>();
        bool listed = std::find(r->missing.begin(), r->missing.end(), p.key()) != r->missing.end();
        EXPECT_EQ(has_nan, listed) << p.key();
      }
      ModuleLoadOptions strict = mo;
      strict.strict = true;
      Small m2;
      auto before = m2->w.clone();
      auto e = LoadIntoModule(*m2, dir.str() + "/B", {}, {}, strict);
      ASSERT_FALSE(e.ok());
      EXPECT_EQ(e.status().reason(), "MissingKeys");
      EXPECT_NE(e.status().message().find("l0.b"), std::string::npos);
      EXPECT_TRUE(torch::equal(m2->w, before));  // failed up front: nothing loaded
    }
    {  // C: one unexpected key; ignorable by regex.
      Small m;
      auto r = LoadIntoModule(*m, dir.str() + "/C", {}, {}, mo);
      ASSERT_OK(r);
      EXPECT_EQ(r->unexpected, std::vector<std::string>{"l0.w_old"});
      ModuleLoadOptions ig = mo;
      ig.ignore_unexpected_regex = {"w_old$"};
      ig.strict = true;
      Small m2;
      auto r2 = LoadIntoModule(*m2, dir.str() + "/C", {}, {}, ig);
      ASSERT_OK(r2);
      EXPECT_TRUE(r2->unexpected.empty());
    }
  }
}

// B23 variant 2: both shards exist but the index names only shard 1.
TEST(FieldFailures, B23_UnnamedShardIsMissingNotRandom) {
  TempDir dir;
  StateDict sd = {{"l0.w", torch::ones({4, 4})}, {"l0.b", torch::ones({4})}};
  SaveOptions o;
  o.max_shard_size = uint64_t{64};
  ASSERT_OK(SaveSharded(sd, dir.str(), o));
  std::ofstream(dir.path() / "model.safetensors.index.json")
      << R"({"metadata":{"total_size":64},"weight_map":{"l0.w":"model-00001-of-00002.safetensors"}})";
  auto m = std::make_shared<torch::nn::Module>();
  m->register_parameter("w", torch::full({4, 4}, NAN));
  m->register_parameter("b", torch::full({4}, NAN));
  torch::nn::Module root;
  root.register_module("l0", m);
  auto r = LoadIntoModule(root, dir.str(), {}, {}, {});
  ASSERT_OK(r);
  EXPECT_EQ(r->missing, std::vector<std::string>{"l0.b"});
  bool warned = false;
  for (const auto& wn : r->warnings) warned = warned || wn.find("model-00002-of-00002.safetensors") != std::string::npos;
  EXPECT_TRUE(warned);
  ModuleLoadOptions strict;
  strict.strict = true;
  EXPECT_FALSE(LoadIntoModule(root, dir.str(), {}, {}, strict).ok());
}

// --- B34 ----------------------------------------------------------------------

TEST(FieldFailures, B34_MismatchedShapesSingleAndSharded) {
  TempDir dir;
  StateDict sd = {{"body.weight", torch::full({16, 16}, 3.0)}, {"head.weight", torch::full({12, 16}, 5.0)},
                  {"tail.weight", torch::full({16}, 7.0)}};
  ASSERT_OK(SaveSharded(sd, dir.str() + "/single", {}));
  SaveOptions o;
  o.max_shard_size = uint64_t{800};  // body (1024 B) alone, then [head], then [tail]
  auto sh = SaveSharded(sd, dir.str() + "/sharded", o);
  ASSERT_OK(sh);
  ASSERT_EQ(sh->files.size(), 3u);
  for (const char* layout : {"single", "sharded"}) {
    for (auto mode : {ModuleLoadMode::kAssign, ModuleLoadMode::kCopy}) {
      SCOPED_TRACE(layout);
      auto bm = std::make_shared<torch::nn::Module>();
      auto bw = bm->register_parameter("weight", torch::zeros({16, 16}));
      auto hm = std::make_shared<torch::nn::Module>();
      auto hw = hm->register_parameter("weight", torch::zeros({10, 16}));
      auto tm = std::make_shared<torch::nn::Module>();
      auto tw = tm->register_parameter("weight", torch::zeros({16}));
      torch::nn::Module root;
      root.register_module("body", bm);
      root.register_module("head", hm);
      root.register_module("tail", tm);
      ModuleLoadOptions mo;
      mo.mode = mode;
      auto e = LoadIntoModule(root, dir.str() + "/" + layout, {}, {}, mo);
      ASSERT_FALSE(e.ok());
      EXPECT_EQ(e.status().reason(), "ShapeMismatch");
      const std::string msg = e.status().message();
      EXPECT_NE(msg.find("head.weight"), std::string::npos) << msg;
      EXPECT_NE(msg.find("[12,16]"), std::string::npos) << msg;
      EXPECT_NE(msg.find("[10,16]"), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::string(layout) == "single" ? "model.safetensors" : "model-000"), std::string::npos) << msg;
      EXPECT_EQ(bw.sum().item<double>(), 0.0);  // nothing loaded before the error
      mo.ignore_mismatched_sizes = true;
      auto r = LoadIntoModule(root, dir.str() + "/" + layout, {}, {}, mo);
      ASSERT_OK(r);
      ASSERT_EQ(r->mismatched.size(), 1u);
      EXPECT_EQ(r->mismatched[0].name, "head.weight");
      EXPECT_EQ(r->mismatched[0].checkpoint_shape, (std::vector<int64_t>{12, 16}));
      EXPECT_EQ(r->mismatched[0].model_shape, (std::vector<int64_t>{10, 16}));
      EXPECT_TRUE(r->missing.empty());
      auto params = root.named_parameters();
      EXPECT_EQ(params["head.weight"].sum().item<double>(), 0.0);  // keeps its init
      EXPECT_EQ(params["body.weight"].sum().item<double>(), 3.0 * 256);
      EXPECT_EQ(params["tail.weight"].sum().item<double>(), 7.0 * 16);
    }
  }
}

// --- B35: one shard at a time -------------------------------------------------

long ReadVmKb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(std::strlen(key)));
  return -1;
}

TEST(FieldFailures, B35_PeakMemoryModelPlusOneShard) {
  TempDir dir;
  const int64_t kElems = 16 * 1024 * 1024;  // 32 MiB of fp16 per tensor
  {
    StateDict sd;
    for (int i = 0; i < 4; ++i) sd.emplace_back("p" + std::to_string(i), torch::full({kElems}, i + 1.0, torch::kHalf));
    SaveOptions o;
    o.max_shard_size = std::string("40MB");
    auto r = SaveSharded(sd, dir.str(), o);
    ASSERT_OK(r);
    ASSERT_EQ(r->files.size(), 4u);
  }
  torch::nn::Module m;
  std::vector<torch::Tensor> params;
  for (int i = 0; i < 4; ++i) params.push_back(m.register_parameter("p" + std::to_string(i), torch::zeros({kElems}, torch::kHalf)));
  {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";  // reset the peak-RSS counter (VmHWM)
    clear.flush();
    if (!clear.good()) GTEST_SKIP() << "cannot reset VmHWM here";
  }
  long rss0 = ReadVmKb("VmRSS:");
  long hwm0 = ReadVmKb("VmHWM:");
  if (rss0 < 0 || hwm0 < 0 || hwm0 > rss0 + 1024) GTEST_SKIP() << "VmHWM reset not supported";
  ModuleLoadOptions mo;
  mo.mode = ModuleLoadMode::kCopy;
  mo.strict = true;
  auto r = LoadIntoModule(m, dir.str(), {}, {}, mo);
  ASSERT_OK(r);
  long peak_kb = ReadVmKb("VmHWM:") - rss0;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(params[i][kElems - 1].item<float>(), i + 1.0f);
  // One shard is 32 MiB; the whole state dict 128 MiB. Allow one shard + 24 MiB of slack.
  EXPECT_LT(peak_kb, (32 + 24) * 1024) << "peak RSS grew by " << peak_kb << " KiB";
}

}  // namespace
}  // namespace hubload
