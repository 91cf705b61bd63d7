// `hubload download` and `hubload cache scan|delete` end to end (CLI binary
// against the in-process server).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <nlohmann/json.hpp>
#include <cstdlib>
#include <sstream>

#include "access_log.h"
#include "endpoints.h"
#include "testing/hub_server.h"
#include "testing/util.h"

namespace fs = std::filesystem;
using hubload::testing::RunCommand;

namespace {
// $HUBLOAD_BIN when ctest provides it, else the binary built with this test.
std::string Bin() {
  const char* e = std::getenv("HUBLOAD_BIN");
  return e && *e ? std::string(e) : std::string(HUBLOAD_CLI_BIN);
}
std::string LastLine(const std::string& out) {
  std::string s = out;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s.substr(s.rfind('\n') == std::string::npos ? 0 : s.rfind('\n') + 1);
}
std::string ReadAll(const fs::path& p) {
  auto b = hubload::testing::ReadFileBytes(p);
  return std::string(b.begin(), b.end());
}
}  // namespace

TEST(HubCli, DownloadPrintsLocalPathLastAndCacheScanDelete) {
  auto hub = hubload::testing::StartTestHub();
  ASSERT_TRUE(hub);
  std::string c1 = hub->AddRepo("org/m", {{"config.json", "{\"a\":1}"}, {"w/x.bin", std::string(5000, 'x')}});
  hubload::testing::TempDir cache;
  std::string base = Bin() + " --endpoint " + hub->url() + " --cache-dir " + cache.str() + " ";
  std::string out, err;
  ASSERT_EQ(RunCommand(base + "download org/m config.json", &out, &err), 0) << err;
  EXPECT_EQ(LastLine(out), (cache.path() / "models--org--m/snapshots" / c1 / "config.json").string());
  EXPECT_EQ(ReadAll(LastLine(out)), "{\"a\":1}");
  ASSERT_EQ(RunCommand(base + "download org/m --include 'w/*'", &out, &err), 0) << err;
  EXPECT_EQ(LastLine(out), (cache.path() / "models--org--m/snapshots" / c1).string());
  EXPECT_NE(err.find("done w/x.bin"), std::string::npos) << err;  // one line per file when not a terminal
  EXPECT_EQ(ReadAll(cache.path() / "models--org--m/snapshots" / c1 / "w/x.bin"), std::string(5000, 'x'));
  ASSERT_EQ(RunCommand(base + "download org/m --quiet --offline", &out, &err), 0) << err;
  EXPECT_TRUE(err.empty()) << err;
  EXPECT_EQ(RunCommand(base + "download org/m missing.txt --offline", &out, &err), 1);
  EXPECT_NE(err.find("OfflineMiss"), std::string::npos) << err;
  // A second commit that shares config.json; then scan and delete the first.
  std::string c2 = hub->Replace("org/m", "w/x.bin", std::string(7000, 'y'));
  ASSERT_EQ(RunCommand(base + "download org/m --quiet", &out, &err), 0) << err;
  ASSERT_EQ(RunCommand(base + "cache scan --json", &out, &err), 0) << err;
  auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j["repos"].size(), 1u);
  EXPECT_EQ(j["repos"][0]["repo_id"], "org/m");
  EXPECT_EQ(j["repos"][0]["revisions"].size(), 2u);
  EXPECT_EQ(j["repos"][0]["size_on_disk"].get<uint64_t>(), 7u + 5000 + 7000);
  EXPECT_EQ(j["repos"][0]["refs"]["main"], c2);
  ASSERT_EQ(RunCommand(base + "cache delete org/m --revision " + c1, &out, &err), 0) << err;
  EXPECT_FALSE(fs::exists(cache.path() / "models--org--m/snapshots" / c1));
  EXPECT_EQ(ReadAll(cache.path() / "models--org--m/snapshots" / c2 / "config.json"), "{\"a\":1}");  // shared blob kept
  EXPECT_EQ(ReadAll(cache.path() / "models--org--m/snapshots" / c2 / "w/x.bin"), std::string(7000, 'y'));
  ASSERT_EQ(RunCommand(base + "cache scan", &out, &err), 0) << err;
  EXPECT_NE(out.find("org/m"), std::string::npos);
  EXPECT_EQ(RunCommand(base + "cache delete org/none", &out, &err), 1);
}

TEST(HubCli, EnvironmentTimeoutsAndLockModeAreReadAndBadValuesAreUsageErrors) {
  auto hub = hubload::testing::StartTestHub();
  ASSERT_TRUE(hub);
  hubload::server::CreateRepoOptions lfs;
  lfs.lfs_threshold_bytes = 1024;
  std::string commit = hub->AddRepo("org/m", {{"config.json", "{\"a\":1}"}, {"w.bin", std::string(3 << 20, 'w')}}, lfs);
  hubload::testing::TempDir cache;
  const std::string tail = " --cache-dir " + cache.str() + " ";
  std::string out, err;
  // HUBLOAD_LOCK_MODE=lease: the blob lock is a lease file while the (slowed) download runs.
  hub->faults().SetBandwidthBytesPerSec(2 << 20);
  std::atomic<bool> finished{false};
  int rc = -1;
  std::thread cli([&] {
    rc = RunCommand("HUBLOAD_LOCK_MODE=lease " + Bin() + " --endpoint " + hub->url() + tail + "download org/m w.bin",
                    &out, &err);
    finished = true;
  });
  bool saw_lease = false;
  while (!finished && !saw_lease) {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(cache.path() / ".locks", ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
      if (it->path().extension() == ".lease") saw_lease = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  cli.join();
  EXPECT_EQ(rc, 0) << err;
  EXPECT_TRUE(saw_lease) << "HUBLOAD_LOCK_MODE=lease reaches the client's FileLockOptions";
  hub->faults().SetBandwidthBytesPerSec(0);
  ASSERT_EQ(RunCommand(Bin() + " --endpoint " + hub->url() + tail + "download org/m config.json", &out, &err), 0)
      << err;
  // HF_HUB_ETAG_TIMEOUT: a silent Hub is given up after that long, then the cached copy answers.
  hubload::testing::SilentServer silent;
  ASSERT_EQ(RunCommand("HF_HUB_ETAG_TIMEOUT=0.5 " + Bin() + " --endpoint " + silent.url() + tail +
                           "download org/m config.json",
                       &out, &err),
            0)
      << err;
  EXPECT_EQ(LastLine(out), (cache.path() / "models--org--m/snapshots" / commit / "config.json").string());
  EXPECT_NE(err.find("after 0.5 s"), std::string::npos) << err;
  EXPECT_NE(err.find(commit), std::string::npos) << "the warning names the commit: " << err;
  // Values that are not what the variables take are usage errors (exit 2) naming the variable.
  for (const char* bad : {"HF_HUB_ETAG_TIMEOUT=abc", "HF_HUB_ETAG_TIMEOUT=0", "HF_HUB_DOWNLOAD_TIMEOUT=-1",
                          "HF_HUB_DOWNLOAD_TIMEOUT=10s", "HUBLOAD_LOCK_MODE=nfs"}) {
    EXPECT_EQ(RunCommand(std::string(bad) + " " + Bin() + " --endpoint " + hub->url() + tail +
                             "download org/m config.json",
                         &out, &err),
              2)
        << bad;
    std::string name = std::string(bad).substr(0, std::string(bad).find('='));
    EXPECT_NE(err.find(name), std::string::npos) << err;
  }
}

// HF_HUB_DOWNLOAD_TIMEOUT reaches the downloads (through HubConfig::
// FromEnvironment, the one reader): a body that stops for 12 s after 1 MiB is
// given up with the variable at 1 s and resumed with Range (two GETs in the
// server's access log); with the default 10 s the stall ends first (one GET).
// (libcurl's low-speed check averages the last few seconds, so an abort comes
// some seconds after the limit: hence the long stall.)
TEST(HubCli, DownloadTimeoutFromTheEnvironmentEndsAStalledTransfer) {
  hubload::testing::TempDir logs;
  hubload::server::ServerOptions so;
  so.access_log = (logs.path() / "access.log").string();
  auto hub = hubload::testing::StartTestHub(so);
  ASSERT_TRUE(hub);
  hubload::server::CreateRepoOptions lfs;
  lfs.lfs_threshold_bytes = 1024;
  const std::string data = hubload::testing::PatternBytes(3 << 20, 7);
  const std::string sha = hubload::testing::Sha256Hex(data.data(), data.size());
  hub->AddRepo("org/m", {{"w.bin", data}}, lfs);
  std::string out, err;
  auto download = [&](const std::string& env, const hubload::testing::TempDir& cache) {
    hub->faults().SetStallAfterBytes(sha, 1 << 20, 12000, 1);
    EXPECT_EQ(RunCommand(env + Bin() + " --endpoint " + hub->url() + " --cache-dir " + cache.str() +
                             " download org/m w.bin --quiet",
                         &out, &err),
              0)
        << err;
    EXPECT_EQ(ReadAll(LastLine(out)), data);
    return hubload::testing::Gets(so.access_log, sha);
  };
  hubload::testing::TempDir short_cache, default_cache;
  auto gets = download("HF_HUB_DOWNLOAD_TIMEOUT=1 ", short_cache);
  ASSERT_EQ(gets.size(), 2u);
  EXPECT_EQ(gets[0].bytes, 1u << 20);
  EXPECT_EQ(gets[1].range, "bytes=1048576-");
  EXPECT_EQ(gets[1].bytes, (3u << 20) - (1u << 20));
  auto all = download("", default_cache);
  ASSERT_EQ(all.size(), 3u) << "with the default limit the 12 s stall ends first: one more GET";
  EXPECT_EQ(all[2].bytes, 3u << 20);
  EXPECT_TRUE(all[2].range.empty());
}
