// Internal helpers shared by cache/*.cc (not installed). The file-system and
// digest leaves are util/'s (file_io.h, hex.h, digest.h).
#pragma once

#include <functional>
#include <string>

#include "hubload/status.h"

namespace hubload::cache_internal {

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

/// Git blob sha1 check of a whole partial (regular Hub files: the etag is
/// their git blob id). OK when `expected` is empty or matches; else calls
/// `discard` and returns kCorruptDownload reason kHashMismatch naming `label`.
Status VerifyGitBlob(const std::string& partial, const std::string& expected, const std::string& label,
                     const ErrorContext& ctx, const std::function<void()>& discard);

/// Runs `write` (a write that may create the cache folder `cache_dir` with
/// its parents); when the folder did not exist before and the write
/// succeeded, tags it with CACHEDIR.TAG (WriteCacheDirTag, best effort).
Status WriteCreatingCache(const std::string& cache_dir, const std::function<Status()>& write);

/// Bytes a ranged partial (RangedBlobWriter, `size` bytes of content) holds
/// per its journal: the sum of every chunk's written prefix. 0 when the file
/// is absent or its journal does not match `size`. Never fails.
uint64_t RangedPartialBytes(const std::string& path, uint64_t size);

}  // namespace hubload::cache_internal
