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
using hubload::testing::StartTestHub;
using hubload::testing::TempDir;

namespace {

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  std::mt19937 g(seed);
  for (auto& c : s) c = static_cast<char>(g() & 0xff);
  return s;
}

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

hubload::server::CreateRepoOptions SmallLfs() {
  hubload::server::CreateRepoOptions o;
  o.lfs_threshold_bytes = 1024;
  return o;
}

}  // namespace

TEST(HubProcesses, SeveralProcessesShareOneCacheAndFetchEachBlobOnce) {
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::string data = Pattern(4 << 20, 1);
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
  std::string data = Pattern(6 << 20, 2);
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

TEST(HubProcesses, DiskFullGivesClearErrorAndNoBlob) {
  // B37 via RLIMIT_FSIZE: the child may write at most 1 MiB per file.
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::string data = Pattern(3 << 20, 3);
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
