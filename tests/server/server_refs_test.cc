// Refs, branches, tags and history of `hubload serve` (issue 20), in the
// request/response shapes of huggingface_hub's HfApi (create_branch,
// delete_branch, create_tag, delete_tag, list_repo_refs, list_repo_commits)
// and @huggingface/hub (createBranch, deleteBranch, listCommits,
// countCommits). Expected commit ids come from the commit answers, refs from
// the store files read here.
#include <fstream>

#include "server/server_fixture.h"
#include "testing/status_matchers.h"

namespace hubload::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class RefsTest : public ServerTest {
 protected:
  std::vector<std::string> W() const { return {Auth(kGood), "Content-Type: application/json"}; }
  Reply Post(const std::string& path, const json& body) {
    std::string b = body.dump();
    return Http("POST", U(path), W(), &b);
  }
  Reply Delete(const std::string& path) { return Http("DELETE", U(path), {Auth(kGood)}); }
  json Refs(bool prs = false) {
    Reply r = Get(U(std::string("/api/models/org/model/refs") + (prs ? "?include_prs=1" : "")));
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body);
  }
  static json Find(const json& list, const std::string& name) {
    for (auto& e : list)
      if (e["name"] == name) return e;
    return nullptr;
  }
  // One NDJSON commit of one small file on `branch`; returns the commit id.
  std::string CommitFile(const std::string& branch, const std::string& path, const std::string& content,
                         const std::string& title) {
    std::string body = json{{"key", "header"}, {"value", {{"summary", title}, {"description", "about " + path}}}}.dump() +
                       "\n" + json{{"key", "file"}, {"value", {{"path", path}, {"content", Base64(content)}}}}.dump();
    Reply r = Http("POST", U("/api/models/org/model/commit/" + branch), {Auth(kGood)}, &body);
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body)["commitOid"];
  }
  std::string RefFile(const std::string& name) {
    std::ifstream in(hub_->root.path() / "models--org--model" / "refs" / name);
    std::string s;
    std::getline(in, s);
    return s;
  }
};

TEST_F(RefsTest, RefsListsBranchesTagsConvertsAndPullRequests) {
  json refs = Refs();
  ASSERT_TRUE(refs.contains("branches") && refs.contains("tags") && refs.contains("converts"));
  EXPECT_FALSE(refs.contains("pullRequests"));
  ASSERT_EQ(refs["branches"].size(), 1u);
  EXPECT_EQ(refs["branches"][0], (json{{"name", "main"}, {"ref", "refs/heads/main"}, {"targetCommit", commit_}}));
  EXPECT_TRUE(refs["tags"].empty());
  ASSERT_OK(server::SetRef(hub_->root.str(), "org/model", "refs/pr/1", commit_));
  ASSERT_OK(server::SetRef(hub_->root.str(), "org/model", "refs/convert/parquet", commit_));
  json with_prs = Refs(true);
  EXPECT_EQ(with_prs["pullRequests"],
            (json::array({{{"name", "refs/pr/1"}, {"ref", "refs/pr/1"}, {"targetCommit", commit_}}})));
  EXPECT_EQ(with_prs["converts"],
            (json::array({{{"name", "parquet"}, {"ref", "refs/convert/parquet"}, {"targetCommit", commit_}}})));
  EXPECT_EQ(Get(U("/api/models/org/nope/refs"), {Auth(kGood)}).h("x-error-code"), "RepoNotFound");
}

TEST_F(RefsTest, CreateAndDeleteBranch) {
  // From main (no body, as huggingface_hub sends {} without a revision).
  Reply c = Post("/api/models/org/model/branch/dev", json::object());
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(RefFile("dev"), commit_);
  EXPECT_EQ(Find(Refs()["branches"], "dev")["targetCommit"], commit_);
  EXPECT_EQ(Get(U("/org/model/resolve/dev/config.json")).body, files_["config.json"]);
  // Exists: 409; overwrite (the js client's option) moves it.
  EXPECT_EQ(Post("/api/models/org/model/branch/dev", json::object()).status, 409);
  std::string c2 = CommitFile("main", "new.txt", "n", "second");
  ASSERT_EQ(Post("/api/models/org/model/branch/dev", json{{"startingPoint", c2}, {"overwrite", true}}).status, 200);
  EXPECT_EQ(RefFile("dev"), c2);
  // From a commit prefix, a branch name with a slash (encoded as py quote(safe="")).
  ASSERT_EQ(Post("/api/models/org/model/branch/feature%2Fx", json{{"startingPoint", commit_.substr(0, 7)}}).status, 200);
  EXPECT_EQ(RefFile("feature/x"), commit_);
  // Bad names and starting points.
  Reply pr = Post("/api/models/org/model/branch/refs%2Fpr%2F5", json::object());
  EXPECT_EQ(pr.status, 400);
  EXPECT_TRUE(json::parse(pr.body).contains("error"));
  EXPECT_EQ(Post("/api/models/org/model/branch/" + std::string(40, 'a'), json::object()).status, 400);
  // A segment too long to be a ref file (fuzzer find: the write failed with a 500): 400 up to the
  // filesystem's limit; a 200-byte segment is a branch like any other.
  for (size_t n : {201, 250, 255, 300}) {
    Reply lng = Post("/api/models/org/model/branch/x%2F" + std::string(n, 'b'), json::object());
    EXPECT_EQ(lng.status, 400) << n << " " << lng.body;
  }
  ASSERT_EQ(Post("/api/models/org/model/branch/" + std::string(200, 'b'), json::object()).status, 200);
  EXPECT_EQ(RefFile(std::string(200, 'b')), c2);  // main moved to c2 above
  EXPECT_EQ(Post("/api/models/org/model/tag/" + commit_, json{{"tag", std::string(230, 't')}}).status, 400);
  // A file name of 255 bytes (NAME_MAX, the most a repo path segment may have) commits and resolves.
  const std::string longest(255, 'f');
  CommitFile("main", "d/" + longest, "long name", "longest name");
  EXPECT_EQ(Get(U("/org/model/resolve/main/d/" + longest)).body, "long name");
  Reply nosp = Post("/api/models/org/model/branch/x", json{{"startingPoint", "nobranch"}});
  EXPECT_EQ(nosp.status, 404);
  EXPECT_EQ(nosp.h("x-error-code"), "RevisionNotFound");
  // Anonymous writes are refused.
  std::string empty = "{}";
  EXPECT_EQ(Http("POST", U("/api/models/org/model/branch/anon"), {}, &empty).status, 401);
  // An empty branch (js emptyBranch): a commit with no files.
  ASSERT_EQ(Post("/api/models/org/model/branch/blank", json{{"emptyBranch", true}}).status, 200);
  Reply tree = Get(U("/api/models/org/model/tree/blank"));
  ASSERT_EQ(tree.status, 200);
  EXPECT_EQ(json::parse(tree.body), json::array());
  EXPECT_NE(RefFile("blank"), commit_);
  // Delete.
  ASSERT_EQ(Delete("/api/models/org/model/branch/dev").status, 200);
  EXPECT_FALSE(fs::exists(hub_->root.path() / "models--org--model" / "refs" / "dev"));
  EXPECT_TRUE(Find(Refs()["branches"], "dev").is_null());
  EXPECT_EQ(Get(U("/org/model/resolve/dev/config.json")).h("x-error-code"), "RevisionNotFound");
  Reply again = Delete("/api/models/org/model/branch/dev");
  EXPECT_EQ(again.status, 404);
  EXPECT_EQ(again.h("x-error-code"), "RevisionNotFound");
  EXPECT_EQ(Delete("/api/models/org/model/branch/main").status, 403);  // the default branch
  EXPECT_EQ(Http("DELETE", U("/api/models/org/model/branch/feature%2Fx")).status, 401);
}

TEST_F(RefsTest, CreateAndDeleteTag) {
  Reply c = Post("/api/models/org/model/tag/main", json{{"tag", "v1.0"}, {"message", "first release"}});
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(RefFile("v1.0"), commit_);
  json tag = Find(Refs()["tags"], "v1.0");
  EXPECT_EQ(tag, (json{{"name", "v1.0"}, {"ref", "refs/tags/v1.0"}, {"targetCommit", commit_}}));
  EXPECT_TRUE(Find(Refs()["branches"], "v1.0").is_null());
  // The tag resolves like a revision, and keeps pointing at its commit.
  std::string c2 = CommitFile("main", "later.txt", "l", "later");
  EXPECT_EQ(Get(U("/org/model/resolve/v1.0/config.json")).h("x-repo-commit"), commit_);
  EXPECT_EQ(json::parse(Get(U("/api/models/org/model/revision/v1.0")).body)["sha"], commit_);
  // Tag a commit prefix; duplicates and branch names conflict.
  ASSERT_EQ(Post("/api/models/org/model/tag/" + c2.substr(0, 10), json{{"tag", "v2"}}).status, 200);
  EXPECT_EQ(RefFile("v2"), c2);
  EXPECT_EQ(Post("/api/models/org/model/tag/main", json{{"tag", "v1.0"}}).status, 409);
  EXPECT_EQ(Post("/api/models/org/model/tag/main", json{{"tag", "main"}}).status, 409);
  Reply norev = Post("/api/models/org/model/tag/nobranch", json{{"tag", "v3"}});
  EXPECT_EQ(norev.status, 404);
  EXPECT_EQ(norev.h("x-error-code"), "RevisionNotFound");
  // A tag is not a branch: neither deletable as one nor committable.
  EXPECT_EQ(Delete("/api/models/org/model/branch/v1.0").status, 404);
  std::string body = json{{"key", "header"}, {"value", {{"summary", "x"}}}}.dump();
  EXPECT_EQ(Http("POST", U("/api/models/org/model/commit/v1.0"), {Auth(kGood)}, &body).status, 400);
  // Delete.
  ASSERT_EQ(Delete("/api/models/org/model/tag/v1.0").status, 200);
  EXPECT_TRUE(Find(Refs()["tags"], "v1.0").is_null());
  EXPECT_EQ(Get(U("/org/model/resolve/v1.0/config.json")).h("x-error-code"), "RevisionNotFound");
  Reply missing = Delete("/api/models/org/model/tag/v1.0");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.h("x-error-code"), "RevisionNotFound");
}

// Deleting "feat/x" removes the folder refs/feat/ it leaves empty: "feat" can then be a branch or a tag
// (git allows "a" once "a/b" is gone). Expected: the store's refs/ folder read here.
TEST_F(RefsTest, DeletingASlashNameFreesItsPrefix) {
  const fs::path refs = hub_->root.path() / "models--org--model" / "refs";
  ASSERT_EQ(Post("/api/models/org/model/branch/feat%2Fx%2Fy", json::object()).status, 200);
  EXPECT_EQ(Post("/api/models/org/model/branch/feat", json::object()).status, 409);  // feat/x/y exists
  ASSERT_EQ(Delete("/api/models/org/model/branch/feat%2Fx%2Fy").status, 200);
  EXPECT_FALSE(fs::exists(refs / "feat"));
  Reply c = Post("/api/models/org/model/branch/feat", json::object());
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(RefFile("feat"), commit_);
  EXPECT_EQ(Find(Refs()["branches"], "feat")["targetCommit"], commit_);
  // A store commit creating a branch whose prefix was freed the same way; then a commit through the API.
  ASSERT_EQ(Post("/api/models/org/model/branch/dev%2Fa", json::object()).status, 200);
  ASSERT_EQ(Delete("/api/models/org/model/branch/dev%2Fa").status, 200);
  server::CommitOptions co;
  co.branch = "dev";
  auto made = server::ReplaceFile(hub_->root.str(), "org/model", "e.txt", "e", co);
  ASSERT_OK(made);
  EXPECT_EQ(RefFile("dev"), *made);
  std::string on_dev = CommitFile("dev", "d.txt", "d", "on dev");
  EXPECT_EQ(RefFile("dev"), on_dev);
  // Tags.
  ASSERT_EQ(Post("/api/models/org/model/tag/main", json{{"tag", "rel/1"}}).status, 200);
  EXPECT_EQ(Post("/api/models/org/model/tag/main", json{{"tag", "rel"}}).status, 409);
  EXPECT_TRUE(Find(Refs()["tags"], "rel").is_null());  // the refused tag is not recorded
  ASSERT_EQ(Delete("/api/models/org/model/tag/rel%2F1").status, 200);
  EXPECT_FALSE(fs::exists(refs / "rel"));
  ASSERT_EQ(Post("/api/models/org/model/tag/main", json{{"tag", "rel"}}).status, 200);
  EXPECT_EQ(Find(Refs()["tags"], "rel")["targetCommit"], commit_);
  // An empty folder left by an older server holds no ref: the name is free, and is not "found" by delete.
  fs::create_directories(refs / "old" / "x");
  EXPECT_EQ(Delete("/api/models/org/model/branch/old%2Fx").status, 404);
  EXPECT_EQ(Delete("/api/models/org/model/branch/old").status, 404);
  ASSERT_EQ(Post("/api/models/org/model/branch/old%2Fx", json::object()).status, 200);
  EXPECT_EQ(RefFile("old/x"), commit_);
  // Other refs under the same prefix stay.
  ASSERT_EQ(Post("/api/models/org/model/branch/team%2Fa", json::object()).status, 200);
  ASSERT_EQ(Post("/api/models/org/model/branch/team%2Fb", json::object()).status, 200);
  ASSERT_EQ(Delete("/api/models/org/model/branch/team%2Fa").status, 200);
  EXPECT_EQ(RefFile("team/b"), commit_);
  EXPECT_EQ(Post("/api/models/org/model/branch/team", json::object()).status, 409);
}

// Names git check-ref-format (and `git branch`) refuses are a 400 naming the rule, for branches, tags and
// a commit that would create the branch; nothing is written.
TEST_F(RefsTest, NamesGitRefusesAre400) {
  const fs::path refs = hub_->root.path() / "models--org--model" / "refs";
  struct Case {
    std::string encoded, name, rule;
  } cases[] = {
      {"x.lock", "x.lock", "'.lock'"},       {"a%2Fb.lock", "a/b.lock", "'.lock'"},
      {"%40", "@", "'@'"},                   {"a..b", "a..b", "no '..'"},
      {".hidden", ".hidden", "start with '.'"}, {"a%2F.b", "a/.b", "start with '.'"},
      {"ends.", "ends.", "end with '.'"},    {"-dash", "-dash", "start with '-'"},
      {"a%40%7Bb", "a@{b", "no '@{'"},       {"a%5Cb", "a\\b", "backslash"},
      {"a%2F%2Fb", "a//b", "empty"},         {"a%20b", "a b", "space"},
      {"HEAD", "HEAD", "'HEAD' is reserved"}, {std::string(40, 'a'), std::string(40, 'a'), "commit id"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Reply b = Post("/api/models/org/model/branch/" + c.encoded, json::object());
    EXPECT_EQ(b.status, 400) << b.body;
    EXPECT_NE(b.body.find(c.rule), std::string::npos) << b.body;
    Reply t = Post("/api/models/org/model/tag/main", json{{"tag", c.name}});
    EXPECT_EQ(t.status, 400) << t.body;
    EXPECT_FALSE(fs::exists(refs / c.name));
  }
  // A store commit that would create such a branch (`hubload store add --revision x.lock`).
  server::CommitOptions co;
  co.branch = "x.lock";
  auto lock = server::ReplaceFile(hub_->root.str(), "org/model", "f.txt", "f", co);
  EXPECT_EQ(lock.status().code(), Code::kInvalidArgument) << lock.status().ToString();
  EXPECT_NE(lock.status().message().find("'.lock'"), std::string::npos) << lock.status().ToString();
  EXPECT_FALSE(fs::exists(refs / "x.lock"));
  co.branch = "bad..name";  // refused before any rule of git's: named too
  auto dots = server::ReplaceFile(hub_->root.str(), "org/model", "f.txt", "f", co);
  EXPECT_EQ(dots.status().code(), Code::kInvalidArgument) << dots.status().ToString();
  EXPECT_NE(dots.status().message().find("no '..'"), std::string::npos) << dots.status().ToString();
  // Allowed by git: dots inside a component, '@' with other characters, a '.lock' that is not at a component's end.
  for (std::string ok : {"v1.0.2", "user@host", "x.locked", "a.lock.b"})
    EXPECT_EQ(Post("/api/models/org/model/branch/" + ok, json::object()).status, 200) << ok;
}

TEST_F(RefsTest, CommitsNewestFirstWithLinkPagination) {
  std::string c2 = CommitFile("main", "two.txt", "2", "second commit");
  std::string c3 = CommitFile("main", "three.txt", "3", "third commit");
  Reply all = Get(U("/api/models/org/model/commits/main"));
  ASSERT_EQ(all.status, 200) << all.body;
  json list = json::parse(all.body);
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0]["id"], c3);
  EXPECT_EQ(list[1]["id"], c2);
  EXPECT_EQ(list[2]["id"], commit_);
  EXPECT_EQ(list[0]["title"], "third commit");
  EXPECT_EQ(list[0]["message"], "about three.txt");
  EXPECT_EQ(list[2]["title"], "Initial commit");  // CreateRepoOptions default
  EXPECT_EQ(list[0]["authors"][0]["user"], "hubload");
  EXPECT_EQ(all.h("x-total-count"), "3");
  for (auto& c : list) EXPECT_EQ(c["date"].get<std::string>().size(), 24u) << c;  // 2026-12-01T10:00:00.000Z
  // limit=1: three pages through Link rel="next" (absolute URLs, as js parseLinkHeader wants).
  std::vector<std::string> ids;
  std::string url = U("/api/models/org/model/commits/main?limit=1");
  for (int page = 0; page < 5 && !url.empty(); ++page) {
    Reply r = Get(url);
    ASSERT_EQ(r.status, 200) << url;
    for (auto& c : json::parse(r.body)) ids.push_back(c["id"]);
    std::string link = r.h("link");
    url.clear();
    if (!link.empty()) {
      ASSERT_EQ(link.rfind("<" + hub_->url() + "/", 0), 0u) << link;
      url = link.substr(1, link.find('>') - 1);
    }
  }
  EXPECT_EQ(ids, (std::vector<std::string>{c3, c2, commit_}));
  // Another revision's history; a missing revision.
  EXPECT_EQ(json::parse(Get(U("/api/models/org/model/commits/" + c2)).body).size(), 2u);
  EXPECT_EQ(Get(U("/api/models/org/model/commits/nobranch")).h("x-error-code"), "RevisionNotFound");
  // expand[]=formatted (huggingface_hub formatted=True) adds formatted title/message.
  json f = json::parse(Get(U("/api/models/org/model/commits/main?expand%5B%5D=formatted&limit=1")).body);
  EXPECT_EQ(f[0]["formatted"]["title"], "third commit");
}

TEST_F(RefsTest, CommitAndDiscussionUrlsAnswer) {
  std::string pr_body = json{{"key", "header"}, {"value", {{"summary", "a <b> pr"}}}}.dump() + "\n" +
                        json{{"key", "file"}, {"value", {{"path", "p.txt"}, {"content", Base64("p")}}}}.dump();
  Reply pr = Http("POST", U("/api/models/org/model/commit/main?create_pr=1"), {Auth(kGood)}, &pr_body);
  ASSERT_EQ(pr.status, 200) << pr.body;
  json pj = json::parse(pr.body);
  std::string commit_url = pj["commitUrl"], pr_url = pj["pullRequestUrl"];
  ASSERT_EQ(commit_url.rfind(hub_->url() + "/org/model/commit/", 0), 0u);
  Reply page = Get(commit_url);
  ASSERT_EQ(page.status, 200);
  EXPECT_EQ(page.h("content-type").rfind("text/html", 0), 0u);
  EXPECT_NE(page.body.find(pj["commitOid"].get<std::string>()), std::string::npos);
  EXPECT_NE(page.body.find("a &lt;b&gt; pr"), std::string::npos);  // escaped
  EXPECT_EQ(page.body.find("<b>"), std::string::npos);
  Reply pjson = Get(commit_url, {"Accept: application/json"});
  json cj = json::parse(pjson.body);
  EXPECT_EQ(cj["id"], pj["commitOid"]);
  EXPECT_EQ(cj["title"], "a <b> pr");
  EXPECT_EQ(cj["parent"], commit_);
  EXPECT_NE(std::find(cj["files"].begin(), cj["files"].end(), "p.txt"), cj["files"].end());
  Reply d = Get(pr_url, {"Accept: application/json"});
  ASSERT_EQ(d.status, 200) << pr_url;
  EXPECT_EQ(json::parse(d.body)["num"], 1);
  EXPECT_EQ(json::parse(d.body)["targetCommit"], pj["commitOid"]);
  EXPECT_EQ(Get(pr_url).h("content-type").rfind("text/html", 0), 0u);
  EXPECT_EQ(Get(U("/org/model/discussions/9")).status, 404);
  EXPECT_EQ(Get(U("/org/model/commit/" + std::string(40, 'e'))).status, 404);
}

TEST_F(RefsTest, SettingsUpdateAccess) {
  std::string body = R"({"private": true})";
  ASSERT_EQ(Http("PUT", U("/api/models/org/model/settings"), W(), &body).status, 200);
  EXPECT_EQ(Get(U("/org/model/resolve/main/config.json")).status, 401);
  EXPECT_EQ(Get(U("/org/model/resolve/main/config.json"), {Auth(kGood)}).status, 200);
  body = R"({"private": false, "gated": "manual"})";
  ASSERT_EQ(Http("PUT", U("/api/models/org/model/settings"), W(), &body).status, 200);
  EXPECT_EQ(json::parse(Get(U("/api/models/org/model")).body)["gated"], "manual");
  EXPECT_EQ(Get(U("/org/model/resolve/main/config.json")).h("x-error-code"), "GatedRepo");
  body = R"({"gated": false})";
  ASSERT_EQ(Http("PUT", U("/api/models/org/model/settings"), W(), &body).status, 200);
  EXPECT_EQ(Get(U("/org/model/resolve/main/config.json")).status, 200);
}

}  // namespace
}  // namespace hubload::testing
