// File resolution (loading-semantics.md section A) and the shard-list checks
// of field failures B23 and B25.
#include <gtest/gtest.h>

#include "hubload/resolve.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace hubload {
namespace {

ResolvedWeights MustResolve(const std::vector<std::string>& files, const ResolveOptions& o) {
  auto r = ResolveWeights(files, o);
  EXPECT_OK(r);
  return r.ok() ? *r : ResolvedWeights{};
}

safetensors::Index MustIndex(const std::string& json) {
  auto r = safetensors::ParseIndex(json, "test index");
  EXPECT_OK(r);
  return r.ok() ? *r : safetensors::Index{};
}

TEST(AddVariant, SplitsAtLastDot) {
  EXPECT_EQ(AddVariant("model.safetensors", "fp16"), "model.fp16.safetensors");
  EXPECT_EQ(AddVariant("model.safetensors.index.json", "fp16"), "model.safetensors.index.fp16.json");
  EXPECT_EQ(AddVariant("model.safetensors", ""), "model.safetensors");
}

TEST(NormaliseSubfolder, StripsOnlyLeadingAndTrailingSlashes) {
  EXPECT_EQ(NormaliseSubfolder("/unet/"), "unet");
  EXPECT_EQ(NormaliseSubfolder("//a/b//"), "a/b");
  EXPECT_EQ(NormaliseSubfolder("a//b"), "a//b");  // inner slashes are ValidateRepoPath's to judge
  EXPECT_EQ(NormaliseSubfolder("../x/"), "../x");
  EXPECT_EQ(NormaliseSubfolder("/"), "");
  EXPECT_EQ(NormaliseSubfolder(""), "");
}

TEST(ResolveWeights, DiffusersIndexWinsOverSingleFile) {
  std::vector<std::string> files = {"unet/config.json", "unet/diffusion_pytorch_model.safetensors",
                                    "unet/diffusion_pytorch_model.safetensors.index.json",
                                    "diffusion_pytorch_model.safetensors"};
  ResolveOptions o;
  o.subfolder = "/unet/";
  o.convention = ResolveOptions::Convention::kDiffusers;
  auto r = MustResolve(files, o);
  EXPECT_EQ(r.kind, ResolvedWeights::kSharded);
  EXPECT_EQ(r.weights_file, "unet/diffusion_pytorch_model.safetensors.index.json");
  EXPECT_EQ(r.weights_name, "diffusion_pytorch_model");
  EXPECT_EQ(r.subfolder, "unet");
  ASSERT_EQ(r.warnings.size(), 1u);  // the stray single file next to the index is named
  EXPECT_NE(r.warnings[0].find("unet/diffusion_pytorch_model.safetensors' is ignored"), std::string::npos);
}

TEST(ResolveWeights, TransformersSingleFileWins) {
  std::vector<std::string> files = {"model.safetensors", "model.safetensors.index.json", "config.json"};
  ResolveOptions o;
  o.convention = ResolveOptions::Convention::kTransformers;
  auto r = MustResolve(files, o);
  EXPECT_EQ(r.kind, ResolvedWeights::kSingleFile);
  EXPECT_EQ(r.weights_file, "model.safetensors");
  o.convention = ResolveOptions::Convention::kAuto;  // auto: index first
  EXPECT_EQ(MustResolve(files, o).weights_file, "model.safetensors.index.json");
}

TEST(ResolveWeights, VariantNamesNewAndLegacy) {
  ResolveOptions o;
  o.variant = "fp16";
  auto r = MustResolve({"diffusion_pytorch_model.safetensors.index.fp16.json",
                        "diffusion_pytorch_model.safetensors.fp16.index.json"},
                       o);
  EXPECT_EQ(r.weights_file, "diffusion_pytorch_model.safetensors.index.fp16.json");
  EXPECT_FALSE(r.legacy_variant_names);
  EXPECT_EQ(r.variant_used, "fp16");
  auto legacy = MustResolve({"diffusion_pytorch_model.safetensors.fp16.index.json"}, o);
  EXPECT_TRUE(legacy.legacy_variant_names);
  EXPECT_EQ(legacy.kind, ResolvedWeights::kSharded);
  EXPECT_FALSE(legacy.warnings.empty());
  auto single = MustResolve({"model.safetensors", "model.fp16.safetensors"}, o);
  EXPECT_EQ(single.weights_file, "model.fp16.safetensors");
  EXPECT_EQ(single.kind, ResolvedWeights::kSingleFile);
}

TEST(ResolveWeights, MissingVariantListsShardedVariantsByNameNotByShard) {
  // New-style variant shards (name.V-0000i-of-0000N) and legacy ones (name-0000i-of-0000N.V):
  // the variant is "fp16" / "bf16", never "fp16-00001-of-00002".
  std::vector<std::string> files = {
      "transformer/diffusion_pytorch_model.fp16-00001-of-00002.safetensors",
      "transformer/diffusion_pytorch_model.fp16-00002-of-00002.safetensors",
      "transformer/diffusion_pytorch_model.safetensors.index.fp16.json",
      "transformer/diffusion_pytorch_model-00001-of-00002.bf16.safetensors",
      "transformer/diffusion_pytorch_model-00002-of-00002.bf16.safetensors",
      "transformer/diffusion_pytorch_model-00001-of-00002.safetensors",
      "transformer/diffusion_pytorch_model-00002-of-00002.safetensors",
      "transformer/diffusion_pytorch_model.safetensors.index.json"};
  ResolveOptions o;
  o.subfolder = "transformer";
  o.variant = "fp99";
  auto r = ResolveWeights(files, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("variants present: (none), bf16, fp16;"), std::string::npos)
      << r.status().message();
}

TEST(ResolveWeights, MissingVariantListsVariantsPresent) {
  std::vector<std::string> files = {"vae/diffusion_pytorch_model.safetensors", "vae/diffusion_pytorch_model.bf16.safetensors",
                                    "vae/diffusion_pytorch_model.safetensors.index.ema.json"};
  ResolveOptions o;
  o.subfolder = "vae";
  o.variant = "fp16";
  auto r = ResolveWeights(files, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_EQ(r.status().reason(), "VariantNotFound");
  EXPECT_NE(r.status().message().find("variants present: (none), bf16, ema"), std::string::npos)
      << r.status().message();
  o.allow_variant_fallback = true;
  auto f = MustResolve(files, o);
  EXPECT_EQ(f.weights_file, "vae/diffusion_pytorch_model.safetensors");
  EXPECT_EQ(f.variant_used, "");
  ASSERT_FALSE(f.warnings.empty());
  EXPECT_NE(f.warnings[0].find("'fp16' not found"), std::string::npos);
}

TEST(ResolveWeights, PickleAndShardedBinDefault) {
  ResolveOptions o;
  auto r = MustResolve({"pytorch_model.bin", "config.json"}, o);
  EXPECT_TRUE(r.is_pickle);
  EXPECT_EQ(r.weights_name, "pytorch_model");
  // diffusers issue #14811: a sharded .bin is found with default options.
  auto s = MustResolve({"diffusion_pytorch_model.bin.index.json", "diffusion_pytorch_model-00001-of-00001.bin"}, o);
  EXPECT_EQ(s.kind, ResolvedWeights::kSharded);
  EXPECT_TRUE(s.is_pickle);
  o.allow_pickle = false;
  auto n = ResolveWeights({"pytorch_model.bin"}, o);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().reason(), "WeightsNotFound");
  EXPECT_NE(n.status().message().find("model.safetensors"), std::string::npos);
}

// A diffusers pipeline root has no weights of its own: the error names the
// subfolders that have some (found by the same resolution), not the others.
TEST(ResolveWeights, PipelineRootNamesTheSubfoldersWithWeights) {
  ResolveOptions o;
  auto r = ResolveWeights({"model_index.json", "scheduler/scheduler_config.json", "transformer/config.json",
                           "transformer/diffusion_pytorch_model.safetensors", "text_encoder/config.json",
                           "text_encoder/model.safetensors.index.json", "text_encoder/model-00001-of-00001.safetensors"},
                          o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "WeightsNotFound");
  EXPECT_NE(r.status().message().find("these subfolders have weights: text_encoder, transformer"), std::string::npos)
      << r.status().ToString();
  EXPECT_EQ(r.status().message().find("scheduler"), std::string::npos) << r.status().ToString();
  // A root with no subfolder of weights gets no hint.
  auto n = ResolveWeights({"config.json", "scheduler/scheduler_config.json"}, o);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().message().find("subfolders"), std::string::npos) << n.status().ToString();
}

TEST(ResolveWeights, BadVariant) {
  ResolveOptions o;
  o.variant = "../x";
  auto r = ResolveWeights({"model.safetensors"}, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
}

// B25: per component, the variant files are used where present, never mixed.
TEST(FieldFailures, B25_VariantResolutionPerComponent) {
  std::vector<std::string> files = {
      "transformer/diffusion_pytorch_model.bf16.safetensors",
      "transformer/diffusion_pytorch_model-00001-of-00002.safetensors",
      "transformer/diffusion_pytorch_model-00002-of-00002.safetensors",
      "transformer/diffusion_pytorch_model.safetensors.index.json",
      "text_encoder/model.bf16-00001-of-00002.safetensors",
      "text_encoder/model.bf16-00002-of-00002.safetensors",
      "text_encoder/model.safetensors.index.bf16.json",
      "text_encoder/model.safetensors",
      "vae/diffusion_pytorch_model.safetensors",
  };
  ResolveOptions o;
  o.variant = "bf16";
  o.subfolder = "transformer";
  auto t = MustResolve(files, o);
  EXPECT_EQ(t.kind, ResolvedWeights::kSingleFile);
  EXPECT_EQ(t.weights_file, "transformer/diffusion_pytorch_model.bf16.safetensors");
  o.subfolder = "text_encoder";
  auto te = MustResolve(files, o);
  EXPECT_EQ(te.weights_file, "text_encoder/model.safetensors.index.bf16.json");
  auto idx = MustIndex(R"({"metadata":{"total_size":8},"weight_map":{"a":"model.bf16-00001-of-00002.safetensors","b":"model.bf16-00002-of-00002.safetensors"}})");
  auto shards = ShardPaths(te, idx, files);
  ASSERT_OK(shards);
  EXPECT_EQ(*shards, (std::vector<std::string>{"text_encoder/model.bf16-00001-of-00002.safetensors",
                                               "text_encoder/model.bf16-00002-of-00002.safetensors"}));
  o.subfolder = "vae";
  auto v = ResolveWeights(files, o);
  ASSERT_FALSE(v.ok());  // strict: an error for vae
  EXPECT_NE(v.status().message().find("'vae/'"), std::string::npos) << v.status().message();
  o.allow_variant_fallback = true;
  auto vf = MustResolve(files, o);
  EXPECT_EQ(vf.weights_file, "vae/diffusion_pytorch_model.safetensors");
  ASSERT_FALSE(vf.warnings.empty());
  EXPECT_NE(vf.warnings[0].find("vae"), std::string::npos);
  // A bf16 index whose weight_map points at non-variant shards is refused (mixing).
  auto mixed = MustIndex(R"({"weight_map":{"a":"model.bf16-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})");
  auto m = ShardPaths(te, mixed, files);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().reason(), "VariantMixing");
  EXPECT_NE(m.status().message().find("model-00002-of-00002.safetensors"), std::string::npos);
  // And a non-variant index naming variant shards.
  ResolveOptions plain;
  plain.subfolder = "text_encoder";
  plain.convention = ResolveOptions::Convention::kTransformers;
  ResolvedWeights pr;
  pr.kind = ResolvedWeights::kSharded;
  pr.weights_file = "text_encoder/model.safetensors.index.json";
  pr.weights_name = "model";
  pr.subfolder = "text_encoder";
  auto m2 = ShardPaths(pr, idx, files);
  ASSERT_FALSE(m2.ok());
  EXPECT_EQ(m2.status().reason(), "VariantMixing");
}

// B23: an index naming a shard that is absent fails before anything is loaded,
// naming the missing shard.
TEST(FieldFailures, B23_MissingShardListed) {
  std::vector<std::string> files = {"model.safetensors.index.json", "model-00001-of-00002.safetensors", "model.safetensors"};
  ResolveOptions o;
  auto r = MustResolve(files, o);
  ASSERT_EQ(r.kind, ResolvedWeights::kSharded);  // variant 3: the index wins, the stray file is ignored
  EXPECT_EQ(r.weights_file, "model.safetensors.index.json");
  auto idx = MustIndex(R"({"weight_map":{"a.weight":"model-00001-of-00002.safetensors","b.weight":"model-00002-of-00002.safetensors"}})");
  auto s = ShardPaths(r, idx, files);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kNotFound);
  EXPECT_EQ(s.status().reason(), "MissingShards");
  EXPECT_NE(s.status().message().find("model-00002-of-00002.safetensors"), std::string::npos);
  EXPECT_EQ(s.status().message().find("model-00001-of-00002.safetensors"), std::string::npos);
}

TEST(ShardPaths, RejectsTraversalAndWrongExtension) {
  ResolvedWeights r;
  r.kind = ResolvedWeights::kSharded;
  r.weights_file = "model.safetensors.index.json";
  r.weights_name = "model";
  // ParseIndex already refuses "../" names; build the Index by hand.
  for (const char* bad : {"../model-00001-of-00001.safetensors", "sub/model.safetensors", "model-00001-of-00001.bin", "C:model.safetensors"}) {
    safetensors::Index idx;
    idx.weight_map["a"] = bad;
    auto s = ShardPaths(r, idx, {bad});
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().reason(), "InvalidShardName") << bad;
  }
  safetensors::Index empty;
  EXPECT_EQ(ShardPaths(r, empty, {}).status().reason(), "EmptyIndex");
}

// The real Mochi pipeline layout (shared data): bf16 index in transformer/,
// default index in text_encoder/; its shards are LFS-only, so ShardPaths lists them missing.
TEST(ResolveWeights, RealMochiLayout) {
  auto root = testing::SharedDataDir();
  if (root.empty()) GTEST_SKIP() << "shared data not present";
  auto files = ListLocalFiles((root / "layouts" / "Mochi-diffusers-pipeline").string());
  ASSERT_OK(files);
  ResolveOptions o;
  o.subfolder = "transformer";
  o.variant = "bf16";
  auto t = MustResolve(*files, o);
  EXPECT_EQ(t.weights_file, "transformer/diffusion_pytorch_model.safetensors.index.bf16.json");
  o.variant = "";
  EXPECT_EQ(MustResolve(*files, o).weights_file, "transformer/diffusion_pytorch_model.safetensors.index.json");
  o.subfolder = "text_encoder";
  auto te = MustResolve(*files, o);
  EXPECT_EQ(te.weights_file, "text_encoder/model.safetensors.index.json");
  auto idx = safetensors::ReadIndex((root / "layouts" / "Mochi-diffusers-pipeline" / te.weights_file).string());
  ASSERT_OK(idx);
  auto s = ShardPaths(te, *idx, *files);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().reason(), "MissingShards");
  for (const auto& shard : idx->shards) EXPECT_NE(s.status().message().find("text_encoder/" + shard), std::string::npos);
  o.subfolder = "vae";
  o.variant = "fp16";
  auto v = ResolveWeights(*files, o);  // vae weights are LFS-only: not in this folder at all
  EXPECT_FALSE(v.ok());
}

}  // namespace
}  // namespace hubload

namespace hubload {
namespace {

// The one weights file-name grammar, case by case (names as transformers,
// diffusers and huggingface_hub write them; expected fields by hand).
TEST(WeightsFileName, EveryForm) {
  using K = WeightsFileName::Kind;
  struct Case {
    const char* name;
    K kind;
    const char* stem;
    const char* variant;
    bool pickle, legacy;
    int shard, num;
  };
  const Case cases[] = {
      {"model.safetensors", K::kSingle, "model", "", false, false, 0, 0},
      {"diffusion_pytorch_model.fp16.safetensors", K::kSingle, "diffusion_pytorch_model", "fp16", false, false, 0, 0},
      {"pytorch_model.bin", K::kSingle, "pytorch_model", "", true, false, 0, 0},
      {"model-00001-of-00002.safetensors", K::kShard, "model", "", false, false, 1, 2},
      {"model.fp16-00002-of-00002.safetensors", K::kShard, "model", "fp16", false, false, 2, 2},
      {"model-00001-of-00003.fp16.safetensors", K::kShard, "model", "fp16", false, true, 1, 3},
      {"pytorch_model-00003-of-00005.bin", K::kShard, "pytorch_model", "", true, false, 3, 5},
      {"consolidated-00001-of-00002.safetensors", K::kShard, "consolidated", "", false, false, 1, 2},
      {"model.safetensors.index.json", K::kIndex, "model", "", false, false, 0, 0},
      {"model.safetensors.index.fp16.json", K::kIndex, "model", "fp16", false, false, 0, 0},
      {"diffusion_pytorch_model.safetensors.fp16.index.json", K::kIndex, "diffusion_pytorch_model", "fp16", false,
       true, 0, 0},
      {"pytorch_model.bin.index.json", K::kIndex, "pytorch_model", "", true, false, 0, 0},
      {"best-of-breed.safetensors", K::kSingle, "best-of-breed", "", false, false, 0, 0},
      {"model.fp16-ema.safetensors", K::kSingle, "model", "fp16-ema", false, false, 0, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto w = ParseWeightsFileName(c.name);
    ASSERT_TRUE(w.has_value());
    EXPECT_EQ(w->kind, c.kind);
    EXPECT_EQ(w->stem, c.stem);
    EXPECT_EQ(w->variant, c.variant);
    EXPECT_EQ(w->pickle, c.pickle);
    EXPECT_EQ(w->legacy_variant, c.legacy);
    EXPECT_EQ(w->shard, c.shard);
    EXPECT_EQ(w->num_shards, c.num);
  }
}

TEST(WeightsFileName, RefusesWhatIsNotAWeightsName) {
  for (const char* bad : {"config.json", "model.gguf", "a/model.safetensors", "model.a.b.safetensors",
                          "model-00000-of-00002.safetensors",  // shard 0 does not exist (B55)
                          "model-00003-of-00002.safetensors", "model.fp16-00000-of-00002.safetensors", ".safetensors",
                          "model.safetensors.index.x.y.json", "model..safetensors"}) {
    EXPECT_FALSE(ParseWeightsFileName(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace hubload
