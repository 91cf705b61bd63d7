// `hubload serve` upload protocol: create, preupload, LFS batch, PUT, multipart, commit, PRs.
#include "server/server_fixture.h"

namespace hubload::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// ---- uploads ----

TEST_F(ServerTest, UploadFlowBasicMultipartCommitAndPr) {
  std::vector<std::string> auth = {Auth(kGood), "Content-Type: application/json"};
  std::string create = R"({"name":"up","organization":"org","type":"model"})";
  Reply c = Http("POST", U("/api/repos/create"), auth, &create);
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(json::parse(c.body)["url"], hub_->url() + "/org/up");
  EXPECT_EQ(Http("POST", U("/api/repos/create"), auth, &create).status, 409);
  std::string head = json::parse(Get(U("/api/models/org/up")).body)["sha"];

  std::string small = PatternBytes(700, 2), big = PatternBytes(2500, 3);  // chunk size 1000 -> 3 parts
  std::string pre = json{{"files", {{{"path", "x.bin"}, {"size", 700}, {"sample", Base64(small.substr(0, 512))}},
                                    {{"path", "readme.md"}, {"size", 5}, {"sample", Base64("hello")}}}}}
                        .dump();
  Reply p = Http("POST", U("/api/models/org/up/preupload/main"), auth, &pre);
  ASSERT_EQ(p.status, 200) << p.body;
  json pj = json::parse(p.body);
  EXPECT_EQ(pj["files"][0]["uploadMode"], "lfs");
  EXPECT_EQ(pj["files"][1]["uploadMode"], "regular");
  EXPECT_EQ(pj["files"][0]["shouldIgnore"], false);

  std::string batch = json{{"operation", "upload"},
                           {"transfers", {"basic", "multipart"}},
                           {"hash_algo", "sha_256"},
                           {"objects", {{{"oid", Sha256(small)}, {"size", 700}}, {{"oid", Sha256(big)}, {"size", 2500}}}}}
                          .dump();
  Reply b = Http("POST", U("/org/up.git/info/lfs/objects/batch"), auth, &batch);
  ASSERT_EQ(b.status, 200) << b.body;
  json bj = json::parse(b.body);
  json basic = bj["objects"][0]["actions"]["upload"];
  EXPECT_FALSE(basic.contains("header"));
  // Wrong content for the oid is refused, the right content accepted (no Authorization).
  std::string wrong = PatternBytes(700, 9);
  EXPECT_EQ(Http("PUT", basic["href"], {}, &wrong).status, 400);
  EXPECT_EQ(Http("PUT", basic["href"], {}, &small).status, 200);
  json mp = bj["objects"][1]["actions"]["upload"];
  ASSERT_EQ(mp["header"]["chunk_size"], "1000");
  json parts = json::array();
  for (int i = 1; i <= 3; ++i) {
    char key[8];
    std::snprintf(key, sizeof key, "%05d", i);
    ASSERT_TRUE(mp["header"].contains(key));
    std::string slice = big.substr(static_cast<size_t>(i - 1) * 1000, 1000);
    Reply pr = Http("PUT", mp["header"][key], {}, &slice);
    ASSERT_EQ(pr.status, 200);
    ASSERT_FALSE(pr.h("etag").empty());
    parts.push_back({{"partNumber", i}, {"etag", pr.h("etag")}});
  }
  std::string done = json{{"oid", Sha256(big)}, {"parts", parts}}.dump();
  ASSERT_EQ(Http("POST", mp["href"], {"Content-Type: application/vnd.git-lfs+json"}, &done).status, 200);
  // Already stored objects come back without actions.
  Reply b2 = Http("POST", U("/org/up.git/info/lfs/objects/batch"), auth, &batch);
  EXPECT_FALSE(json::parse(b2.body)["objects"][0].contains("actions"));

  auto line = [](const json& j) { return j.dump() + "\n"; };
  std::string commit_body =
      line({{"key", "header"}, {"value", {{"summary", "add files"}, {"description", ""}, {"parentCommit", head}}}}) +
      line({{"key", "file"}, {"value", {{"path", "readme.md"}, {"content", Base64("hello")}, {"encoding", "base64"}}}}) +
      line({{"key", "lfsFile"}, {"value", {{"path", "x.bin"}, {"algo", "sha256"}, {"oid", Sha256(small)}, {"size", 700}}}}) +
      json{{"key", "lfsFile"}, {"value", {{"path", "d/big.bin"}, {"algo", "sha256"}, {"oid", Sha256(big)}, {"size", 2500}}}}
          .dump();  // no trailing newline (as js sends)
  std::vector<std::string> nd = {Auth(kGood), "Content-Type: application/x-ndjson"};
  Reply cm = Http("POST", U("/api/models/org/up/commit/main"), nd, &commit_body);
  ASSERT_EQ(cm.status, 200) << cm.body;
  json cj = json::parse(cm.body);
  std::string new_commit = cj["commitOid"];
  EXPECT_EQ(cj["commitUrl"], hub_->url() + "/org/up/commit/" + new_commit);
  // The new head is visible at once.
  Reply rb = Get(U("/org/up/resolve/main/d/big.bin"), {Auth(kGood)});
  EXPECT_EQ(rb.status, 302);
  EXPECT_EQ(rb.h("x-repo-commit"), new_commit);
  EXPECT_EQ(Http("GET", rb.h("location")).body, big);
  EXPECT_EQ(Get(U("/org/up/resolve/main/readme.md")).body, "hello");
  EXPECT_EQ(Get(U("/org/up/resolve/main/x.bin"), {}).status, 302);

  // Stale parent_commit is refused and changes nothing.
  Reply stale = Http("POST", U("/api/models/org/up/commit/main"), nd, &commit_body);
  EXPECT_EQ(stale.status, 412);
  EXPECT_TRUE(json::parse(stale.body).contains("error"));
  EXPECT_EQ(json::parse(Get(U("/api/models/org/up")).body)["sha"], new_commit);
  // An lfsFile whose object was never uploaded is refused.
  std::string ghost = line({{"key", "header"}, {"value", {{"summary", "ghost"}}}}) +
                      line({{"key", "lfsFile"}, {"value", {{"path", "g.bin"}, {"oid", Sha256("never")}, {"size", 5}}}});
  EXPECT_GE(Http("POST", U("/api/models/org/up/commit/main"), nd, &ghost).status, 400);
  // Deleting a missing file: 404 EntryNotFound.
  std::string del = line({{"key", "header"}, {"value", {{"summary", "del"}}}}) +
                    line({{"key", "deletedFile"}, {"value", {{"path", "nope.txt"}}}});
  Reply dr = Http("POST", U("/api/models/org/up/commit/main"), nd, &del);
  EXPECT_EQ(dr.status, 404);
  EXPECT_EQ(dr.h("x-error-code"), "EntryNotFound");

  // create_pr=1: refs/pr/1, main unchanged.
  std::string pr_body = line({{"key", "header"}, {"value", {{"summary", "pr"}}}}) +
                        line({{"key", "file"}, {"value", {{"path", "readme.md"}, {"content", Base64("changed")}}}});
  Reply prr = Http("POST", U("/api/models/org/up/commit/main?create_pr=1"), nd, &pr_body);
  ASSERT_EQ(prr.status, 200) << prr.body;
  std::string pr_url = json::parse(prr.body)["pullRequestUrl"];
  EXPECT_EQ(pr_url, hub_->url() + "/org/up/discussions/1");
  EXPECT_EQ(Get(U("/org/up/resolve/refs%2Fpr%2F1/readme.md")).body, "changed");
  EXPECT_EQ(Get(U("/org/up/resolve/main/readme.md")).body, "hello");
  // Anonymous and read-only writes are refused.
  EXPECT_EQ(Http("POST", U("/api/models/org/up/commit/main"), {"Content-Type: application/x-ndjson"}, &pr_body).status,
            401);
}

TEST(ServerReadOnly, MirrorRefusesWrites) {
  server::ServerOptions o;
  o.read_only = true;
  auto hub = StartTestHub(o);
  ASSERT_TRUE(hub);
  hub->AddRepo("org/m", {{"a.txt", "a"}});
  std::string body = R"({"name":"x","organization":"org"})";
  EXPECT_EQ(Http("POST", hub->url() + "/api/repos/create", {"Authorization: Bearer t"}, &body).status, 403);
  std::string nd = R"({"key":"header","value":{"summary":"s"}})";
  EXPECT_EQ(Http("POST", hub->url() + "/api/models/org/m/commit/main", {"Authorization: Bearer t"}, &nd).status, 403);
  EXPECT_EQ(Get(hub->url() + "/org/m/resolve/main/a.txt").body, "a");
}

// A cache written by a client (no .hubload-repo.json, refs + symlinks) is served as is.

}  // namespace
}  // namespace hubload::testing
