// Private to hub/: the download scheduler — files started in the order given,
// spread over the connections as ClientOptions::download_order says.
//
// Every DownloadFiles / Snapshot / Download call runs here. The files are
// given in the caller's order (load order). Preparation threads run each
// file's `prepare` (cache lookup, HEAD, lock) a few files ahead of the
// download frontier; no file starts before an earlier one is prepared (up to
// a grace period, so a blob lock held by another process does not stall the
// rest). Connection threads (at most ClientOptions::max_workers, of which
// ConnectionController lets `limit()` work at once) take work in file order:
//  - a file of at most one chunk (or with ranges off) is one resumable GET;
//  - a larger file is cut into range_chunk_bytes chunks: its first request is
//    sent alone (a 200 answer means Range is ignored, and that one answer
//    then carries the whole file), once it answers 206 the other chunks are
//    taken in order, at most max_ranges_per_file at once.
// Load order (kLoadOrder): every connection takes the earliest file's chunks;
// the next file starts once every byte of the earlier ranged files is in (a
// free connection waits while their last chunks are in flight), so on one
// link shared by all connections the files complete in order, each at the
// speed of the whole link. Single-stream files (small ones, or a server that
// ignores Range) do not hold later files back.
// Throughput (kThroughput): a free connection first gives a connection to
// the earliest file that has none in flight from its first missing byte (a
// new file, or the chunks after its previous request: its bytes arrive in
// order and are hashed from memory). With at least as many files left as
// connections that request is a run of chunks of up to 64 MiB (a 64 MiB file
// is one GET); with fewer it is one chunk. Only when every file that can
// start has a connection do free connections take the last chunks left of
// the earliest unfinished file, from its end.
// A file is verified (size, sha256 inline) and renamed into blobs/ by the
// thread that finished its last byte, which stops counting as a connection
// first (there is one connection thread more than connections): the next
// file's ranges start at once and the hash of the out-of-order chunks
// overlaps them. Then `finish` links it and on_file_done runs (completion
// order). A ranged file whose server answers ranges unusably, or whose hash
// does not match, is fetched again as one stream (with one warning). The
// first error cancels everything else promptly and is returned.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hub/fetch.h"

namespace hubload::hub_internal {

/// What `prepare` found for one file.
struct PreparedFile {
  /// Set when no transfer is needed (cached, or completed by another process).
  std::optional<std::string> local_path;
  /// Otherwise: what to fetch, the lock held until it is done, and the step
  /// after verification (link snapshots/..., write local_dir metadata), which
  /// returns the local path.
  std::optional<FetchTarget> target;
  std::optional<FileLock> lock;
  std::function<Result<std::string>()> finish;
  /// Bytes already present (counted as done in the progress).
  uint64_t cached_bytes = 0;
  /// Size learned while preparing (HEAD), added to the progress total when
  /// FileWork::size was unknown.
  std::optional<uint64_t> size;
};

struct FileWork {
  std::string path;
  /// Size known in advance (from a listing) for the progress total.
  std::optional<uint64_t> size;
  ErrorContext ctx;
  std::function<Result<PreparedFile>()> prepare;
};

struct ScheduleOutcome {
  Status status;
  std::string failed_path;
  Code failed_code = Code::kOk;
  /// Local path of each file (in the order given), "" for those not done.
  std::vector<std::string> local_paths;
};

/// Runs the downloads (see the header comment). `max_connections` <= 0 means
/// ClientOptions::max_workers.
ScheduleOutcome RunDownloads(const Session& s, std::vector<FileWork> files, const DownloadCallbacks& cb,
                             int max_connections = 0);

}  // namespace hubload::hub_internal
