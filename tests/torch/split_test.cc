// Split plan and size parsing vs. values worked out by hand from
// huggingface_hub's split_state_dict_into_shards_factory / parse_size_to_int and the size grammar.
#include <gtest/gtest.h>

#include "hubload/split.h"
#include "testing/status_matchers.h"

namespace hubload {
namespace {

using Files = std::vector<std::pair<std::string, std::vector<std::string>>>;

StateDictSplit MustSplit(const std::vector<SplitEntry>& e, uint64_t max, const std::string& pattern) {
  auto r = SplitStateDict(e, max, pattern);
  EXPECT_OK(r);
  return r.ok() ? *r : StateDictSplit{};
}

// The one size grammar (hubload/size.h) as --max-shard-size / SaveOptions read it: the decimal
// units mean what huggingface_hub's parse_size_to_int makes of them, binary units are 2^10 steps.
TEST(ParseMaxShardSize, DecimalAsHubBinaryAsIec) {
  EXPECT_EQ(*ParseMaxShardSize("5GB"), 5'000'000'000ull);
  EXPECT_EQ(*ParseMaxShardSize("10GB"), 10'000'000'000ull);
  EXPECT_EQ(*ParseMaxShardSize("1.5GB"), 1'500'000'000ull);
  EXPECT_EQ(*ParseMaxShardSize(" 10 KB "), 10'000ull);
  EXPECT_EQ(*ParseMaxShardSize("20MB"), 20'000'000ull);
  EXPECT_EQ(*ParseMaxShardSize("1TB"), 1'000'000'000'000ull);
  EXPECT_EQ(*ParseMaxShardSize("10GiB"), 10ull * 1024 * 1024 * 1024);
  EXPECT_EQ(*ParseMaxShardSize("10KiB"), 10'240ull);
  EXPECT_EQ(*ParseMaxShardSize("1.5MiB"), 1'572'864ull);
  EXPECT_EQ(*ParseMaxShardSize("2.0000005KB"), 2000ull);  // 2000.0005 rounded down
  EXPECT_EQ(*ParseMaxShardSize("1000"), 1000ull);          // digits are bytes
  EXPECT_EQ(*ParseMaxShardSize("100B"), 100ull);
}

TEST(ParseMaxShardSize, RefusesBitsZeroAndJunkQuotingTheText) {
  for (const char* bad : {"5Gb", "20mb", "100b", "abc", "", "GB", "-1GB", "1e3KB", "nanGB", "0x10KB", "1 0KB",
                          "10XB", "1.5"}) {
    auto r = ParseMaxShardSize(bad);
    ASSERT_FALSE(r.ok()) << bad << " parsed as " << *r;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << bad;
    EXPECT_EQ(r.status().reason(), "InvalidMemorySize") << bad;
    EXPECT_NE(r.status().message().find(std::string("'") + bad + "'"), std::string::npos) << r.status().message();
  }
  EXPECT_NE(ParseMaxShardSize("5Gb").status().message().find("bits"), std::string::npos);
  for (const char* zero : {"0", "0KB", "0.0001B"}) {
    auto r = ParseMaxShardSize(zero);
    ASSERT_FALSE(r.ok()) << zero;
    EXPECT_EQ(r.status().reason(), "InvalidSize") << zero;
    EXPECT_NE(r.status().message().find(std::string("'") + zero + "'"), std::string::npos) << r.status().message();
  }
}

TEST(SplitNames, PatternsAndIndex) {
  EXPECT_EQ(ShardFilenamePattern("model", ""), "model{suffix}.safetensors");
  EXPECT_EQ(ShardFilenamePattern("model", "fp16"), "model.fp16{suffix}.safetensors");
  EXPECT_EQ(ShardFilenamePattern("diffusion_pytorch_model", "ema"), "diffusion_pytorch_model.ema{suffix}.safetensors");
  EXPECT_EQ(IndexFilename("model", ""), "model.safetensors.index.json");
  EXPECT_EQ(IndexFilename("diffusion_pytorch_model", "fp16"), "diffusion_pytorch_model.safetensors.index.fp16.json");
}

// The huggingface_hub docstring example: limit 10, sizes [6,6,2,6,2,2] -> [6] [6+2] [6+2+2].
TEST(SplitStateDict, HubDocExample) {
  std::vector<SplitEntry> e = {{"a", 6, 1}, {"b", 6, 2}, {"c", 2, 3}, {"d", 6, 4}, {"e", 2, 5}, {"f", 2, 6}};
  auto s = MustSplit(e, 10, "model{suffix}.safetensors");
  EXPECT_TRUE(s.is_sharded);
  EXPECT_EQ(s.total_size, 24u);
  Files want = {{"model-00001-of-00003.safetensors", {"a"}},
                {"model-00002-of-00003.safetensors", {"b", "c"}},
                {"model-00003-of-00003.safetensors", {"d", "e", "f"}}};
  EXPECT_EQ(s.filename_to_tensors, want);
  std::map<std::string, std::string> wm = {
      {"a", "model-00001-of-00003.safetensors"}, {"b", "model-00002-of-00003.safetensors"},
      {"c", "model-00002-of-00003.safetensors"}, {"d", "model-00003-of-00003.safetensors"},
      {"e", "model-00003-of-00003.safetensors"}, {"f", "model-00003-of-00003.safetensors"}};
  EXPECT_EQ(s.tensor_to_filename, wm);
}

// An oversized tensor becomes its own shard, appended before the open one.
TEST(SplitStateDict, OversizedTensorGoesAheadOfOpenShard) {
  // a=4 opens shard; b=12 > 10 -> [b] appended now; c=5 -> open [a,c]=9; d=3 -> 12 > 10 closes [a,c].
  std::vector<SplitEntry> e = {{"a", 4, std::nullopt}, {"b", 12, std::nullopt}, {"c", 5, std::nullopt}, {"d", 3, std::nullopt}};
  auto s = MustSplit(e, 10, "diffusion_pytorch_model.fp16{suffix}.safetensors");
  EXPECT_EQ(s.total_size, 24u);
  Files want = {{"diffusion_pytorch_model.fp16-00001-of-00003.safetensors", {"b"}},
                {"diffusion_pytorch_model.fp16-00002-of-00003.safetensors", {"a", "c"}},
                {"diffusion_pytorch_model.fp16-00003-of-00003.safetensors", {"d"}}};
  EXPECT_EQ(s.filename_to_tensors, want);
}

// A shard may be exactly max bytes (strict '>').
TEST(SplitStateDict, ExactBoundaryFits) {
  std::vector<SplitEntry> e = {{"x", 5, std::nullopt}, {"y", 5, std::nullopt}, {"z", 1, std::nullopt}};
  auto s = MustSplit(e, 10, "model{suffix}.safetensors");
  Files want = {{"model-00001-of-00002.safetensors", {"x", "y"}}, {"model-00002-of-00002.safetensors", {"z"}}};
  EXPECT_EQ(s.filename_to_tensors, want);
  EXPECT_EQ(s.total_size, 11u);
}

// Shared storage: sized once, placed with the first name of the storage.
TEST(SplitStateDict, AliasesJoinFirstNameShard) {
  // a(id1,6) -> [a]; b(id2,6): 12>10 closes [a], opens [b]; c aliases id1 (deferred);
  // d(4): 6+4=10 fits -> [b,d]. Then c joins a's shard. total = 6+6+4.
  std::vector<SplitEntry> e = {{"a", 6, 1}, {"b", 6, 2}, {"c", 6, 1}, {"d", 4, std::nullopt}};
  auto s = MustSplit(e, 10, "model{suffix}.safetensors");
  EXPECT_EQ(s.total_size, 16u);
  Files want = {{"model-00001-of-00002.safetensors", {"a", "c"}}, {"model-00002-of-00002.safetensors", {"b", "d"}}};
  EXPECT_EQ(s.filename_to_tensors, want);
  EXPECT_EQ(s.tensor_to_filename.at("c"), "model-00001-of-00002.safetensors");
}

TEST(SplitStateDict, OneShardIsNotSharded) {
  std::vector<SplitEntry> e = {{"w", 3, 7}, {"tied", 3, 7}, {"b", 2, std::nullopt}};
  auto s = MustSplit(e, 100, "model.fp16{suffix}.safetensors");
  EXPECT_FALSE(s.is_sharded);
  EXPECT_EQ(s.total_size, 5u);
  Files want = {{"model.fp16.safetensors", {"w", "tied", "b"}}};
  EXPECT_EQ(s.filename_to_tensors, want);
  // A single oversized tensor is one shard too.
  auto s2 = MustSplit({{"big", 50, std::nullopt}}, 10, "model{suffix}.safetensors");
  EXPECT_FALSE(s2.is_sharded);
  EXPECT_EQ(s2.filename_to_tensors.at(0).first, "model.safetensors");
}

TEST(SplitStateDict, EmptyGivesNoShard) {
  auto s = MustSplit({}, 10, "model{suffix}.safetensors");
  EXPECT_TRUE(s.filename_to_tensors.empty());
  EXPECT_FALSE(s.is_sharded);
  EXPECT_EQ(s.total_size, 0u);
}

TEST(SplitStateDict, RejectsBadInput) {
  EXPECT_FALSE(SplitStateDict({{"a", 1, std::nullopt}}, 10, "model.safetensors").ok());
  EXPECT_FALSE(SplitStateDict({{"a", 1, std::nullopt}, {"a", 1, std::nullopt}}, 10, "m{suffix}.safetensors").ok());
  EXPECT_FALSE(SplitStateDict({{"a", 1, std::nullopt}}, 0, "m{suffix}.safetensors").ok());
}

}  // namespace
}  // namespace hubload
