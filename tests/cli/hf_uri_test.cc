// tools/hubload/hf_uri.h: hf:// URIs as huggingface_hub's HfFileSystem
// writes them. Expected parts are read off each literal by hand.
#include "tools/hubload/hf_uri.h"

#include <gtest/gtest.h>

#include "hubload/reasons.h"
#include "testing/status_matchers.h"

namespace {
using hubload::RepoType;
using hubload::cli::ParseRepoRef;

TEST(HfUri, PlainRepoIdIsTakenAsIs) {
  auto r = ParseRepoRef("org/name");
  ASSERT_OK(r);
  EXPECT_EQ(r->repo_id, "org/name");
  EXPECT_EQ(r->repo_type, RepoType::kModel);
  EXPECT_FALSE(r->repo_type_given);
  EXPECT_EQ(r->revision, "");
  EXPECT_EQ(r->path, "");
  auto legacy = ParseRepoRef("gpt2");
  ASSERT_OK(legacy);
  EXPECT_EQ(legacy->repo_id, "gpt2");
}

TEST(HfUri, RepoRevisionAndPath) {
  auto r = ParseRepoRef("hf://org/name@v1.0/sub/dir/file.json");
  ASSERT_OK(r);
  EXPECT_EQ(r->repo_id, "org/name");
  EXPECT_EQ(r->repo_type, RepoType::kModel);
  EXPECT_EQ(r->revision, "v1.0");
  EXPECT_EQ(r->path, "sub/dir/file.json");

  auto bare = ParseRepoRef("hf://org/name");
  ASSERT_OK(bare);
  EXPECT_EQ(bare->repo_id, "org/name");
  EXPECT_EQ(bare->revision, "");
  EXPECT_EQ(bare->path, "");

  auto no_rev = ParseRepoRef("hf://org/name/config.json");
  ASSERT_OK(no_rev);
  EXPECT_EQ(no_rev->path, "config.json");
  EXPECT_EQ(no_rev->revision, "");

  auto slash = ParseRepoRef("hf://org/name@main/");
  ASSERT_OK(slash);
  EXPECT_EQ(slash->revision, "main");
  EXPECT_EQ(slash->path, "");
}

TEST(HfUri, TypePrefixes) {
  struct Case {
    const char* text;
    RepoType type;
  } cases[] = {{"hf://datasets/org/data@main/train/0.parquet", RepoType::kDataset},
               {"hf://spaces/org/app", RepoType::kSpace},
               {"hf://models/org/name", RepoType::kModel}};
  for (auto& c : cases) {
    auto r = ParseRepoRef(c.text);
    ASSERT_OK(r) << c.text << ": " << r.status().ToString();
    EXPECT_EQ(r->repo_type, c.type) << c.text;
    EXPECT_TRUE(r->repo_type_given) << c.text;
  }
  auto d = ParseRepoRef("hf://datasets/org/data@main/train/0.parquet");
  EXPECT_EQ(d->repo_id, "org/data");
  EXPECT_EQ(d->path, "train/0.parquet");
}

TEST(HfUri, SpecialRefsKeepTheirSlashesAndEscapesAreDecoded) {
  auto pr = ParseRepoRef("hf://org/name@refs/pr/3/model.safetensors");
  ASSERT_OK(pr);
  EXPECT_EQ(pr->revision, "refs/pr/3");
  EXPECT_EQ(pr->path, "model.safetensors");
  auto conv = ParseRepoRef("hf://datasets/org/d@refs/convert/parquet/default/x.parquet");
  ASSERT_OK(conv);
  EXPECT_EQ(conv->revision, "refs/convert/parquet");
  EXPECT_EQ(conv->path, "default/x.parquet");
  auto enc = ParseRepoRef("hf://org/name@refs%2Fpr%2F7/a.txt");
  ASSERT_OK(enc);
  EXPECT_EQ(enc->revision, "refs/pr/7");
  EXPECT_EQ(enc->path, "a.txt");
  auto legacy = ParseRepoRef("hf://gpt2@main");
  ASSERT_OK(legacy);
  EXPECT_EQ(legacy->repo_id, "gpt2");
  EXPECT_EQ(legacy->revision, "main");
}

TEST(HfUri, HostileAndMalformedFormsAreRefusedWithTheText) {
  const char* bad[] = {"hf://",
                       "hf://../x",
                       "hf://org/..",
                       "hf://org/name/../../etc/passwd",
                       "hf://org//name",
                       "hf://org/name//file",
                       "hf://org/name@",
                       "hf://org/name@/file",
                       "hf://org/name@a@b",
                       "hf://datasets/",
                       "hf://datasets",
                       "hf://org/name@refs/pr",
                       "hf://org/name@%zz",
                       "hf://gpt2@main/config.json",
                       "hf://org/name/a\\b",
                       "hf://org/na me",
                       "../x",
                       ""};
  for (const char* t : bad) {
    auto r = ParseRepoRef(t);
    ASSERT_FALSE(r.ok()) << "accepted: '" << t << "' as repo " << r->repo_id << " path " << r->path;
    EXPECT_TRUE(r.status().Is(hubload::reason::kBadHfUri)) << t << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find(std::string("'") + t + "'"), std::string::npos) << r.status().message();
  }
}

}  // namespace
