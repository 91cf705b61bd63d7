// Field failure B49: the index as the authority over its shards, on the
// safetensors core (no LibTorch): index metadata that is tool-specific, null,
// absent or wrong about total_size, extra top-level keys, non-standard shard
// prefixes, a truncated index; shards that hold tensors the index does not
// list for them. The expected problems are written out by hand from the
// scenario in ../shared/docs/field-failures.md.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "hubload/reasons.h"
#include "hubload/safetensors.h"
#include "testing/status_matchers.h"

namespace st = hubload::safetensors;
using hubload::Code;

namespace {

const std::string kMap = "\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s1.safetensors\",\"c\":\"s2.safetensors\"}";

}  // namespace

TEST(FieldB49, OptionalOrToolSpecificMetadataParses) {
  const std::vector<std::string> variants = {
      "{\"metadata\":{\"quantization_level\":\"4\",\"tool_version\":\"0.1\"}," + kMap + "}",  // (i) no total_size
      "{\"metadata\":null," + kMap + "}",                                                     // (ii)
      "{" + kMap + "}",                                                                       // (iii)
      "{\"metadata\":{\"total_size\":999}," + kMap + "}",                                     // (iv)
      "{\"format\":\"pt\",\"note\":\"x\"," + kMap + "}",                                      // (v)
  };
  for (const auto& text : variants) {
    auto i = st::ParseIndex(text, "model.safetensors.index.json");
    ASSERT_OK(i) << text << ": " << i.status().ToString();
    EXPECT_EQ(i->shards, (std::vector<std::string>{"s1.safetensors", "s2.safetensors"})) << text;
    EXPECT_EQ(i->weight_map.at("a"), "s1.safetensors");
  }
  auto i = st::ParseIndex("{\"metadata\":{\"quantization_level\":\"4\"}," + kMap + "}", "idx.json");
  ASSERT_OK(i);
  EXPECT_FALSE(i->total_size.has_value());
  EXPECT_EQ(i->metadata.at("quantization_level"), "4");
  // (iv): total_size is informational: a warning naming both numbers, never an error.
  auto iv = st::ParseIndex("{\"metadata\":{\"total_size\":999}," + kMap + "}", "idx.json");
  ASSERT_OK(iv);
  std::string w = st::TotalSizeWarning(*iv, 24);
  EXPECT_NE(w.find("999"), std::string::npos) << w;
  EXPECT_NE(w.find("24"), std::string::npos) << w;
  EXPECT_EQ(st::TotalSizeWarning(*iv, 999), "");
}

TEST(FieldB49, NonStandardShardPrefixes) {  // (vi)
  auto i = st::ParseIndex(
      "{\"weight_map\":{\"a\":\"consolidated-00001-of-00002.safetensors\",\"c\":\"consolidated-00002-of-00002."
      "safetensors\"}}",
      "idx.json");
  ASSERT_OK(i);
  EXPECT_EQ(i->shards.size(), 2u);
}

TEST(FieldB49, ATruncatedIndexNamesTheFileAndWhereItBroke) {  // (vii)
  std::string full = "{\"metadata\":{\"total_size\":24}," + kMap + "}";
  std::string cut = full.substr(0, 40);
  auto i = st::ParseIndex(cut, "org/m/model.safetensors.index.json");
  ASSERT_FALSE(i.ok());
  EXPECT_EQ(i.status().code(), Code::kInvalidFormat);
  EXPECT_EQ(i.status().reason(), "InvalidIndexJson");
  EXPECT_NE(i.status().message().find("org/m/model.safetensors.index.json"), std::string::npos);
  // The parser stops at the end of the 40 bytes: it says so.
  EXPECT_NE(i.status().message().find("at byte 40 of 40"), std::string::npos) << i.status().message();
}

TEST(FieldB49, TensorsTheIndexDoesNotMapToAShardAreNamed) {
  auto i = st::ParseIndex("{" + kMap + "}", "idx.json");
  ASSERT_OK(i);
  // s1 = {a, b, x_old}, s2 = {c, a (other values)}: the mapped shard s1 owns a;
  // the second copy in s2 is "stored twice" (a tensor in several shards).
  std::vector<st::ShardTensors> shards = {{"s1.safetensors", true, "", {{"a", 8}, {"b", 8}, {"x_old", 8}}},
                                          {"s2.safetensors", true, "", {{"c", 8}, {"a", 8}}}};
  auto check = st::CheckIndexAgainstShards(*i, shards);
  std::set<std::string> found;
  for (auto& p : check.problems) found.insert(p.shard + ":" + p.tensor + ":" + p.reason);
  EXPECT_EQ(found,
            (std::set<std::string>{"s1.safetensors:x_old:" + std::string(hubload::reason::kIndexTensorUnlisted),
                                   "s2.safetensors:a:" + std::string(hubload::reason::kIndexTensorStoredTwice)}));
  // Shard by shard, as `load` checks them: s1 fails on x_old, s2 on a.
  std::vector<std::string_view> s1 = {"a", "b", "x_old"}, s2 = {"c", "a"};
  auto e1 = st::CheckShardNamesAgainstIndex(*i, "s1.safetensors", s1);
  ASSERT_FALSE(e1.ok());
  EXPECT_NE(e1.message().find("x_old"), std::string::npos) << e1.message();
  auto e2 = st::CheckShardNamesAgainstIndex(*i, "s2.safetensors", s2);
  ASSERT_FALSE(e2.ok());
  EXPECT_NE(e2.message().find("\"a\""), std::string::npos) << e2.message();
}

// Lenient (the index is the authority): the tensors a shard holds that the
// index does not map to it are returned to be skipped; a mapped tensor the
// shard lacks is still an error.
TEST(FieldB49, LenientNamesTheTensorsToSkipAndStillRefusesAMissingOne) {
  auto i = st::ParseIndex("{" + kMap + "}", "idx.json");
  ASSERT_OK(i);
  std::vector<std::string_view> s1 = {"a", "b", "x_old"}, s2 = {"c", "a"};
  auto k1 = st::ShardTensorsNotMappedHere(*i, "s1.safetensors", s1);
  ASSERT_OK(k1);
  EXPECT_EQ(*k1, (std::vector<std::string>{"x_old"}));
  auto k2 = st::ShardTensorsNotMappedHere(*i, "s2.safetensors", s2);
  ASSERT_OK(k2);
  EXPECT_EQ(*k2, (std::vector<std::string>{"a"}));
  std::vector<std::string_view> agrees = {"c"};
  auto k3 = st::ShardTensorsNotMappedHere(*i, "s2.safetensors", agrees);
  ASSERT_OK(k3);
  EXPECT_TRUE(k3->empty());
  std::vector<std::string_view> lacks_b = {"a", "x_old"};
  auto e = st::ShardTensorsNotMappedHere(*i, "s1.safetensors", lacks_b);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().reason(), hubload::reason::kIndexTensorMissing);
  EXPECT_NE(e.status().message().find("\"b\""), std::string::npos) << e.status().message();
  auto unnamed = st::ShardTensorsNotMappedHere(*i, "s3.safetensors", agrees);
  EXPECT_FALSE(unnamed.ok());
}
