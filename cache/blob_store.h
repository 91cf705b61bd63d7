// Private to cache/, hub/ and the distributed transfer: the ONE cache write
// protocol (hubload/cache.h rules 1 and 2), used by every download path and
// by the distributed broadcast:
//   lock (FileLock on .locks/<repo>/<etag>.lock)
//   -> partial (blobs/<etag>.incomplete or .ranges.incomplete)
//   -> verify: size; sha256 for LFS blobs (64-hex etag); git blob sha1 for
//      regular files (40-hex etag); other etags (mirrors) size only
//   -> rename into blobs/<etag> -> link snapshots/<commit>/<path> -> refs/<rev>.
// Nothing reaches a final name before it is verified. Bytes are never
// rewritten in place: a restart continues in a new partial (new inode).
//
// Thread safety: a BlobStore is an immutable value; its methods may be
// called from many threads and processes at once (the lock orders writers).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "hubload/cache.h"

namespace hubload::cache_internal {

/// A blob as the Hub names it: the normalised etag and the size (-1 unknown).
struct BlobId {
  std::string etag;
  int64_t size = -1;
  /// sha256 to verify (the etag when it is 64 lower-case hex), else "".
  std::string sha256() const;
  /// git blob sha1 to verify (the etag when it is 40 lower-case hex), else "".
  std::string git_sha1() const;
};

/// Writer options that verify `id` by its name (see the header comment).
BlobWriter::Options StreamOptions(const BlobId& id, bool resume);
RangedBlobWriter::Options RangedOptions(const BlobId& id, uint64_t chunk_bytes, bool resume);

class BlobStore {
 public:
  BlobStore(RepoCache rc, FileLockOptions lock = {}, bool use_symlinks = true);
  const RepoCache& repo() const { return rc_; }

  /// blobs/<etag> exists with the size.
  bool Has(const BlobId& id) const { return rc_.HasBlob(id.etag, id.size); }
  /// The local path when no transfer is needed: snapshots/<commit>/<path>
  /// already points at this etag (or is a regular file of unknown origin)
  /// and holds id.size bytes, or the blob exists with that size and is now
  /// linked. nullopt when the bytes must be fetched: a pointer of another
  /// size (truncated by a crash or another tool) is warned about, naming it.
  /// Errors: LinkSnapshot's.
  Result<std::optional<std::string>> Cached(const std::string& commit, const std::string& path,
                                            const BlobId& id) const;
  /// Takes the blob's lock, waiting up to `timeout_s`; check Has() again
  /// after it (another process may have finished the blob meanwhile).
  Result<FileLock> Lock(const std::string& etag, double timeout_s) const;
  /// Writers of blobs/<etag> (caller holds the lock); verification by name.
  Result<std::unique_ptr<BlobWriter>> OpenStream(const BlobId& id, bool resume) const;
  Result<std::unique_ptr<RangedBlobWriter>> OpenRanged(const BlobId& id, uint64_t chunk_bytes, bool resume) const;
  /// After a writer's Commit: snapshots/<commit>/<path> -> blobs/<etag>;
  /// `new_blob` lets the no-symlink fallback move the blob (B14). Returns the pointer.
  Result<std::string> Link(const std::string& commit, const std::string& path, const std::string& etag,
                           bool new_blob) const;
  /// refs/<revision> = commit, for revisions that are not a commit id.
  Status WriteRef(const std::string& revision, const std::string& commit) const;

 private:
  RepoCache rc_;
  FileLockOptions lock_;
  bool use_symlinks_;
};

}  // namespace hubload::cache_internal
