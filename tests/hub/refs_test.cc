// HubClient branches, tags, refs and commits (huggingface_hub create_branch,
// delete_branch, create_tag, delete_tag, list_repo_refs, list_repo_commits)
// against the in-process `hubload serve`. Expected values come from the store
// itself (server::ListRefs / server::ListCommits read the store files) and
// from the commit ids the store returned when the test made the commits,
// never from the client under test.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hub/answers.h"
#include "hubload/hub.h"
#include "hubload/reasons.h"
#include "testing/hub_server.h"
#include "testing/status_matchers.h"

namespace hubload {
namespace {

using testing::StartTestHub;
using testing::TestHub;

constexpr const char* kToken = "hf_refs_client_token";

class ClientRefsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::ServerOptions so;
    so.tokens = {kToken};
    hub_ = StartTestHub(so);
    ASSERT_TRUE(hub_);
    first_ = hub_->AddRepo("org/model", {{"config.json", "{\"a\": 1}"}});
    ASSERT_FALSE(first_.empty());
    second_ = hub_->Replace("org/model", "config.json", "{\"a\": 2}");
    ASSERT_FALSE(second_.empty());
    ClientOptions o;
    o.config.endpoint = hub_->url();
    o.config.token = kToken;
    client_ = std::make_unique<HubClient>(o);
  }
  // The store's own view of a ref's commit ("" when absent).
  std::string StoreRef(const std::string& name, bool tag = false) {
    auto refs = server::ListRefs(hub_->root.str(), "org/model");
    EXPECT_OK(refs);
    if (!refs.ok()) return "";
    for (const server::RefInfo& r : tag ? refs->tags : refs->branches)
      if (r.name == name) return r.target_commit;
    return "";
  }
  std::unique_ptr<TestHub> hub_;
  std::string first_, second_;
  std::unique_ptr<HubClient> client_;
};

TEST_F(ClientRefsTest, CreateBranchFromDefaultBranchAndFromACommit) {
  ASSERT_OK(client_->CreateBranch("org/model", "dev"));
  EXPECT_EQ(StoreRef("dev"), second_);  // head of main
  CreateBranchOptions at_first;
  at_first.revision = first_;
  ASSERT_OK(client_->CreateBranch("org/model", "old", at_first));
  EXPECT_EQ(StoreRef("old"), first_);
  // A name with '/' travels percent-encoded and is one branch.
  ASSERT_OK(client_->CreateBranch("org/model", "feature/x", at_first));
  EXPECT_EQ(StoreRef("feature/x"), first_);
}

TEST_F(ClientRefsTest, ExistingBranchIsConflictUnlessExistOk) {
  ASSERT_OK(client_->CreateBranch("org/model", "dev"));
  Status again = client_->CreateBranch("org/model", "dev");
  EXPECT_EQ(again.code(), Code::kConflict) << again.ToString();
  EXPECT_TRUE(again.Is(reason::kRefExists)) << again.ToString();
  EXPECT_NE(again.message().find("dev"), std::string::npos) << again.message();
  EXPECT_EQ(again.context().http_status, 409);
  CreateBranchOptions ok;
  ok.exist_ok = true;
  ok.revision = first_;
  EXPECT_OK(client_->CreateBranch("org/model", "dev", ok));
  EXPECT_EQ(StoreRef("dev"), second_);  // exist_ok does not move it (huggingface_hub)
}

TEST_F(ClientRefsTest, BranchErrors) {
  CreateBranchOptions bad;
  bad.revision = "no-such-branch";
  EXPECT_EQ(client_->CreateBranch("org/model", "x", bad).code(), Code::kRevisionNotFound);
  EXPECT_EQ(client_->CreateBranch("org/nope", "x").code(), Code::kRepoNotFound);
  EXPECT_EQ(client_->CreateBranch("org/model", "a..b").code(), Code::kInvalidArgument);
  EXPECT_EQ(client_->CreateBranch("org/model", "").code(), Code::kInvalidArgument);
  EXPECT_EQ(client_->CreateBranch("bad id!", "x").code(), Code::kInvalidArgument);
  ClientOptions o = client_->options();
  o.config.token = "hf_wrong";
  EXPECT_EQ(HubClient(o).CreateBranch("org/model", "x").code(), Code::kUnauthorized);
  EXPECT_EQ(StoreRef("x"), "");
}

TEST_F(ClientRefsTest, DeleteBranch) {
  ASSERT_OK(client_->CreateBranch("org/model", "feature/y"));
  ASSERT_EQ(StoreRef("feature/y"), second_);
  ASSERT_OK(client_->DeleteBranch("org/model", "feature/y"));
  EXPECT_EQ(StoreRef("feature/y"), "");
  EXPECT_EQ(client_->DeleteBranch("org/model", "feature/y").code(), Code::kRevisionNotFound);
  EXPECT_EQ(client_->DeleteBranch("org/model", "main").code(), Code::kPermissionDenied);
  EXPECT_EQ(StoreRef("main"), second_);
}

TEST_F(ClientRefsTest, CreateAndDeleteTag) {
  CreateTagOptions o;
  o.message = "first release";
  ASSERT_OK(client_->CreateTag("org/model", "v1", o));  // revision "" = main
  EXPECT_EQ(StoreRef("v1", true), second_);
  o.revision = first_;
  ASSERT_OK(client_->CreateTag("org/model", "v0/rc", o));
  EXPECT_EQ(StoreRef("v0/rc", true), first_);
  Status again = client_->CreateTag("org/model", "v1", o);
  EXPECT_EQ(again.code(), Code::kConflict) << again.ToString();
  o.exist_ok = true;
  EXPECT_OK(client_->CreateTag("org/model", "v1", o));
  EXPECT_EQ(StoreRef("v1", true), second_);
  o.revision = "nope";
  o.exist_ok = false;
  EXPECT_EQ(client_->CreateTag("org/model", "v2", o).code(), Code::kRevisionNotFound);
  ASSERT_OK(client_->DeleteTag("org/model", "v0/rc"));
  EXPECT_EQ(StoreRef("v0/rc", true), "");
  EXPECT_EQ(client_->DeleteTag("org/model", "v0/rc").code(), Code::kRevisionNotFound);
}

TEST_F(ClientRefsTest, ListRepoRefsMatchesTheStore) {
  ASSERT_OK(server::CreateBranch(hub_->root.str(), "org/model", "dev", first_));
  ASSERT_OK(server::CreateTag(hub_->root.str(), "org/model", "v1", second_));
  ASSERT_OK(server::SetRef(hub_->root.str(), "org/model", "refs/pr/1", first_));
  auto store = server::ListRefs(hub_->root.str(), "org/model");
  ASSERT_OK(store);
  auto same = [](const std::vector<GitRefInfo>& got, const std::vector<server::RefInfo>& want) {
    if (got.size() != want.size()) return false;
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i].name != want[i].name || got[i].ref != want[i].ref || got[i].target_commit != want[i].target_commit)
        return false;
    return true;
  };
  auto refs = client_->ListRepoRefs("org/model");
  ASSERT_OK(refs);
  EXPECT_TRUE(same(refs->branches, store->branches));
  EXPECT_TRUE(same(refs->tags, store->tags));
  EXPECT_TRUE(refs->pull_requests.empty());
  ASSERT_EQ(refs->branches.size(), 2u);
  ASSERT_EQ(refs->tags.size(), 1u);
  EXPECT_EQ(refs->tags[0].ref, "refs/tags/v1");
  EXPECT_EQ(refs->tags[0].target_commit, second_);
  auto with_prs = client_->ListRepoRefs("org/model", RepoType::kModel, true);
  ASSERT_OK(with_prs);
  ASSERT_EQ(with_prs->pull_requests.size(), 1u);
  EXPECT_EQ(with_prs->pull_requests[0].ref, "refs/pr/1");
  EXPECT_EQ(with_prs->pull_requests[0].target_commit, first_);
  EXPECT_EQ(client_->ListRepoRefs("org/nope").status().code(), Code::kRepoNotFound);
}

TEST_F(ClientRefsTest, ListRepoCommitsFollowsPagesNewestFirst) {
  // 60 commits on main: more than one page of the server's 50.
  std::vector<std::string> made{second_, first_};
  for (int i = 0; i < 58; ++i) {
    server::CommitOptions co;
    co.message = "commit " + std::to_string(i);
    made.insert(made.begin(), hub_->Replace("org/model", "n.txt", std::to_string(i), co));
  }
  auto commits = client_->ListRepoCommits("org/model");
  ASSERT_OK(commits);
  ASSERT_EQ(commits->size(), made.size());
  auto store = server::ListCommits(hub_->root.str(), "org/model", "main");
  ASSERT_OK(store);
  ASSERT_EQ(store->size(), made.size());
  for (size_t i = 0; i < made.size(); ++i) {
    EXPECT_EQ((*commits)[i].commit_id, made[i]) << i;
    EXPECT_EQ((*commits)[i].title, (*store)[i].title) << i;
    EXPECT_EQ((*commits)[i].created_at, (*store)[i].date) << i;
  }
  EXPECT_EQ((*commits)[0].title, "commit 57");
  ASSERT_FALSE((*commits)[0].authors.empty());
  // Another branch: its own history.
  ASSERT_OK(server::CreateBranch(hub_->root.str(), "org/model", "feature/old", first_));
  auto old = client_->ListRepoCommits("org/model", "feature/old");
  ASSERT_OK(old);
  ASSERT_EQ(old->size(), 1u);
  EXPECT_EQ((*old)[0].commit_id, first_);
  EXPECT_EQ(client_->ListRepoCommits("org/model", "nope").status().code(), Code::kRevisionNotFound);
}

// huggingface_hub create_branch(exist_ok=True): a 403 is success when the branch is listed.
TEST(ClientRefsReadOnly, ExistOkForgivesA403OnlyForAListedBranch) {
  server::ServerOptions so;
  so.read_only = true;  // every write answers 403
  auto hub = StartTestHub(so);
  ASSERT_TRUE(hub);
  ASSERT_FALSE(hub->AddRepo("org/m", {{"config.json", "{}"}}).empty());
  ClientOptions o;
  o.config.endpoint = hub->url();
  o.config.token = kToken;  // writes need a token; the read-only mirror then answers 403
  HubClient client(o);
  CreateBranchOptions ok;
  ok.exist_ok = true;
  EXPECT_OK(client.CreateBranch("org/m", "main", ok));
  EXPECT_EQ(client.CreateBranch("org/m", "main").code(), Code::kPermissionDenied);
  EXPECT_EQ(client.CreateBranch("org/m", "new", ok).code(), Code::kPermissionDenied);
}

// The answers' shapes are checked field by field (hub/answers.h).
TEST(RefsAnswers, MalformedAnswersAreInvalidFormat) {
  using nlohmann::json;
  const std::string c(40, 'a');
  auto ok = hub_internal::ParseRefs(json::parse(R"({"branches":[{"name":"main","ref":"refs/heads/main","targetCommit":")" +
                                                c + R"("}],"tags":[],"converts":[]})"),
                                    "refs");
  ASSERT_OK(ok);
  EXPECT_EQ(ok->branches.at(0).target_commit, c);
  for (const char* bad : {R"([])", R"({"tags":[]})", R"({"branches":{},"tags":[]})",
                          R"({"branches":[{"name":"m","ref":"r","targetCommit":"xyz"}],"tags":[]})",
                          R"({"branches":[{"name":1,"ref":"r","targetCommit":"xyz"}],"tags":[]})",
                          R"({"branches":[],"tags":[],"pullRequests":[3]})"}) {
    auto r = hub_internal::ParseRefs(json::parse(bad), "refs");
    EXPECT_EQ(r.status().code(), Code::kInvalidFormat) << bad;
  }
  for (const char* bad : {R"({})", R"([{"id":"abc"}])", R"([{"title":"t"}])", R"([{"id":")" "0123456789012345678901234567890123456789" R"(","authors":[{"user":2}]}])",
                          R"([{"id":")" "0123456789012345678901234567890123456789" R"(","title":5}])"}) {
    auto r = hub_internal::ParseCommitsPage(json::parse(bad), "commits");
    EXPECT_EQ(r.status().code(), Code::kInvalidFormat) << bad;
  }
}

}  // namespace
}  // namespace hubload
