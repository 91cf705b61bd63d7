// Private to hub/: what one file needs before its bytes move — the cache
// lookups, the HEAD probe, the blob lock — for the scheduler (hub/scheduler.h).
#pragma once

#include <string>

#include "hub/scheduler.h"

namespace hubload::hub_internal {

/// Cache mode, metadata known: the blob `m.etag` into blobs/ and
/// snapshots/<m.commit>/<path> linked to it. Reuses a matching pointer or
/// blob (no transfer); otherwise takes the blob's lock (waiting up to
/// lock_timeout_s) and checks again, since another process may have finished
/// it meanwhile. `rev_for_url` is the revision of the /resolve/ URL when the
/// server sent no absolute location.
Result<PreparedFile> PrepareBlob(const Session& s, const RepoCache& rc, const FileMeta& m, const std::string& path,
                                 const std::string& rev_for_url, bool force);

/// Cache mode at a commit: a cached pointer costs nothing, else HEAD +
/// PrepareBlob. `size`: the file's size in bytes from the listing (-1:
/// unknown); a cached pointer of another size is fetched again (PrepareBlob).
Result<PreparedFile> PrepareAtCommit(const Session& s, const RepoCache& rc, const std::string& commit,
                                     const std::string& path, int64_t size = -1);

/// huggingface_hub local_dir mode: <dir>/<path> with its metadata file. A
/// file whose metadata names `rev` (a commit) costs no request; one whose
/// etag is unchanged only refreshes the metadata (either only when the file
/// holds `size` bytes, the listing's, -1: unknown, or the HEAD's; else it is
/// fetched again); on a network-like failure an existing file is used (one
/// warning). Offline: the file when present, else kOfflineMiss.
Result<PreparedFile> PrepareLocalDir(const Session& s, RepoType t, const std::string& repo, const std::string& rev,
                                     const std::string& path, const std::string& dir, bool force, int64_t size = -1);

}  // namespace hubload::hub_internal
