// What the cache already holds of a file (hubload download --dry-run), and
// the CACHEDIR.TAG of a cache root (hubload/cache.h).
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "cache/local_dir.h"
#include "cache/util.h"
#include "hubload/cache.h"
#include "util/file_io.h"

namespace hubload {
namespace fs = std::filesystem;
namespace {

// Size of a regular file (symlinks followed), -1 when absent.
int64_t FileSize(const std::string& p) {
  struct stat st;
  if (::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return -1;
  return static_cast<int64_t>(st.st_size);
}

}  // namespace

CachedFileState ProbeCachedFile(const RepoCache& repo, std::string_view path_in_repo, std::string_view etag,
                                uint64_t size, const std::string& local_dir) {
  CachedFileState s;
  const std::string path(path_in_repo), tag(etag);
  std::string single, ranged;
  if (local_dir.empty()) {
    s.cached = repo.HasBlob(etag, static_cast<int64_t>(size));
    single = repo.IncompletePath(etag);
    ranged = repo.RangedIncompletePath(etag);
  } else {
    auto meta = cache_internal::ReadLocalDirMeta(local_dir, path);
    s.cached = meta && meta->etag == tag && FileSize(local_dir + "/" + path) == static_cast<int64_t>(size);
    single = cache_internal::LocalDirPartialPath(local_dir, path, tag, false);
    ranged = cache_internal::LocalDirPartialPath(local_dir, path, tag, true);
  }
  if (s.cached) return s;
  int64_t prefix = FileSize(single);
  if (prefix > 0) s.partial_bytes = std::min<uint64_t>(static_cast<uint64_t>(prefix), size);
  else s.partial_bytes = std::min(cache_internal::RangedPartialBytes(ranged, size), size);
  s.bytes_to_fetch = size - s.partial_bytes;
  return s;
}

Status WriteCacheDirTag(const std::string& cache_dir) {
  const std::string tag = cache_dir + "/CACHEDIR.TAG";
  std::error_code ec;
  if (fs::exists(tag, ec)) return Status::Ok();
  return util::AtomicWriteFile(tag,
                               "Signature: 8a477f597d28d172789f06886806bc55\n"
                               "# This file is a cache directory tag created by hubload (Hugging Face cache).\n"
                               "# For information about cache directory tags see https://bford.info/cachedir/\n");
}

namespace cache_internal {

Status WriteCreatingCache(const std::string& cache_dir, const std::function<Status()>& write) {
  std::error_code ec;
  const bool existed = cache_dir.empty() || fs::exists(cache_dir, ec);
  Status st = write();
  if (st.ok() && !existed) (void)WriteCacheDirTag(cache_dir);
  return st;
}

}  // namespace cache_internal
}  // namespace hubload
