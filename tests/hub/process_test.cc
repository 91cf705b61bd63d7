// Several processes on one cache, SIGKILL mid-download, disk full (RLIMIT_FSIZE).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "hubload/hub.h"
#include "testing/hub_server.h"
#include "testing/util.h"

namespace fs = std::filesystem;
using hubload::testing::SmallLfs;
using hubload::testing::PatternBytes;
using hubload::testing::StartTestHub;
using hubload::testing::TempDir;

namespace {

pid_t Spawn(const std::vector<std::string>& args, const std::string& err_file) {
  pid_t pid = fork();
  if (pid == 0) {
    FILE* f = std::freopen(err_file.c_str(), "w", stderr);
    (void)f;
    std::freopen("/dev/null", "w", stdout);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(HUB_CHILD_BIN, argv.data());
    _exit(127);
  }
  return pid;
}

int Wait(pid_t pid, double timeout_s) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  while (std::chrono::steady_clock::now() < end) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

std::string ReadAll(const fs::path& p) {
  auto b = hubload::testing::ReadFileBytes(p);
  return std::string(b.begin(), b.end());
}

// The server counts a request after its last byte is written, which can be
// after the client has returned: let in-flight bookkeeping finish before
// reading or resetting the counters (not a timing assertion).
void Settle() { std::this_thread::sleep_for(std::chrono::milliseconds(200)); }
hubload::server::ServerStats Stats(const hubload::testing::TestHub& hub) {
  Settle();
  return hub.server->stats();
}

uint64_t BytesFor(const hubload::testing::TestHub& hub, const std::string& needle) {
  uint64_t n = 0;
  for (auto& [p, b] : Stats(hub).body_bytes_per_path)
    if (p.find(needle) != std::string::npos) n += b;
  return n;
}

}  // namespace

TEST(HubProcesses, SeveralProcessesShareOneCacheAndFetchEachBlobOnce) {
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::string data = PatternBytes(4 << 20, 1);
  std::string sha = hubload::testing::Sha256Hex(data.data(), data.size());
  std::string commit = hub->AddRepo("org/m", {{"model.safetensors", data}}, SmallLfs());
  hub->faults().SetBandwidthBytesPerSec(8 << 20);
  TempDir cache;
  std::vector<pid_t> pids;
  for (int i = 0; i < 4; ++i)
    pids.push_back(Spawn({HUB_CHILD_BIN, hub->url(), cache.str(), "org/m", "model.safetensors"},
                         cache.str() + "/../err" + std::to_string(i)));
  for (auto pid : pids) EXPECT_EQ(Wait(pid, 120), 0);
  fs::path blob = cache.path() / "models--org--m/blobs" / sha;
  EXPECT_EQ(hubload::testing::Sha256Hex(ReadAll(blob).data(), data.size()), sha);
  EXPECT_EQ(BytesFor(*hub, sha), data.size());  // fetched once
  EXPECT_TRUE(fs::exists(cache.path() / "models--org--m/snapshots" / commit / "model.safetensors"));
}

TEST(HubProcesses, SigkillAtRandomPointsThenRerunVerifies) {
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::string data = PatternBytes(6 << 20, 2);
  std::string sha = hubload::testing::Sha256Hex(data.data(), data.size());
  hub->AddRepo("org/m", {{"model.safetensors", data}}, SmallLfs());
  hub->faults().SetBandwidthBytesPerSec(4 << 20);
  TempDir cache;
  fs::path blobs = cache.path() / "models--org--m/blobs";
  std::mt19937 rng(12345);
  uint64_t sent_before_rerun = 0;
  for (int round = 0; round < 3; ++round) {
    pid_t pid = Spawn({HUB_CHILD_BIN, hub->url(), cache.str(), "org/m", "model.safetensors"}, "/dev/null");
    std::this_thread::sleep_for(std::chrono::milliseconds(150 + rng() % 400));
    kill(pid, SIGKILL);
    Wait(pid, 10);
    // Never a blob under its final name unless it is complete and correct.
    if (fs::exists(blobs / sha)) {
      EXPECT_EQ(hubload::testing::Sha256Hex(ReadAll(blobs / sha).data(), data.size()), sha);
    }
  }
  uint64_t partial = fs::exists(blobs / (sha + ".incomplete")) ? fs::file_size(blobs / (sha + ".incomplete")) : 0;
  sent_before_rerun = BytesFor(*hub, sha);
  hub->faults().SetBandwidthBytesPerSec(0);
  EXPECT_EQ(Wait(Spawn({HUB_CHILD_BIN, hub->url(), cache.str(), "org/m", "model.safetensors"}, "/dev/null"), 60), 0);
  EXPECT_EQ(hubload::testing::Sha256Hex(ReadAll(blobs / sha).data(), data.size()), sha);
  if (!fs::exists(blobs / (sha + ".incomplete"))) {
    uint64_t rerun = BytesFor(*hub, sha) - sent_before_rerun;
    EXPECT_EQ(rerun, data.size() - partial);  // resumed exactly from the kept partial
  }
}

// Bytes the ranged partial's journal records as written (format in hubload/cache.h:
// data, then magic[16], size u64le, chunk u64le, one u64le per chunk).
uint64_t JournaledBytes(const fs::path& partial, uint64_t size, uint64_t chunk) {
  std::string all = ReadAll(partial);
  uint64_t n = (size + chunk - 1) / chunk;
  if (all.size() != size + 32 + 8 * n || all.compare(size, 16, "hubload-ranges1\n") != 0) return 0;
  uint64_t sum = 0;
  for (uint64_t k = 0; k < n; ++k) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(all[size + 32 + 8 * k + i]);
    sum += v;
  }
  return sum;
}

TEST(HubProcesses, SigkillDuringParallelRangesThenRerunFetchesOnlyWhatIsMissing) {
  // performance.md S10 with ranges: a killed run keeps every chunk's journaled bytes.
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  const uint64_t chunk = 1 << 20;
  std::string data = PatternBytes(12 << 20, 4);
  std::string sha = hubload::testing::Sha256Hex(data.data(), data.size());
  hub->AddRepo("org/m", {{"model.safetensors", data}}, SmallLfs());
  hub->faults().SetBandwidthBytesPerSec(1 << 20);  // per connection: 4 MiB/s for the 4 ranges
  TempDir cache;
  fs::path blobs = cache.path() / "models--org--m/blobs";
  setenv("HUB_CHILD_RANGE_CHUNK", std::to_string(chunk).c_str(), 1);
  std::mt19937 rng(777);
  fs::path partial = blobs / (sha + ".ranges.incomplete");
  uint64_t kept = 0;
  for (int round = 0; round < 5 && kept == 0; ++round) {
    pid_t pid = Spawn({HUB_CHILD_BIN, hub->url(), cache.str(), "org/m", "model.safetensors"}, "/dev/null");
    // Long enough for whole 1 MiB chunks to land (1 s each, after the child's start-up, slower on a loaded
    // machine: each round waits 250 ms more); a round starts with no whole chunk (kept == 0) and moves at most
    // 2.4 s x 4 MiB/s < 12 MiB minus what earlier rounds left, so the download never completes.
    std::this_thread::sleep_for(std::chrono::milliseconds(1100 + 250 * round + rng() % 300));
    kill(pid, SIGKILL);
    Wait(pid, 10);
    ASSERT_FALSE(fs::exists(blobs / sha)) << "round " << round;
    if (fs::exists(partial)) kept = JournaledBytes(partial, data.size(), chunk);
  }
  ASSERT_GT(kept, 0u) << "no chunk completed before the kills";
  uint64_t sent_before = BytesFor(*hub, sha);
  hub->faults().SetBandwidthBytesPerSec(0);
  EXPECT_EQ(Wait(Spawn({HUB_CHILD_BIN, hub->url(), cache.str(), "org/m", "model.safetensors"}, "/dev/null"), 60), 0);
  unsetenv("HUB_CHILD_RANGE_CHUNK");
  EXPECT_EQ(hubload::testing::Sha256Hex(ReadAll(blobs / sha).data(), data.size()), sha);
  EXPECT_FALSE(fs::exists(partial));
  EXPECT_EQ(BytesFor(*hub, sha) - sent_before, data.size() - kept);  // exactly the missing bytes
}

TEST(HubProcesses, DiskFullGivesClearErrorAndNoBlob) {
  // B37 via RLIMIT_FSIZE: the child may write at most 1 MiB per file.
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::string data = PatternBytes(3 << 20, 3);
  std::string sha = hubload::testing::Sha256Hex(data.data(), data.size());
  std::string commit = hub->AddRepo("org/m", {{"model.safetensors", data}}, SmallLfs());
  TempDir cache, logs;
  std::string err = logs.str() + "/err";
  int rc = Wait(Spawn({HUB_CHILD_BIN, hub->url(), cache.str(), "org/m", "model.safetensors", "1048576"}, err), 60);
  EXPECT_EQ(rc, 3);
  std::string msg = ReadAll(err);
  EXPECT_NE(msg.find("DiskFull"), std::string::npos) << msg;
  EXPECT_NE(msg.find("blobs/" + sha), std::string::npos) << msg;  // names the path
  EXPECT_FALSE(fs::exists(cache.path() / "models--org--m/blobs" / sha));
  EXPECT_FALSE(fs::exists(cache.path() / "models--org--m/snapshots" / commit / "model.safetensors"));
}
