// Private to cache/ and hub/: huggingface_hub's local_dir layout
// (_local_folder.py): <dir>/<path> plain files, and per file
// <dir>/.cache/huggingface/download/<path>.metadata = "<commit>\n<etag>\n<timestamp>\n",
// plus .cache/huggingface/.gitignore ("*") and CACHEDIR.TAG.
//
// The metadata files are untrusted (other tools write them): a file that does
// not parse is ignored with one warning naming it (and rewritten by the next
// download). Thread safety: free functions; writers replace files atomically.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hubload/status.h"

namespace hubload::cache_internal {

struct LocalDirMeta {
  std::string commit;  // 40 hex
  std::string etag;
  double timestamp = 0;  // seconds since the epoch when it was written
};

/// <dir>/.cache/huggingface/download/<path>.metadata
std::string LocalDirMetaPath(const std::string& dir, const std::string& path);
/// The partial of <path> for `etag`: <meta folder>/<path>.<etag>[.ranges].incomplete
std::string LocalDirPartialPath(const std::string& dir, const std::string& path, const std::string& etag, bool ranged);

/// The metadata of <dir>/<path>, nullopt when absent, unreadable, corrupt
/// (one warning) or older than the file (the file was edited since).
std::optional<LocalDirMeta> ReadLocalDirMeta(const std::string& dir, const std::string& path);

/// Writes the metadata (atomically) and the folder's .gitignore/CACHEDIR.TAG.
/// Errors: IoError's.
Status WriteLocalDirMeta(const std::string& dir, const std::string& path, const std::string& commit,
                         const std::string& etag);

/// The files of a local_dir as a download left them: every entry below `dir`
/// that is not a folder, as a '/'-separated path relative to `dir`, with its
/// size in bytes (0 when it is no regular file); the metadata folder .cache/
/// at the top is left out. Sorted by path. An unreadable folder ends the walk
/// (what was read so far is returned). Reads only; never fails.
std::vector<std::pair<std::string, uint64_t>> ListLocalDirFiles(const std::string& dir);

}  // namespace hubload::cache_internal
