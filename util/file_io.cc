#include "util/file_io.h"
#include "hubload/reasons.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>

namespace hubload::util {

Status IoError(std::string_view what, const std::string& path, int err) {
  Code code = Code::kIOError;
  std::string_view why = reason::kIOError;
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) {
    code = Code::kDiskFull;
    why = reason::kDiskFull;
  } else if (err == ENOENT || err == ENOTDIR) {
    code = Code::kNotFound;
    why = reason::kNotFound;
  } else if (err == EROFS) {
    why = reason::kReadOnlyFileSystem;
  } else if (err == EACCES || err == EPERM) {
    why = reason::kPermissionDenied;
  }
  ErrorContext ctx;
  ctx.file = path;
  return Status(code, std::string(what) + " " + path + ": " + std::strerror(err), why, std::move(ctx));
}

Status PwriteAll(int fd, const void* data, size_t n, uint64_t off, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(off));
    if (w < 0) {
      if (errno == EINTR) continue;
      return IoError("cannot write", path, errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
    off += static_cast<uint64_t>(w);
  }
  return Status::Ok();
}

std::string RandomSuffix() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kDigits[] = "0123456789abcdef";
  uint64_t v = rng();
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(kDigits[(v >> (4 * i)) & 15]);
  return s;
}

Status WriteAll(int fd, const void* data, uint64_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const size_t piece = static_cast<size_t>(n < (1ull << 30) ? n : (1ull << 30));
    ssize_t w = ::write(fd, p, piece);
    if (w < 0) {
      if (errno == EINTR) continue;
      return IoError("cannot write", path, errno);
    }
    p += w;
    n -= static_cast<uint64_t>(w);
  }
  return Status::Ok();
}

Status AtomicWriteFileWith(const std::string& path, const AtomicWriteBody& body, const AtomicWriteOptions& options) {
  std::error_code ec;
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty() && options.create_parents) {
    std::filesystem::create_directories(parent, ec);
    if (ec) return IoError("cannot create the folder of", path, ec.value());
  }
  std::string tmp = path + ".tmp" + RandomSuffix();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, options.mode);
  if (fd < 0) return IoError("cannot create", tmp, errno);
  auto fail = [&](Status st) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return st;
  };
  if (body) {
    Status w = body(fd, tmp);
    if (!w.ok()) return fail(std::move(w));
  }
  if (options.durable && ::fsync(fd) != 0) return fail(IoError("cannot sync", tmp, errno));
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
  if (options.durable) {
    int dfd = ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);  // best effort: some file systems refuse fsync on folders
      ::close(dfd);
    }
  }
  return Status::Ok();
}

Status AtomicWriteFile(const std::string& path, std::string_view content, const AtomicWriteOptions& options) {
  return AtomicWriteFileWith(
      path, [&](int fd, const std::string& tmp) { return WriteAll(fd, content.data(), content.size(), tmp); },
      options);
}

Result<std::string> ReadSmallFile(const std::string& path, uint64_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return IoError("cannot open", path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return IoError("cannot stat", path, e);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    ErrorContext ctx;
    ctx.file = path;
    return Status(Code::kInvalidFormat, path + " is not a regular file", reason::kNotARegularFile, ctx);
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    ErrorContext ctx;
    ctx.file = path;
    return Status(Code::kInvalidFormat,
                  path + " has " + std::to_string(st.st_size) + " bytes, more than the " + std::to_string(max_bytes) +
                      " accepted for this kind of file",
                  reason::kFileTooLarge, ctx);
  }
  std::string out;
  char buf[65536];
  while (true) {
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return IoError("cannot read", path, e);
    }
    if (r == 0) break;
    out.append(buf, static_cast<size_t>(r));
    if (out.size() > max_bytes) break;  // grew while we read
  }
  ::close(fd);
  return out;
}

}  // namespace hubload::util
