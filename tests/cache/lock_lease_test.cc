// FileLock lease mode (B09): stale leases are taken over, live ones are not,
// the holder's heartbeat refreshes the lease, FileLockOptions choose the mode (the library reads no environment).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "hubload/cache.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace fs = std::filesystem;
using hubload::FileLock;
using hubload::FileLockOptions;
using hubload::LockMode;

namespace {

double AgeOf(const std::string& p) {
  struct stat st;
  if (::stat(p.c_str(), &st) != 0) return -1;
  double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return now - static_cast<double>(st.st_mtime);
}

std::string ReadText(const std::string& p) {
  auto b = hubload::testing::ReadFileBytes(p);
  return std::string(b.begin(), b.end());
}

// A lock file and a lease file as a crashed holder leaves them.
struct LeaseFixture {
  hubload::testing::TempDir tmp;
  std::string lock = tmp.str() + "/.locks/models--org--m/" + std::string(64, 'e') + ".lock";
  std::string lease = lock + ".lease";
  LeaseFixture() { fs::create_directories(fs::path(lock).parent_path()); }
  void WriteLease(double age_s) {
    hubload::testing::WriteFileBytes(lease, std::string("pid 999999 host gone-host\n"));
    hubload::testing::SetFileAge(lease, age_s);
  }
};

FileLockOptions Lease() {
  FileLockOptions o;
  o.mode = LockMode::kLease;
  return o;
}

// Restores HUBLOAD_LOCK_MODE on scope exit.
struct EnvGuard {
  explicit EnvGuard(const char* value) {
    if (const char* old = std::getenv("HUBLOAD_LOCK_MODE")) saved = old, had = true;
    ::setenv("HUBLOAD_LOCK_MODE", value, 1);
  }
  ~EnvGuard() {
    if (had) ::setenv("HUBLOAD_LOCK_MODE", saved.c_str(), 1);
    else ::unsetenv("HUBLOAD_LOCK_MODE");
  }
  std::string saved;
  bool had = false;
};

}  // namespace

TEST(FileLockLease, StaleLeaseOfADeadHolderIsTakenOver) {
  // B09 (a): plain lock file and a lease last refreshed 1 h ago, nobody alive.
  LeaseFixture f;
  hubload::testing::WriteFileBytes(f.lock, std::string());
  hubload::testing::SetFileAge(f.lock, 3600);
  f.WriteLease(3600);
  // A 2 s budget: succeeding proves the holder was not waited for (the limit is 10 min).
  auto l = FileLock::Acquire(f.lock, 2, Lease());
  ASSERT_OK(l);
  EXPECT_TRUE(l->is_lease());
  std::string mine = "pid " + std::to_string(::getpid()) + " host ";
  EXPECT_EQ(ReadText(f.lease).rfind(mine, 0), 0u) << ReadText(f.lease);
  EXPECT_FALSE(fs::exists(f.lease + ".break"));
  { auto released = std::move(*l); }
  EXPECT_FALSE(fs::exists(f.lease));  // released on destruction
  EXPECT_TRUE(fs::exists(f.lock));    // the flock file stays (huggingface_hub keeps it too)
}

TEST(FileLockLease, LiveLeaseIsNotTakenOverAndTheTimeoutNamesThePaths) {
  LeaseFixture f;
  f.WriteLease(0);
  auto l = FileLock::Acquire(f.lock, 0.3, Lease());
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), hubload::Code::kConflict);
  EXPECT_EQ(l.status().reason(), "LockTimeout");
  EXPECT_NE(l.status().message().find(f.lock), std::string::npos) << l.status().message();
  EXPECT_NE(l.status().message().find(f.lease), std::string::npos) << l.status().message();
  EXPECT_NE(l.status().message().find("pid 999999 host gone-host"), std::string::npos) << l.status().message();
  EXPECT_EQ(ReadText(f.lease), "pid 999999 host gone-host\n");  // untouched
}

TEST(FileLockLease, FreshLeaseOfADeadProcessOnThisHostIsTakenOverAtOnce) {
  // Ctrl-C / kill of a lease holder: the next run must not wait for the 10 min staleness.
  LeaseFixture f;
  pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  waitpid(child, nullptr, 0);  // now a pid with no process
  char host[256] = {0};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  hubload::testing::WriteFileBytes(f.lease, "pid " + std::to_string(child) + " host " + host + "\n");
  auto l = FileLock::Acquire(f.lock, 5, Lease());  // default stale limit: 600 s
  ASSERT_OK(l);
  EXPECT_EQ(ReadText(f.lease), "pid " + std::to_string(getpid()) + " host " + host + "\n");
}

TEST(FileLockLease, FreshLeaseOfALiveProcessOnThisHostIsRespected) {
  LeaseFixture f;
  char host[256] = {0};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  std::string mine = "pid " + std::to_string(getppid()) + " host " + host + "\n";  // the parent is alive
  hubload::testing::WriteFileBytes(f.lease, mine);
  auto l = FileLock::Acquire(f.lock, 0.3, Lease());
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().reason(), "LockTimeout");
  EXPECT_EQ(ReadText(f.lease), mine);
}

TEST(FileLockLease, DefaultStaleLimitIsTenMinutes) {
  LeaseFixture f;
  f.WriteLease(9 * 60);  // younger than 600 s: still live
  auto young = FileLock::Acquire(f.lock, 0.2, Lease());
  ASSERT_FALSE(young.ok());
  EXPECT_EQ(young.status().reason(), "LockTimeout");
  f.WriteLease(11 * 60);  // older than 600 s: stale
  auto old = FileLock::Acquire(f.lock, 2, Lease());
  ASSERT_OK(old);
}

TEST(FileLockLease, ConfigurableStaleLimit) {
  LeaseFixture f;
  f.WriteLease(30);
  FileLockOptions o = Lease();
  o.stale_after_s = 20;
  EXPECT_OK(FileLock::Acquire(f.lock, 2, o));
  f.WriteLease(30);
  o.stale_after_s = 60;
  EXPECT_FALSE(FileLock::Acquire(f.lock, 0.2, o).ok());
}

TEST(FileLockLease, HolderRefreshesItsLease) {
  LeaseFixture f;
  FileLockOptions o = Lease();
  o.heartbeat_s = 0.05;
  auto l = FileLock::Acquire(f.lock, 1, o);
  ASSERT_OK(l);
  hubload::testing::SetFileAge(f.lease, 3600);
  // The heartbeat must bring the mtime back to "now" (poll up to 20 s).
  double age = AgeOf(f.lease);
  for (int i = 0; i < 400 && age > 60; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    age = AgeOf(f.lease);
  }
  EXPECT_LT(age, 60);
  EXPECT_GE(age, -5);
}

TEST(FileLockLease, SequentialHoldersInLeaseMode) {
  LeaseFixture f;
  for (int i = 0; i < 3; ++i) {
    auto l = FileLock::Acquire(f.lock, 1, Lease());
    ASSERT_OK(l) << i << ": " << l.status().ToString();
    EXPECT_TRUE(fs::exists(f.lease));
  }
  EXPECT_FALSE(fs::exists(f.lease));
}

TEST(FileLockLease, OptionsChooseTheModeAndTheEnvironmentIsNotRead) {
  // The library reads no environment (the CLI maps HUBLOAD_LOCK_MODE into
  // FileLockOptions): with the variable set, kAuto stays a flock here.
  LeaseFixture f;
  EnvGuard env("lease");
  {
    auto l = FileLock::Acquire(f.lock, 1);
    ASSERT_OK(l);
    EXPECT_FALSE(l->is_lease());
    EXPECT_FALSE(fs::exists(f.lease));
  }
  {
    FileLockOptions o;
    o.mode = LockMode::kLease;
    auto l = FileLock::Acquire(f.lock, 1, o);
    ASSERT_OK(l);
    EXPECT_TRUE(l->is_lease());
    EXPECT_TRUE(fs::exists(f.lease));
  }
  FileLockOptions o;
  o.mode = LockMode::kFlock;
  auto l = FileLock::Acquire(f.lock, 1, o);
  ASSERT_OK(l);
  EXPECT_FALSE(l->is_lease());
}

TEST(FileLockLease, FlockHoldersRespectALiveLeaseAndIgnoreAStaleOne) {
  // A lease-mode process elsewhere (e.g. another NFS client) holds the lease.
  LeaseFixture f;
  f.WriteLease(0);
  FileLockOptions o;
  o.mode = LockMode::kFlock;
  auto busy = FileLock::Acquire(f.lock, 0.2, o);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.status().reason(), "LockTimeout");
  EXPECT_NE(busy.status().message().find(f.lease), std::string::npos) << busy.status().message();
  f.WriteLease(3600);
  auto free = FileLock::Acquire(f.lock, 0.2, o);
  ASSERT_OK(free);
  EXPECT_TRUE(fs::exists(f.lease));  // a flock holder does not remove others' leases
}

TEST(FileLockLease, LeaseHolderAlsoExcludesFlockHolders) {
  LeaseFixture f;
  auto a = FileLock::Acquire(f.lock, 1, Lease());
  ASSERT_OK(a);
  FileLockOptions o;
  o.mode = LockMode::kFlock;
  auto b = FileLock::Acquire(f.lock, 0.1, o);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().reason(), "LockTimeout");
  auto c = FileLock::Acquire(f.lock, 0.1, Lease());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().reason(), "LockTimeout");
}

TEST(FileLockLease, BadOptionsAreRejected) {
  LeaseFixture f;
  FileLockOptions o = Lease();
  o.stale_after_s = 0;
  auto l = FileLock::Acquire(f.lock, 1, o);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), hubload::Code::kInvalidArgument);
}
