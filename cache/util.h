// Internal helpers shared by cache/*.cc (not installed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "hubload/status.h"

namespace hubload::cache_internal {

/// kDiskFull for ENOSPC/EDQUOT/EFBIG, else kIOError; message "<what> <path>: strerror".
Status IoError(const std::string& what, const std::string& path, int err);

inline ErrorContext FileCtx(std::string file) {
  ErrorContext c;
  c.file = std::move(file);
  return c;
}
inline ErrorContext RevCtx(std::string rev) {
  ErrorContext c;
  c.revision = std::move(rev);
  return c;
}
inline ErrorContext RepoRevCtx(std::string repo_id, std::string rev) {
  ErrorContext c;
  c.repo_id = std::move(repo_id);
  c.revision = std::move(rev);
  return c;
}

/// Lowercase hex of a digest (sha256 names of blobs).
std::string Hex(const unsigned char* md, unsigned len);

/// pwrite(2) of all `n` bytes at `off` (EINTR and short writes handled);
/// IoError naming `path` on failure (kDiskFull for ENOSPC/EDQUOT/EFBIG).
Status PwriteAll(int fd, const void* data, size_t n, uint64_t off, const std::string& path);

/// 8 random hex characters (temp-file suffixes).
std::string RandomSuffix();

/// Writes `content` to `path` via a temp file in the same folder + rename;
/// parent folders are created.
Status AtomicWriteFile(const std::string& path, const std::string& content);

}  // namespace hubload::cache_internal
