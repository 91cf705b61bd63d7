#include "cache/util.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>

namespace hubload::cache_internal {

Status IoError(const std::string& what, const std::string& path, int err) {
  bool full = err == ENOSPC || err == EDQUOT || err == EFBIG;
  return Status(full ? Code::kDiskFull : Code::kIOError, what + " " + path + ": " + std::strerror(err),
                full ? "DiskFull" : "IOError", cache_internal::FileCtx(path));
}

std::string Hex(const unsigned char* md, unsigned len) {
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < len; ++i) {
    s.push_back(hex[md[i] >> 4]);
    s.push_back(hex[md[i] & 15]);
  }
  return s;
}

Status PwriteAll(int fd, const void* data, size_t n, uint64_t off, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(off));
    if (w < 0) {
      if (errno == EINTR) continue;
      return IoError("cannot write partial download", path, errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
    off += static_cast<uint64_t>(w);
  }
  return Status::Ok();
}

std::string RandomSuffix() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  uint64_t v = rng();
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(hex[(v >> (4 * i)) & 15]);
  return s;
}

Status AtomicWriteFile(const std::string& path, const std::string& content) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) return IoError("cannot create folder for", path, ec.value());
  std::string tmp = path + ".tmp" + RandomSuffix();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("cannot create", tmp, errno);
  size_t off = 0;
  while (off < content.size()) {
    ssize_t w = ::write(fd, content.data() + off, content.size() - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return IoError("cannot write", tmp, e);
    }
    off += static_cast<size_t>(w);
  }
  if (::close(fd) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return IoError("cannot write", tmp, e);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return IoError("cannot rename into", path, e);
  }
  return Status::Ok();
}

}  // namespace hubload::cache_internal
