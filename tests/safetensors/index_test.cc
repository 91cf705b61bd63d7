// Index files: parsing, shard-name safety, metadata, and shard-vs-index checks.
#include <gtest/gtest.h>

#include "hubload/safetensors.h"
#include "safetensors/independent.h"
#include "testing/json_mutate.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace st = hubload::safetensors;
using hubload::Code;
using namespace hubload::testing;

namespace {

constexpr const char* kLabel = "model.safetensors.index.json";

void ExpectIndexError(const std::string& text, const std::string& reason, const std::string& tensor = {}) {
  SCOPED_TRACE(text);
  auto r = st::ParseIndex(text, kLabel);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidFormat);
  EXPECT_EQ(r.status().reason(), reason) << r.status().ToString();
  EXPECT_NE(r.status().message().find(kLabel), std::string::npos);
  if (!tensor.empty()) {
    EXPECT_EQ(r.status().context().tensor, tensor);
  }
}

TEST(SafetensorsIndex, ParsesShardsMetadataAndGroups) {
  std::string text = R"({
    "metadata": {"total_size": 1234, "format": "pt", "total_parameters": 617, "nested": {"a": [1]}},
    "weight_map": {
      "b.weight": "model-00002-of-00002.safetensors",
      "a.weight": "model-00001-of-00002.safetensors",
      "a.bias": "model-00001-of-00002.safetensors"
    }
  })";
  auto r = st::ParseIndex(text, kLabel);
  ASSERT_OK(r);
  EXPECT_EQ(r->weight_map.size(), 3u);
  EXPECT_EQ(r->weight_map.at("b.weight"), "model-00002-of-00002.safetensors");
  ASSERT_TRUE(r->total_size.has_value());
  EXPECT_EQ(*r->total_size, 1234u);
  EXPECT_EQ(r->metadata, (std::map<std::string, std::string>{
                             {"format", "pt"}, {"total_parameters", "617"}, {"nested", "{\"a\":[1]}"}}));
  EXPECT_EQ(r->shards, (std::vector<std::string>{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}));
  EXPECT_EQ(r->tensors_by_shard.at("model-00001-of-00002.safetensors"),
            (std::vector<std::string>{"a.bias", "a.weight"}));
  EXPECT_EQ(r->tensors_by_shard.at("model-00002-of-00002.safetensors"), (std::vector<std::string>{"b.weight"}));
}

TEST(SafetensorsIndex, MetadataOptionalAndTotalSizeForms) {
  auto r = st::ParseIndex(R"({"weight_map": {"a": "m.safetensors"}})", kLabel);
  ASSERT_OK(r);
  EXPECT_FALSE(r->total_size.has_value());
  auto f = st::ParseIndex(R"({"metadata": {"total_size": 2.5e9}, "weight_map": {}})", kLabel);
  ASSERT_OK(f);
  EXPECT_EQ(*f->total_size, 2500000000u);
  EXPECT_TRUE(f->shards.empty());
}

TEST(SafetensorsIndex, TotalSizeWrongType) {
  ExpectIndexError(R"({"metadata": {"total_size": "1234"}, "weight_map": {}})", "InvalidTotalSize");
  ExpectIndexError(R"({"metadata": {"total_size": -1}, "weight_map": {}})", "InvalidTotalSize");
  ExpectIndexError(R"({"metadata": {"total_size": 1.5}, "weight_map": {}})", "InvalidTotalSize");
  ExpectIndexError(R"({"metadata": {"total_size": [1]}, "weight_map": {}})", "InvalidTotalSize");
}

TEST(SafetensorsIndex, WeightMapShape) {
  ExpectIndexError("not json", "InvalidIndexJson");
  ExpectIndexError("[]", "InvalidIndexJson");
  ExpectIndexError(R"({"metadata": {}})", "InvalidIndexJson");
  ExpectIndexError(R"({"weight_map": ["a.safetensors"]})", "InvalidIndexJson");
  ExpectIndexError(R"({"weight_map": "a.safetensors"})", "InvalidIndexJson");
  ExpectIndexError(R"({"weight_map": {"a": 1}})", "InvalidIndexJson", "a");
  ExpectIndexError(R"({"metadata": [1], "weight_map": {}})", "InvalidIndexJson");
  ExpectIndexError(std::string(100000, '['), "InvalidIndexJson");
  ExpectIndexError(R"({"weight_map": {"a": "x.safetensors", "a": "y.safetensors"}})", "DuplicateTensor", "a");
}

TEST(SafetensorsIndex, BadShardNames) {
  for (const std::string bad : {"../model.safetensors", "sub/model.safetensors", "/abs/model.safetensors",
                                "..\\\\model.safetensors", "C:model.safetensors", "model.bin", ".safetensors",
                                "model.safetensors.bak", "", "a..safetensors"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(st::IsValidShardName(bad));
    nlohmann::json j = {{"weight_map", {{"w", bad}}}};
    ExpectIndexError(j.dump(), "InvalidShardName", "w");
  }
  EXPECT_TRUE(st::IsValidShardName("model-00001-of-00002.safetensors"));
  EXPECT_TRUE(st::IsValidShardName("diffusion_pytorch_model.fp16-00001-of-00002.safetensors"));
}

st::Header MakeHeader(std::vector<std::string> names) {
  // Build real bytes and parse them (so Find() has its name index).
  std::string text = "{";
  uint64_t off = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) text += ",";
    text += "\"" + names[i] + "\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[" + std::to_string(off) + "," +
            std::to_string(off + 1) + "]}";
    ++off;
  }
  text += "}";
  auto bytes = BuildFile(text, std::vector<uint8_t>(off));
  auto h = st::ParseHeader(bytes.data(), bytes.size(), bytes.size(), "shard");
  EXPECT_OK(h);
  return h.ok() ? *h : st::Header{};
}

TEST(SafetensorsIndex, CheckShardAgainstIndex) {
  auto idx = st::ParseIndex(R"({"weight_map": {"a": "s1.safetensors", "b": "s1.safetensors", "c": "s2.safetensors"}})",
                            kLabel);
  ASSERT_OK(idx);
  EXPECT_OK(st::CheckShardAgainstIndex(*idx, "s1.safetensors", MakeHeader({"a", "b"})));
  EXPECT_OK(st::CheckShardAgainstIndex(*idx, "s2.safetensors", MakeHeader({"c"})));

  auto missing = st::CheckShardAgainstIndex(*idx, "s1.safetensors", MakeHeader({"a"}));
  EXPECT_EQ(missing.reason(), "IndexTensorMissing");
  EXPECT_EQ(missing.context().tensor, "b");
  EXPECT_NE(missing.message().find("s1.safetensors"), std::string::npos);

  auto extra = st::CheckShardAgainstIndex(*idx, "s1.safetensors", MakeHeader({"a", "b", "zz"}));
  EXPECT_EQ(extra.reason(), "IndexTensorUnlisted");
  EXPECT_EQ(extra.context().tensor, "zz");

  auto other = st::CheckShardAgainstIndex(*idx, "s1.safetensors", MakeHeader({"a", "b", "c"}));
  EXPECT_EQ(other.reason(), "IndexTensorInOtherShard");
  EXPECT_NE(other.message().find("s2.safetensors"), std::string::npos);

  auto unknown = st::CheckShardAgainstIndex(*idx, "s3.safetensors", MakeHeader({}));
  EXPECT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.code(), Code::kInvalidArgument);
}

TEST(SafetensorsIndex, ReadIndexFileErrors) {
  auto r = st::ReadIndex("/nonexistent/model.safetensors.index.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  TempDir tmp;
  auto p = tmp.path() / "x.index.json";
  WriteFileBytes(p, std::string("{\"weight_map\": {\"a\": \"../x.safetensors\"}}"));
  auto bad = st::ReadIndex(p.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().reason(), "InvalidShardName");
  EXPECT_EQ(bad.status().context().file, p.string());
}

}  // namespace

// Issue 14: every field of an index set to every JSON type (and removed):
// a Status naming the index file and the field, or the index; never a throw.
TEST(SafetensorsIndex, EveryFieldOfEveryType) {
  using json = nlohmann::json;
  json doc = {{"metadata", {{"total_size", 1234}, {"format", "pt"}}},
              {"weight_map", {{"a.weight", "model-00001-of-00002.safetensors"},
                              {"b.weight", "model-00002-of-00002.safetensors"}}}};
  ASSERT_OK(st::ParseIndex(doc.dump(), kLabel));
  int runs = MutateEveryField(
      doc, [](const json& j) { return st::ParseIndex(j.dump(), kLabel).status(); },
      {{"/weight_map", json::value_t::object},
       {"/weight_map/a.weight", json::value_t::string, false},
       {"/weight_map/b.weight", json::value_t::string, false},
       {"/metadata", json::value_t::object, false},
       {"/metadata/total_size", json::value_t::number_unsigned, false}},
      kLabel, /*jsonin_paths=*/false);
  EXPECT_GT(runs, 50);
  // Non-string metadata values are kept as compact JSON text, whatever their type.
  for (const json& t : EveryJsonType()) {
    json m = doc;
    m["metadata"]["format"] = t;
    auto r = st::ParseIndex(m.dump(), kLabel);
    ASSERT_OK(r) << t.dump() << ": " << r.status().ToString();
    EXPECT_EQ(r->metadata.at("format"), t.is_string() ? t.get<std::string>() : t.dump()) << t.dump();
  }
}
