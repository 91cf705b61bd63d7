// LinkSnapshot without symlinks (B14 a/c): a new blob is moved into the
// snapshot, a cached one is copied (huggingface_hub _create_symlink).
#include <gtest/gtest.h>

#include <filesystem>

#include "hubload/cache.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace fs = std::filesystem;
using hubload::RepoCache;
using hubload::RepoType;

namespace {
std::string ReadText(const std::string& p) {
  auto b = hubload::testing::ReadFileBytes(p);
  return std::string(b.begin(), b.end());
}
}  // namespace

TEST(CacheLinkFallback, NewBlobIsMovedIntoTheSnapshot) {
  hubload::testing::TempDir tmp;
  RepoCache rc(tmp.str(), "org/m", RepoType::kModel);
  std::string commit(40, 'c');
  fs::create_directories(rc.repo_dir() + "/blobs");
  hubload::testing::WriteFileBytes(rc.BlobPath("e1"), std::string("fresh bytes"));
  auto p = rc.LinkSnapshot(commit, "sub/w.bin", "e1", /*use_symlinks=*/false, /*new_blob=*/true);
  ASSERT_OK(p);
  EXPECT_EQ(*p, rc.PointerPath(commit, "sub/w.bin"));
  EXPECT_FALSE(fs::is_symlink(*p));
  EXPECT_EQ(ReadText(*p), "fresh bytes");
  EXPECT_FALSE(fs::exists(rc.BlobPath("e1")));  // moved: no second copy in blobs/
  EXPECT_TRUE(fs::is_empty(rc.repo_dir() + "/blobs"));
  EXPECT_TRUE(rc.CachedPointer(commit, "sub/w.bin").has_value());
}

TEST(CacheLinkFallback, CachedBlobIsCopiedAndKept) {
  hubload::testing::TempDir tmp;
  RepoCache rc(tmp.str(), "org/m", RepoType::kModel);
  std::string commit(40, 'c');
  fs::create_directories(rc.repo_dir() + "/blobs");
  hubload::testing::WriteFileBytes(rc.BlobPath("e1"), std::string("shared"));
  auto p = rc.LinkSnapshot(commit, "a.txt", "e1", /*use_symlinks=*/false, /*new_blob=*/false);
  ASSERT_OK(p);
  EXPECT_FALSE(fs::is_symlink(*p));
  EXPECT_EQ(ReadText(*p), "shared");
  EXPECT_EQ(ReadText(rc.BlobPath("e1")), "shared");
}

TEST(CacheLinkFallback, SymlinkModeIgnoresNewBlob) {
  hubload::testing::TempDir tmp;
  RepoCache rc(tmp.str(), "org/m", RepoType::kModel);
  std::string commit(40, 'c');
  fs::create_directories(rc.repo_dir() + "/blobs");
  hubload::testing::WriteFileBytes(rc.BlobPath("e1"), std::string("x"));
  auto p = rc.LinkSnapshot(commit, "a.txt", "e1", /*use_symlinks=*/true, /*new_blob=*/true);
  ASSERT_OK(p);
  EXPECT_TRUE(fs::is_symlink(*p));
  EXPECT_EQ(fs::read_symlink(*p).string(), "../../blobs/e1");
  EXPECT_TRUE(fs::exists(rc.BlobPath("e1")));
}

TEST(CacheLinkFallback, MissingBlobIsAnErrorNamingThePointer) {
  hubload::testing::TempDir tmp;
  RepoCache rc(tmp.str(), "org/m", RepoType::kModel);
  std::string commit(40, 'c');
  auto p = rc.LinkSnapshot(commit, "a.txt", "nope", /*use_symlinks=*/false, /*new_blob=*/true);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find(rc.PointerPath(commit, "a.txt")), std::string::npos) << p.status().message();
  EXPECT_FALSE(fs::exists(rc.PointerPath(commit, "a.txt")));
}
