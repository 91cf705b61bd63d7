// Every Hub JSON answer the client reads (hub/answers.h), with each field of
// a valid document replaced by each JSON type: the parser returns a Status
// (kInvalidFormat naming the document and the field) or a value, and never
// throws or aborts. Valid documents give the values written in them.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "hub/answers.h"
#include "hub/errors.h"
#include "testing/json_mutate.h"
#include "testing/status_matchers.h"

using hubload::Code;
using json = nlohmann::json;
namespace hi = hubload::hub_internal;

namespace {

using hubload::testing::JsonField;
constexpr auto kString = json::value_t::string;
constexpr auto kUint = json::value_t::number_unsigned;
constexpr auto kArray = json::value_t::array;
constexpr auto kObject = json::value_t::object;

int Mutate(const json& doc, const std::function<hubload::Status(const json&)>& parse,
           const std::vector<JsonField>& checked) {
  return hubload::testing::MutateEveryField(doc, parse, checked, "doc://test");
}

}  // namespace

TEST(HubAnswers, RevisionInfo) {
  json doc = {{"id", "org/m"}, {"sha", "0123456789012345678901234567890123456789"}};
  auto ok = hi::ParseRevisionSha(doc, "doc://test");
  ASSERT_OK(ok);
  EXPECT_EQ(*ok, "0123456789012345678901234567890123456789");
  EXPECT_GT(Mutate(doc, [](const json& j) { return hi::ParseRevisionSha(j, "doc://test").status(); },
                   {{"/sha", kString}}),
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
  ASSERT_OK(ok);
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[0].path, "config.json");
  EXPECT_EQ((*ok)[0].size, 12u);
  EXPECT_EQ((*ok)[1].lfs_sha256, std::string(64, 'd'));
  EXPECT_EQ((*ok)[1].size, 1048576u);  // the LFS size, not the pointer's
  // The issue's own examples each fail, naming the field: "size":"2", "type":1, "oid":{...}, "path":42.
  for (auto [key, bad] : std::vector<std::pair<std::string, json>>{
           {"size", "2"}, {"type", 1}, {"oid", json{{"k", "v"}}}, {"path", 42}}) {
    json m = doc;
    m[0][key] = bad;
    auto st = hi::ParseTreePage(m, "doc://test").status();
    EXPECT_EQ(st.code(), Code::kInvalidFormat) << key << " = " << bad.dump();
    EXPECT_NE(st.message().find("'[0]." + key + "'"), std::string::npos) << st.message();
  }
  // Every field of the two file entries (a directory's other fields are not read).
  Mutate(doc, [](const json& j) { return hi::ParseTreePage(j, "doc://test").status(); },
         {{"/0", kObject}, {"/0/path", kString}, {"/0/type", kString, false}, {"/0/size", kUint, false},
          {"/0/oid", kString, false}, {"/2/path", kString}, {"/2/lfs", kObject, false},
          {"/2/lfs/oid", kString, false}, {"/2/lfs/size", kUint, false}, {"/1/type", kString, false}});
}

TEST(HubAnswers, Preupload) {
  json doc = {{"files",
               {{{"path", "a.bin"}, {"uploadMode", "lfs"}, {"shouldIgnore", false}, {"oid", std::string(64, 'e')}},
                {{"path", "c.json"}, {"uploadMode", "regular"}, {"shouldIgnore", true}}}}};
  auto ok = hi::ParsePreupload(doc, "doc://test");
  ASSERT_OK(ok);
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[0].oid, std::string(64, 'e'));
  EXPECT_TRUE((*ok)[1].should_ignore);
  EXPECT_EQ((*ok)[1].upload_mode, "regular");
  Mutate(doc, [](const json& j) { return hi::ParsePreupload(j, "doc://test").status(); },
         {{"/files", kArray}, {"/files/0/path", kString}, {"/files/0/uploadMode", kString},
          {"/files/0/shouldIgnore", json::value_t::boolean, false}, {"/files/0/oid", kString, false}});
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
  ASSERT_OK(ok);
  ASSERT_EQ(ok->size(), 3u);
  EXPECT_EQ((*ok)[0].chunk_size, 16u);
  ASSERT_EQ((*ok)[0].parts.size(), 2u);
  EXPECT_EQ((*ok)[0].parts[1].second, "http://p/2");
  EXPECT_EQ((*ok)[0].verify_href, "http://hub/v");
  EXPECT_TRUE((*ok)[1].upload_href.empty());  // stored already
  EXPECT_TRUE((*ok)[2].has_error);
  EXPECT_EQ((*ok)[2].error_code, 403);
  Mutate(doc, [](const json& j) { return hi::ParseLfsBatch(j, "doc://test").status(); },
         {{"/objects", kArray}, {"/objects/0/oid", kString}, {"/objects/0/size", kUint},
          {"/objects/0/actions/upload/href", kString}});
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
  ASSERT_OK(ok);
  EXPECT_EQ(ok->pr_url, "http://hub/org/m/discussions/3");
  Mutate(doc, [](const json& j) { return hi::ParseCommitAnswer(j, "doc://test").status(); },
         {{"/commitOid", kString}, {"/commitUrl", kString}, {"/pullRequestUrl", kString, false}});
  json repo = {{"url", "http://hub/org/m"}, {"name", "org/m"}};
  auto u = hi::ParseRepoUrl(repo, "doc://test");
  ASSERT_OK(u);
  EXPECT_EQ(u->value_or(""), "http://hub/org/m");
  Mutate(repo, [](const json& j) { return hi::ParseRepoUrl(j, "doc://test").status(); }, {{"/url", kString, false}});
}

TEST(HubAnswers, Refs) {
  const std::string a(40, 'a'), b(40, 'b'), c(40, 'c');
  json doc = {{"branches", {{{"name", "main"}, {"ref", "refs/heads/main"}, {"targetCommit", a}}}},
              {"tags", {{{"name", "v1"}, {"ref", "refs/tags/v1"}, {"targetCommit", b}}}},
              {"converts", json::array()},
              {"pullRequests", {{{"name", "refs/pr/1"}, {"ref", "refs/pr/1"}, {"targetCommit", c}}}}};
  auto ok = hi::ParseRefs(doc, "doc://test");
  ASSERT_OK(ok);
  ASSERT_EQ(ok->branches.size(), 1u);
  EXPECT_EQ(ok->branches[0].name, "main");
  EXPECT_EQ(ok->branches[0].target_commit, a);
  ASSERT_EQ(ok->tags.size(), 1u);
  EXPECT_EQ(ok->tags[0].ref, "refs/tags/v1");
  ASSERT_EQ(ok->pull_requests.size(), 1u);
  EXPECT_EQ(ok->pull_requests[0].target_commit, c);
  std::vector<JsonField> fields = {{"/branches", kArray}, {"/tags", kArray}, {"/pullRequests", kArray, false}};
  for (const char* list : {"/branches/0", "/tags/0", "/pullRequests/0"}) {
    fields.push_back({list, kObject});
    for (const char* key : {"/name", "/ref", "/targetCommit"}) fields.push_back({std::string(list) + key, kString});
  }
  Mutate(doc, [](const json& j) { return hi::ParseRefs(j, "doc://test").status(); }, fields);
  // A targetCommit that is a string but not a commit is refused too, naming it.
  json bad = doc;
  bad["tags"][0]["targetCommit"] = "xyz";
  auto st = hi::ParseRefs(bad, "doc://test").status();
  EXPECT_EQ(st.code(), Code::kInvalidFormat);
  EXPECT_NE(st.message().find("'tags[0].targetCommit'"), std::string::npos) << st.message();
}

TEST(HubAnswers, CommitsPage) {
  const std::string a(40, 'a'), b(40, 'b');
  json doc = json::array({{{"id", a},
                           {"title", "Add weights"},
                           {"message", "long text"},
                           {"date", "2026-12-01T10:00:00.000Z"},
                           {"authors", {{{"user", "alice"}, {"avatar", "x"}}, {{"user", "bob"}}}}},
                          {{"id", b}, {"title", "Initial commit"}}});
  auto ok = hi::ParseCommitsPage(doc, "doc://test");
  ASSERT_OK(ok);
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[0].commit_id, a);
  EXPECT_EQ((*ok)[0].title, "Add weights");
  EXPECT_EQ((*ok)[0].created_at, "2026-12-01T10:00:00.000Z");
  EXPECT_EQ((*ok)[0].authors, (std::vector<std::string>{"alice", "bob"}));
  EXPECT_EQ((*ok)[1].message, "");
  Mutate(doc, [](const json& j) { return hi::ParseCommitsPage(j, "doc://test").status(); },
         {{"/0", kObject}, {"/0/id", kString}, {"/0/title", kString, false}, {"/0/message", kString, false},
          {"/0/date", kString, false}, {"/0/authors", kArray, false}, {"/0/authors/0", kObject},
          {"/0/authors/0/user", kString}, {"/1/id", kString}, {"/1/title", kString, false}});
}

// Error answers (huggingface_hub hf_raise_for_status): the body only adds a
// message; with any field of any type the Status is the one the HTTP status
// and X-Error-Code give, and a message of the wrong type is not shown.
TEST(HubAnswers, ErrorBodies) {
  const json doc = {{"error", "Repository Not Found for url"},
                    {"message", "m"},
                    {"error_description", "d"},
                    {"errors", {{{"message", "first of errors"}}}}};
  struct Answer {
    int status;
    const char* error_code;
    Code code;
  };
  const std::vector<Answer> answers = {{404, "RepoNotFound", Code::kRepoNotFound},
                                       {404, "EntryNotFound", Code::kEntryNotFound},
                                       {401, "", Code::kUnauthorized},
                                       {403, "", Code::kPermissionDenied},
                                       {429, "", Code::kRateLimited},
                                       {500, "", Code::kServerError},
                                       {400, "", Code::kInvalidArgument}};
  auto classify = [](const Answer& a, const std::string& body) {
    hubload::HttpHeaders h;
    if (*a.error_code) h.Add("X-Error-Code", a.error_code);
    hubload::ErrorContext ctx;
    ctx.repo_id = "org/m";
    ctx.file = "config.json";
    ctx.url = "http://hub/x";
    return hubload::StatusFromHttp(a.status, h, body, ctx);
  };
  // The valid body: its first message is shown.
  EXPECT_NE(classify(answers[0], doc.dump()).message().find("Repository Not Found for url"), std::string::npos);
  json only_errors = {{"errors", {{{"message", "first of errors"}}}}};
  EXPECT_NE(classify(answers[0], only_errors.dump()).message().find("first of errors"), std::string::npos);
  // Values whose text would be recognisable in a message if a non-string were shown.
  const std::vector<json> distinctive = {true, 1.5, 18446744073709551615ull, json{{"k", "v"}}};
  std::vector<std::string> ptrs = {"/error", "/message", "/error_description", "/errors", "/errors/0",
                                   "/errors/0/message"};
  for (const Answer& a : answers) {
    auto check = [&](const std::string& body, const std::string& what) {
      hubload::Status st;
      EXPECT_NO_THROW(st = classify(a, body)) << what;
      EXPECT_EQ(st.code(), a.code) << a.status << " " << a.error_code << ", " << what << ": " << st.ToString();
      EXPECT_EQ(st.context().http_status, a.status) << what;
      // A message is shown only when it is a string (or the first string of an array).
      for (const json& t : distinctive) {
        EXPECT_EQ(st.message().find(t.dump()), std::string::npos) << what;
      }
    };
    for (const std::string& p : ptrs) {
      for (const json& t : hubload::testing::EveryJsonType()) {
        json m = doc;
        m[json::json_pointer(p)] = t;
        check(m.dump(), p + " = " + t.dump());
        // And the same field alone in the body (no other message to fall back on).
        json alone = json::object();
        if (p.rfind("/errors", 0) == 0) alone = only_errors;
        alone[json::json_pointer(p)] = t;
        check(alone.dump(), "alone " + p + " = " + t.dump());
      }
    }
    for (const json& t : hubload::testing::EveryJsonType()) check(t.dump(), "body = " + t.dump());
    check("{not json", "not JSON");
    check(std::string(10000, '['), "deep nesting");
  }
}
