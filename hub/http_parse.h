// Private to hub/: parsers of the HTTP header values the client reads from
// servers (untrusted: every function accepts any bytes, never throws, never
// reads out of bounds; tests/fuzz/http_headers_fuzz.cc).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "hubload/transport.h"

namespace hubload::hub_internal {

/// A non-negative decimal integer made of digits only that fits in int64
/// ("12" -> 12; "", "-1", "1e3", "99999999999999999999" -> nullopt).
std::optional<int64_t> ParseDecimal(std::string_view v);
inline std::optional<int64_t> ParseDecimal(const std::optional<std::string>& v) {
  return v ? ParseDecimal(std::string_view(*v)) : std::nullopt;
}

/// Content-Range "bytes a-b/total" -> first = a, total (-1 for "*");
/// "bytes */total" -> first = -1. False when malformed (b < a included).
bool ParseContentRange(std::string_view v, int64_t* first, int64_t* total);

/// Target of the rel="next" entry of a Link header (RFC 8288, as the Hub's
/// tree pagination sends it), nullopt when there is none.
std::optional<std::string> NextLink(const HttpHeaders& h);
std::optional<std::string> NextLinkValue(std::string_view link);

/// Retry-After in seconds when it is delta-seconds (an HTTP-date -> nullopt).
std::optional<double> RetryAfterSeconds(std::string_view v);

/// Retry-After in either form of RFC 9110 §10.2.3: delta-seconds, or an
/// HTTP-date (IMF-fixdate and the obsolete forms, parsed by libcurl's
/// curl_getdate) taken relative to `now_unix_s` (a date in the past -> 0).
/// A date has whole-second resolution, so 1 s is added to it: waiting until
/// the named second itself may end before the server's window does.
std::optional<double> RetryAfterSecondsAt(std::string_view v, int64_t now_unix_s);

/// The Hub's rate-limit answer (IETF draft httpapi-ratelimit-headers, as
/// huggingface_hub parse_ratelimit_headers reads it):
/// `RateLimit: "<group>";r=<remaining>;t=<s to reset>` and
/// `RateLimit-Policy: "fixed window";"<group>";q=<quota>;w=<window s>`.
/// Fields that are absent or malformed stay empty / -1.
struct RateLimitInfo {
  std::string group;       // endpoint group ("api", "resolvers"), "" when not named
  int64_t remaining = -1;  // r
  int64_t reset_s = -1;    // t
  int64_t quota = -1;      // q
  int64_t window_s = -1;   // w
};
/// Nullopt when neither header is present.
std::optional<RateLimitInfo> ParseRateLimit(const HttpHeaders& h);

/// The wait a 429/503 answer announces, as huggingface_hub http_backoff reads
/// it: RateLimit's t first, then Retry-After (seconds or HTTP-date, see
/// RetryAfterSecondsAt). Nullopt when the answer names no wait.
std::optional<double> AnnouncedWait(const HttpHeaders& h, int64_t now_unix_s);

/// IETF RateLimit header ("limit=500, remaining=0, reset=20" or the
/// "\"api\";r=0;t=20" structured form the Hub sends): seconds until reset, or
/// nullopt when absent/malformed.
std::optional<double> RateLimitResetSeconds(std::string_view v);

/// True for an etag in the Hub's format: 40 (git sha1) or 64 (sha256) lower-case hex.
bool IsHubEtag(std::string_view e);

/// If-Range value for a raw ETag header value (weak marker removed, quoted).
std::string IfRangeValue(std::string_view raw_etag);

}  // namespace hubload::hub_internal
