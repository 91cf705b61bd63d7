// FileLock: flock()-based advisory locks shared with huggingface_hub (filelock
// uses fcntl/flock on the same .lock files).
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "cache/util.h"
#include "hubload/cache.h"

namespace hubload {

Result<FileLock> FileLock::Acquire(const std::string& path, double timeout_s) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) return cache_internal::IoError("cannot create lock folder for", path, ec.value());
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return cache_internal::IoError("cannot open lock file", path, errno);
  auto start = std::chrono::steady_clock::now();
  auto sleep = std::chrono::milliseconds(5);
  while (true) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return FileLock(fd, path);
    if (errno != EWOULDBLOCK && errno != EINTR) {
      int e = errno;
      ::close(fd);
      return cache_internal::IoError("cannot lock", path, e);
    }
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited >= timeout_s) {
      ::close(fd);
      return Status(Code::kConflict,
                    "timed out after " + std::to_string(static_cast<int>(timeout_s)) +
                        " s waiting for the lock " + path + " (held by another live process)",
                    "LockTimeout", cache_internal::FileCtx(path));
    }
    std::this_thread::sleep_for(sleep);
    if (sleep < std::chrono::milliseconds(100)) sleep *= 2;
  }
}

FileLock::FileLock(FileLock&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }

FileLock& FileLock::operator=(FileLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the flock
}

}  // namespace hubload
