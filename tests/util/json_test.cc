// util/json.h: every accessor refuses every wrong JSON type with a Status that
// names the document, the field path and the expected type.
#include <gtest/gtest.h>

#include <string>

#include "util/json.h"
#include "testing/status_matchers.h"

namespace hubload::util {
namespace {

using nlohmann::json;


TEST(Json, ParseRejectsInvalidAndDeep) {
  auto bad = ParseJson("{\"a\": ", "trees/x.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().reason(), "BadJson");
  EXPECT_NE(bad.status().message().find("trees/x.json"), std::string::npos);
  EXPECT_EQ(bad.status().context().file, "trees/x.json");
  std::string deep(100000, '[');
  auto d = ParseJson(deep, "https://h/x");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("nested deeper"), std::string::npos);
  EXPECT_EQ(d.status().context().url, "https://h/x");
  std::string ok64 = std::string(64, '[') + std::string(64, ']');
  EXPECT_OK(ParseJson(ok64, "x"));
  EXPECT_FALSE(ParseJson(std::string(65, '[') + std::string(65, ']'), "x").ok());
  EXPECT_FALSE(ParseJson("\"\xff\"", "x").ok());  // invalid UTF-8
  EXPECT_FALSE(ParseJson("{} trailing", "x").ok());
}

TEST(Json, TypedFieldsAndPaths) {
  auto j = *ParseJson(R"([{"path":"a.bin","size":2,"lfs":{"oid":"ab"}},{"path":42,"size":"2"}])", "u");
  JsonIn in(j, "https://hub.test/tree");
  auto items = in.Elements();
  ASSERT_OK(items);
  ASSERT_EQ(items->size(), 2u);
  EXPECT_EQ(*(*items)[0].String("path"), "a.bin");
  EXPECT_EQ(*(*items)[0].Uint("size"), 2u);
  auto lfs = (*items)[0].OptObject("lfs");
  ASSERT_TRUE(lfs.ok() && lfs->has_value());
  EXPECT_EQ(*(*lfs)->String("oid"), "ab");
  auto p = (*items)[1].String("path");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::kInvalidFormat);
  EXPECT_EQ(p.status().reason(), "BadJsonField");
  EXPECT_EQ(p.status().message(), "https://hub.test/tree: '[1].path' must be a string, got an integer");
  auto s = (*items)[1].Uint("size");
  EXPECT_EQ(s.status().message(), "https://hub.test/tree: '[1].size' must be a non-negative integer, got a string");
  auto missing = (*items)[1].String("oid");
  EXPECT_EQ(missing.status().message(), "https://hub.test/tree: '[1].oid' is required but absent");
}

TEST(Json, NumbersAreRangeChecked) {
  json j = {{"neg", -1}, {"flt", 2.0}, {"big", 18446744073709551615ull}, {"i", -5}};
  JsonIn in(j, "doc");
  EXPECT_FALSE(in.Uint("neg").ok());
  EXPECT_NE(in.Uint("neg").status().message().find("a negative integer"), std::string::npos);
  EXPECT_FALSE(in.Uint("flt").ok());
  EXPECT_EQ(*in.Uint("big"), 18446744073709551615ull);
  EXPECT_FALSE(in.Int("big").ok());
  EXPECT_EQ(*in.Int("i"), -5);
  auto huge = ParseJson(R"({"n": 1e400})", "d");  // out of double range: nlohmann refuses it
  if (huge.ok()) {
    EXPECT_FALSE(JsonIn(*huge, "d").Uint("n").ok());
  }
}

TEST(Json, OptionalFields) {
  json j = {{"a", nullptr}, {"b", "x"}, {"c", 3}};
  JsonIn in(j, "doc");
  EXPECT_FALSE(in.OptString("a")->has_value());
  EXPECT_FALSE(in.OptString("zz")->has_value());
  EXPECT_EQ(**in.OptString("b"), "x");
  EXPECT_FALSE(in.OptString("c").ok());
  EXPECT_EQ(*in.StringOr("zz", "dflt"), "dflt");
  EXPECT_FALSE(in.StringOr("c", "dflt").ok());
  EXPECT_FALSE(in.OptObject("b").ok());
  EXPECT_FALSE(in.OptArray("c").ok());
}

// Every accessor, fed every JSON type: a Status, never an exception.
TEST(Json, EveryAccessorEveryType) {
  const json kinds[] = {json(nullptr), json(true), json(1), json(-1), json(1.5), json("s"),
                        json::array({1}), json::object({{"k", 1}}), json(18446744073709551615ull)};
  for (const json& v : kinds) {
    json holder = {{"f", v}};
    JsonIn top(holder, "doc");
    JsonIn val(v, "doc");
    EXPECT_NO_THROW({
      (void)val.AsString();
      (void)val.AsUint();
      (void)val.AsInt();
      (void)val.AsBool();
      (void)val.AsNumber();
      (void)val.Elements();
      (void)val.Members();
      (void)val.String("f");
      (void)val.Uint("f");
      (void)val.Object("f");
      (void)val.OptString("f");
      (void)top.String("f");
      (void)top.Uint("f");
      (void)top.Int("f");
      (void)top.Bool("f");
      (void)top.Object("f");
      (void)top.Array("f");
      (void)top.OptString("f");
      (void)top.OptUint("f");
      (void)top.OptInt("f");
      (void)top.OptBool("f");
      (void)top.OptObject("f");
      (void)top.OptArray("f");
      (void)top.StringOr("f", "");
    });
    EXPECT_EQ(top.String("f").ok(), v.is_string());
    EXPECT_EQ(top.Bool("f").ok(), v.is_boolean());
    EXPECT_EQ(top.Object("f").ok(), v.is_object());
    EXPECT_EQ(top.Array("f").ok(), v.is_array());
    EXPECT_EQ(top.Uint("f").ok(), v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0));
  }
}

TEST(Json, MembersKeepPaths) {
  json j = json::parse(R"({"weight_map":{"a.weight":"s1","b":7}})");
  JsonIn in(j, "model.safetensors.index.json");
  auto wm = in.Object("weight_map");
  ASSERT_OK(wm);
  auto m = wm->Members();
  ASSERT_OK(m);
  ASSERT_EQ(m->size(), 2u);
  auto bad = (*m)[1].second.AsString();
  EXPECT_EQ(bad.status().message(), "model.safetensors.index.json: 'weight_map.b' must be a string, got an integer");
}

}  // namespace
}  // namespace hubload::util
