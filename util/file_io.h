// util/file_io.h: the file-system leaves every module needs: errno mapped to a
// Status, pwrite of a whole buffer, atomic replacement of a small file.
// Thread safety: pure functions (the file system orders concurrent writers:
// AtomicWriteFile's readers see the old or the new file, never a mix).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "hubload/status.h"

namespace hubload::util {

/// A Status for a failed system call on `path` with errno `err`:
/// kDiskFull (reason "DiskFull") for ENOSPC/EDQUOT/EFBIG, kNotFound ("NotFound")
/// for ENOENT, kIOError ("ReadOnlyFileSystem") for
/// EROFS, kIOError ("PermissionDenied") for EACCES/EPERM, else kIOError
/// ("IOError"). Message "<what> <path>: <strerror>"; ErrorContext::file = path.
Status IoError(std::string_view what, const std::string& path, int err);

/// pwrite(2) of all `n` bytes at byte offset `off` (EINTR and short writes
/// handled). Errors: IoError("cannot write", path).
Status PwriteAll(int fd, const void* data, size_t n, uint64_t off, const std::string& path);

/// 8 random lower-case hex characters (unique temp-file suffixes).
std::string RandomSuffix();

struct AtomicWriteOptions {
  /// Permission bits of the new file (before the umask).
  unsigned mode = 0644;
  /// fsync the file before the rename and the folder after it (durable
  /// against power loss; huggingface_hub does not).
  bool durable = false;
};

/// Replaces `path` with `content` through `<path>.tmp<random>` in the same
/// folder and rename(2); parent folders are created. On any error the temp
/// file is removed and `path` is untouched. Errors: IoError's.
Status AtomicWriteFile(const std::string& path, std::string_view content, const AtomicWriteOptions& options = {});

/// Whole contents of a regular file of at most `max_bytes` bytes (a fifo or
/// device is refused without blocking). Errors:
/// IoError's; kInvalidFormat (reason "FileTooLarge") above the limit.
Result<std::string> ReadSmallFile(const std::string& path, uint64_t max_bytes = 64ull << 20);

}  // namespace hubload::util
