// Mirror mode over a Hugging Face cache (issue 19): a snapshot is complete
// only when trees/<commit>.json proves it; listed files the cache lacks
// answer 404 EntryNotFound, or are pulled through from --upstream once however
// many clients ask. The caches here are written by the test as huggingface_hub
// lays them out (blob names and tree entries computed here with OpenSSL).
#include <atomic>
#include <thread>

#include "server/server_fixture.h"
#include "testing/status_matchers.h"

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
  ASSERT_OK(s);
  Reply r = Get((*s)->url() + "/org/cached/resolve/main/f.txt");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, content);
  EXPECT_EQ(r.h("x-repo-commit"), commit);
  EXPECT_EQ(r.h("etag"), "\"" + GitSha1(content) + "\"");
}

// Writes one file of `repo` (a cache repo folder) into snapshot `commit`.
void CacheFile(const fs::path& repo, const std::string& commit, const std::string& path, const std::string& content,
               bool lfs) {
  std::string blob = lfs ? Sha256(content) : GitSha1(content);
  fs::create_directories(repo / "blobs");
  WriteFileBytes(repo / "blobs" / blob, content);
  fs::path link = repo / "snapshots" / commit / path;
  fs::create_directories(link.parent_path());
  std::string up = "../../";
  for (char c : path)
    if (c == '/') up += "../";
  fs::create_symlink(up + "blobs/" + blob, link);
}

void WriteRef(const fs::path& repo, const std::string& commit) {
  fs::create_directories(repo / "refs");
  WriteFileBytes(repo / "refs" / "main", commit);
}

std::string LfsPointerText(const std::string& content) {
  return "version https://git-lfs.github.com/spec/v1\noid sha256:" + Sha256(content) + "\nsize " +
         std::to_string(content.size()) + "\n";
}

// trees/<commit>.json as huggingface_hub _tree_cache.py writes it.
void WriteTreeListing(const fs::path& repo, const std::string& commit, const std::map<std::string, std::string>& files,
                      const std::set<std::string>& lfs) {
  json entries = json::object();
  for (auto& [p, c] : files) {
    if (lfs.count(p)) {
      entries[p] = {{"size", c.size()}, {"blob_id", GitSha1(LfsPointerText(c))}, {"lfs_sha256", Sha256(c)},
                    {"lfs_size", c.size()}};
    } else {
      entries[p] = {{"size", c.size()}, {"blob_id", GitSha1(c)}};
    }
  }
  fs::create_directories(repo / "trees");
  WriteFileBytes(repo / "trees" / (commit + ".json"), json{{"format_version", 1}, {"files", entries}}.dump());
}

struct MirrorFixture {
  std::map<std::string, std::string> files = {{"config.json", "{\"layers\": 2}\n"},
                                              {"model-00001-of-00002.safetensors", PatternBytes(3000, 21)},
                                              {"model-00002-of-00002.safetensors", PatternBytes(2500, 22)},
                                              {"tok/vocab.txt", "a\nb\nc\n"},
                                              {"README.md", "# m\n"}};
  std::set<std::string> lfs = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
  // What the partial cache holds (one LFS file, one regular file).
  std::set<std::string> present = {"config.json", "model-00001-of-00002.safetensors"};
};

TEST(ServerMirror, ListingMakesAPartialCacheCompleteAndMissingFiles404) {
  MirrorFixture m;
  TempDir cache, logs;
  std::string commit(40, 'c');
  fs::path repo = cache.path() / "models--org--m";
  for (auto& p : m.present) CacheFile(repo, commit, p, m.files[p], m.lfs.count(p) > 0);
  WriteRef(repo, commit);
  WriteTreeListing(repo, commit, m.files, m.lfs);
  // A second repo without a listing: only what is there, marked unproven.
  fs::path bare = cache.path() / "models--org--bare";
  CacheFile(bare, commit, "only.txt", "only\n", false);
  WriteRef(bare, commit);

  server::ServerOptions o;
  o.root = cache.str();
  o.read_only = true;
  o.access_log = logs.str() + "/access.log";
  auto s = server::Server::Start(o);
  ASSERT_OK(s);
  std::string url = (*s)->url();

  json info = json::parse(Get(url + "/api/models/org/m?blobs=true").body);
  EXPECT_EQ(info["sha"], commit);
  std::map<std::string, json> sib;
  for (auto& e : info["siblings"]) sib[e["rfilename"]] = e;
  ASSERT_EQ(sib.size(), m.files.size());
  for (auto& [p, c] : m.files) {
    EXPECT_EQ(sib[p]["size"], c.size()) << p;
    if (m.lfs.count(p)) EXPECT_EQ(sib[p]["lfs"]["sha256"], Sha256(c)) << p;
    else EXPECT_EQ(sib[p]["blobId"], GitSha1(c)) << p;
  }
  json tree = json::parse(Get(url + "/api/models/org/m/tree/main?recursive=true").body);
  std::set<std::string> listed;
  for (auto& e : tree) listed.insert(e["type"].get<std::string>() + ":" + e["path"].get<std::string>());
  std::set<std::string> want = {"directory:tok"};
  for (auto& [p, c] : m.files) want.insert("file:" + p);
  EXPECT_EQ(listed, want);
  json pi_body_j = {{"paths", {"tok/vocab.txt", "README.md", "nope"}}};
  std::string pi_body = pi_body_j.dump();
  json pi = json::parse(Http("POST", url + "/api/models/org/m/paths-info/main", {"Content-Type: application/json"},
                             &pi_body)
                            .body);
  ASSERT_EQ(pi.size(), 2u);
  EXPECT_EQ(pi[0]["path"], "tok/vocab.txt");
  EXPECT_EQ(pi[0]["oid"], GitSha1(m.files["tok/vocab.txt"]));
  EXPECT_EQ(pi[1]["oid"], GitSha1(m.files["README.md"]));
  // Present files are served, missing ones are 404 EntryNotFound with the commit.
  EXPECT_EQ(Get(url + "/org/m/resolve/main/config.json").body, m.files["config.json"]);
  EXPECT_TRUE(Http("GET", url + "/org/m/resolve/main/model-00001-of-00002.safetensors", {}, nullptr, true).body ==
              m.files["model-00001-of-00002.safetensors"]);
  for (const char* p : {"tok/vocab.txt", "README.md", "model-00002-of-00002.safetensors"}) {
    Reply r = Get(url + "/org/m/resolve/main/" + p);
    EXPECT_EQ(r.status, 404) << p;
    EXPECT_EQ(r.h("x-error-code"), "EntryNotFound") << p;
    EXPECT_EQ(r.h("x-repo-commit"), commit) << p;
  }
  // Unproven snapshot: only the file that is there, and the log says so.
  json bare_info = json::parse(Get(url + "/api/models/org/bare").body);
  ASSERT_EQ(bare_info["siblings"].size(), 1u);
  EXPECT_EQ(bare_info["siblings"][0]["rfilename"], "only.txt");
  (*s)->Stop();
  bool marked = false, proven_unmarked = true;
  for (auto& l : ReadAccessLog(logs.path() / "access.log")) {
    if (l["path"] == "/api/models/org/bare") marked = l.value("unproven", false);
    if (l["path"] == "/api/models/org/m") proven_unmarked = proven_unmarked && !l.contains("unproven");
  }
  EXPECT_TRUE(marked);
  EXPECT_TRUE(proven_unmarked);
}

TEST(ServerMirror, CorruptListingIsIgnored) {
  TempDir cache;
  std::string commit(40, 'd');
  fs::path repo = cache.path() / "models--org--c";
  CacheFile(repo, commit, "a.txt", "a", false);
  WriteRef(repo, commit);
  fs::create_directories(repo / "trees");
  WriteFileBytes(repo / "trees" / (commit + ".json"), std::string(R"({"format_version":1,"files":{"b.txt":{"size":"3"}}})"));
  server::ServerOptions o;
  o.root = cache.str();
  auto s = server::Server::Start(o);
  ASSERT_OK(s);
  json info = json::parse(Get((*s)->url() + "/api/models/org/c").body);
  ASSERT_EQ(info["siblings"].size(), 1u);  // the walk of the snapshot, as without a listing
  EXPECT_EQ(info["siblings"][0]["rfilename"], "a.txt");
}

TEST(ServerMirror, PullThroughFetchesEachMissingFileOnceForConcurrentClients) {
  MirrorFixture m;
  TempDir up_store, up_logs, cache;
  // The upstream Hub: a store with the whole repo.
  server::CreateRepoOptions co;
  co.lfs_threshold_bytes = 1000;
  co.lfs_by_extension = false;
  auto commit = server::CreateRepoFromFiles(up_store.str(), "org/m", m.files, co);
  ASSERT_OK(commit);
  server::ServerOptions uo;
  uo.root = up_store.str();
  uo.access_log = up_logs.str() + "/access.log";
  auto up = server::Server::Start(uo);
  ASSERT_OK(up);
  // The mirror's cache: part of that commit, and its listing.
  fs::path repo = cache.path() / "models--org--m";
  for (auto& p : m.present) CacheFile(repo, *commit, p, m.files[p], m.lfs.count(p) > 0);
  WriteRef(repo, *commit);
  WriteTreeListing(repo, *commit, m.files, m.lfs);
  server::ServerOptions mo;
  mo.root = cache.str();
  mo.read_only = true;
  mo.upstream = (*up)->url();
  auto mirror = server::Server::Start(mo);
  ASSERT_OK(mirror);

  std::vector<std::string> missing;
  for (auto& [p, c] : m.files)
    if (!m.present.count(p)) missing.push_back(p);
  constexpr int kClients = 6;
  std::atomic<int> good{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i)
    clients.emplace_back([&] {
      for (auto& p : missing) {
        Reply r = Http("GET", (*mirror)->url() + "/org/m/resolve/main/" + p, {}, nullptr, true);
        if (r.status == 200 && r.body == m.files[p]) good++;
      }
    });
  for (auto& t : clients) t.join();
  EXPECT_EQ(good.load(), kClients * static_cast<int>(missing.size()));
  // The mirror's cache now holds them (a later client needs no upstream).
  for (auto& p : missing) {
    auto bytes = ReadFileBytes(repo / "snapshots" / *commit / p);
    EXPECT_TRUE(std::string(bytes.begin(), bytes.end()) == m.files[p]) << p;
  }
  (*up)->Stop();
  // Exactly one upstream GET of each file's bytes (/resolve/ for regular
  // files, the CDN blob for LFS files); HEADs are metadata.
  std::map<std::string, int> gets;
  for (auto& l : ReadAccessLog(up_logs.path() / "access.log")) {
    if (l["method"] != "GET") continue;
    std::string path = l["path"];
    for (auto& p : missing) {
      std::string blob = m.lfs.count(p) ? Sha256(m.files[p]) : GitSha1(m.files[p]);
      if (path == "/org/m/resolve/" + *commit + "/" + p || path == "/models--org--m/" + blob) gets[p]++;
    }
  }
  for (auto& p : missing) EXPECT_EQ(gets[p], 1) << p;
}

}  // namespace
}  // namespace hubload::testing
