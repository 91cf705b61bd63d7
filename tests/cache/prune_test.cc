// PruneIncompleteDownloads (B37 iii): orphaned partials are deleted and
// counted; partials whose lock a live process holds, or that are recent, stay.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "hubload/cache.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kMiB = 1024 * 1024;

// 64-hex etag number i (LFS blob names).
std::string Etag(int i) {
  char buf[65];
  std::snprintf(buf, sizeof buf, "%064x", i + 1);
  return buf;
}

std::string MakeFile(const fs::path& p, uint64_t size, double age_s) {
  fs::create_directories(p.parent_path());
  hubload::testing::WriteFileBytes(p, std::string(size, 'x'));
  hubload::testing::SetFileAge(p.string(), age_s);
  return p.string();
}

// A child process that flock()s `lock` and holds it until killed.
struct LockHolder {
  pid_t pid = -1;
  explicit LockHolder(const std::string& lock) {
    int ready[2];
    if (::pipe(ready) != 0) return;
    pid = ::fork();
    if (pid == 0) {
      ::close(ready[0]);
      int fd = ::open(lock.c_str(), O_RDWR | O_CREAT, 0644);
      char ok = (fd >= 0 && ::flock(fd, LOCK_EX) == 0) ? '1' : '0';
      if (::write(ready[1], &ok, 1) != 1) _exit(2);
      while (true) ::pause();
    }
    ::close(ready[1]);
    char c = 0;
    if (::read(ready[0], &c, 1) != 1 || c != '1') ADD_FAILURE() << "lock holder could not lock " << lock;
    ::close(ready[0]);
  }
  void Stop() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
  }
  ~LockHolder() { Stop(); }
};

}  // namespace

TEST(CachePrune, DeletesOrphanedPartialsAndKeepsLockedAndRecentOnes) {
  hubload::testing::TempDir tmp;
  fs::path cache = tmp.path();
  fs::path m = cache / "models--org--m/blobs", d = cache / "datasets--org--d/blobs";
  std::vector<std::string> orphans;
  // 20 orphaned 1 MiB partials, 2 h old: both partial kinds, in two repos.
  for (int i = 0; i < 20; ++i) {
    fs::path dir = i < 15 ? m : d;
    std::string suffix = i % 2 ? ".ranges.incomplete" : ".incomplete";
    orphans.push_back(MakeFile(dir / (Etag(i) + suffix), kMiB, 7200));
  }
  std::string blob = MakeFile(m / Etag(100), kMiB, 7200);                          // complete blob
  std::string locked = MakeFile(m / (Etag(101) + ".incomplete"), kMiB, 7200);      // a live download
  std::string leased = MakeFile(m / (Etag(102) + ".incomplete"), kMiB, 7200);      // live lease elsewhere
  std::string recent = MakeFile(m / (Etag(103) + ".incomplete"), kMiB, 10);        // younger than min age
  std::string lock_dir = (cache / ".locks/models--org--m").string();
  fs::create_directories(lock_dir);
  LockHolder holder(lock_dir + "/" + Etag(101) + ".lock");
  hubload::testing::WriteFileBytes(lock_dir + "/" + Etag(102) + ".lock.lease", std::string("pid 1 host other\n"));

  auto rep = hubload::PruneIncompleteDownloads(cache.string(), 3600);
  ASSERT_OK(rep);
  std::sort(orphans.begin(), orphans.end());
  EXPECT_EQ(rep->deleted_files, orphans);
  EXPECT_EQ(rep->freed_bytes, 20 * kMiB);  // 20 files of 1 MiB
  EXPECT_EQ(rep->kept_locked, (std::vector<std::string>{locked, leased}));
  EXPECT_EQ(rep->kept_recent, (std::vector<std::string>{recent}));
  for (auto& o : orphans) EXPECT_FALSE(fs::exists(o)) << o;
  EXPECT_TRUE(fs::exists(blob));
  EXPECT_TRUE(fs::exists(locked));
  EXPECT_TRUE(fs::exists(leased));
  EXPECT_TRUE(fs::exists(recent));

  // Once its holder is gone, the formerly locked partial is an orphan too.
  holder.Stop();
  auto again = hubload::PruneIncompleteDownloads(cache.string(), 3600);
  ASSERT_OK(again);
  EXPECT_EQ(again->deleted_files, (std::vector<std::string>{locked}));
  EXPECT_EQ(again->freed_bytes, kMiB);
  EXPECT_FALSE(fs::exists(locked));
  EXPECT_TRUE(fs::exists(leased));
}

TEST(CachePrune, ScanReportsPartialsThatPruneDeletes) {
  hubload::testing::TempDir tmp;
  std::string p = MakeFile(tmp.path() / "models--org--m/blobs" / (Etag(1) + ".incomplete"), 1000, 7200);
  auto before = hubload::ScanCache(tmp.str());
  ASSERT_OK(before);
  ASSERT_EQ(before->repos.size(), 1u);
  EXPECT_EQ(before->repos[0].incomplete_files, (std::vector<std::string>{p}));
  auto rep = hubload::PruneIncompleteDownloads(tmp.str(), 0);
  ASSERT_OK(rep);
  EXPECT_EQ(rep->freed_bytes, 1000u);
  auto after = hubload::ScanCache(tmp.str());
  ASSERT_OK(after);
  EXPECT_TRUE(after->repos[0].incomplete_files.empty());
}

TEST(CachePrune, BadArguments) {
  hubload::testing::TempDir tmp;
  auto neg = hubload::PruneIncompleteDownloads(tmp.str(), -1);
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(neg.status().code(), hubload::Code::kInvalidArgument);
  auto missing = hubload::PruneIncompleteDownloads(tmp.str() + "/nope", 0);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), hubload::Code::kNotFound);
  EXPECT_NE(missing.status().message().find(tmp.str() + "/nope"), std::string::npos);
}

TEST(CacheDelete, RefusesWhileADownloadHoldsAPartialAndCountsSparseBytes) {
  hubload::testing::TempDir tmp;
  fs::path cache = tmp.path();
  fs::path repo = cache / "models--org--m";
  std::string etag = Etag(7);
  // A sparse ranged partial: 64 MiB long, 1 MiB of it written.
  std::string partial = (repo / "blobs" / (etag + ".ranges.incomplete")).string();
  fs::create_directories(repo / "blobs");
  {
    int fd = ::open(partial.c_str(), O_RDWR | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, 64 * kMiB), 0);
    std::string mib(kMiB, 'y');
    ASSERT_EQ(::pwrite(fd, mib.data(), mib.size(), 0), static_cast<ssize_t>(kMiB));
    ::close(fd);
  }
  auto scan = hubload::ScanCache(cache.string());
  ASSERT_OK(scan);
  ASSERT_EQ(scan->repos.size(), 1u);
  EXPECT_GE(scan->repos[0].incomplete_bytes, kMiB);       // what is on disk ...
  EXPECT_LT(scan->repos[0].incomplete_bytes, 2 * kMiB);   // ... not the 64 MiB length
  std::string lock = (cache / ".locks/models--org--m" / (etag + ".lock")).string();
  fs::create_directories(fs::path(lock).parent_path());
  {
    LockHolder holder(lock);
    auto d = hubload::DeleteFromCache(cache.string(), "org/m", hubload::RepoType::kModel);
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), hubload::Code::kConflict);
    EXPECT_EQ(d.status().reason(), "DownloadInProgress");
    EXPECT_NE(d.status().message().find(partial), std::string::npos) << d.status().message();
    EXPECT_TRUE(fs::exists(partial));
  }
  auto d = hubload::DeleteFromCache(cache.string(), "org/m", hubload::RepoType::kModel);
  ASSERT_OK(d);
  EXPECT_TRUE(d->deleted_repo);
  EXPECT_FALSE(fs::exists(repo));
}
