// Field failures of issue 5 against the in-process `hubload serve`:
// B09 (lock leases where flock is unavailable), B14 c (no symlinks), B19 b
// (a transfer that stalls with the socket open), B37 (disk full on a small
// tmpfs). Expected bytes and hashes come from the test's own data (OpenSSL),
// request counts from the server's access log.
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "field_support.h"
#include "hubload/hub.h"
#include "testing/hub_server.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace fs = std::filesystem;
using hubload::Code;
using hubload::testing::StartTestHub;
using hubload::testing::TempDir;
using hubload::testing::TestHub;
using json = nlohmann::json;

using namespace hubload::testing::field;  // NOLINT(build/namespaces): Opts, Req, PatternBytes, AccessLog, ...

namespace {

// Client options with lease locks (ClientOptions::lock; the CLI maps HUBLOAD_LOCK_MODE=lease).
hubload::ClientOptions LeaseOpts(const TestHub& hub, const std::string& cache) {
  auto o = Opts(hub, cache);
  o.lock.mode = hubload::LockMode::kLease;
  return o;
}

// A tmpfs of `size` mounted on a fresh folder, unmounted on destruction.
class Tmpfs {
 public:
  explicit Tmpfs(const std::string& size) {
    dir_ = tmp_.path() / "mnt";
    fs::create_directories(dir_);
    std::string opts = "size=" + size + ",mode=0755";
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, opts.c_str()) == 0) mounted_ = true;
    else error_ = std::strerror(errno);
  }
  ~Tmpfs() {
    if (mounted_ && ::umount2(dir_.c_str(), 0) != 0) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }
  std::string str() const { return dir_.string(); }
  uint64_t Available() const {
    struct statvfs sv;
    if (::statvfs(dir_.c_str(), &sv) != 0) return 0;
    return static_cast<uint64_t>(sv.f_bavail) * sv.f_frsize;
  }

 private:
  TempDir tmp_;
  fs::path dir_;
  bool mounted_ = false;
  std::string error_;
};

}  // namespace

// ---------------------------------------------------------------------------
// B09: lock leases (file systems without flock; LockMode::kLease).

TEST(HubFailures, B09_StaleLeaseFromACrashedRunDoesNotBlockTheDownload) {
  TempDir logs;
  auto hub = HubWithLog(logs);
  ASSERT_TRUE(hub);
  std::string data = PatternBytes(2 * kMiB, 1), sha = Sha256(data);
  std::string commit = hub->AddRepo("org/m", {{"w.bin", data}}, SmallLfs());
  TempDir cache;
  // A killed run left its lock file and its lease, last touched 1 h ago.
  std::string lock = cache.str() + "/.locks/models--org--m/" + sha + ".lock";
  fs::create_directories(fs::path(lock).parent_path());
  hubload::testing::WriteFileBytes(lock, std::string());
  hubload::testing::WriteFileBytes(lock + ".lease", std::string("pid 999999 host crashed-node\n"));
  hubload::testing::SetFileAge(lock, 3600);
  hubload::testing::SetFileAge(lock + ".lease", 3600);
  auto o = LeaseOpts(*hub, cache.str());
  o.lock_timeout_s = 10;  // far below the 10 min stale limit: succeeding means the lease was taken over
  auto p = hubload::HubClient(o).Download(Req("org/m", "w.bin"));
  ASSERT_OK(p);
  EXPECT_EQ(*p, cache.str() + "/models--org--m/snapshots/" + commit + "/w.bin");
  EXPECT_EQ(FileSha256(*p), sha);
  EXPECT_FALSE(fs::exists(lock + ".lease"));  // our own lease is gone after release
  auto log = AccessLog(*hub, logs);
  EXPECT_EQ(Lines(log, "GET", sha).size(), 1u);  // downloaded once, by this client
}

TEST(HubFailures, B09_ClientWaitsForALiveLeaseHolderAndUsesItsBlob) {
  TempDir logs;
  auto hub = HubWithLog(logs);
  ASSERT_TRUE(hub);
  std::string data = PatternBytes(3 * kMiB, 2), sha = Sha256(data);
  std::string commit = hub->AddRepo("org/m", {{"w.bin", data}}, SmallLfs());
  TempDir cache;
  std::string lock = cache.str() + "/.locks/models--org--m/" + sha + ".lock";
  std::string lease = lock + ".lease";
  std::string blobs = cache.str() + "/models--org--m/blobs";
  std::string blob = blobs + "/" + sha, tmp_blob = blob + ".holder-tmp";
  fs::create_directories(fs::path(lock).parent_path());
  fs::create_directories(blobs);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  // The holder (another process on the same cache) speaks the lease protocol
  // with plain system calls: exclusive create, mtime refresh every 0.5 s,
  // blob written and renamed into place, lease removed after ~3 s.
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    int fd = ::open(lease.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) _exit(10);
    const char who[] = "pid child host holder\n";
    if (::write(fd, who, sizeof who - 1) < 0) _exit(11);
    if (::write(ready[1], "1", 1) != 1) _exit(12);
    for (int i = 0; i < 6; ++i) {
      ::usleep(500 * 1000);
      if (::futimens(fd, nullptr) != 0) _exit(13);
    }
    int b = ::open(tmp_blob.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (b < 0) _exit(14);
    size_t off = 0;
    while (off < data.size()) {
      ssize_t w = ::write(b, data.data() + off, data.size() - off);
      if (w <= 0) _exit(15);
      off += static_cast<size_t>(w);
    }
    ::close(b);
    if (::rename(tmp_blob.c_str(), blob.c_str()) != 0) _exit(16);
    ::unlink(lease.c_str());
    ::close(fd);
    _exit(0);
  }
  ASSERT_GT(pid, 0);
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);  // the lease exists before the client starts
  ::close(ready[0]);
  auto p = hubload::HubClient(LeaseOpts(*hub, cache.str())).Download(Req("org/m", "w.bin"));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  ASSERT_OK(p);
  EXPECT_EQ(*p, cache.str() + "/models--org--m/snapshots/" + commit + "/w.bin");
  EXPECT_EQ(FileSha256(*p), sha);
  EXPECT_FALSE(fs::exists(lease));
  auto log = AccessLog(*hub, logs);
  EXPECT_GE(Lines(log, "HEAD", "w.bin").size(), 1u);  // it did ask for the metadata
  EXPECT_EQ(Lines(log, "GET", sha).size(), 0u);       // but used the holder's blob
  EXPECT_EQ(Lines(log, "GET", "w.bin").size(), 0u);
}

TEST(HubFailures, B09_LiveLeaseTimeoutNamesTheLock) {
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::string data = PatternBytes(64 * 1024, 3), sha = Sha256(data);
  hub->AddRepo("org/m", {{"w.bin", data}}, SmallLfs());
  TempDir cache;
  std::string lock = cache.str() + "/.locks/models--org--m/" + sha + ".lock";
  fs::create_directories(fs::path(lock).parent_path());
  hubload::testing::WriteFileBytes(lock + ".lease", std::string("pid 4242 host busy-node\n"));  // fresh
  auto o = LeaseOpts(*hub, cache.str());
  o.lock_timeout_s = 0.5;
  auto p = hubload::HubClient(o).Download(Req("org/m", "w.bin"));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::kConflict);
  EXPECT_EQ(p.status().reason(), "LockTimeout");
  EXPECT_NE(p.status().message().find(lock), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("busy-node"), std::string::npos) << p.status().message();
  EXPECT_TRUE(fs::exists(lock + ".lease"));  // a live lease is never taken over
}

// ---------------------------------------------------------------------------
// B14 (c): ClientOptions::use_symlinks = false creates no symlink anywhere.

TEST(HubFailures, B14_NoSymlinkModeCreatesNoSymlink) {
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::string w = PatternBytes(300 * 1024, 4), cfg = "{\"a\": 1}";
  std::string commit = hub->AddRepo("org/m", {{"w.bin", w}, {"config.json", cfg}}, SmallLfs());
  TempDir cache;
  auto o = Opts(*hub, cache.str());
  o.use_symlinks = false;
  hubload::SnapshotRequest r;
  r.repo_id = "org/m";
  auto dir = hubload::HubClient(o).Snapshot(r);
  ASSERT_OK(dir);
  EXPECT_EQ(*dir, cache.str() + "/models--org--m/snapshots/" + commit);
  std::string link;
  EXPECT_FALSE(hubload::testing::HasSymlinkBelow(cache.path(), &link)) << link;
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(*dir + "/w.bin")));
  EXPECT_EQ(FileSha256(*dir + "/w.bin"), Sha256(w));
  EXPECT_EQ(FileSha256(*dir + "/config.json"), Sha256(cfg));
}

// ---------------------------------------------------------------------------
// B19 (b): the body stops at 50 % with the socket open.

TEST(HubFailures, B19_StalledTransferIsAbortedAndResumedWithRange) {
  TempDir logs;
  auto hub = HubWithLog(logs);
  ASSERT_TRUE(hub);
  const uint64_t size = 8 * kMiB, half = size / 2;
  std::string data = PatternBytes(size, 5), sha = Sha256(data);
  std::string commit = hub->AddRepo("org/m", {{"model.safetensors", data}}, SmallLfs());
  hub->faults().SetStallAfterBytes(sha, half, 60000, 1);  // CDN path "/models--org--m/<sha>"
  TempDir cache;
  auto o = Opts(*hub, cache.str());
  o.transport_options.low_speed_time_s = 2;
  o.config.download_timeout_s = 2;  // HF_HUB_DOWNLOAD_TIMEOUT: the stall limit of download GETs
  auto t0 = std::chrono::steady_clock::now();
  auto p = hubload::HubClient(o).Download(Req("org/m", "model.safetensors"));
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_OK(p);
  EXPECT_EQ(FileSha256(*p), sha);
  EXPECT_EQ(FileSha256(cache.str() + "/models--org--m/blobs/" + sha), sha);
  // Hang check, not a benchmark: the stall lasts 60 s, the idle timeout 2 s.
  EXPECT_LT(elapsed, 30) << "the client waited for the stalled transfer";
  auto gets = Lines(AccessLog(*hub, logs), "GET", sha);
  ASSERT_EQ(gets.size(), 2u);
  uint64_t received = gets[0].value("bytes", uint64_t{0});
  EXPECT_TRUE(gets[0]["range"].is_null());
  EXPECT_GT(received, 0u);
  EXPECT_LT(received, size);
  EXPECT_EQ(received, half);  // the server sent exactly the bytes before the stall
  EXPECT_EQ(gets[1].value("range", std::string()), "bytes=" + std::to_string(received) + "-");
  EXPECT_EQ(gets[1].value("status", 0), 206);
  EXPECT_EQ(gets[1].value("bytes", uint64_t{0}), size - received);
}

TEST(HubFailures, B19_StallEndsWhenTheServerStops) {
  // The stall must never hold a test (or a server shutdown) for its duration.
  TempDir logs;
  auto hub = HubWithLog(logs);
  ASSERT_TRUE(hub);
  std::string data = PatternBytes(2 * kMiB, 6), sha = Sha256(data);
  hub->AddRepo("org/m", {{"w.bin", data}}, SmallLfs());
  hub->faults().SetStallAfterBytes(sha, kMiB, 600000, -1);  // 10 min, every response
  TempDir cache;
  auto o = Opts(*hub, cache.str());
  o.transport_options.low_speed_time_s = 1;
  o.config.download_timeout_s = 1;
  o.max_resume_attempts = 1;
  o.retry.max_retries = 0;
  std::thread client([&] { (void)hubload::HubClient(o).Download(Req("org/m", "w.bin")); });
  // Wait until the stalled GET has started, then stop the server under it.
  for (int i = 0; i < 200 && hub->server->RequestCount(sha) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto t0 = std::chrono::steady_clock::now();
  hub->server->Stop();
  double stop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  client.join();
  EXPECT_LT(stop_s, 30) << "Stop() waited for the stall";
}

// ---------------------------------------------------------------------------
// B37: disk full on a 64 MiB tmpfs.

TEST(HubFailures, B37_PreflightRefusesAFileLargerThanTheFreeSpace) {
  Tmpfs mnt("64m");
  if (!mnt.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (needs CAP_SYS_ADMIN): " << mnt.error();
  TempDir logs;
  auto hub = HubWithLog(logs);
  ASSERT_TRUE(hub);
  std::string big(100 * kMiB, '\0');
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>(i / 4096);
  std::string mid = PatternBytes(10 * kMiB, 7);
  std::string big_sha = Sha256(big), mid_sha = Sha256(mid);
  std::string commit = hub->AddRepo("org/m", {{"big.bin", big}, {"mid.bin", mid}}, SmallLfs());
  big.clear();
  big.shrink_to_fit();
  std::string blobs = mnt.str() + "/models--org--m/blobs";
  hubload::HubClient client(Opts(*hub, mnt.str()));
  auto p = client.Download(Req("org/m", "big.bin"));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::kDiskFull);
  std::string msg = p.status().message();
  EXPECT_NE(msg.find("104857600"), std::string::npos) << msg;  // bytes needed
  EXPECT_NE(msg.find("available"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(blobs + "/" + big_sha + ".incomplete"));
  EXPECT_FALSE(fs::exists(blobs + "/" + big_sha + ".ranges.incomplete"));
  EXPECT_FALSE(fs::exists(blobs + "/" + big_sha));
  EXPECT_FALSE(fs::exists(mnt.str() + "/models--org--m/snapshots/" + commit + "/big.bin"));
  auto ok = client.Download(Req("org/m", "mid.bin"));
  ASSERT_OK(ok);
  EXPECT_EQ(FileSha256(*ok), mid_sha);
  auto log = AccessLog(*hub, logs);
  EXPECT_EQ(Lines(log, "GET", big_sha).size(), 0u);  // failed before any transfer
  EXPECT_EQ(Lines(log, "GET", mid_sha).size(), 1u);
}

TEST(HubFailures, B37_DiskFullMidDownloadNamesThePathAndLeavesNoBlob) {
  Tmpfs mnt("64m");
  if (!mnt.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (needs CAP_SYS_ADMIN): " << mnt.error();
  auto hub = StartTestHub();
  ASSERT_TRUE(hub);
  std::string mid = PatternBytes(10 * kMiB, 8), mid_sha = Sha256(mid);
  std::string commit = hub->AddRepo("org/m", {{"mid.bin", mid}}, SmallLfs());
  // Fill the file system so that only 5 MiB remain.
  uint64_t avail = mnt.Available();
  ASSERT_GT(avail, 5 * kMiB);
  {
    std::ofstream fill(mnt.str() + "/filler", std::ios::binary);
    std::string chunk(kMiB, 'f');
    uint64_t left = avail - 5 * kMiB;
    while (left > 0) {
      uint64_t n = std::min<uint64_t>(left, chunk.size());
      fill.write(chunk.data(), static_cast<std::streamsize>(n));
      left -= n;
    }
    ASSERT_TRUE(fill.good());
  }
  uint64_t left = mnt.Available();
  ASSERT_LT(left, 10 * kMiB);
  std::string repo = mnt.str() + "/models--org--m";
  std::string partial = repo + "/blobs/" + mid_sha + ".incomplete";
  // The preflight check (on by default) refuses at once, naming the sizes.
  auto pre = hubload::HubClient(Opts(*hub, mnt.str())).Download(Req("org/m", "mid.bin"));
  ASSERT_FALSE(pre.ok());
  EXPECT_EQ(pre.status().code(), Code::kDiskFull);
  EXPECT_NE(pre.status().message().find("10485760"), std::string::npos) << pre.status().message();
  EXPECT_FALSE(fs::exists(partial));
  // Without it (space taken by someone else after the check), ENOSPC strikes mid-write.
  auto o = Opts(*hub, mnt.str());
  o.check_free_space = false;
  auto p = hubload::HubClient(o).Download(Req("org/m", "mid.bin"));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::kDiskFull);
  EXPECT_NE(p.status().message().find(repo + "/blobs/" + mid_sha), std::string::npos) << p.status().message();
  EXPECT_FALSE(fs::exists(repo + "/blobs/" + mid_sha));
  EXPECT_FALSE(fs::exists(fs::symlink_status(repo + "/snapshots/" + commit + "/mid.bin")));
  // A partial that stays is resumable and reported by the cache scan.
  auto scan = hubload::ScanCache(mnt.str());
  ASSERT_OK(scan);
  std::vector<std::string> partials;
  for (auto& r : scan->repos)
    partials.insert(partials.end(), r.incomplete_files.begin(), r.incomplete_files.end());
  std::error_code ec;
  for (auto& e : fs::directory_iterator(repo + "/blobs", ec)) {
    std::string name = e.path().filename().string();
    EXPECT_NE(name, mid_sha);
    EXPECT_NE(std::find(partials.begin(), partials.end(), e.path().string()), partials.end())
        << e.path() << " is neither removed nor reported by ScanCache";
  }
}
