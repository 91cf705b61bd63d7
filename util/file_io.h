// util/file_io.h: the file-system leaves every module needs: errno mapped to a
// Status, write/pwrite of a whole buffer, atomic replacement of a file (small
// content, or streamed by a callback).
// Thread safety: pure functions (the file system orders concurrent writers:
// AtomicWriteFile's readers see the old or the new file, never a mix).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <functional>
#include <string_view>

#include "hubload/status.h"

namespace hubload::util {

/// A Status for a failed system call on `path` with errno `err`:
/// kDiskFull (reason "DiskFull") for ENOSPC/EDQUOT/EFBIG, kNotFound ("NotFound")
/// for ENOENT/ENOTDIR, kIOError ("ReadOnlyFileSystem") for
/// EROFS, kIOError ("PermissionDenied") for EACCES/EPERM, else kIOError
/// ("IOError"). Message "<what> <path>: <strerror>"; ErrorContext::file = path.
Status IoError(std::string_view what, const std::string& path, int err);

/// pwrite(2) of all `n` bytes at byte offset `off` (EINTR and short writes
/// handled). Errors: IoError("cannot write", path).
Status PwriteAll(int fd, const void* data, size_t n, uint64_t off, const std::string& path);

/// write(2) of all `n` bytes at the file position (EINTR and short writes
/// handled; pieces of at most 1 GiB). Errors: IoError("cannot write", path).
Status WriteAll(int fd, const void* data, uint64_t n, const std::string& path);

/// 8 random lower-case hex characters (unique temp-file suffixes).
std::string RandomSuffix();

struct AtomicWriteOptions {
  /// Permission bits of the new file (before the umask).
  unsigned mode = 0644;
  /// fsync the file before the rename and the folder after it (durable
  /// against power loss; huggingface_hub does not).
  bool durable = false;
  /// Create missing parent folders first (false: a missing folder is an error).
  bool create_parents = true;
};

/// What fills the temp file of AtomicWriteFileWith: writes at the file
/// position of `fd` (opened for writing, empty); `tmp_path` names it in errors.
using AtomicWriteBody = std::function<Status(int fd, const std::string& tmp_path)>;

/// Replaces `path` with what `body` writes, through `<path>.tmp<random>` in
/// the same folder and rename(2) (readers see the old or the new file, never
/// a mix). On any error (body's included) the temp file is removed and `path`
/// is untouched. Errors: IoError's, or body's Status.
Status AtomicWriteFileWith(const std::string& path, const AtomicWriteBody& body,
                           const AtomicWriteOptions& options = {});

/// AtomicWriteFileWith writing `content`.
Status AtomicWriteFile(const std::string& path, std::string_view content, const AtomicWriteOptions& options = {});

/// Whole contents of a regular file of at most `max_bytes` bytes (a fifo or
/// device is refused without blocking). Errors:
/// IoError's; kInvalidFormat (reason "FileTooLarge") above the limit.
Result<std::string> ReadSmallFile(const std::string& path, uint64_t max_bytes = 64ull << 20);

}  // namespace hubload::util
