// Every Hub JSON answer the client reads (hub/answers.h), with each field of
// a valid document replaced by each JSON type: the parser returns a Status
// (kInvalidFormat naming the document and the field) or a value, and never
// throws or aborts. Valid documents give the values written in them.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "hub/answers.h"

using hubload::Code;
using json = nlohmann::json;
namespace hi = hubload::hub_internal;

namespace {

const std::vector<json> kTypes = {nullptr, true, false, 0, 7, -3, 1.5, 18446744073709551615ull, "text", "",
                                  json::array(), json::array({1, "x"}), json::object(), json{{"k", "v"}}};

void Pointers(const json& j, const json::json_pointer& at, std::vector<json::json_pointer>* out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      auto p = at / it.key();
      out->push_back(p);
      Pointers(it.value(), p, out);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      auto p = at / i;
      out->push_back(p);
      Pointers(j[i], p, out);
    }
  }
}

// Runs `parse` on every one-field mutation of `doc`; `required` lists the
// pointers whose wrong type must be an error naming the field's key.
int Mutate(const json& doc, const std::function<hubload::Status(const json&)>& parse,
           const std::vector<std::pair<std::string, json::value_t>>& required) {
  std::vector<json::json_pointer> ptrs;
  Pointers(doc, json::json_pointer(), &ptrs);
  int runs = 0;
  for (auto& p : ptrs) {
    for (const json& t : kTypes) {
      json m = doc;
      m[p] = t;
      hubload::Status st;
      EXPECT_NO_THROW(st = parse(m)) << p.to_string();
      ++runs;
      if (!st.ok()) {
        EXPECT_EQ(st.code(), Code::kInvalidFormat) << p.to_string() << " = " << t.dump() << ": " << st.ToString();
        EXPECT_NE(st.message().find("doc://test"), std::string::npos) << st.message();
      }
      for (auto& [rp, type] : required) {
        if (p.to_string() != rp) continue;
        bool same = t.type() == type ||
                    (type == json::value_t::number_unsigned && t.is_number_integer() && t.get<int64_t>() >= 0);
        if (same) continue;
        EXPECT_FALSE(st.ok()) << rp << " = " << t.dump() << " was accepted";
        EXPECT_NE(st.message().find(p.back()), std::string::npos) << st.message();
      }
    }
    // And the field removed.
    json m = doc;
    json& parent = m[p.parent_pointer()];
    if (parent.is_object()) {
      parent.erase(p.back());
      hubload::Status st;
      EXPECT_NO_THROW(st = parse(m));
      for (auto& [rp, type] : required) {
        if (p.to_string() == rp) {
          EXPECT_FALSE(st.ok()) << rp << " missing was accepted";
        }
      }
    }
  }
  // The whole document replaced by each type.
  for (const json& t : kTypes) EXPECT_NO_THROW((void)parse(t));
  return runs;
}

}  // namespace

TEST(HubAnswers, RevisionInfo) {
  json doc = {{"id", "org/m"}, {"sha", "0123456789012345678901234567890123456789"}};
  auto ok = hi::ParseRevisionSha(doc, "doc://test");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, "0123456789012345678901234567890123456789");
  EXPECT_GT(Mutate(doc, [](const json& j) { return hi::ParseRevisionSha(j, "doc://test").status(); },
                   {{"/sha", json::value_t::string}}),
            0);
}

TEST(HubAnswers, TreePage) {
  json doc = json::array(
      {{{"type", "file"}, {"oid", std::string(40, 'a')}, {"size", 12}, {"path", "config.json"}},
       {{"type", "directory"}, {"oid", std::string(40, 'b')}, {"size", 0}, {"path", "sub"}},
       {{"type", "file"},
        {"oid", std::string(40, 'c')},
        {"size", 134},
        {"path", "sub/w.safetensors"},
        {"lfs", {{"oid", std::string(64, 'd')}, {"size", 1048576}, {"pointerSize", 134}}}}});
  auto ok = hi::ParseTreePage(doc, "doc://test");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[0].path, "config.json");
  EXPECT_EQ((*ok)[0].size, 12u);
  EXPECT_EQ((*ok)[1].lfs_sha256, std::string(64, 'd'));
  EXPECT_EQ((*ok)[1].size, 1048576u);  // the LFS size, not the pointer's
  Mutate(doc, [](const json& j) { return hi::ParseTreePage(j, "doc://test").status(); },
         {{"/0/path", json::value_t::string}});
}

TEST(HubAnswers, Preupload) {
  json doc = {{"files",
               {{{"path", "a.bin"}, {"uploadMode", "lfs"}, {"shouldIgnore", false}, {"oid", std::string(64, 'e')}},
                {{"path", "c.json"}, {"uploadMode", "regular"}, {"shouldIgnore", true}}}}};
  auto ok = hi::ParsePreupload(doc, "doc://test");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[0].oid, std::string(64, 'e'));
  EXPECT_TRUE((*ok)[1].should_ignore);
  EXPECT_EQ((*ok)[1].upload_mode, "regular");
  Mutate(doc, [](const json& j) { return hi::ParsePreupload(j, "doc://test").status(); },
         {{"/files", json::value_t::array}, {"/files/0/path", json::value_t::string},
          {"/files/0/uploadMode", json::value_t::string}});
}

TEST(HubAnswers, LfsBatch) {
  json doc = {{"transfer", "multipart"},
              {"objects",
               {{{"oid", std::string(64, '1')},
                 {"size", 30},
                 {"actions",
                  {{"upload", {{"href", "http://cdn/u"}, {"header", {{"chunk_size", "16"}, {"00001", "http://p/1"},
                                                                      {"00002", "http://p/2"}}}}},
                   {"verify", {{"href", "http://hub/v"}}}}}},
                {{"oid", std::string(64, '2')}, {"size", 5}},
                {{"oid", std::string(64, '3')}, {"size", 9}, {"error", {{"code", 403}, {"message", "no"}}}}}}};
  auto ok = hi::ParseLfsBatch(doc, "doc://test");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->size(), 3u);
  EXPECT_EQ((*ok)[0].chunk_size, 16u);
  ASSERT_EQ((*ok)[0].parts.size(), 2u);
  EXPECT_EQ((*ok)[0].parts[1].second, "http://p/2");
  EXPECT_EQ((*ok)[0].verify_href, "http://hub/v");
  EXPECT_TRUE((*ok)[1].upload_href.empty());  // stored already
  EXPECT_TRUE((*ok)[2].has_error);
  EXPECT_EQ((*ok)[2].error_code, 403);
  Mutate(doc, [](const json& j) { return hi::ParseLfsBatch(j, "doc://test").status(); },
         {{"/objects", json::value_t::array}, {"/objects/0/oid", json::value_t::string},
          {"/objects/0/size", json::value_t::number_unsigned},
          {"/objects/0/actions/upload/href", json::value_t::string}});
  // A part URL of another type is an error naming it.
  json bad = doc;
  bad["objects"][0]["actions"]["upload"]["header"]["00002"] = 5;
  auto st = hi::ParseLfsBatch(bad, "doc://test").status();
  EXPECT_EQ(st.code(), Code::kInvalidFormat);
  EXPECT_NE(st.message().find("00002"), std::string::npos) << st.message();
  bad["objects"][0]["actions"]["upload"]["header"]["00002"] = "http://p/2";
  bad["objects"][0]["actions"]["upload"]["header"]["chunk_size"] = "sixteen";
  EXPECT_FALSE(hi::ParseLfsBatch(bad, "doc://test").ok());
}

TEST(HubAnswers, CommitAndRepoCreation) {
  json doc = {{"commitOid", std::string(40, 'f')},
              {"commitUrl", "http://hub/org/m/commit/" + std::string(40, 'f')},
              {"pullRequestUrl", "http://hub/org/m/discussions/3"}};
  auto ok = hi::ParseCommitAnswer(doc, "doc://test");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->pr_url, "http://hub/org/m/discussions/3");
  Mutate(doc, [](const json& j) { return hi::ParseCommitAnswer(j, "doc://test").status(); },
         {{"/commitOid", json::value_t::string}, {"/commitUrl", json::value_t::string}});
  json repo = {{"url", "http://hub/org/m"}, {"name", "org/m"}};
  auto u = hi::ParseRepoUrl(repo, "doc://test");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->value_or(""), "http://hub/org/m");
  Mutate(repo, [](const json& j) { return hi::ParseRepoUrl(j, "doc://test").status(); }, {});
}
