// Mirror mode over a Hugging Face cache.
#include "server/server_fixture.h"

namespace hubload::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

TEST(ServerMirror, ServesAPlainCacheFolder) {
  TempDir cache;
  std::string content = "cached bytes\n";
  std::string commit(40, 'a');
  fs::path repo = cache.path() / "models--org--cached";
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "refs");
  fs::create_directories(repo / "snapshots" / commit);
  WriteFileBytes(repo / "blobs" / GitSha1(content), content);
  fs::create_symlink("../../blobs/" + GitSha1(content), repo / "snapshots" / commit / "f.txt");
  WriteFileBytes(repo / "refs" / "main", commit);
  server::ServerOptions o;
  o.root = cache.str();
  o.read_only = true;
  auto s = server::Server::Start(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Reply r = Get((*s)->url() + "/org/cached/resolve/main/f.txt");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, content);
  EXPECT_EQ(r.h("x-repo-commit"), commit);
  EXPECT_EQ(r.h("etag"), "\"" + GitSha1(content) + "\"");
}

}  // namespace
}  // namespace hubload::testing
