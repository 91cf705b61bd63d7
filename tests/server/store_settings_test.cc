// The server's own .hubload-repo.json (issue 14): the file may be edited by
// hand or written by another version. Every field set to every JSON type (and
// removed) gives a Status naming the file and the field, or the settings;
// never a throw. End to end, a corrupt file is ignored with defaults (the
// repo stays public) and the server keeps answering.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hub/server/store_internal.h"
#include "server/server_fixture.h"
#include "testing/json_mutate.h"
#include "testing/status_matchers.h"

namespace hubload::testing {
namespace {

using json = nlohmann::json;
using server::internal::ParseSettings;
using server::internal::RepoSettings;

const std::string kDoc = "/store/models--org--m/.hubload-repo.json";

json ValidSettings() {
  const std::string c1(40, '1'), c2(40, '2');
  return {{"private", true},
          {"gated", "manual"},
          {"read_tokens_sha256", {std::string(64, 'a')}},
          {"gated_tokens_sha256", {std::string(64, 'b'), std::string(64, 'c')}},
          {"created_at", "2026-12-01T10:00:00Z"},
          {"commits",
           {{c1, {{"parent", ""}, {"title", "Initial commit"}, {"message", ""}, {"date", "2026-12-01T10:00:00Z"}}},
            {c2, {{"parent", c1}, {"title", "Add weights"}, {"message", "m"}, {"date", "2026-12-01T11:00:00Z"}}}}},
          {"tags", {{"v1", {{"message", "first"}}}}}};
}

TEST(StoreSettings, ValidFileIsRead) {
  RepoSettings s;
  ASSERT_OK(ParseSettings(ValidSettings().dump(), kDoc, &s));
  EXPECT_TRUE(s.private_repo);
  EXPECT_EQ(s.gated, "manual");
  EXPECT_EQ(s.read_sha256, std::vector<std::string>{std::string(64, 'a')});
  EXPECT_EQ(s.gated_sha256.size(), 2u);
  EXPECT_EQ(s.commits.at(std::string(40, '2')).parent, std::string(40, '1'));
  EXPECT_EQ(s.commits.at(std::string(40, '2')).title, "Add weights");
  EXPECT_EQ(s.tags.at("v1"), "first");
  RepoSettings g;
  ASSERT_OK(ParseSettings(R"({"gated": true})", kDoc, &g));
  EXPECT_EQ(g.gated, "auto");
}

TEST(StoreSettings, EveryFieldOfEveryType) {
  const std::string c2 = "/commits/" + std::string(40, '2');
  constexpr auto kString = json::value_t::string;
  std::vector<JsonField> fields = {{"/private", json::value_t::boolean, false},
                                   {"/read_tokens_sha256", json::value_t::array, false},
                                   {"/read_tokens_sha256/0", kString},
                                   {"/gated_tokens_sha256", json::value_t::array, false},
                                   {"/gated_tokens_sha256/1", kString},
                                   {"/created_at", kString, false},
                                   {"/commits", json::value_t::object, false},
                                   {c2, json::value_t::object, false},
                                   {c2 + "/parent", kString, false},
                                   {c2 + "/title", kString, false},
                                   {c2 + "/message", kString, false},
                                   {c2 + "/date", kString, false},
                                   {"/tags", json::value_t::object, false},
                                   {"/tags/v1", json::value_t::object, false},
                                   {"/tags/v1/message", kString, false}};
  int runs = hubload::testing::MutateEveryField(
      ValidSettings(),
      [](const json& j) {
        RepoSettings s;
        return ParseSettings(j.dump(), kDoc, &s);
      },
      fields, kDoc);
  EXPECT_GT(runs, 200);
  // "gated" takes a string or a boolean; every other type is an error naming it.
  for (const json& t : hubload::testing::EveryJsonType()) {
    json m = ValidSettings();
    m["gated"] = t;
    RepoSettings s;
    Status st = ParseSettings(m.dump(), kDoc, &s);
    if (t.is_string() || t.is_boolean() || t.is_null()) {
      EXPECT_OK(st) << t.dump() << ": " << st.ToString();
    } else {
      EXPECT_EQ(st.code(), Code::kInvalidFormat) << t.dump();
      EXPECT_NE(st.message().find("'gated'"), std::string::npos) << st.message();
    }
  }
  // Not JSON at all.
  RepoSettings s;
  for (const std::string& bad : std::vector<std::string>{"", "{", "not json", std::string(100000, '[')}) {
    Status st = ParseSettings(bad, kDoc, &s);
    EXPECT_EQ(st.code(), Code::kInvalidFormat) << bad.substr(0, 20);
    EXPECT_NE(st.message().find(kDoc), std::string::npos) << st.message();
  }
}

// A private repo whose settings file is then corrupted: the server warns,
// serves it with default settings (public, no history), and keeps answering.
TEST_F(ServerTest, CorruptSettingsFileIsServedWithDefaults) {
  const auto file = hub_->root.path() / "models--org--model" / ".hubload-repo.json";
  ASSERT_TRUE(std::filesystem::is_regular_file(file));
  for (const std::string& bad : {std::string("{\"private\": \"yes\"}"), std::string("[]"), std::string("{"),
                                std::string("{\"commits\": {\"x\": 5}}"), std::string("{\"gated\": 3}")}) {
    WriteFileBytes(file, bad);
    Reply r = Get(U("/api/models/org/model/revision/main"));
    EXPECT_EQ(r.status, 200) << bad << ": " << r.body;
    EXPECT_EQ(json::parse(r.body, nullptr, false).value("sha", ""), commit_) << bad;
  }
  // A valid private file again: anonymous requests are refused (the settings are read each time).
  WriteFileBytes(file, json{{"private", true}}.dump());
  Reply r = Get(U("/api/models/org/model/revision/main"));
  EXPECT_GE(r.status, 400) << r.body;
  EXPECT_LT(r.status, 500) << r.body;
  EXPECT_EQ(Get(U("/api/models/org/model/revision/main"), {Auth(kGood)}).status, 200);
}

}  // namespace
}  // namespace hubload::testing
