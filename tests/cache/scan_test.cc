// Cache scan and delete: sizes, refs, unreferenced blobs; delete keeps shared blobs.
#include <gtest/gtest.h>

#include <filesystem>

#include "hubload/cache.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace fs = std::filesystem;
using hubload::RepoCache;

namespace {
// Builds a cache by hand (independent of the client): two commits sharing blob "s".
struct Fixture {
  hubload::testing::TempDir tmp;
  RepoCache rc{tmp.str(), "org/m", hubload::RepoType::kModel};
  std::string a = std::string(40, 'a'), b = std::string(40, 'b');
  Fixture() {
    fs::create_directories(rc.repo_dir() + "/blobs");
    hubload::testing::WriteFileBytes(rc.BlobPath("s"), std::string(100, 's'));    // shared
    hubload::testing::WriteFileBytes(rc.BlobPath("oa"), std::string(10, 'a'));    // only in A
    hubload::testing::WriteFileBytes(rc.BlobPath("ob"), std::string(1000, 'b'));  // only in B
    hubload::testing::WriteFileBytes(rc.BlobPath("orphan"), std::string(7, 'o'));
    hubload::testing::WriteFileBytes(rc.IncompletePath("part"), std::string(3, 'p'));
    fs::create_directories(rc.SnapshotDir(a) + "/d");
    fs::create_directories(rc.SnapshotDir(b));
    fs::create_symlink("../../blobs/s", rc.PointerPath(a, "shared.bin"));
    fs::create_symlink("../../../blobs/oa", rc.PointerPath(a, "d/a.txt"));
    fs::create_symlink("../../blobs/s", rc.PointerPath(b, "shared.bin"));
    fs::create_symlink("../../blobs/ob", rc.PointerPath(b, "b.txt"));
    EXPECT_OK(rc.WriteRef("main", b));
    EXPECT_OK(rc.WriteRef("v1", a));
  }
};
}  // namespace

TEST(CacheScan, ReportsRevisionsSizesAndUnreferenced) {
  Fixture f;
  auto info = hubload::ScanCache(f.tmp.str());
  ASSERT_OK(info);
  ASSERT_EQ(info->repos.size(), 1u);
  const auto& r = info->repos[0];
  EXPECT_EQ(r.repo_id, "org/m");
  EXPECT_EQ(r.size_on_disk, 100u + 10 + 1000 + 7 + 3);
  EXPECT_EQ(r.nb_blobs, 4u);
  ASSERT_EQ(r.revisions.size(), 2u);
  EXPECT_EQ(r.revisions[0].commit, f.a);
  EXPECT_EQ(r.revisions[0].size_on_disk, 110u);
  EXPECT_EQ(r.revisions[0].files, (std::vector<std::string>{"d/a.txt", "shared.bin"}));
  EXPECT_EQ(r.revisions[0].refs, (std::vector<std::string>{"v1"}));
  EXPECT_EQ(r.revisions[1].size_on_disk, 1100u);
  EXPECT_EQ(r.unreferenced_blobs, (std::vector<std::string>{"orphan"}));
  EXPECT_EQ(r.unreferenced_bytes, 7u);
  ASSERT_EQ(r.incomplete_files.size(), 1u);
  EXPECT_EQ(r.incomplete_bytes, 3u);
}

TEST(CacheScan, DeleteRevisionKeepsBlobsOtherSnapshotsUse) {
  Fixture f;
  auto rep = hubload::DeleteFromCache(f.tmp.str(), "org/m", hubload::RepoType::kModel, "v1");
  ASSERT_OK(rep);
  EXPECT_EQ(rep->deleted_snapshots, (std::vector<std::string>{f.a}));
  EXPECT_EQ(rep->deleted_refs, (std::vector<std::string>{"v1"}));
  EXPECT_EQ(rep->deleted_blobs, (std::vector<std::string>{"oa"}));
  EXPECT_EQ(rep->freed_bytes, 10u);
  EXPECT_FALSE(rep->deleted_repo);
  EXPECT_TRUE(fs::exists(f.rc.BlobPath("s")));
  EXPECT_FALSE(fs::exists(f.rc.BlobPath("oa")));
  EXPECT_FALSE(fs::exists(f.rc.SnapshotDir(f.a)));
  EXPECT_TRUE(fs::exists(f.rc.PointerPath(f.b, "shared.bin")));
  EXPECT_EQ(fs::file_size(f.rc.PointerPath(f.b, "shared.bin")), 100u);
}

TEST(CacheScan, DeleteLastRevisionRemovesRepo) {
  Fixture f;
  ASSERT_OK(hubload::DeleteFromCache(f.tmp.str(), "org/m", hubload::RepoType::kModel, "v1"));
  auto rep = hubload::DeleteFromCache(f.tmp.str(), "org/m", hubload::RepoType::kModel, f.b);
  ASSERT_OK(rep);
  EXPECT_TRUE(rep->deleted_repo);
  EXPECT_FALSE(fs::exists(f.rc.repo_dir()));
}

TEST(CacheScan, DeleteUnknownIsNotFound) {
  Fixture f;
  EXPECT_EQ(hubload::DeleteFromCache(f.tmp.str(), "org/m", hubload::RepoType::kModel, "nope").status().code(),
            hubload::Code::kNotFound);
  EXPECT_EQ(hubload::DeleteFromCache(f.tmp.str(), "org/x", hubload::RepoType::kModel).status().code(),
            hubload::Code::kNotFound);
  EXPECT_EQ(hubload::ScanCache(f.tmp.str() + "/missing").status().code(), hubload::Code::kNotFound);
}
