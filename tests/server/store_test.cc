// The store library calls (hubload/server.h "Store"), checked on disk.
#include <fstream>

#include "server/server_fixture.h"
#include "testing/status_matchers.h"

namespace hubload::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// ---- store layout ----

TEST(ServerStore, CreateRepoFromFolderLayout) {
  TempDir root, src;
  std::string reg = "regular text\n", big = PatternBytes(300, 4);
  fs::create_directories(src.path() / "d");
  WriteFileBytes(src.path() / "r.txt", reg);
  WriteFileBytes(src.path() / "d" / "w.dat", big);
  server::CreateRepoOptions o;
  o.lfs_threshold_bytes = 100;  // force the 300-byte file through LFS
  o.lfs_by_extension = false;
  auto c = server::CreateRepoFromFolder(root.str(), "org/layout", src.str(), o);
  ASSERT_OK(c);
  fs::path repo = root.path() / "models--org--layout";
  std::string ref;
  {
    std::ifstream in(repo / "refs" / "main");
    std::getline(in, ref);
  }
  EXPECT_EQ(ref, *c);
  EXPECT_TRUE(fs::exists(repo / "blobs" / GitSha1(reg)));
  EXPECT_TRUE(fs::exists(repo / "blobs" / Sha256(big)));
  fs::path snap = repo / "snapshots" / *c;
  EXPECT_EQ(fs::read_symlink(snap / "r.txt").string(), "../../blobs/" + GitSha1(reg));
  EXPECT_EQ(fs::read_symlink(snap / "d" / "w.dat").string(), "../../../blobs/" + Sha256(big));
  // ReplaceFile: new commit on main, old snapshot intact.
  auto c2 = server::ReplaceFile(root.str(), "org/layout", "r.txt", "v2");
  ASSERT_OK(c2);
  EXPECT_NE(*c2, *c);
  EXPECT_EQ(fs::read_symlink(snap / "r.txt").string(), "../../blobs/" + GitSha1(reg));
  EXPECT_EQ(fs::read_symlink(repo / "snapshots" / *c2 / "r.txt").string(), "../../blobs/" + GitSha1("v2"));
  // Bad inputs are refused with clear errors.
  EXPECT_EQ(server::ReplaceFile(root.str(), "org/layout", "../x", "v").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(server::ReplaceFile(root.str(), "org/none", "x", "v").status().code(), Code::kRepoNotFound);
  server::CommitOptions stale;
  stale.parent_commit = *c;
  EXPECT_EQ(server::ReplaceFile(root.str(), "org/layout", "r.txt", "v3", stale).status().code(), Code::kConflict);
  EXPECT_EQ(server::CreateRepoFromFiles(root.str(), "bad--name", {{"a", "b"}}).status().code(),
            Code::kInvalidArgument);
}

}  // namespace
}  // namespace hubload::testing
