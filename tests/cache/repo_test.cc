// The one repo vocabulary (hubload/repo.h): the path rule against
// huggingface_hub _validate_path_in_repo / FORBIDDEN_FOLDERS (hand-listed
// cases), repo ids against validate_repo_id, commit hashes.
#include "hubload/repo.h"

#include <gtest/gtest.h>

#include <string>

#include "hubload/reasons.h"
#include "testing/status_matchers.h"

TEST(RepoPath, GitAndCacheSegmentsAreForbiddenAnywhere) {
  for (const char* p : {".git", ".git/config", ".git/hooks/post-checkout", "a/.git/b", "a/b/.git",
                        ".cache", ".cache/huggingface/download/x.metadata", "sub/.cache/huggingface/x"}) {
    auto st = hubload::ValidateRepoPath(p);
    EXPECT_EQ(st.code(), hubload::Code::kInvalidArgument) << p;
    EXPECT_TRUE(st.Is(hubload::reason::kForbiddenFolder)) << p << ": " << st.ToString();
    EXPECT_NE(st.message().find(p), std::string::npos) << st.message();
  }
  // Segments are compared exactly and case-sensitively, as huggingface_hub and the Hub.
  for (const char* p : {".gitattributes", ".github/workflows/ci.yml", ".gitignore", "a.git/b", ".git_x/y",
                        "x/.cached", ".Git/config", ".CACHE/x", "git/config", "cache/x"}) {
    EXPECT_OK(hubload::ValidateRepoPath(p)) << p;
  }
}

TEST(RepoPath, StructuralRulesComeFirst) {
  // "../.git" breaks the structural rule: reason UnsafePath, not ForbiddenFolder.
  EXPECT_TRUE(hubload::ValidateRepoPath("../.git/config").Is(hubload::reason::kUnsafePath));
  EXPECT_TRUE(hubload::ValidateRepoPath("/.git/config").Is(hubload::reason::kUnsafePath));
  EXPECT_TRUE(hubload::ValidateRepoPath(".git//config").Is(hubload::reason::kUnsafePath));
  // Length limits: 255 bytes per segment, 4096 in all.
  EXPECT_OK(hubload::ValidateRepoPath(std::string(255, 'a')));
  EXPECT_TRUE(hubload::ValidateRepoPath(std::string(256, 'a')).Is(hubload::reason::kUnsafePath));
  std::string deep;
  for (int i = 0; i < 25; ++i) deep += std::string(200, 'b') + "/";
  deep += "f";
  EXPECT_GT(deep.size(), 4096u);
  EXPECT_TRUE(hubload::ValidateRepoPath(deep).Is(hubload::reason::kUnsafePath));
  // Control characters are shown escaped, never raw.
  auto st = hubload::ValidateRepoPath(std::string("a\nb\x7f", 4));
  EXPECT_TRUE(st.Is(hubload::reason::kUnsafePath));
  EXPECT_NE(st.message().find("a\\x0ab\\x7f"), std::string::npos) << st.message();
}

TEST(RepoId, HubRules) {
  for (const char* ok : {"gpt2", "org/name", "Org-1/model_v2.5", "a/b"}) EXPECT_OK(hubload::ValidateRepoId(ok)) << ok;
  for (const char* bad : {"", "a/b/c", "org/", "/name", "a--b", "a..b", "-a", "a-", ".a", "org/name.git", "a b", "a/b\n"})
    EXPECT_FALSE(hubload::ValidateRepoId(bad).ok()) << bad;
  EXPECT_FALSE(hubload::ValidateRepoId(std::string(97, 'a')).ok());
}

TEST(RepoVocabulary, CommitHashAndRepoType) {
  EXPECT_TRUE(hubload::IsCommitHash("0123456789abcdef0123456789abcdef01234567"));
  EXPECT_FALSE(hubload::IsCommitHash("0123456789ABCDEF0123456789abcdef01234567"));
  EXPECT_FALSE(hubload::IsCommitHash("0123456789abcdef0123456789abcdef0123456"));
  EXPECT_FALSE(hubload::IsCommitHash("main"));
  EXPECT_EQ(*hubload::ParseRepoType("datasets"), hubload::RepoType::kDataset);
  EXPECT_STREQ(hubload::RepoTypeName(hubload::RepoType::kSpace), "space");
  EXPECT_FALSE(hubload::ParseRepoType("repo").ok());
}
