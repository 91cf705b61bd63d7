// The addresses `hubload serve` hands out (issue 19): LFS redirects, upload
// actions, commit URLs and pagination links use the address the client
// reached the server by (its Host header, validated), or --public-url; the
// CDN listener binds the hub listener's address. Expected URLs are built here
// from the ports and names the test chose.
#include "hubload/hub.h"
#include "server/server_fixture.h"
#include "testing/status_matchers.h"

namespace hubload::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct Served {
  TempDir store;
  std::unique_ptr<server::Server> server;
  std::map<std::string, std::string> files;
  std::string commit;
};

std::unique_ptr<Served> Serve(server::ServerOptions o) {
  auto s = std::make_unique<Served>();
  s->files = {{"config.json", "{\"x\": 1}\n"},
              {"model.safetensors", PatternBytes(5000, 11)},
              {"w/shard.bin", PatternBytes(3000, 12)},
              {"a.txt", "a\n"},
              {"b.txt", "b\n"}};
  server::CreateRepoOptions co;
  co.lfs_threshold_bytes = 1000;  // the two big files are LFS (CDN redirect)
  auto c = server::CreateRepoFromFiles(s->store.str(), "org/m", s->files, co);
  if (!c.ok()) {
    ADD_FAILURE() << c.status().ToString();
    return nullptr;
  }
  s->commit = *c;
  o.root = s->store.str();
  o.tree_page_size = 2;
  auto srv = server::Server::Start(o);
  if (!srv.ok()) {
    ADD_FAILURE() << srv.status().ToString();
    return nullptr;
  }
  s->server = std::move(*srv);
  return s;
}

std::string Port(uint16_t p) { return std::to_string(p); }

// The snapshot through the existing HubClient: every file's bytes as stored.
void ExpectSnapshot(const Served& s, const std::string& endpoint) {
  TempDir cache;
  ClientOptions co;
  co.config.endpoint = endpoint;
  co.config.cache_dir = cache.str();
  HubClient client(co);
  SnapshotRequest req;
  req.repo_id = "org/m";
  auto dir = client.Snapshot(req);
  ASSERT_OK(dir);
  for (auto& [p, content] : s.files) {
    auto bytes = ReadFileBytes(fs::path(*dir) / p);
    EXPECT_EQ(std::string(bytes.begin(), bytes.end()), content) << p;
  }
}

TEST(ServerAddress, BoundToALoopbackAliasWithNoOtherFlag) {
  server::ServerOptions o;
  o.host = "127.0.0.2";
  auto s = Serve(o);
  ASSERT_TRUE(s);
  std::string url = s->server->url();
  EXPECT_EQ(url, "http://127.0.0.2:" + Port(s->server->port()));
  Reply r = Http("HEAD", url + "/org/m/resolve/main/model.safetensors");
  ASSERT_EQ(r.status, 302);
  EXPECT_EQ(r.h("location").rfind("http://127.0.0.2:" + Port(s->server->cdn_port()) + "/models--org--m/", 0), 0u)
      << r.h("location");
  // Both listeners are on 127.0.0.2 only.
  EXPECT_EQ(RawExchange(s->server->cdn_port(), "GET / HTTP/1.1\r\n\r\n", 500, "127.0.0.1"), "");
  ExpectSnapshot(*s, url);
}

TEST(ServerAddress, AnyAddressAnswersWithTheHostTheClientUsed) {
  server::ServerOptions o;
  o.host = "0.0.0.0";
  auto s = Serve(o);
  ASSERT_TRUE(s);
  std::string port = Port(s->server->port()), cdn = Port(s->server->cdn_port());
  EXPECT_EQ(s->server->url(), "http://127.0.0.1:" + port);
  std::string url = "http://127.0.0.1:" + port;
  ExpectSnapshot(*s, url);
  // A client that reached the node by another name gets URLs with that name.
  std::vector<std::string> host = {"Host: node7.cluster:" + port};
  Reply lfs = Http("HEAD", url + "/org/m/resolve/main/model.safetensors", host);
  EXPECT_EQ(lfs.h("location").rfind("http://node7.cluster:" + cdn + "/models--org--m/", 0), 0u) << lfs.h("location");
  Reply tree = Get(url + "/api/models/org/m/tree/main?recursive=true", host);
  EXPECT_EQ(tree.h("link").rfind("<http://node7.cluster:" + port + "/api/models/org/m/tree/main?", 0), 0u)
      << tree.h("link");
  // A Host that is not a plain host[:port] falls back to the configured address.
  for (const char* bad : {"Host: evil.test/path", "Host: a b", "Host: x:99999999", "Host: [zz]:1"}) {
    Reply r = Http("HEAD", url + "/org/m/resolve/main/model.safetensors", {bad});
    EXPECT_EQ(r.h("location").rfind("http://127.0.0.1:" + cdn + "/", 0), 0u) << bad << " -> " << r.h("location");
  }
  // Upload actions and commit URLs follow the Host too.
  std::vector<std::string> w = {"Authorization: Bearer t", "Content-Type: application/json", host[0]};
  std::string batch = json{{"operation", "upload"}, {"objects", {{{"oid", Sha256("new")}, {"size", 3}}}}}.dump();
  Reply b = Http("POST", url + "/org/m.git/info/lfs/objects/batch", w, &batch);
  std::string href = json::parse(b.body)["objects"][0]["actions"]["upload"]["href"];
  EXPECT_EQ(href.rfind("http://node7.cluster:" + port + "/_lfs/", 0), 0u) << href;
  std::string commit = json{{"key", "header"}, {"value", {{"summary", "s"}}}}.dump() + "\n" +
                       json{{"key", "file"}, {"value", {{"path", "n.txt"}, {"content", Base64("n")}}}}.dump();
  Reply c = Http("POST", url + "/api/models/org/m/commit/main", w, &commit);
  EXPECT_EQ(json::parse(c.body)["commitUrl"].get<std::string>().rfind("http://node7.cluster:" + port + "/org/m/commit/", 0),
            0u)
      << c.body;
}

TEST(ServerAddress, PublicUrlAndCdnHostOverride) {
  server::ServerOptions o;
  o.public_url = "https://hub.example.org/mirror/";
  auto s = Serve(o);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->server->url(), "https://hub.example.org/mirror");
  std::string local = "http://127.0.0.1:" + Port(s->server->port());
  Reply tree = Get(local + "/api/models/org/m/tree/main?recursive=true");
  EXPECT_EQ(tree.h("link").rfind("<https://hub.example.org/mirror/api/models/org/m/tree/main?", 0), 0u) << tree.h("link");
  Reply lfs = Http("HEAD", local + "/org/m/resolve/main/model.safetensors");
  EXPECT_EQ(lfs.h("location").rfind("http://hub.example.org:" + Port(s->server->cdn_port()) + "/", 0), 0u)
      << lfs.h("location");

  server::ServerOptions o2;
  o2.cdn_host = "localhost";
  auto s2 = Serve(o2);
  ASSERT_TRUE(s2);
  Reply r = Http("HEAD", s2->server->url() + "/org/m/resolve/main/model.safetensors");
  EXPECT_EQ(r.h("location").rfind("http://localhost:" + Port(s2->server->cdn_port()) + "/", 0), 0u) << r.h("location");
  EXPECT_EQ(s2->server->cdn_url(), "http://localhost:" + Port(s2->server->cdn_port()));

  server::ServerOptions bad;
  bad.public_url = "ftp://x";
  bad.root = s->store.str();
  EXPECT_EQ(server::Server::Start(bad).status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace hubload::testing
