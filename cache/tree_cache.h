// Private to cache/ and hub/: listings kept in the cache folder.
//  - trees/<commit>.json: the full tree of a commit, as huggingface_hub
//    _tree_cache.py writes it: {"format_version": 1, "files": {path: {"size",
//    "blob_id", "lfs_sha256"?, "lfs_size"?}}}. Untrusted (other tools write
//    it): a file that does not parse, has a wrong type anywhere or an unsafe
//    path is ignored with one warning naming the file (the caller fetches
//    the tree again and rewrites it). This is huggingface_hub's behaviour
//    (_read_tree_cache_from_disk: warning, None); offline the caller lists
//    the snapshot folder instead and cannot tell an incomplete snapshot.
//  - the snapshot folder: a listing from its entries (sizes from the blobs,
//    blob names from the symlink targets), for offline use.
// Thread safety: free functions; writes replace the file atomically.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hubload/cache.h"

namespace hubload::cache_internal {

struct TreeEntry {
  std::string path;
  uint64_t size = 0;
  std::string blob_id;     // git blob sha1, may be empty (offline listing of an LFS file)
  std::string lfs_sha256;  // 64 hex for LFS files
};

/// <repo>/trees/<commit>.json
std::string TreeCachePath(const RepoCache& rc, const std::string& commit);

/// Entries of trees/<commit>.json sorted by path; nullopt when absent or
/// corrupt (one warning naming the file).
std::optional<std::vector<TreeEntry>> ReadTreeCache(const RepoCache& rc, const std::string& commit);

/// The entries of a trees/<commit>.json text (`doc` names it in errors),
/// sorted by path. Errors: kInvalidFormat (BadJson/BadJsonField), kInvalidArgument
/// "UnsafePath".
Result<std::vector<TreeEntry>> ParseTreeCacheText(const std::string& text, const std::string& doc);

/// Writes trees/<commit>.json atomically. Best effort: errors are returned
/// for the caller to ignore (a cache of a listing).
Status WriteTreeCache(const RepoCache& rc, const std::string& commit, const std::vector<TreeEntry>& files);

/// Every file under snapshots/<commit>/, sorted by path. kNotFound when the
/// snapshot folder does not exist; unreadable entries are skipped.
Result<std::vector<TreeEntry>> ListSnapshotFolder(const RepoCache& rc, const std::string& commit);

}  // namespace hubload::cache_internal
