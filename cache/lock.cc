// FileLock: flock()-based advisory locks shared with huggingface_hub (filelock
// uses fcntl/flock on the same .lock files), with an existence lease refreshed
// by a heartbeat where flock is unavailable or not trusted (see LockMode in
// hubload/cache.h; B09).
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "cache/util.h"
#include "util/file_io.h"
#include "hubload/cache.h"
#include "hubload/reasons.h"

namespace hubload {
namespace {

using Clock = std::chrono::steady_clock;

// A breaker file older than this belongs to a waiter that died inside the
// few system calls of a takeover.
constexpr double kBreakerStaleS = 30;

bool FlockUnsupported(int err) { return err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS || err == EINVAL; }

// Seconds since the last modification of `st`, by the local wall clock.
double AgeSeconds(const struct stat& st) {
  auto now = std::chrono::system_clock::now().time_since_epoch();
  double now_s = std::chrono::duration<double>(now).count();
  double mtime = static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) * 1e-9;
  return now_s - mtime;
}

std::string ReadSmall(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  if (s.size() > 200) s.resize(200);
  return s;
}

std::string Seconds(double s) { return std::to_string(static_cast<long long>(s)); }

Status Timeout(const std::string& path, double timeout_s, const std::string& detail) {
  return Status(Code::kConflict,
                "timed out after " + Seconds(timeout_s) + " s waiting for the lock " + path + " (" + detail + ")",
                reason::kLockTimeout, cache_internal::FileCtx(path));
}

// Sleeps a growing interval (5 ms .. cap), never past `deadline`.
class Backoff {
 public:
  explicit Backoff(std::chrono::milliseconds cap) : cap_(cap) {}
  void Sleep(Clock::time_point deadline) {
    auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) return;
    std::this_thread::sleep_for(std::min<Clock::duration>(cur_, left));
    if (cur_ < cap_) cur_ = std::min(cur_ * 2, cap_);
  }

 private:
  std::chrono::milliseconds cur_{5};
  std::chrono::milliseconds cap_;
};

// True when a lease's holder line ("pid N host H") names a process of this
// host that no longer exists (kill(N, 0) fails with ESRCH).
bool HolderIsDeadHere(const std::string& holder) {
  unsigned long pid = 0;
  char host[256] = {0};
  if (std::sscanf(holder.c_str(), "pid %lu host %255s", &pid, host) != 2 || pid == 0) return false;
  char me[256] = {0};
  if (::gethostname(me, sizeof me - 1) != 0 || std::strcmp(me, host) != 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// Removes `lease` if it is still the very file `seen` (same inode) and still
// stale; one waiter at a time (O_EXCL breaker file), so that two waiters can
// never both remove a lease and both create a new one.
Status BreakStaleLease(const std::string& lease, const struct stat& seen, double stale_after_s) {
  std::string breaker = lease + ".break";
  int bfd = ::open(breaker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (bfd < 0) {
    int e = errno;
    if (e != EEXIST) return util::IoError("cannot create lease breaker", breaker, e);
    struct stat bst;
    if (::stat(breaker.c_str(), &bst) == 0 && AgeSeconds(bst) > kBreakerStaleS) ::unlink(breaker.c_str());
    return Status::Ok();  // someone else is breaking it; wait and look again
  }
  struct stat now;
  if (::stat(lease.c_str(), &now) == 0 && now.st_ino == seen.st_ino && now.st_dev == seen.st_dev &&
      AgeSeconds(now) > stale_after_s) {
    std::string holder = ReadSmall(lease);
    if (::unlink(lease.c_str()) == 0)
      spdlog::warn("taking over the stale lock lease {} ({}; last refreshed {} s ago, limit {} s)", lease,
                   holder.empty() ? "holder unknown" : holder, Seconds(AgeSeconds(now)), Seconds(stale_after_s));
  }
  ::close(bfd);
  ::unlink(breaker.c_str());
  return Status::Ok();
}

}  // namespace

struct FileLock::Lease {
  std::string path;
  int fd = -1;
  struct stat st {};
  std::chrono::duration<double> interval{5.0};
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::thread heartbeat;

  void Beat() {
    bool lost_reported = false;
    std::unique_lock<std::mutex> l(mu);
    while (!cv.wait_for(l, interval, [this] { return stop; })) {
      // NULL times = "now"; on NFS the server's clock sets it.
      if (::futimens(fd, nullptr) != 0)
        spdlog::warn("cannot refresh the lock lease {}: {}", path, std::strerror(errno));
      struct stat cur;
      if (!lost_reported && ::fstat(fd, &cur) == 0 && cur.st_nlink == 0) {
        spdlog::error("the lock lease {} was removed by another process (taken over as stale?); "
                      "another download of the same file may now run concurrently",
                      path);
        lost_reported = true;
      }
    }
  }

  ~Lease() {
    {
      std::lock_guard<std::mutex> l(mu);
      stop = true;
    }
    cv.notify_all();
    if (heartbeat.joinable()) heartbeat.join();
    struct stat cur;
    // Remove the lease only while it is still ours (not taken over and replaced).
    if (::stat(path.c_str(), &cur) == 0 && cur.st_ino == st.st_ino && cur.st_dev == st.st_dev)
      ::unlink(path.c_str());
    if (fd >= 0) ::close(fd);
  }
};

namespace {

// Creates the lease `path` (O_EXCL) or waits until `deadline` for it,
// taking over a lease not refreshed for options.stale_after_s.
Result<std::unique_ptr<FileLock::Lease>> AcquireLease(const std::string& lock_path, const std::string& path,
                                                      Clock::time_point deadline, double timeout_s,
                                                      const FileLockOptions& options) {
  Backoff backoff(std::chrono::milliseconds(250));
  auto start = Clock::now();
  bool told = false;
  while (true) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      char host[256] = {0};
      if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "?");
      std::string who = "pid " + std::to_string(::getpid()) + " host " + host + "\n";
      struct stat st;
      errno = EIO;  // reported if a short write sets none
      if (::write(fd, who.data(), who.size()) != static_cast<ssize_t>(who.size()) || ::fstat(fd, &st) != 0) {
        int e = errno;
        ::unlink(path.c_str());
        ::close(fd);
        return util::IoError("cannot write lock lease", path, e);
      }
      auto lease = std::make_unique<FileLock::Lease>();
      lease->path = path;
      lease->fd = fd;
      lease->st = st;
      double hb = std::min(options.heartbeat_s, options.stale_after_s / 4);
      lease->interval = std::chrono::duration<double>(std::max(hb, 0.01));
      FileLock::Lease* raw = lease.get();
      lease->heartbeat = std::thread([raw] { raw->Beat(); });
      return lease;
    }
    int e = errno;
    if (e != EEXIST) return util::IoError("cannot create lock lease", path, e);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      if (errno != ENOENT) return util::IoError("cannot read lock lease", path, errno);
      continue;  // released meanwhile: try again at once
    }
    double age = AgeSeconds(st);
    if (age > options.stale_after_s) {
      HUBLOAD_RETURN_IF_ERROR(BreakStaleLease(path, st, options.stale_after_s));
      if (::access(path.c_str(), F_OK) != 0) continue;
    } else if (HolderIsDeadHere(ReadSmall(path))) {
      // Its holder was this host's process and is gone (Ctrl-C, kill): no need to wait for staleness.
      HUBLOAD_RETURN_IF_ERROR(BreakStaleLease(path, st, -1));
      if (::access(path.c_str(), F_OK) != 0) continue;
    }
    if (!told && Clock::now() - start > std::chrono::seconds(2)) {
      told = true;
      std::string holder = ReadSmall(path);
      spdlog::info("waiting for the lock lease {} held by {} (stale after {} s without refresh)", path,
                   holder.empty() ? "an unknown process" : holder, Seconds(options.stale_after_s));
    }
    if (Clock::now() >= deadline) {
      std::string holder = ReadSmall(path);
      return Timeout(lock_path, timeout_s,
                     "lease " + path + " held by " + (holder.empty() ? "an unknown process" : holder) +
                         ", refreshed " + Seconds(std::max(age, 0.0)) + " s ago; a lease is stale after " +
                         Seconds(options.stale_after_s) + " s");
    }
    backoff.Sleep(deadline);
  }
}

// kAuto/kFlock holders respect a live lease of a kLease process (another host
// of an NFS cache); a stale one is ignored (not removed).
Status WaitNoLiveLease(const std::string& lock_path, const std::string& lease, Clock::time_point deadline,
                       double timeout_s, const FileLockOptions& options) {
  Backoff backoff(std::chrono::milliseconds(250));
  while (true) {
    struct stat st;
    if (::stat(lease.c_str(), &st) != 0) return Status::Ok();
    double age = AgeSeconds(st);
    if (age > options.stale_after_s) return Status::Ok();
    if (Clock::now() >= deadline) {
      std::string holder = ReadSmall(lease);
      return Timeout(lock_path, timeout_s,
                     "flock held, but the lease " + lease + " of " + (holder.empty() ? "an unknown process" : holder) +
                         " was refreshed " + Seconds(std::max(age, 0.0)) + " s ago");
    }
    backoff.Sleep(deadline);
  }
}

}  // namespace

Result<FileLock> FileLock::Acquire(const std::string& path, double timeout_s, const FileLockOptions& options) {
  if (!(options.stale_after_s > 0) || !(options.heartbeat_s > 0))
    return Status(Code::kInvalidArgument, "lock options for " + path + ": stale_after_s and heartbeat_s must be > 0",
                  reason::kBadLockOptions, cache_internal::FileCtx(path));
  if (!(timeout_s >= 0)) timeout_s = 0;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) return util::IoError("cannot create lock folder for", path, ec.value());
  const LockMode mode = options.mode;  // the caller's choice (the CLI maps HUBLOAD_LOCK_MODE)
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::min(timeout_s, 1e9)));
  const std::string lease_path = path + ".lease";

  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return util::IoError("cannot open lock file", path, errno);
  bool use_lease = mode == LockMode::kLease;
  Backoff backoff(std::chrono::milliseconds(100));
  while (true) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) break;
    int e = errno;
    if (e == EWOULDBLOCK || e == EINTR) {
      if (Clock::now() >= deadline) {
        ::close(fd);
        return Timeout(path, timeout_s, "held by another live process");
      }
      backoff.Sleep(deadline);
      continue;
    }
    ::close(fd);
    fd = -1;
    if (FlockUnsupported(e) && mode != LockMode::kFlock) {
      if (mode == LockMode::kAuto) {
        static std::once_flag warned;
        std::call_once(warned, [&] {
          spdlog::warn("the file system of {} does not support flock ({}); using lock leases instead "
                       "(LockMode::kLease; HUBLOAD_LOCK_MODE=lease in the CLI)",
                       path, std::strerror(e));
        });
      }
      use_lease = true;
      break;
    }
    return util::IoError(FlockUnsupported(e) ? "flock is not supported (LockMode::kFlock) on"
                                                       : "cannot lock",
                                   path, e);
  }
  if (use_lease) {
    auto lease = AcquireLease(path, lease_path, deadline, timeout_s, options);
    if (!lease.ok()) {
      if (fd >= 0) ::close(fd);
      return lease.status();
    }
    return FileLock(fd, path, std::move(*lease));
  }
  Status live = WaitNoLiveLease(path, lease_path, deadline, timeout_s, options);
  if (!live.ok()) {
    ::close(fd);
    return live;
  }
  return FileLock(fd, path, nullptr);
}

FileLock::FileLock(int fd, std::string path, std::unique_ptr<Lease> lease)
    : fd_(fd), path_(std::move(path)), lease_(std::move(lease)) {}

FileLock::FileLock(FileLock&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)), lease_(std::move(o.lease_)) {
  o.fd_ = -1;
}

FileLock& FileLock::operator=(FileLock&& o) noexcept {
  if (this != &o) {
    Release();
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    lease_ = std::move(o.lease_);
    o.fd_ = -1;
  }
  return *this;
}

void FileLock::Release() {
  lease_.reset();  // stops the heartbeat and removes the lease (while still holding the flock)
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the flock
  fd_ = -1;
}

FileLock::~FileLock() { Release(); }

}  // namespace hubload
