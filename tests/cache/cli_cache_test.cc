// The `hubload` CLI on caches where symlinks are refused (B14 a, through an
// LD_PRELOAD shim making symlink()/symlinkat() fail with EPERM) and
// `hubload cache prune` (B37 iii). Expected hashes come from the test's data.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "testing/hub_server.h"
#include "testing/util.h"

namespace fs = std::filesystem;
using hubload::testing::SmallLfs;
using hubload::testing::PatternBytes;
using hubload::testing::TempDir;

namespace {

constexpr uint64_t kMiB = 1024 * 1024;

std::string Sha256(const std::string& s) { return hubload::testing::Sha256Hex(s.data(), s.size()); }

std::string FileSha256(const fs::path& p) {
  auto b = hubload::testing::ReadFileBytes(p);
  return hubload::testing::Sha256Hex(b.data(), b.size());
}

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// `hubload ARGS` with a clean Hub environment pointing at `endpoint` and `cache`.
int Hubload(const std::string& env, const std::string& args, std::string* out, std::string* err) {
  std::string cmd = "env -u HF_TOKEN -u HF_HUB_OFFLINE -u HF_ENDPOINT -u HUBLOAD_LOCK_MODE " + env + " " +
                    Quote(hubload::testing::HubloadBin()) + " " + args;
  return hubload::testing::RunCommand(cmd, out, err);
}

std::vector<std::string> LinesContaining(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.find(needle) != std::string::npos) out.push_back(line);
  return out;
}

std::string LastLine(const std::string& text) {
  std::string t = text;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

}  // namespace

TEST(CacheCli, ShimMakesSymlinkFailWithEperm) {
  // Guards the test below against a shim that does nothing.
  TempDir tmp;
  std::string out, err;
  int rc = hubload::testing::RunCommand("LD_PRELOAD=" + Quote(HUBLOAD_SYMLINK_SHIM) + " ln -s target " +
                                            Quote(tmp.str() + "/link"),
                                        &out, &err);
  EXPECT_NE(rc, 0);
  EXPECT_NE(err.find("Operation not permitted"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(fs::symlink_status(tmp.path() / "link")));
}

TEST(CacheCli, DownloadWithoutSymlinkSupportMovesNewBlobsAndWarnsOnce) {
  auto hub = hubload::testing::StartTestHub();
  ASSERT_TRUE(hub);
  std::string w = PatternBytes(3 * kMiB, 1), a = PatternBytes(2 * kMiB, 2), cfg = "{\"hidden_size\": 8}";
  std::string commit = hub->AddRepo("org/m", {{"w.bin", w}, {"a.bin", a}, {"config.json", cfg}}, SmallLfs());
  TempDir home, cache;
  std::string env = "LD_PRELOAD=" + Quote(HUBLOAD_SYMLINK_SHIM) + " ASAN_OPTIONS=verify_asan_link_order=0 HF_HOME=" +
                    Quote(home.str()) + " HF_HUB_CACHE=" + Quote(cache.str()) + " HF_ENDPOINT=" + Quote(hub->url());
  std::string snap = cache.str() + "/models--org--m/snapshots/" + commit;
  std::string blobs = cache.str() + "/models--org--m/blobs";

  // One file (HubClient::Download).
  std::string out, err;
  // Not --quiet: that hides warnings, as hf download --quiet does.
  ASSERT_EQ(Hubload(env, "download org/m w.bin", &out, &err), 0) << err;
  EXPECT_EQ(LastLine(out), snap + "/w.bin");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(snap + "/w.bin")));
  EXPECT_EQ(FileSha256(snap + "/w.bin"), Sha256(w));
  EXPECT_FALSE(fs::exists(blobs + "/" + Sha256(w))) << "the new blob was copied, not moved";
  // One warning, on stderr (stdout carries only the result path).
  EXPECT_EQ(LinesContaining(err, "symlink").size(), 1u) << "stderr:\n" << err << "stdout:\n" << out;
  EXPECT_EQ(LinesContaining(out, "symlink").size(), 0u) << out;

  // Two more files in one process: still a single warning.
  ASSERT_EQ(Hubload(env, "download org/m a.bin config.json", &out, &err), 0) << err;
  EXPECT_EQ(FileSha256(snap + "/a.bin"), Sha256(a));
  EXPECT_EQ(FileSha256(snap + "/config.json"), Sha256(cfg));
  EXPECT_EQ(LinesContaining(err + out, "symlink").size(), 1u) << "stderr:\n" << err << "stdout:\n" << out;

  // No second full-size copy of any file in blobs/, and no symlink anywhere.
  std::error_code ec;
  for (auto& e : fs::directory_iterator(blobs, ec)) {
    std::string name = e.path().filename().string();
    EXPECT_NE(name, Sha256(w));
    EXPECT_NE(name, Sha256(a));
    EXPECT_FALSE(e.is_regular_file() && (e.file_size() == w.size() || e.file_size() == a.size())) << e.path();
  }
  std::string link;
  EXPECT_FALSE(hubload::testing::HasSymlinkBelow(cache.path(), &link)) << link;

  // The cache stays usable offline (the regular files are the snapshot).
  ASSERT_EQ(Hubload(env, "download org/m w.bin --quiet --offline", &out, &err), 0) << err;
  EXPECT_EQ(LastLine(out), snap + "/w.bin");
}

TEST(CacheCli, PruneDeletesOrphanedPartialsAndReportsBytes) {
  TempDir cache;
  fs::path blobs = cache.path() / "models--org--m/blobs";
  fs::create_directories(blobs);
  auto old_file = [&](const std::string& name, uint64_t size) {
    std::string p = (blobs / name).string();
    hubload::testing::WriteFileBytes(p, std::string(size, 'p'));
    timespec ts[2];
    ts[0].tv_sec = ts[1].tv_sec = ::time(nullptr) - 7200;
    ts[0].tv_nsec = ts[1].tv_nsec = 0;
    EXPECT_EQ(::utimensat(AT_FDCWD, p.c_str(), ts, 0), 0);
    return p;
  };
  std::string e1(64, '1'), e2(64, '2'), e3(64, '3');
  std::string p1 = old_file(e1 + ".incomplete", kMiB);
  std::string p2 = old_file(e2 + ".ranges.incomplete", 2 * kMiB);
  std::string p3 = old_file(e3 + ".incomplete", kMiB);
  // A child process holds the lock of e3 (a download in progress).
  std::string lock = cache.str() + "/.locks/models--org--m/" + e3 + ".lock";
  fs::create_directories(fs::path(lock).parent_path());
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    int fd = ::open(lock.c_str(), O_RDWR | O_CREAT, 0644);
    char ok = (fd >= 0 && ::flock(fd, LOCK_EX) == 0) ? '1' : '0';
    if (::write(ready[1], &ok, 1) != 1) _exit(2);
    while (true) ::pause();
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(c, '1');
  std::string out, err;
  int rc = Hubload("", "--cache-dir " + Quote(cache.str()) + " cache prune --min-age-s 60 --json", &out, &err);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_EQ(rc, 0) << err;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["freed_bytes"].get<uint64_t>(), 3 * kMiB);
  EXPECT_EQ(j["deleted_files"], nlohmann::json::array({p1, p2}));
  EXPECT_EQ(j["kept_locked"], nlohmann::json::array({p3}));
  EXPECT_FALSE(fs::exists(p1));
  EXPECT_FALSE(fs::exists(p2));
  EXPECT_TRUE(fs::exists(p3));
  // Human output; the holder is gone now, so e3's partial goes too.
  ASSERT_EQ(Hubload("", "--cache-dir " + Quote(cache.str()) + " cache prune --min-age-s 60", &out, &err), 0) << err;
  EXPECT_NE(out.find("deleted " + p3), std::string::npos) << out;
  EXPECT_NE(out.find("freed 1.0 MiB in 1 partial files"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(p3));
  // A bad argument is a usage error naming the option.
  EXPECT_NE(Hubload("", "--cache-dir " + Quote(cache.str()) + " cache prune --min-age-s -5", &out, &err), 0);
  EXPECT_NE(err.find("min-age-s"), std::string::npos) << err;
}
