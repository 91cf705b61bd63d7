// Private to hub/: a file's signed CDN URL that can be renewed (field failure
// B44). The Hub answers /resolve/ with a redirect to a presigned URL that
// expires (S3, CloudFront, Xet: typically after an hour); a download that
// outlives it gets 403 from the CDN. Every fetch of the file (each range
// worker, each resume) reads the current URL from here, and after a 403 asks
// for a new one: the first caller re-resolves the file through the Hub, the
// others that saw the same URL fail wait for that one answer (one re-resolve
// per expiry, not one per worker) and continue with Range on the new URL.
//
// Thread safety: every method may be called from many threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <utility>

#include "hubload/status.h"

namespace hubload::hub_internal {

class SignedUrl {
 public:
  /// `url`: the first signed URL; `resolve`: asks the Hub for a fresh one
  /// (a HEAD on /resolve/<commit>/<path>), failing when the file changed.
  SignedUrl(std::string url, std::function<Result<std::string>()> resolve)
      : url_(std::move(url)), resolve_(std::move(resolve)) {}

  /// The URL to use now and its generation (0 for the first one).
  std::pair<std::string, uint64_t> Current() const;

  /// After a 403 from the URL of generation `gen`: re-resolves unless a
  /// newer URL is already there (then returns at once). Concurrent callers
  /// with the same `gen` share one re-resolve. Errors: the re-resolve's.
  Status Renew(uint64_t gen);

  /// Body bytes came from the URL of generation `gen` (it worked for
  /// someone): a later 403 from it is an expiry, whoever renewed it.
  void MarkProductive(uint64_t gen);
  /// True once MarkProductive(gen) was called.
  bool Productive(uint64_t gen) const;

  /// Number of re-resolves made so far.
  uint64_t renewals() const;

 private:
  mutable std::mutex mu_;
  std::string url_;
  uint64_t gen_ = 0;
  int64_t productive_ = -1;  // highest generation that delivered bytes
  std::function<Result<std::string>()> resolve_;
};

}  // namespace hubload::hub_internal
