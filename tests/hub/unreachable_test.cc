// The Hub cannot be reached (issue 13 item 4): a refused port and a silent
// server (accepts connections, never answers), with and without a cached
// snapshot, for every entry point. Retry sleeps are recorded through
// RetryPolicy::sleep (no real waiting, no timing assertion but one lower
// bound); warnings are counted through a spdlog sink.
#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <mutex>

#include "endpoints.h"
#include "hubload/hub.h"
#include "testing/hub_server.h"
#include "testing/util.h"

namespace fs = std::filesystem;
using hubload::Code;
using hubload::testing::RefusedUrl;
using hubload::testing::SilentServer;
using hubload::testing::TempDir;

namespace {

// Collects warnings logged through spdlog's default logger.
class Warnings : public spdlog::sinks::base_sink<std::mutex> {
 public:
  int Count(const std::string& needle) {
    std::lock_guard<std::mutex> l(mutex_);
    int n = 0;
    for (auto& m : lines_) n += m.find(needle) != std::string::npos;
    return n;
  }
  void Clear() {
    std::lock_guard<std::mutex> l(mutex_);
    lines_.clear();
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (msg.level == spdlog::level::warn) lines_.emplace_back(msg.payload.data(), msg.payload.size());
  }
  void flush_() override {}

 private:
  std::vector<std::string> lines_;
};

struct Scope {
  std::shared_ptr<Warnings> sink = std::make_shared<Warnings>();
  Scope() { spdlog::default_logger()->sinks().push_back(sink); }
  ~Scope() {
    auto& s = spdlog::default_logger()->sinks();
    s.erase(std::remove(s.begin(), s.end(), sink), s.end());
  }
};

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
    EXPECT_TRUE(s.ok()) << s.status().ToString();
  }  // the server stops here
};

hubload::ClientOptions Opts(const std::string& endpoint, const std::string& cache, std::vector<double>* sleeps) {
  hubload::ClientOptions o;
  o.config.endpoint = endpoint;
  o.config.cache_dir = cache;
  o.etag_timeout_s = 0.5;
  o.download_timeout_s = 1;
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
  Scope log;
  std::vector<double> sleeps;
  hubload::HubClient client(Opts(endpoint, r.cache.str(), &sleeps));
  const std::string snap = r.cache.str() + "/models--org--m/snapshots/" + r.commit;

  auto c = client.ResolveCommit("org/m", "main");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(*c, r.commit);
  EXPECT_EQ(log.sink->Count(r.commit), 1) << "ResolveCommit warns once, naming the commit";

  log.sink->Clear();
  auto l = client.ListFiles("org/m", "main");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->commit, r.commit);
  ASSERT_EQ(l->files.size(), 2u);
  EXPECT_EQ(l->files[0].path, "config.json");
  EXPECT_EQ(l->files[1].size, 300000u);
  ASSERT_EQ(l->warnings.size(), 1u);
  EXPECT_NE(l->warnings[0].find(r.commit), std::string::npos);
  EXPECT_EQ(log.sink->Count(r.commit), 1);

  log.sink->Clear();
  hubload::FileRequest fr;
  fr.repo_id = "org/m";
  fr.filename = "config.json";
  auto p = client.Download(fr);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(*p, snap + "/config.json");
  EXPECT_EQ(log.sink->Count(r.commit), 1);

  log.sink->Clear();
  std::vector<std::string> done;
  hubload::DownloadCallbacks cb;
  cb.on_file_done = [&](const std::string& path, const std::string&) { done.push_back(path); };
  auto st = client.DownloadFiles("org/m", "main", hubload::RepoType::kModel, {"model.safetensors", "config.json"}, cb);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(done, (std::vector<std::string>{"model.safetensors", "config.json"}));
  EXPECT_EQ(log.sink->Count(r.commit), 1);

  log.sink->Clear();
  hubload::SnapshotRequest sr;
  sr.repo_id = "org/m";
  auto s = client.Snapshot(sr);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(*s, snap);
  EXPECT_EQ(log.sink->Count(r.commit), 1);

  // A pinned commit lists from trees/<commit>.json the same way.
  log.sink->Clear();
  auto pinned = client.ListFiles("org/m", r.commit);
  ASSERT_TRUE(pinned.ok()) << pinned.status().ToString();
  EXPECT_EQ(pinned->files.size(), 2u);
  EXPECT_EQ(pinned->warnings.size(), 1u);

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
  EXPECT_EQ(client.Download(fr).status().code(), Code::kNetwork);
  EXPECT_EQ(client.DownloadFiles("org/m", "main", hubload::RepoType::kModel, {"config.json"}, {}).code(),
            Code::kNetwork);
  hubload::SnapshotRequest sr;
  sr.repo_id = "org/m";
  EXPECT_EQ(client.Snapshot(sr).status().code(), Code::kNetwork);
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
    Scope log;
    auto l = client.ListFiles("org/m", "main");
    ASSERT_TRUE(l.ok()) << bad << ": " << l.status().ToString();
    EXPECT_EQ(l->files.size(), 2u) << bad;
    EXPECT_EQ(log.sink->Count((repo / "trees").string()), 1) << bad;
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
