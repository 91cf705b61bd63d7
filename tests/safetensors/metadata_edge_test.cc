// Field failure B48: `__metadata__` edge cases of the safetensors header, on
// hand-built bytes (tests/safetensors/independent.h BuildFile), each with the
// behaviour asserted explicitly: {} and null are "no metadata", a non-string
// value, a string or an array are errors naming `__metadata__`, zero tensors
// load, the key given twice is a duplicate, and the key's place in the JSON
// does not matter. Writer outputs are re-read with nlohmann::json (a strict
// parser) and the header length checked against the 8-byte alignment.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hubload/safetensors.h"
#include "safetensors/independent.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace st = hubload::safetensors;
using hubload::Code;
using namespace hubload::testing;  // NOLINT(build/namespaces)

namespace {

constexpr const char* kLabel = "model.safetensors";
// `w` F32 [2] at [0, 8], 8 data bytes 1.0f, 2.0f.
const std::string kW = "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";
const std::vector<uint8_t> kWData = {0, 0, 0x80, 0x3f, 0, 0, 0, 0x40};

hubload::Result<st::Header> Parse(const std::string& header_text, const std::vector<uint8_t>& data = kWData) {
  auto b = BuildFile(header_text, data);
  return st::ParseHeader(b.data(), b.size(), b.size(), kLabel);
}

void ExpectMetadataError(const std::string& text, const std::string& must_name) {
  auto r = Parse(text);
  ASSERT_FALSE(r.ok()) << text;
  EXPECT_EQ(r.status().code(), Code::kInvalidFormat);
  EXPECT_EQ(r.status().reason(), "InvalidHeaderJson") << r.status().ToString();
  EXPECT_NE(r.status().message().find("__metadata__"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(must_name), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(kLabel), std::string::npos) << r.status().message();
}

}  // namespace

TEST(FieldB48, EmptyOrNullMetadataIsNoMetadataAndNeverATensor) {
  for (const std::string meta : {"{}", "null"}) {  // (a), (b)
    auto r = Parse("{\"__metadata__\":" + meta + "," + kW + "}");
    ASSERT_OK(r) << meta << ": " << r.status().ToString();
    EXPECT_TRUE(r->metadata.empty()) << meta;
    ASSERT_EQ(r->tensors.size(), 1u);
    EXPECT_EQ(r->tensors[0].name, "w");
    EXPECT_EQ(r->Find("__metadata__"), nullptr);
  }
}

TEST(FieldB48, NonStringValuesAreRefusedNamingTheKeyAndTheType) {
  ExpectMetadataError("{\"__metadata__\":{\"n\":0}," + kW + "}", "\"n\"");  // (c)
  ExpectMetadataError("{\"__metadata__\":{\"n\":0}," + kW + "}", "not a string");
  ExpectMetadataError("{\"__metadata__\":{\"k\":\"v\",\"nested\":{\"a\":\"b\"}}," + kW + "}", "\"nested\"");
  ExpectMetadataError("{\"__metadata__\":\"x\"," + kW + "}", "string");  // (g)
  ExpectMetadataError("{\"__metadata__\":[]," + kW + "}", "array");
  ExpectMetadataError("{\"__metadata__\":7," + kW + "}", "number");
}

TEST(FieldB48, ZeroTensorsLoadWithOrWithoutMetadata) {
  auto d = Parse("{\"__metadata__\":{\"k\":\"v\"}}", {});  // (d)
  ASSERT_OK(d);
  EXPECT_TRUE(d->tensors.empty());
  EXPECT_EQ(d->metadata, (std::map<std::string, std::string>{{"k", "v"}}));
  EXPECT_EQ(d->file_size, d->data_start);
  auto e = Parse("{}      ", {});  // (e): 8 + 8 bytes
  ASSERT_OK(e);
  EXPECT_TRUE(e->tensors.empty());
  EXPECT_EQ(e->file_size, 16u);
}

TEST(FieldB48, MetadataTwiceIsADuplicateKey) {
  auto r = Parse("{\"__metadata__\":{\"a\":\"1\"},\"__metadata__\":{\"b\":\"2\"}," + kW + "}");  // (f)
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidFormat);
  EXPECT_NE(r.status().message().find("__metadata__"), std::string::npos) << r.status().message();
}

TEST(FieldB48, NoFormatKeyAndMetadataAfterTheTensorsAreAccepted) {
  auto first = Parse("{\"__metadata__\":{\"k\":\"v\"}," + kW + "}");
  auto last = Parse("{" + kW + ",\"__metadata__\":{\"k\":\"v\"}}");  // (i)
  ASSERT_OK(first);
  ASSERT_OK(last);
  EXPECT_EQ(first->metadata, last->metadata);
  EXPECT_EQ(first->metadata.count("format"), 0u);  // (h): not required
  ASSERT_EQ(last->tensors.size(), 1u);
  EXPECT_EQ(last->tensors[0].name, first->tensors[0].name);
  EXPECT_EQ(last->tensors[0].begin, first->tensors[0].begin);
  EXPECT_EQ(last->tensors[0].end, first->tensors[0].end);
}

TEST(FieldB48, WriterOutputsAreStrictJsonAlignedAndRoundTrip) {
  TempDir tmp;
  const float w[2] = {1.0f, 2.0f};
  struct Case {
    bool with_tensor;
    std::map<std::string, std::string> meta;
  };
  const std::vector<Case> cases = {{false, {{"k", "v"}}}, {true, {}}, {true, {{"k", "v"}, {"format", "pt"}}}};
  for (size_t i = 0; i < cases.size(); ++i) {
    std::vector<st::TensorToWrite> t;
    if (cases[i].with_tensor) t.push_back({"w", st::Dtype::F32, {2}, w, sizeof w});
    auto path = (tmp.path() / ("c" + std::to_string(i) + ".safetensors")).string();
    ASSERT_OK(st::WriteFile(path, t, cases[i].meta)) << i;
    auto bytes = ReadFileBytes(path);
    RawHeader raw = DecodeRaw(bytes);
    ASSERT_TRUE(raw.ok) << i;
    EXPECT_EQ(raw.n % 8, 0u) << i;
    auto j = nlohmann::json::parse(raw.text);  // strict: throws (fails the test) on anything else
    ASSERT_TRUE(j.is_object());
    if (cases[i].meta.empty()) {
      EXPECT_FALSE(j.contains("__metadata__")) << raw.text;
    } else {
      EXPECT_EQ(j["__metadata__"], nlohmann::json(cases[i].meta)) << raw.text;
    }
    auto back = st::ParseHeader(bytes.data(), bytes.size(), bytes.size(), path);
    ASSERT_OK(back);
    EXPECT_EQ(back->metadata, cases[i].meta);
    EXPECT_EQ(back->tensors.size(), cases[i].with_tensor ? 1u : 0u);
    if (cases[i].with_tensor) {
      EXPECT_EQ(std::vector<uint8_t>(bytes.end() - 8, bytes.end()), kWData);  // the values, bit-exact
    }
  }
}
