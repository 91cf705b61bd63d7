// Private to hub/: moving one file's bytes from the server into a partial of
// the cache (or of a local_dir) — one resumable stream (fetch_stream.cc) or
// byte ranges of fixed chunks (fetch_ranged.cc) — with progress,
// cancellation and the on_file_bytes announcements. The order in which files
// and ranges are fetched is the scheduler's (hub/scheduler.h).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "cache/blob_store.h"
#include "hub/file_metadata.h"
#include "hub/session.h"
#include "hub/signed_url.h"
#include "util/progress.h"

namespace hubload::hub_internal {

/// Cancellation shared by the workers of one call.
struct Cancel {
  const DownloadCallbacks* cb = nullptr;
  std::atomic<bool> stop{false};
  bool Cancelled() const {
    if (stop.load(std::memory_order_relaxed)) return true;
    if (cb && cb->cancel_flag && cb->cancel_flag->load()) return true;
    if (cb && cb->cancelled && cb->cancelled()) return true;
    return false;
  }
};

/// Aggregate progress (bytes done / total), reported at most every 100 ms
/// (util::RateLimiter) plus forced calls; calls are serialised.
struct Progress {
  const DownloadCallbacks* cb = nullptr;
  std::atomic<uint64_t> done{0}, total{0};
  /// Body bytes received over the network in this call (not the bytes of a
  /// resumed partial or a cached file): what a transfer rate divides.
  std::atomic<uint64_t> received{0};
  std::mutex mu;
  util::RateLimiter rate;
  void Add(int64_t n) {
    if (n >= 0) done += static_cast<uint64_t>(n);
    else done -= static_cast<uint64_t>(-n);
    Report(false);
  }
  /// `n` bytes arrived from the server: done and received.
  void AddReceived(size_t n) {
    received += n;
    Add(static_cast<int64_t>(n));
  }
  void Report(bool force) {
    if (!cb || (!cb->on_progress && !cb->on_bytes_received) || !rate.Due(force)) return;
    std::lock_guard<std::mutex> l(mu);
    if (cb->on_progress) cb->on_progress(done.load(), total.load());
    if (cb->on_bytes_received) cb->on_bytes_received(received.load());
  }
};

/// DownloadCallbacks::on_file_bytes for one file: tracks the partial's inode
/// (a new inode = a new generation), hands out a read-only descriptor of it,
/// rate-limits to one call per MiB of growth and serialises the calls.
class BytesAnnouncer {
 public:
  BytesAnnouncer(const DownloadCallbacks* cb, std::string path_in_repo);
  ~BytesAnnouncer();
  BytesAnnouncer(const BytesAnnouncer&) = delete;
  BytesAnnouncer& operator=(const BytesAnnouncer&) = delete;
  bool enabled() const { return cb_ && cb_->on_file_bytes; }
  /// `writer_fd`/`partial_path`: the writer's partial; `contiguous`: its
  /// written prefix; `size`: final size (-1 unknown: only the final call is
  /// made); `final`: the call before the hash check (contiguous == size).
  void Update(int writer_fd, const std::string& partial_path, uint64_t contiguous, int64_t size, bool final);
  /// Number of partial files announced so far.
  uint64_t generation() const;

 private:
  const DownloadCallbacks* cb_;
  std::string path_;
  mutable std::mutex mu_;
  int ro_fd_ = -1;
  std::string ro_path_;  // the path ro_fd_ was opened by ("" = through /proc/self/fd)
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  uint64_t generation_ = 0;
  uint64_t last_ = 0;
  bool any_ = false;
};

/// Where one file's bytes go and where they come from.
struct FetchTarget {
  std::string path_in_repo;
  std::string single_partial;  // <etag>.incomplete (resumable by huggingface_hub too)
  std::string ranged_partial;  // <etag>.ranges.incomplete (chunks + journal)
  std::string final_path;      // blobs/<etag> or <local_dir>/<path>
  std::string label;           // names the file in cache messages
  std::string dir;             // folder checked for free space
  std::string url;             // the bytes (CDN location or /resolve/)
  /// Set when `url` is a CDN location the Hub redirected to: the URL every
  /// request of the file uses, renewed after a 403 (B44; see SignedUrl).
  std::shared_ptr<SignedUrl> signed_url;
  FileMeta meta;
  /// What the bytes are verified against: size, and sha256 (LFS) or git blob
  /// sha1 (regular files) by the etag (cache/blob_store.h).
  cache_internal::BlobId id;
};

/// What a fetch reports to (all may be null).
struct FileIo {
  Progress* progress = nullptr;
  Cancel* cancel = nullptr;
  const DownloadCallbacks* cb = nullptr;
  BytesAnnouncer* bytes = nullptr;
  std::atomic<uint64_t>* wire_bytes = nullptr;  // body bytes received (scheduler throughput)
  std::function<void(int status)> on_retry;     // HttpRequest::on_retry
  /// The file's retry allowance, shared by all its requests and resumes
  /// (HttpRequest::budget); null = one per fetch call.
  std::shared_ptr<RetryBudget> budget;
  /// Downloads from scratch after the whole file failed its sha256 check (a
  /// persistent corruption is then reported, not fetched again and again).
  int hash_retries = 1;
};

/// After a kNetwork error of a request of this file that delivered no byte:
/// true when resuming is pointless — the host refused the connection or did
/// not resolve (the transport already spent its few retries on it), or the
/// file's retry budget is spent.
bool GiveUpAfter(const Status& s, const RetryBudget& budget);

/// The URL a request of `t` goes to now and its generation (t.signed_url's,
/// else t.url with generation 0).
std::pair<std::string, uint64_t> CurrentUrl(const FetchTarget& t);

/// B44, after a 403 answer (`body`) to a request of `t` sent to the URL of
/// generation `gen`: true when the request should be sent again on a renewed
/// URL. Needs a signed URL (t.signed_url). `*idle` counts the renewals this
/// fetch made since its last body byte (the caller resets it when bytes
/// arrive). Renewed: always when the refusing URL had delivered bytes to some
/// request (SignedUrl::Productive: it worked, then expired, e.g. used up by
/// the other range workers); up to 3 idle renewals when the CDN says the
/// request expired (S3/CloudFront "Request has expired"); else once. So a 403
/// that is not about expiry is final after one fresh URL (xet-core #956:
/// never minutes of silent re-fetching). The renewal takes nothing from the
/// retry budget. *err is set when the re-resolve failed.
bool RenewAfter403(const FetchTarget& t, uint64_t gen, const std::string& body, int* idle, Status* err);

/// For PrepareBlob / PrepareLocalDir: `m.location` as a renewable signed URL
/// that re-resolves `path` at `m.commit` (the same etag and size are
/// required: kCorruptDownload "FileChanged" otherwise). Null without a location.
std::shared_ptr<SignedUrl> MakeSignedUrl(const Session& s, RepoType type, const std::string& repo,
                                         const std::string& path, const FileMeta& m);

/// True when the file goes in parallel ranges (ClientOptions range_*): the
/// size is known and large enough and no single-stream partial waits.
bool UseRanges(const Session& s, const FetchTarget& t);

/// One resumable stream into BlobWriter(t.single_partial -> t.final_path):
/// Range + If-Range resume, restart from zero in a new partial whenever the
/// answer cannot be appended, verification and rename. Returns the final path.
Result<std::string> FetchStream(const Session& s, const FetchTarget& t, const ErrorContext& ctx, FileIo io);

/// Opens the ranged partial of `t` (resume: keep a matching journal).
Result<std::unique_ptr<RangedBlobWriter>> OpenRanged(const Session& s, const FetchTarget& t, bool resume);

/// Fetches chunks [k, k_end) of `w` (k_end > k; the caller owns them) with one
/// request for their bytes, spread over the chunks in order, until each is
/// complete (resumed at the first incomplete byte after connection errors).
/// `probe`: the first request of the file — a 200 answer (Range ignored) is
/// then the whole file, spread over every chunk (*whole = true); without
/// `probe` a 200 is kUnsupported "RangesUnusable", and so is a body longer
/// than the range asked for (nothing past the range is written: those bytes
/// belong to another request). `on_answer(true)` runs when the answer is a fitting
/// 206, `on_answer(false)` when a probe's answer is the whole file (200).
/// Returns OK early when `stop()` turns true.
Status FetchChunk(const Session& s, RangedBlobWriter& w, size_t k, size_t k_end, bool probe, const FetchTarget& t,
                  const ErrorContext& ctx, FileIo io, const std::function<bool()>& stop,
                  const std::function<void(bool)>& on_answer, bool* whole);

}  // namespace hubload::hub_internal
