// HubClient against the in-process `hubload serve`: layout, zero-request
// paths, revalidation, resume and the field failures of issue 5.
// Expected bytes/hashes come from the test's own data (OpenSSL), never from
// hubload code.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "hubload/hub.h"
#include "testing/hub_server.h"
#include "testing/util.h"
#include "field_support.h"
#include "testing/status_matchers.h"
#include "util/log_capture.h"

namespace fs = std::filesystem;
using hubload::Code;
using hubload::testing::SmallLfs;
using hubload::testing::PatternBytes;
using hubload::testing::StartTestHub;
using hubload::testing::TempDir;
using hubload::testing::TestHub;
using hubload::testing::field::Opts;  // the hub tests' client options

namespace {

std::string Sha256(const std::string& s) { return hubload::testing::Sha256Hex(s.data(), s.size()); }

std::string GitSha1(const std::string& content) { return hubload::testing::GitBlobSha1Hex(content); }

std::string ReadAll(const fs::path& p) {
  auto b = hubload::testing::ReadFileBytes(p);
  return std::string(b.begin(), b.end());
}

hubload::FileRequest Req(const std::string& repo, const std::string& file, const std::string& rev = "main") {
  hubload::FileRequest r;
  r.repo_id = repo;
  r.filename = file;
  r.revision = rev;
  return r;
}

// The server counts a request after its last byte is written, which can be
// after the client has returned: let in-flight bookkeeping finish before
// reading or resetting the counters (not a timing assertion).
void Settle() { std::this_thread::sleep_for(std::chrono::milliseconds(200)); }
hubload::server::ServerStats Stats(const hubload::testing::TestHub& hub) {
  Settle();
  return hub.server->stats();
}
uint64_t Count(const hubload::testing::TestHub& hub, const std::string& needle) {
  Settle();
  return hub.server->RequestCount(needle);
}

uint64_t BytesFor(const TestHub& hub, const std::string& needle) {
  uint64_t n = 0;
  for (auto& [p, b] : Stats(hub).body_bytes_per_path)
    if (p.find(needle) != std::string::npos) n += b;
  return n;
}

// Records every request URL; optional rewrite of responses.
class RecordingTransport : public hubload::HttpTransport {
 public:
  explicit RecordingTransport(std::shared_ptr<hubload::HttpTransport> inner) : inner_(std::move(inner)) {}
  hubload::Result<hubload::HttpResponse> Send(const hubload::HttpRequest& req, hubload::BodySink* sink) override {
    {
      std::lock_guard<std::mutex> l(mu);
      urls.push_back(req.method + " " + req.url);
    }
    auto r = inner_->Send(req, sink);
    if (r.ok() && rewrite) rewrite(req, &*r);
    return r;
  }
  std::vector<std::string> Urls() {
    std::lock_guard<std::mutex> l(mu);
    return urls;
  }
  std::function<void(const hubload::HttpRequest&, hubload::HttpResponse*)> rewrite;
  std::mutex mu;
  std::vector<std::string> urls;

 private:
  std::shared_ptr<hubload::HttpTransport> inner_;
};

}  // namespace

TEST(HubDownload, SingleFileLandsInHfLayoutWithVerifiedBlobNames) {
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::string cfg = "{\"model_type\": \"test\"}";
  std::string weights = PatternBytes(300000, 1);
  std::string commit = hub->AddRepo("org/m", {{"config.json", cfg}, {"sub/model.safetensors", weights}}, SmallLfs());
  TempDir cache;
  hubload::HubClient client(Opts(*hub, cache.str()));
  auto p = client.Download(Req("org/m", "config.json"));
  ASSERT_OK(p);
  fs::path repo = cache.path() / "models--org--m";
  EXPECT_EQ(*p, (repo / "snapshots" / commit / "config.json").string());
  EXPECT_EQ(ReadAll(*p), cfg);
  EXPECT_EQ(fs::read_symlink(*p).string(), "../../blobs/" + GitSha1(cfg));  // regular file: git blob sha1
  EXPECT_EQ(ReadAll(repo / "refs" / "main"), commit);
  auto w = client.Download(Req("org/m", "sub/model.safetensors"));
  ASSERT_OK(w);
  EXPECT_EQ(fs::read_symlink(*w).string(), "../../../blobs/" + Sha256(weights));  // LFS: sha256
  EXPECT_EQ(Sha256(ReadAll(*w)), Sha256(weights));
  for (auto& e : fs::directory_iterator(repo / "blobs"))
    EXPECT_EQ(e.path().filename().string().find('.'), std::string::npos) << "leftover " << e.path();
}

TEST(HubDownload, PinnedCommitAndOfflineMakeZeroRequests) {
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::string commit = hub->AddRepo("org/m", {{"a.txt", "alpha"}, {"b.txt", "beta"}});
  TempDir cache;
  hubload::HubClient client(Opts(*hub, cache.str()));
  ASSERT_OK(client.Download(Req("org/m", "a.txt")));
  Settle();
  hub->server->ResetStats();
  auto pinned = client.Download(Req("org/m", "a.txt", commit));
  ASSERT_OK(pinned);
  EXPECT_EQ(ReadAll(*pinned), "alpha");
  auto opts = Opts(*hub, cache.str());
  opts.config.offline = true;
  hubload::HubClient offline(opts);
  auto off = offline.Download(Req("org/m", "a.txt"));
  ASSERT_OK(off);
  EXPECT_EQ(ReadAll(*off), "alpha");
  auto miss = offline.Download(Req("org/m", "b.txt"));
  EXPECT_EQ(miss.status().code(), Code::kOfflineMiss);
  EXPECT_NE(miss.status().message().find(cache.str()), std::string::npos);
  EXPECT_EQ(offline.ResolveCommit("org/m", "main").value(), commit);
  EXPECT_EQ(Stats(*hub).requests, 0u);
}

TEST(HubDownload, OfflineServesRefWithTrailingNewlineAndNoServer) {
  // B12(a)/(b): a cache written elsewhere; the endpoint is a closed port.
  TempDir cache;
  std::string commit(40, 'c');
  fs::path repo = cache.path() / "models--org--m";
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "snapshots" / commit);
  fs::create_directories(repo / "refs");
  hubload::testing::WriteFileBytes(repo / "blobs" / "e1", std::string("{}"));
  fs::create_symlink("../../blobs/e1", repo / "snapshots" / commit / "config.json");
  hubload::testing::WriteFileBytes(repo / "refs" / "main", commit + "\n");
  hubload::ClientOptions o;
  o.config.endpoint = "http://127.0.0.1:9";  // discard port: nothing listens
  o.config.cache_dir = cache.str();
  o.config.offline = true;
  auto p = hubload::HubClient(o).Download(Req("org/m", "config.json"));
  ASSERT_OK(p);
  EXPECT_EQ(ReadAll(*p), "{}");
  // Online with the port closed: bounded retries, then the cached copy.
  o.config.offline = false;
  o.retry.initial_backoff_s = 0.01;
  o.retry.max_total_s = 1;
  auto q = hubload::HubClient(o).Download(Req("org/m", "config.json"));
  ASSERT_OK(q);
}

TEST(HubDownload, BranchRevalidationReusesBlobAndChangedEtagKeepsOldSnapshot) {
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::string v1 = PatternBytes(5000, 2), v2 = PatternBytes(5000, 3);
  std::string c1 = hub->AddRepo("org/m", {{"w.bin", v1}}, SmallLfs());
  TempDir cache;
  hubload::HubClient client(Opts(*hub, cache.str()));
  ASSERT_OK(client.Download(Req("org/m", "w.bin")));
  Settle();
  hub->server->ResetStats();
  auto again = client.Download(Req("org/m", "w.bin"));
  ASSERT_OK(again);
  EXPECT_EQ(Stats(*hub).requests, 1u);        // one metadata request
  EXPECT_EQ(Stats(*hub).body_bytes_sent, 0u);  // no body bytes
  hubload::server::CommitOptions co;
  co.lfs_threshold_bytes = 1024;
  std::string c2 = hub->Replace("org/m", "w.bin", v2, co);
  ASSERT_NE(c1, c2);
  auto p2 = client.Download(Req("org/m", "w.bin"));
  ASSERT_OK(p2);
  EXPECT_NE(p2->find(c2), std::string::npos);
  EXPECT_EQ(ReadAll(*p2), v2);
  EXPECT_EQ(ReadAll(cache.path() / "models--org--m/snapshots" / c1 / "w.bin"), v1);  // old snapshot intact
  EXPECT_EQ(ReadAll(cache.path() / "models--org--m/refs/main"), c2);
}

TEST(HubDownload, ErrorsAreTypedWithContext) {
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::string commit = hub->AddRepo("org/m", {{"a.txt", "x"}});
  TempDir cache;
  hubload::HubClient client(Opts(*hub, cache.str()));
  auto e = client.Download(Req("org/m", "missing.txt"));
  EXPECT_EQ(e.status().code(), Code::kEntryNotFound);
  EXPECT_EQ(e.status().context().repo_id, "org/m");
  EXPECT_EQ(e.status().context().file, "missing.txt");
  EXPECT_EQ(e.status().context().http_status, 404);
  // .no_exist marker written from X-Repo-Commit, as huggingface_hub.
  EXPECT_TRUE(fs::exists(cache.path() / "models--org--m/.no_exist" / commit / "missing.txt"));
  EXPECT_EQ(client.Download(Req("org/m", "a.txt", "nobranch")).status().code(), Code::kRevisionNotFound);
  EXPECT_EQ(client.Download(Req("org/none", "a.txt")).status().code(), Code::kRepoNotFound);
  EXPECT_EQ(client.ResolveCommit("org/m", "nobranch").status().code(), Code::kRevisionNotFound);
  EXPECT_EQ(client.Download(Req("org/m", "../x")).status().reason(), "UnsafePath");
}

TEST(HubSnapshot, PatternsSubfoldersAndCallbacks) {
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::map<std::string, std::string> files = {{"config.json", "{}"},
                                              {"a/x.json", "1"},
                                              {"a/b/y.json", "2"},
                                              {"model.safetensors", PatternBytes(4096, 4)},
                                              {"README.md", "readme"}};
  std::string commit = hub->AddRepo("org/m", files, SmallLfs());
  TempDir cache;
  hubload::HubClient client(Opts(*hub, cache.str()));
  hubload::SnapshotRequest req;
  req.repo_id = "org/m";
  req.allow_patterns = {"*.json", "*.safetensors"};
  req.ignore_patterns = {"a/b/"};
  std::mutex mu;
  std::set<std::string> done;
  uint64_t last_done = 0, last_total = 0;
  req.callbacks.on_file_done = [&](const std::string& p, const std::string& local) {
    std::lock_guard<std::mutex> l(mu);
    done.insert(p);
    EXPECT_EQ(ReadAll(local), files[p]);
  };
  req.callbacks.on_progress = [&](uint64_t d, uint64_t t) {
    std::lock_guard<std::mutex> l(mu);
    last_done = d;
    last_total = t;
  };
  auto snap = client.Snapshot(req);
  ASSERT_OK(snap);
  EXPECT_EQ(*snap, (cache.path() / "models--org--m/snapshots" / commit).string());
  EXPECT_EQ(done, (std::set<std::string>{"config.json", "a/x.json", "model.safetensors"}));
  EXPECT_FALSE(fs::exists(fs::path(*snap) / "README.md"));
  EXPECT_FALSE(fs::exists(fs::path(*snap) / "a/b/y.json"));
  EXPECT_EQ(last_total, 2u + 1 + 4096);
  EXPECT_EQ(last_done, last_total);
  // Offline, everything selected is present → same folder, zero requests.
  Settle();
  hub->server->ResetStats();
  auto o = Opts(*hub, cache.str());
  o.config.offline = true;
  auto off = hubload::HubClient(o).Snapshot(req);
  ASSERT_OK(off);
  EXPECT_EQ(*off, *snap);
  // B12(d): asking offline for more than is cached names the missing file.
  hubload::SnapshotRequest all = req;
  all.allow_patterns.clear();
  all.ignore_patterns.clear();
  auto inc = hubload::HubClient(o).Snapshot(all);
  EXPECT_EQ(inc.status().code(), Code::kOfflineMiss);
  EXPECT_EQ(inc.status().reason(), "IncompleteSnapshot");
  EXPECT_NE(inc.status().message().find("README.md"), std::string::npos);
  EXPECT_EQ(Stats(*hub).requests, 0u);
}

TEST(HubSnapshot, TreePaginationListsEveryFile) {
  // B18 (scaled): 350 files in 7 folders, 100 entries per tree page.
  hubload::server::ServerOptions so;
  so.tree_page_size = 100;
  auto hub = StartTestHub(so);
  ASSERT_TRUE(hub);
  std::map<std::string, std::string> files;
  for (int i = 0; i < 350; ++i) files["d" + std::to_string(i % 7) + "/f" + std::to_string(i) + ".txt"] = std::to_string(i);
  std::string commit = hub->AddRepo("org/many", files);
  TempDir cache;
  hubload::HubClient client(Opts(*hub, cache.str()));
  auto l = client.ListFiles("org/many", "main");
  ASSERT_OK(l);
  EXPECT_EQ(l->commit, commit);
  std::set<std::string> got;
  for (auto& f : l->files) got.insert(f.path);
  EXPECT_EQ(got.size(), 350u);
  EXPECT_GE(Count(*hub, "/tree/"), 4u);
  hubload::SnapshotRequest req;
  req.repo_id = "org/many";
  auto s = client.Snapshot(req);
  ASSERT_OK(s);
  for (auto& [p, c] : files) ASSERT_EQ(ReadAll(fs::path(*s) / p), c) << p;
  Settle();
  hub->server->ResetStats();
  ASSERT_OK(client.Snapshot(req));
  EXPECT_EQ(Count(*hub, "/resolve/"), 0u);  // re-run: no file requests
}

TEST(HubDownload, SpecialNamesAndPrRevisionAreEncoded) {
  // B17.
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::map<std::string, std::string> files = {{"eval/C1_or_C2?_premise/x.json", "q"},
                                              {"dir with space/\xc3\xbc-na\xc3\xafve.txt", "u"},
                                              {"a#b.txt", "h"},
                                              {"100%.txt", "p"},
                                              {"plus+sign.txt", "+"}};
  std::string commit = hub->AddRepo("org/m", files);
  ASSERT_OK(hubload::server::SetRef(hub->root.str(), "org/m", "refs/pr/1", commit));
  TempDir cache;
  auto rec = std::make_shared<RecordingTransport>(hubload::MakeCurlTransport());
  auto o = Opts(*hub, cache.str());
  o.transport = rec;
  hubload::HubClient client(o);
  for (auto& [p, c] : files) {
    auto r = client.Download(Req("org/m", p, "refs/pr/1"));
    ASSERT_OK(r) << p << ": " << r.status().ToString();
    EXPECT_EQ(ReadAll(*r), c);
    EXPECT_EQ(*r, (cache.path() / "models--org--m/snapshots" / commit / p).string());
  }
  EXPECT_EQ(ReadAll(cache.path() / "models--org--m/refs/refs/pr/1"), commit);
  auto urls = rec->Urls();
  auto has = [&](const std::string& s) {
    return std::any_of(urls.begin(), urls.end(), [&](const std::string& u) { return u.find(s) != std::string::npos; });
  };
  EXPECT_TRUE(has("/org/m/resolve/refs%2Fpr%2F1/eval/C1_or_C2%3F_premise/x.json"));
  EXPECT_TRUE(has("/resolve/refs%2Fpr%2F1/dir%20with%20space/%C3%BC-na%C3%AFve.txt"));
  EXPECT_TRUE(has("/resolve/refs%2Fpr%2F1/a%23b.txt"));
  EXPECT_TRUE(has("/resolve/refs%2Fpr%2F1/100%25.txt"));
  EXPECT_FALSE(has("%252F"));
}

TEST(HubSnapshot, UnsafeNamesFromServerAreRejectedBeforeAnyWrite) {
  // B16: the tree listing is rewritten to contain hostile names.
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  hub->AddRepo("org/m", {{"config.json", "{}"}});
  TempDir cache;
  auto rec = std::make_shared<RecordingTransport>(hubload::MakeCurlTransport());
  rec->rewrite = [](const hubload::HttpRequest& req, hubload::HttpResponse* r) {
    if (req.url.find("/tree/") == std::string::npos) return;
    std::string extra = "[{\"type\":\"file\",\"oid\":\"" + std::string(40, 'a') +
                        "\",\"size\":3,\"path\":\"../../evil.txt\"},";
    r->body = extra + r->body.substr(1);
  };
  auto o = Opts(*hub, cache.str());
  o.transport = rec;
  hubload::SnapshotRequest req;
  req.repo_id = "org/m";
  auto before = std::distance(fs::directory_iterator(cache.path()), fs::directory_iterator());
  auto s = hubload::HubClient(o).Snapshot(req);
  EXPECT_EQ(s.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(s.status().reason(), "UnsafePath");
  EXPECT_NE(s.status().message().find("../../evil.txt"), std::string::npos);
  EXPECT_EQ(std::distance(fs::directory_iterator(cache.path()), fs::directory_iterator()), before);
  for (auto& u : rec->Urls()) EXPECT_EQ(u.find("/resolve/"), std::string::npos) << u;
  EXPECT_FALSE(fs::exists(cache.path().parent_path() / "evil.txt"));
}

TEST(HubDownload, InterruptedDownloadNeverLeavesABlobAndResumes) {
  // B01: the CDN closes after 400,000 bytes; later requests fail with 500.
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::string data = PatternBytes(1048576, 5);
  std::string sha = Sha256(data);
  std::string commit = hub->AddRepo("org/m", {{"model.safetensors", data}}, SmallLfs());
  hub->faults().SetDropAfterBytes(sha, 400000, 1);
  TempDir cache;
  hubload::HubClient client(Opts(*hub, cache.str()));
  hubload::DownloadCallbacks cb;
  std::atomic<bool> armed{false};
  cb.on_file_progress = [&](const std::string&, uint64_t done, uint64_t) {
    if (done >= 400000 && !armed.exchange(true)) hub->faults().SetStatusForNext(sha, 500, 1000);
  };
  auto st = client.DownloadFiles("org/m", "main", hubload::RepoType::kModel, {"model.safetensors"}, cb);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kServerError) << st.ToString();
  EXPECT_EQ(st.context().file, "model.safetensors");
  fs::path repo = cache.path() / "models--org--m";
  EXPECT_FALSE(fs::exists(repo / "blobs" / sha));
  EXPECT_FALSE(fs::exists(repo / "snapshots" / commit / "model.safetensors"));
  ASSERT_TRUE(fs::exists(repo / "blobs" / (sha + ".incomplete")));
  uint64_t kept = fs::file_size(repo / "blobs" / (sha + ".incomplete"));
  EXPECT_EQ(kept, 400000u);
  hub->faults().Clear();
  Settle();
  hub->server->ResetStats();
  auto p = client.Download(Req("org/m", "model.safetensors"));
  ASSERT_OK(p);
  EXPECT_EQ(Sha256(ReadAll(*p)), sha);
  EXPECT_EQ(BytesFor(*hub, sha), data.size() - kept);  // only the missing bytes
}

TEST(HubDownload, WrongSizedBlobIsRefetched) {
  // B01 invariant: a pre-existing blobs/E of wrong size is never returned.
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::string data = PatternBytes(20000, 6);
  hub->AddRepo("org/m", {{"w.bin", data}}, SmallLfs());
  TempDir cache;
  fs::create_directories(cache.path() / "models--org--m/blobs");
  hubload::testing::WriteFileBytes(cache.path() / "models--org--m/blobs" / Sha256(data), data.substr(0, 999));
  auto p = hubload::HubClient(Opts(*hub, cache.str())).Download(Req("org/m", "w.bin"));
  ASSERT_OK(p);
  EXPECT_EQ(ReadAll(*p), data);
}

// A cached file cut short (a crash of another tool, a full disk, `truncate`)
// is never handed out as cached: every download path that knows the file's
// size (the Hub's HEAD, the listing, trees/<commit>.json, the local_dir
// metadata's etag) fetches it again, with one warning naming it.
TEST(HubDownload, TruncatedCachedFileIsFetchedAgainOnEveryPath) {
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  const std::string data = PatternBytes(300000, 9), cfg = "{\"a\": 1}";
  const std::string commit = hub->AddRepo("org/m", {{"w.bin", data}, {"config.json", cfg}}, SmallLfs());
  TempDir cache, ld;
  hubload::HubClient client(Opts(*hub, cache.str()));
  hubload::SnapshotRequest sr;
  sr.repo_id = "org/m";
  auto snap = client.Snapshot(sr);
  ASSERT_OK(snap);
  const fs::path blob = cache.path() / "models--org--m/blobs" / Sha256(data);
  const fs::path pointer = fs::path(*snap) / "w.bin";
  ASSERT_TRUE(ReadAll(pointer) == data);
  auto cut = [&](const fs::path& p, size_t n) {
    fs::resize_file(p, n);
    ASSERT_EQ(fs::file_size(p), n);
  };
  struct Path {
    const char* name;
    std::function<hubload::Result<std::string>()> run;
  };
  const std::vector<Path> paths = {
      {"Snapshot", [&] { return client.Snapshot(sr); }},
      {"Download at main (HEAD)", [&] { return client.Download(Req("org/m", "w.bin")); }},
      {"DownloadFiles at main (listing from trees/)",
       [&]() -> hubload::Result<std::string> {
         HUBLOAD_RETURN_IF_ERROR(client.DownloadFiles("org/m", "main", hubload::RepoType::kModel, {"w.bin"}, {}));
         return pointer.string();
       }},
      {"DownloadFiles at the commit",
       [&]() -> hubload::Result<std::string> {
         HUBLOAD_RETURN_IF_ERROR(client.DownloadFiles("org/m", commit, hubload::RepoType::kModel, {"w.bin"}, {}));
         return pointer.string();
       }},
  };
  for (const Path& p : paths) {
    cut(blob, 1000);
    hubload::util::WarningCapture log;
    auto r = p.run();
    ASSERT_OK(r) << p.name;
    EXPECT_TRUE(ReadAll(pointer) == data) << p.name << ": " << fs::file_size(pointer) << " bytes";
    EXPECT_EQ(fs::file_size(blob), data.size()) << p.name;
    EXPECT_EQ(log.Count("1000 bytes, the Hub says 300000"), 1) << p.name;
  }
  // A local_dir file of another size than its metadata's etag promises.
  hubload::SnapshotRequest lr = sr;
  lr.local_dir = ld.str();
  ASSERT_OK(client.Snapshot(lr));
  cut(ld.path() / "w.bin", 5);
  ASSERT_OK(client.Snapshot(lr));
  EXPECT_TRUE(ReadAll(ld.path() / "w.bin") == data) << fs::file_size(ld.path() / "w.bin") << " bytes";
  // A whole cached file costs no transfer of its bytes.
  const uint64_t before = BytesFor(*hub, "w.bin");
  ASSERT_OK(client.Snapshot(sr));
  EXPECT_EQ(BytesFor(*hub, "w.bin"), before);
}

TEST(HubDownload, PartialOfUnknownProvenanceNeverMixesBytes) {
  // B02 (ii): a partial under the new etag holds old bytes (0xAA); the server
  // answers the Range with new bytes. The sha256 check must reject the mix.
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::string v2(2 << 20, '\xBB');
  std::string e2 = Sha256(v2);
  hub->AddRepo("org/m", {{"w.bin", v2}}, SmallLfs());
  TempDir cache;
  fs::create_directories(cache.path() / "models--org--m/blobs");
  hubload::testing::WriteFileBytes(cache.path() / "models--org--m/blobs" / (e2 + ".incomplete"),
                                   std::string(1 << 20, '\xAA'));
  auto p = hubload::HubClient(Opts(*hub, cache.str())).Download(Req("org/m", "w.bin"));
  ASSERT_OK(p);
  std::string got = ReadAll(*p);
  EXPECT_EQ(got.size(), v2.size());
  EXPECT_EQ(got.find('\xAA'), std::string::npos);
  EXPECT_EQ(Sha256(got), e2);
}

TEST(HubDownload, EtagChangeStartsANewPartial) {
  // B02 (i): a partial of v1 (etag E1) is never continued into v2.
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::string v1(2 << 20, '\xAA'), v2(2 << 20, '\xBB');
  hub->AddRepo("org/m", {{"w.bin", v1}}, SmallLfs());
  hubload::server::CommitOptions co;
  co.lfs_threshold_bytes = 1024;
  hub->Replace("org/m", "w.bin", v2, co);
  TempDir cache;
  fs::create_directories(cache.path() / "models--org--m/blobs");
  hubload::testing::WriteFileBytes(cache.path() / "models--org--m/blobs" / (Sha256(v1) + ".incomplete"),
                                   v1.substr(0, 1 << 20));
  auto p = hubload::HubClient(Opts(*hub, cache.str())).Download(Req("org/m", "w.bin"));
  ASSERT_OK(p);
  EXPECT_EQ(ReadAll(*p), v2);
}

TEST(HubDownload, CompletePartialIsPromotedWithoutRangedGet) {
  // B03: the partial already holds every byte; oversized variant restarts.
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::string data = PatternBytes(5000, 7);
  std::string sha = Sha256(data);
  hub->AddRepo("org/m", {{"w.bin", data}}, SmallLfs());
  TempDir cache;
  fs::path blobs = cache.path() / "models--org--m/blobs";
  fs::create_directories(blobs);
  hubload::testing::WriteFileBytes(blobs / (sha + ".incomplete"), data);
  hubload::HubClient client(Opts(*hub, cache.str()));
  auto p = client.Download(Req("org/m", "w.bin"));
  ASSERT_OK(p);
  EXPECT_EQ(ReadAll(*p), data);
  EXPECT_EQ(BytesFor(*hub, sha), 0u);
  TempDir cache2;
  fs::create_directories(cache2.path() / "models--org--m/blobs");
  hubload::testing::WriteFileBytes(cache2.path() / "models--org--m/blobs" / (sha + ".incomplete"), data + "123456");
  auto q = hubload::HubClient(Opts(*hub, cache2.str())).Download(Req("org/m", "w.bin"));
  ASSERT_OK(q);
  EXPECT_EQ(ReadAll(*q), data);
}

// org/m with the LFS file w.bin (300000 bytes of PatternBytes(seed)) and a cache
// holding its first 100000 bytes as a partial download.
struct ResumableInCache {
  std::unique_ptr<TestHub> hub = StartTestHub();
  std::string data, sha;
  TempDir cache;
  explicit ResumableInCache(int seed) : data(PatternBytes(300000, seed)), sha(Sha256(data)) {
    if (!hub) return;
    hub->AddRepo("org/m", {{"w.bin", data}}, SmallLfs());
    fs::create_directories(cache.path() / "models--org--m/blobs");
    hubload::testing::WriteFileBytes(cache.path() / "models--org--m/blobs" / (sha + ".incomplete"),
                                     data.substr(0, 100000));
  }
};

TEST(HubDownload, ProgressAfterResumeCountsOnlyBytesReceivedInThisRun) {
  // Issue 19: a resumed download reports the partial's bytes as done but not
  // as received (the rate's numerator); received == what the server sent.
  ResumableInCache r(10);
  ASSERT_TRUE(r.hub);
  auto& hub = r.hub;
  const std::string& data = r.data;
  const std::string& sha = r.sha;
  TempDir& cache = r.cache;
  std::atomic<uint64_t> done{0}, received{0};
  hubload::SnapshotRequest req;
  req.repo_id = "org/m";
  req.allow_patterns = {"w.bin"};
  req.callbacks.on_progress = [&](uint64_t d, uint64_t) { done = d; };
  req.callbacks.on_bytes_received = [&](uint64_t n) { received = n; };
  auto p = hubload::HubClient(Opts(*hub, cache.str())).Snapshot(req);
  ASSERT_OK(p);
  EXPECT_EQ(done.load(), data.size());
  EXPECT_EQ(BytesFor(*hub, sha), data.size() - 100000);  // the server's own count
  EXPECT_EQ(received.load(), data.size() - 100000);
}

TEST(HubDownload, SingleFileDownloadReportsProgressThroughItsCallbacks) {
  // FileRequest::callbacks (hf_hub_download has a progress bar too): the same
  // counts as a snapshot's, after a resumed partial of 100000 bytes.
  ResumableInCache r(11);
  ASSERT_TRUE(r.hub);
  auto& hub = r.hub;
  const std::string& data = r.data;
  const std::string& sha = r.sha;
  std::atomic<uint64_t> done{0}, total{0}, received{0}, file_done{0};
  std::atomic<int> file_done_calls{0};
  auto req = Req("org/m", "w.bin");
  req.callbacks.on_progress = [&](uint64_t d, uint64_t t) {
    done = d;
    total = t;
  };
  req.callbacks.on_bytes_received = [&](uint64_t n) { received = n; };
  req.callbacks.on_file_progress = [&](const std::string& p, uint64_t d, uint64_t) {
    EXPECT_EQ(p, "w.bin");
    file_done = d;
  };
  req.callbacks.on_file_done = [&](const std::string&, const std::string&) { ++file_done_calls; };
  auto p = hubload::HubClient(Opts(*hub, r.cache.str())).Download(req);
  ASSERT_OK(p);
  EXPECT_EQ(ReadAll(*p), data);
  EXPECT_EQ(done.load(), data.size());
  EXPECT_EQ(total.load(), data.size());
  EXPECT_EQ(file_done.load(), data.size());
  EXPECT_EQ(received.load(), BytesFor(*hub, sha));  // the server's own count
  EXPECT_EQ(received.load(), data.size() - 100000);
  EXPECT_EQ(file_done_calls.load(), 0);  // documented: the path is the result
}

TEST(HubDownload, ServerIgnoringRangeRestartsWithoutDuplicatingBytes) {
  // B08 / S9: Range ignored → the 200 body restarts the partial; exactly 1.00× bytes.
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::string data = PatternBytes(300000, 8);
  std::string sha = Sha256(data);
  hub->AddRepo("org/m", {{"w.bin", data}}, SmallLfs());
  hub->faults().SetIgnoreRange(true);
  TempDir cache;
  fs::create_directories(cache.path() / "models--org--m/blobs");
  hubload::testing::WriteFileBytes(cache.path() / "models--org--m/blobs" / (sha + ".incomplete"), data.substr(0, 1000));
  auto p = hubload::HubClient(Opts(*hub, cache.str())).Download(Req("org/m", "w.bin"));
  ASSERT_OK(p);
  EXPECT_EQ(ReadAll(*p), data);
  EXPECT_EQ(BytesFor(*hub, sha), data.size());
}

TEST(HubDownload, MissingContentLengthLearnsSizeFromBody) {
  // B08: no Content-Length / X-Linked-Size on the bytes; close-delimited body.
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::string data = PatternBytes(200000, 9);
  std::string small = "plain text file";
  hub->AddRepo("org/m", {{"w.bin", data}, {"t.txt", small}}, SmallLfs());
  hub->faults().SetStripContentLength(true);
  TempDir cache;
  hubload::HubClient client(Opts(*hub, cache.str()));
  auto p = client.Download(Req("org/m", "w.bin"));
  ASSERT_OK(p);
  EXPECT_EQ(Sha256(ReadAll(*p)), Sha256(data));
  auto t = client.Download(Req("org/m", "t.txt"));
  ASSERT_OK(t);
  EXPECT_EQ(ReadAll(*t), small);
}

TEST(HubDownload, TransientErrorsAreRetried) {
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  hub->AddRepo("org/m", {{"a.txt", "retry me"}});
  hub->faults().SetStatusForNext("a.txt", 503, 2, 0);
  TempDir cache;
  auto p = hubload::HubClient(Opts(*hub, cache.str())).Download(Req("org/m", "a.txt"));
  ASSERT_OK(p);
  EXPECT_EQ(ReadAll(*p), "retry me");
  hub->faults().SetStatusForNext("b.txt", 429, 100, 0);
  auto o = Opts(*hub, cache.str());
  o.retry.max_retries = 2;
  auto q = hubload::HubClient(o).Download(Req("org/m", "b.txt"));
  EXPECT_EQ(q.status().code(), Code::kRateLimited);
}

TEST(HubDownload, MetadataTimeoutIsApplied) {
  // B19(a)/(c): a server that answers after 3 s with a 1 s limit fails fast.
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  hub->AddRepo("org/m", {{"a.txt", "slow"}});
  hub->faults().SetLatencyMs(3000);
  TempDir cache;
  auto o = Opts(*hub, cache.str());
  o.config.etag_timeout_s = 1;
  o.retry.max_retries = 0;
  auto p = hubload::HubClient(o).Download(Req("org/m", "a.txt"));
  EXPECT_EQ(p.status().code(), Code::kNetwork);
  hub->faults().SetLatencyMs(0);
}

TEST(HubDownload, TokenNeverAppearsInErrorsOrCache) {
  // B22.
  hubload::server::ServerOptions so;
  so.tokens = {"hf_GOODTOKEN"};
  auto hub = StartTestHub(so);
  ASSERT_TRUE(hub);
  hubload::server::CreateRepoOptions ro;
  ro.private_repo = true;
  hub->AddRepo("org/private", {{"a.txt", "secret"}}, ro);
  TempDir cache;
  auto o = Opts(*hub, cache.str());
  o.config.token = "hf_TESTSECRET123456789";
  hubload::HubClient client(o);
  std::vector<hubload::Status> errors;
  errors.push_back(client.Download(Req("org/private", "a.txt")).status());
  errors.push_back(client.ResolveCommit("org/private", "main").status());
  hubload::SnapshotRequest sr;
  sr.repo_id = "org/private";
  errors.push_back(client.Snapshot(sr).status());
  for (auto& s : errors) {
    EXPECT_FALSE(s.ok());
    std::string all = s.ToString() + s.context().url + s.context().file + s.context().request_id;
    EXPECT_EQ(all.find("TESTSECRET"), std::string::npos) << all;
  }
  EXPECT_EQ(errors[0].code(), Code::kUnauthorized) << errors[0].ToString();
  for (auto& e : fs::recursive_directory_iterator(cache.path())) {
    if (!e.is_regular_file()) continue;
    EXPECT_EQ(ReadAll(e.path()).find("TESTSECRET"), std::string::npos) << e.path();
  }
  // With the right token the private repo downloads.
  o.config.token = "hf_GOODTOKEN";
  auto ok = hubload::HubClient(o).Download(Req("org/private", "a.txt"));
  ASSERT_OK(ok);
  EXPECT_EQ(ReadAll(*ok), "secret");
}

TEST(HubDownload, StaleRevisionAnswerIsCorrectedByResolve) {
  // B11: the revision API answers an old commit A whose snapshot is gone on
  // the server; /resolve/main reports B, which wins.
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::string a = hub->AddRepo("org/m", {{"config.json", "{\"v\":1}"}});
  std::string b = hub->Replace("org/m", "config.json", "{\"v\":2}");
  fs::remove_all(hub->root.path() / "models--org--m/snapshots" / a);  // history rewritten
  TempDir cache;
  auto rec = std::make_shared<RecordingTransport>(hubload::MakeCurlTransport());
  std::atomic<int> stale{1};
  rec->rewrite = [&](const hubload::HttpRequest& req, hubload::HttpResponse* r) {
    if (req.url.find("/revision/main") != std::string::npos && stale.fetch_sub(1) > 0)
      r->body = "{\"id\":\"org/m\",\"sha\":\"" + a + "\"}";
  };
  auto o = Opts(*hub, cache.str());
  o.transport = rec;
  hubload::HubClient client(o);
  auto st = client.DownloadFiles("org/m", "main", hubload::RepoType::kModel, {"config.json"}, {});
  ASSERT_OK(st);
  EXPECT_EQ(ReadAll(cache.path() / "models--org--m/refs/main"), b);
  EXPECT_EQ(ReadAll(cache.path() / "models--org--m/snapshots" / b / "config.json"), "{\"v\":2}");
  o.config.offline = true;
  auto off = hubload::HubClient(o).Download(Req("org/m", "config.json"));
  ASSERT_OK(off);
  EXPECT_EQ(ReadAll(*off), "{\"v\":2}");
}

TEST(HubDownloadFiles, CompletionCallbacksAndFirstErrorCancels) {
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::map<std::string, std::string> files;
  for (int i = 0; i < 12; ++i) files["s" + std::to_string(i) + ".bin"] = PatternBytes(10000 + i, i);
  std::string commit = hub->AddRepo("org/m", files, SmallLfs());
  TempDir cache;
  hubload::HubClient client(Opts(*hub, cache.str()));
  std::vector<std::string> paths;
  for (auto& [p, c] : files) paths.push_back(p);
  std::mutex mu;
  std::vector<std::string> order;
  std::set<std::thread::id> threads;
  hubload::DownloadCallbacks cb;
  cb.on_file_done = [&](const std::string& p, const std::string& local) {
    std::lock_guard<std::mutex> l(mu);
    order.push_back(p);
    threads.insert(std::this_thread::get_id());
    EXPECT_EQ(Sha256(ReadAll(local)), Sha256(files[p])) << p;  // verified before the callback
  };
  ASSERT_OK(client.DownloadFiles("org/m", "main", hubload::RepoType::kModel, paths, cb));
  EXPECT_EQ(order.size(), files.size());
  EXPECT_EQ(std::set<std::string>(order.begin(), order.end()).size(), files.size());
  // A missing path: typed error naming it; the call returns.
  TempDir cache2;
  hubload::HubClient c2(Opts(*hub, cache2.str()));
  std::vector<std::string> with_missing = paths;
  with_missing.insert(with_missing.begin(), "nope.bin");
  auto st = c2.DownloadFiles("org/m", commit, hubload::RepoType::kModel, with_missing, {});
  EXPECT_EQ(st.code(), Code::kEntryNotFound);
  EXPECT_EQ(st.context().file, "nope.bin");
  // Cancellation flag.
  std::atomic<bool> cancel{true};
  hubload::DownloadCallbacks ccb;
  ccb.cancel_flag = &cancel;
  TempDir cache3;
  EXPECT_EQ(hubload::HubClient(Opts(*hub, cache3.str()))
                .DownloadFiles("org/m", commit, hubload::RepoType::kModel, paths, ccb)
                .code(),
            Code::kCancelled);
}

TEST(HubDownload, ConcurrentClientsFetchEachBlobOnce) {
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::string data = PatternBytes(3 << 20, 10);
  std::string sha = Sha256(data);
  hub->AddRepo("org/m", {{"w.safetensors", data}}, SmallLfs());
  hub->faults().SetBandwidthBytesPerSec(8 << 20);
  TempDir cache;
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i)
    ts.emplace_back([&] {
      auto p = hubload::HubClient(Opts(*hub, cache.str())).Download(Req("org/m", "w.safetensors"));
      if (p.ok() && Sha256(ReadAll(*p)) == sha) ++ok;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 4);
  EXPECT_EQ(BytesFor(*hub, sha), data.size());
}

TEST(HubLocalDir, PlainFilesWithHuggingfaceHubMetadata) {
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::string data = PatternBytes(4000, 11);
  std::string commit = hub->AddRepo("org/m", {{"a/w.bin", data}, {"c.json", "{}"}}, SmallLfs());
  TempDir out, cache;
  hubload::SnapshotRequest req;
  req.repo_id = "org/m";
  req.local_dir = out.str();
  hubload::HubClient client(Opts(*hub, cache.str()));
  auto s = client.Snapshot(req);
  ASSERT_OK(s);
  EXPECT_EQ(*s, out.str());
  EXPECT_FALSE(fs::is_symlink(out.path() / "a/w.bin"));
  EXPECT_EQ(ReadAll(out.path() / "a/w.bin"), data);
  std::string meta = ReadAll(out.path() / ".cache/huggingface/download/a/w.bin.metadata");
  EXPECT_EQ(meta.substr(0, 41), commit + "\n");
  EXPECT_EQ(meta.substr(41, 65), Sha256(data) + "\n");
  EXPECT_EQ(ReadAll(out.path() / ".cache/huggingface/.gitignore"), "*");
  Settle();
  hub->server->ResetStats();
  hubload::FileRequest fr = Req("org/m", "a/w.bin", commit);
  fr.local_dir = out.str();
  ASSERT_OK(client.Download(fr));
  EXPECT_EQ(Stats(*hub).requests, 0u);  // pinned commit + metadata: no request
}
