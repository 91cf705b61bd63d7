// The cache write protocol (cache/blob_store.h).
#include "cache/blob_store.h"

#include <filesystem>
#include <optional>

#include <spdlog/spdlog.h>

#include "cache/util.h"
#include "util/hex.h"

namespace hubload::cache_internal {
namespace fs = std::filesystem;

std::string BlobId::sha256() const { return etag.size() == 64 && util::IsLowerHex(etag) ? etag : std::string(); }
std::string BlobId::git_sha1() const { return etag.size() == 40 && util::IsLowerHex(etag) ? etag : std::string(); }

BlobWriter::Options StreamOptions(const BlobId& id, bool resume) {
  BlobWriter::Options o;
  o.expected_size = id.size;
  o.expected_sha256 = id.sha256();
  o.expected_git_sha1 = id.git_sha1();
  o.resume = resume;
  return o;
}

RangedBlobWriter::Options RangedOptions(const BlobId& id, uint64_t chunk_bytes, bool resume) {
  RangedBlobWriter::Options o;
  o.size = id.size > 0 ? static_cast<uint64_t>(id.size) : 0;
  o.chunk_bytes = chunk_bytes;
  o.expected_sha256 = id.sha256();
  o.expected_git_sha1 = id.git_sha1();
  o.resume = resume;
  return o;
}

BlobStore::BlobStore(RepoCache rc, FileLockOptions lock, bool use_symlinks)
    : rc_(std::move(rc)), lock_(lock), use_symlinks_(use_symlinks) {}

Result<std::optional<std::string>> BlobStore::Cached(const std::string& commit, const std::string& path,
                                                     const BlobId& id) const {
  if (auto p = rc_.CachedPointer(commit, path)) {
    std::error_code ec;
    auto target = fs::read_symlink(*p, ec);
    if (ec || target.filename().string() == id.etag) {
      std::error_code sec;
      const uintmax_t n = fs::file_size(*p, sec);
      if (id.size < 0 || (!sec && n == static_cast<uintmax_t>(id.size))) return std::optional<std::string>(*p);
      // Truncated or grown by something else: never handed out (the blob's
      // name promises the Hub's bytes); fetched again below.
      spdlog::warn("{}: the cached file is {} bytes, the Hub says {}: fetching it again", *p,
                   sec ? std::string("unreadable") : std::to_string(n), id.size);
    }
  }
  if (!Has(id)) return std::optional<std::string>();
  HUBLOAD_ASSIGN_OR_RETURN(std::string local, rc_.LinkSnapshot(commit, path, id.etag, use_symlinks_));
  return std::optional<std::string>(std::move(local));
}

Result<FileLock> BlobStore::Lock(const std::string& etag, double timeout_s) const {
  // The first write into a cache folder that did not exist tags it (CACHEDIR.TAG).
  std::optional<FileLock> held;
  Status st = WriteCreatingCache(rc_.cache_dir(), [&]() -> Status {
    HUBLOAD_ASSIGN_OR_RETURN(FileLock l, FileLock::Acquire(rc_.LockPath(etag), timeout_s, lock_));
    held.emplace(std::move(l));
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return std::move(*held);
}

Result<std::unique_ptr<BlobWriter>> BlobStore::OpenStream(const BlobId& id, bool resume) const {
  return BlobWriter::Open(rc_, id.etag, StreamOptions(id, resume));
}

Result<std::unique_ptr<RangedBlobWriter>> BlobStore::OpenRanged(const BlobId& id, uint64_t chunk_bytes,
                                                                bool resume) const {
  return RangedBlobWriter::Open(rc_, id.etag, RangedOptions(id, chunk_bytes, resume));
}

Result<std::string> BlobStore::Link(const std::string& commit, const std::string& path, const std::string& etag,
                                    bool new_blob) const {
  return rc_.LinkSnapshot(commit, path, etag, use_symlinks_, new_blob);
}

Status BlobStore::WriteRef(const std::string& revision, const std::string& commit) const {
  if (IsCommitHash(revision) || revision == commit) return Status::Ok();
  return rc_.WriteRef(revision, commit);
}

}  // namespace hubload::cache_internal
