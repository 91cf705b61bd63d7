// The Hub cannot be reached (issue 13 item 4): a refused port and a silent
// server (accepts connections, never answers), with and without a cached
// snapshot, for every entry point. Retry sleeps are recorded through
// RetryPolicy::sleep (no real waiting, no timing assertion but one lower
// bound); warnings are counted through util::WarningCapture (a spdlog sink).
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>

#include "endpoints.h"
#include "hubload/hub.h"
#include "testing/hub_server.h"
#include "testing/util.h"
#include "util/log_capture.h"
#include "testing/status_matchers.h"

namespace fs = std::filesystem;
using hubload::Code;
using hubload::testing::RefusedUrl;
using hubload::testing::SilentServer;
using hubload::testing::TempDir;

namespace {

using Scope = hubload::util::WarningCapture;

const std::map<std::string, std::string> kFiles = {{"config.json", "{\"a\": 1}"},
                                                   {"model.safetensors", std::string(300000, 'w')}};

// A cache holding the snapshot of org/m@main (refs/main, snapshots, trees).
struct CachedRepo {
  TempDir cache;
  std::string commit;
  CachedRepo() {
    auto hub = hubload::testing::StartTestHub();
    if (!hub) return;
    commit = hub->AddRepo("org/m", kFiles);
    hubload::ClientOptions o;
    o.config.endpoint = hub->url();
    o.config.cache_dir = cache.str();
    hubload::SnapshotRequest req;
    req.repo_id = "org/m";
    auto s = hubload::HubClient(o).Snapshot(req);
    EXPECT_OK(s);
  }  // the server stops here
};

hubload::ClientOptions Opts(const std::string& endpoint, const std::string& cache, std::vector<double>* sleeps) {
  hubload::ClientOptions o;
  o.config.endpoint = endpoint;
  o.config.cache_dir = cache;
  o.config.etag_timeout_s = 0.5;
  o.config.download_timeout_s = 1;
  o.transport_options.connect_timeout_s = 2;
  o.retry.max_retries = 2;
  o.retry.initial_backoff_s = 0.01;
  o.retry.jitter_fraction = 0;
  o.retry.sleep = [sleeps](double s) { sleeps->push_back(s); };
  return o;
}

// Every entry point answers from the cache, once warned, without retry rounds.
void ExpectServedFromCache(const std::string& endpoint) {
  CachedRepo r;
  ASSERT_FALSE(r.commit.empty());
  hubload::util::WarningCapture log;
  std::vector<double> sleeps;
  hubload::HubClient client(Opts(endpoint, r.cache.str(), &sleeps));
  const std::string snap = r.cache.str() + "/models--org--m/snapshots/" + r.commit;

  auto c = client.ResolveCommit("org/m", "main");
  ASSERT_OK(c);
  EXPECT_EQ(*c, r.commit);
  EXPECT_EQ(log.Count(r.commit), 1) << "ResolveCommit warns once, naming the commit";

  log.Clear();
  auto l = client.ListFiles("org/m", "main");
  ASSERT_OK(l);
  EXPECT_EQ(l->commit, r.commit);
  ASSERT_EQ(l->files.size(), 2u);
  EXPECT_EQ(l->files[0].path, "config.json");
  EXPECT_EQ(l->files[1].size, 300000u);
  ASSERT_EQ(l->warnings.size(), 1u);
  EXPECT_NE(l->warnings[0].find(r.commit), std::string::npos);
  EXPECT_EQ(log.Count(r.commit), 1);

  log.Clear();
  hubload::FileRequest fr;
  fr.repo_id = "org/m";
  fr.filename = "config.json";
  auto p = client.Download(fr);
  ASSERT_OK(p);
  EXPECT_EQ(*p, snap + "/config.json");
  EXPECT_EQ(log.Count(r.commit), 1);

  log.Clear();
  std::vector<std::string> done;
  std::vector<std::pair<uint64_t, uint64_t>> progress;
  hubload::DownloadCallbacks cb;
  std::mutex mu;  // calls for different files may overlap (hub.h)
  cb.on_file_done = [&](const std::string& path, const std::string&) {
    std::lock_guard<std::mutex> l(mu);
    done.push_back(path);
  };
  cb.on_progress = [&](uint64_t d, uint64_t t) { progress.emplace_back(d, t); };
  auto st = client.DownloadFiles("org/m", "main", hubload::RepoType::kModel, {"model.safetensors", "config.json"}, cb);
  ASSERT_OK(st);
  EXPECT_EQ(done, (std::vector<std::string>{"model.safetensors", "config.json"}));
  // The cached files' bytes count as done (a progress bar ended at "0 B" of them).
  const uint64_t total = kFiles.at("model.safetensors").size() + kFiles.at("config.json").size();
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back(), (std::pair<uint64_t, uint64_t>{total, total}));
  EXPECT_EQ(log.Count(r.commit), 1);

  log.Clear();
  hubload::SnapshotRequest sr;
  sr.repo_id = "org/m";
  auto s = client.Snapshot(sr);
  ASSERT_OK(s);
  EXPECT_EQ(*s, snap);
  EXPECT_EQ(log.Count(r.commit), 1);

  // A pinned commit lists from trees/<commit>.json the same way.
  log.Clear();
  auto pinned = client.ListFiles("org/m", r.commit);
  ASSERT_OK(pinned);
  EXPECT_EQ(pinned->files.size(), 2u);
  EXPECT_EQ(pinned->warnings.size(), 1u);

  // The pipeline downloads at the listed commit: every file from the cache,
  // no request, and the cached bytes count as done (`hubload load` with the
  // Hub unreachable ended its bar at "0% 0 B / 12.8 MiB shards 6/6").
  log.Clear();
  done.clear();
  progress.clear();
  ASSERT_OK(client.DownloadFiles("org/m", r.commit, hubload::RepoType::kModel, {"model.safetensors", "config.json"},
                                 cb));
  std::sort(done.begin(), done.end());  // cached files are done in completion order (preparation threads)
  EXPECT_EQ(done, (std::vector<std::string>{"config.json", "model.safetensors"}));
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back(), (std::pair<uint64_t, uint64_t>{total, total}));
  EXPECT_EQ(log.Count(r.commit), 0) << "no request, nothing to warn about";

  EXPECT_TRUE(sleeps.empty()) << "no retry round when the cache can answer (" << sleeps.size() << " sleeps)";
}

// Without a cached snapshot every entry point fails as before, after its retries.
void ExpectErrorsWithoutCache(const std::string& endpoint) {
  TempDir cache;
  std::vector<double> sleeps;
  hubload::HubClient client(Opts(endpoint, cache.str(), &sleeps));
  EXPECT_EQ(client.ResolveCommit("org/m", "main").status().code(), Code::kNetwork);
  EXPECT_EQ(client.ListFiles("org/m", "main").status().code(), Code::kNetwork);
  hubload::FileRequest fr;
  fr.repo_id = "org/m";
  fr.filename = "config.json";
  // The message says the cache could not answer either (huggingface_hub's
  // LocalEntryNotFoundError), beside the transport's own words.
  const std::string not_cached = " of org/m at revision 'main' is not in the local cache " + cache.str();
  auto d = client.Download(fr).status();
  EXPECT_EQ(d.code(), Code::kNetwork);
  EXPECT_NE(d.message().find("'config.json'" + not_cached), std::string::npos) << d.ToString();
  auto df = client.DownloadFiles("org/m", "main", hubload::RepoType::kModel, {"config.json"}, {});
  EXPECT_EQ(df.code(), Code::kNetwork);
  EXPECT_NE(df.message().find("a complete snapshot" + not_cached), std::string::npos) << df.ToString();
  hubload::SnapshotRequest sr;
  sr.repo_id = "org/m";
  auto sn = client.Snapshot(sr).status();
  EXPECT_EQ(sn.code(), Code::kNetwork);
  EXPECT_NE(sn.message().find("a complete snapshot" + not_cached), std::string::npos) << sn.ToString();
  EXPECT_EQ(sleeps.size(), 5u * 2u) << "each metadata request retried as the policy says";
  EXPECT_TRUE(std::none_of(fs::directory_iterator(cache.path()), fs::directory_iterator(),
                           [](auto& e) { return e.path().filename() == "models--org--m" &&
                                                fs::exists(e.path() / "snapshots"); }));
}

}  // namespace

TEST(Unreachable, RefusedConnectionIsAnsweredFromTheCacheAtOnce) { ExpectServedFromCache(RefusedUrl()); }

TEST(Unreachable, SilentServerIsAnsweredFromTheCacheAfterTheEtagTimeout) {
  SilentServer silent;
  auto t0 = std::chrono::steady_clock::now();
  ExpectServedFromCache(silent.url());
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(s, 5 * 0.5 * 0.9) << "each entry point waited for the metadata timeout";
}

TEST(Unreachable, RefusedWithoutACachedSnapshotIsTheErrorAsBefore) { ExpectErrorsWithoutCache(RefusedUrl()); }

TEST(Unreachable, SilentWithoutACachedSnapshotIsTheErrorAsBefore) {
  SilentServer silent;
  ExpectErrorsWithoutCache(silent.url());
}

// A local_dir download (`hubload download --local-dir`) with the Hub down:
// a non-empty local folder answers after one request, with one warning
// naming it, as huggingface_hub's snapshot_download returns an existing
// local_dir; an empty one is no snapshot, and the error is as before.
void ExpectLocalDirAnswers(const std::string& endpoint) {
  TempDir folder;
  const std::string ld = (folder.path() / "ld").string();
  std::string commit;
  {
    auto hub = hubload::testing::StartTestHub();
    ASSERT_TRUE(hub);
    commit = hub->AddRepo("org/m", kFiles);
    hubload::ClientOptions o;
    o.config.endpoint = hub->url();
    o.config.cache_dir = (folder.path() / "cache").string();
    hubload::SnapshotRequest req;
    req.repo_id = "org/m";
    req.local_dir = ld;
    ASSERT_OK(hubload::HubClient(o).Snapshot(req));
  }  // the server stops here
  ASSERT_EQ(hubload::testing::ReadFileBytes(fs::path(ld) / "model.safetensors").size(), 300000u);
  std::vector<double> sleeps;
  hubload::HubClient client(Opts(endpoint, (folder.path() / "cache").string(), &sleeps));
  for (const std::string& rev : {std::string("main"), commit}) {  // a commit skips /revision: the listing fails
    hubload::util::WarningCapture log;
    hubload::SnapshotRequest req;
    req.repo_id = "org/m";
    req.revision = rev;
    req.local_dir = ld;
    auto s = client.Snapshot(req);
    ASSERT_OK(s) << rev;
    EXPECT_EQ(*s, ld) << rev;
    EXPECT_EQ(log.Count("using the local folder " + ld), 1) << rev;
    EXPECT_TRUE(sleeps.empty()) << rev << ": no retry round when the local folder can answer (" << sleeps.size()
                                << " sleeps)";
  }
  // An empty local folder: the failure, after the policy's retries.
  const std::string empty = (folder.path() / "empty").string();
  fs::create_directories(empty);
  hubload::SnapshotRequest req;
  req.repo_id = "org/m";
  req.local_dir = empty;
  EXPECT_EQ(client.Snapshot(req).status().code(), Code::kNetwork);
  EXPECT_EQ(sleeps.size(), 2u);
  // Offline: the same rule, named.
  auto o = Opts(endpoint, (folder.path() / "cache").string(), &sleeps);
  o.config.offline = true;
  auto off = hubload::HubClient(o).Snapshot(req);
  EXPECT_EQ(off.status().code(), Code::kOfflineMiss);
  EXPECT_NE(off.status().message().find(empty + " is empty"), std::string::npos) << off.status().ToString();
  req.local_dir = ld;
  auto ok = hubload::HubClient(o).Snapshot(req);
  ASSERT_OK(ok);
  EXPECT_EQ(*ok, ld);
}

TEST(Unreachable, RefusedConnectionIsAnsweredFromANonEmptyLocalDirAtOnce) { ExpectLocalDirAnswers(RefusedUrl()); }

TEST(Unreachable, SilentServerIsAnsweredFromANonEmptyLocalDir) {
  SilentServer silent;
  ExpectLocalDirAnswers(silent.url());
}

TEST(Unreachable, OfflineCorruptRefOrTreeFileIsAClearErrorNeverAnAbort) {
  CachedRepo r;
  ASSERT_FALSE(r.commit.empty());
  const fs::path repo = r.cache.path() / "models--org--m";
  std::vector<double> sleeps;
  auto o = Opts(RefusedUrl(), r.cache.str(), &sleeps);
  o.config.offline = true;
  hubload::HubClient client(o);
  // A tree file of every wrong shape: ignored with one warning, listing from the snapshot folder.
  for (const char* bad : {"not json", "[]", "{\"files\": []}", "{\"files\": {\"config.json\": {\"size\": \"8\"}}}",
                          "{\"files\": {\"../x\": {\"size\": 1}}}", "{\"files\": {\"a\": {\"size\": -1}}}",
                          "{\"files\": {\"a\": {\"size\": 1, \"blob_id\": 7}}}"}) {
    hubload::testing::WriteFileBytes(repo / "trees" / (r.commit + ".json"), std::string(bad));
    hubload::util::WarningCapture log;
    auto l = client.ListFiles("org/m", "main");
    ASSERT_OK(l) << bad << ": " << l.status().ToString();
    EXPECT_EQ(l->files.size(), 2u) << bad;
    EXPECT_EQ(log.Count((repo / "trees").string()), 1) << bad;
  }
  // A corrupt ref: the offline miss says so.
  hubload::testing::WriteFileBytes(repo / "refs" / "main", std::string("garbage\n"));
  auto c = client.ResolveCommit("org/m", "main");
  EXPECT_EQ(c.status().code(), Code::kOfflineMiss);
  EXPECT_NE(c.status().message().find("corrupt"), std::string::npos) << c.status().ToString();
  auto l = client.ListFiles("org/m", "main");
  EXPECT_EQ(l.status().code(), Code::kOfflineMiss);
  EXPECT_NE(l.status().message().find("corrupt"), std::string::npos) << l.status().ToString();
}

// A served repo (kFiles) already downloaded once into a fresh cache.
class CorruptCache : public ::testing::Test {
 protected:
  void SetUp() override {
    hub = hubload::testing::StartTestHub();
    ASSERT_TRUE(hub);
    commit = hub->AddRepo("org/m", kFiles);
    client = std::make_unique<hubload::HubClient>(Opts(hub->url(), cache.str(), &sleeps));
    req.repo_id = "org/m";
    ASSERT_OK(client->Snapshot(req));
  }
  std::unique_ptr<hubload::testing::TestHub> hub;
  std::string commit;
  TempDir cache;
  std::vector<double> sleeps;
  std::unique_ptr<hubload::HubClient> client;
  hubload::SnapshotRequest req;
};

// Issue 14 item 2, online: a corrupt refs/main or trees/<commit>.json is
// ignored with one warning naming the file, the Hub's answer is used, and the
// file is rewritten (its bytes are the commit; the tree lists kFiles' sizes).
TEST_F(CorruptCache, OnlineCorruptRefIsWarnedOnceAndRewritten) {
  const fs::path ref = cache.path() / "models--org--m" / "refs" / "main";
  auto ref_bytes = [&] {
    auto b = hubload::testing::ReadFileBytes(ref);
    return std::string(b.begin(), b.end());
  };
  ASSERT_EQ(ref_bytes(), commit);
  for (const std::string& bad : {std::string("garbage\n"), std::string(), std::string(39, 'a'), commit + commit}) {
    hubload::testing::WriteFileBytes(ref, bad);
    {
      Scope log;
      hubload::FileRequest f;
      f.repo_id = "org/m";
      f.filename = "config.json";
      auto p = client->Download(f);
      ASSERT_OK(p) << bad << ": " << p.status().ToString();
      EXPECT_EQ(log.Count(ref.string()), 1) << "Download, ref '" << bad << "'";
      EXPECT_EQ(ref_bytes(), commit) << bad;
    }
    hubload::testing::WriteFileBytes(ref, bad);
    {
      Scope log;
      auto s = client->Snapshot(req);
      ASSERT_OK(s) << bad << ": " << s.status().ToString();
      EXPECT_EQ(log.Count(ref.string()), 1) << "Snapshot, ref '" << bad << "'";
      EXPECT_EQ(ref_bytes(), commit) << bad;
    }
  }
  // A good ref: no warning.
  Scope log;
  ASSERT_OK(client->Snapshot(req));
  EXPECT_EQ(log.Count("refs"), 0);
}

TEST_F(CorruptCache, OnlineCorruptTreeFileIsWarnedOnceAndRewritten) {
  const fs::path tree = cache.path() / "models--org--m" / "trees" / (commit + ".json");
  ASSERT_TRUE(fs::is_regular_file(tree));
  for (const std::string& bad : {std::string("not json"), std::string("[]"),
                                 std::string("{\"files\": {\"config.json\": {\"size\": \"8\"}}}"),
                                 std::string("{\"files\": {\"../x\": {\"size\": 1}}}"), std::string()}) {
    hubload::testing::WriteFileBytes(tree, bad);
    Scope log;
    auto s = client->Snapshot(req);
    ASSERT_OK(s) << bad << ": " << s.status().ToString();
    EXPECT_EQ(log.Count(tree.string()), 1) << bad;
    auto b = hubload::testing::ReadFileBytes(tree);
    auto j = nlohmann::json::parse(std::string(b.begin(), b.end()), nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << bad;
    ASSERT_TRUE(j.contains("files") && j["files"].is_object()) << bad;
    EXPECT_EQ(j["files"].size(), kFiles.size()) << bad;
    for (auto& [path, bytes] : kFiles) {
      ASSERT_TRUE(j["files"].contains(path)) << path;
      EXPECT_EQ(j["files"][path]["size"], bytes.size()) << path;
    }
  }
}
