// libFuzzer target: the HTTP header values the Hub client parses from
// servers (hub/http_parse.h, hub/url.cc): Content-Range, ETag / X-Linked-Etag
// (normalisation, If-Range, Hub etag check), X-Linked-Size / Content-Length,
// X-Repo-Commit, Link pagination (and the origin check of its target),
// Location (relative redirect resolution), Retry-After (seconds and HTTP-date),
// RateLimit / RateLimit-Policy, the 429 gate key of a URL.
// The input is split at the first NUL into (header value, base URL); every
// parser must accept any bytes without crashing, hanging or reading out of
// bounds (ASan/UBSan on).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "hub/url.h"
#include "hub/http_parse.h"
#include "hub/rate_gate.h"
#include "hubload/transport.h"
#include "util/hex.h"

using namespace hubload;
using namespace hubload::hub_internal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t nul = in.find('\0');
  std::string_view value = in.substr(0, nul);
  std::string base = nul == std::string_view::npos ? "http://127.0.0.1:8080/api/models/a/b/tree/main"
                                                   : std::string(in.substr(nul + 1));
  int64_t first = 0, total = 0;
  if (ParseContentRange(value, &first, &total)) {
    if (total >= 0 && first >= total) __builtin_trap();  // a fitting range never starts past the end
  }
  if (auto d = ParseDecimal(value); d && *d < 0) __builtin_trap();
  (void)IsHubEtag(value);
  std::string ifr = IfRangeValue(value);
  if (!ifr.empty() && ifr.front() != '"') __builtin_trap();  // always a quoted validator
  (void)(value.size() == 40 && util::IsLowerHex(value));  // X-Repo-Commit
  (void)RetryAfterSeconds(value);
  (void)RateLimitResetSeconds(value);
  if (auto w = RetryAfterSecondsAt(value, 1700000000); w && *w < 0) __builtin_trap();  // never a negative wait
  {
    HttpHeaders rl;
    rl.Add("RateLimit", std::string(value));
    rl.Add("RateLimit-Policy", std::string(value));
    (void)ParseRateLimit(rl);
    (void)AnnouncedWait(rl, 1700000000);
    (void)hubload::hub_internal::RateKey(base);
  }
  if (auto next = NextLinkValue(value)) {
    (void)UrlOrigin(*next);
    (void)RedactUrl(*next);
  }
  HttpHeaders h;
  h.Add("Link", std::string(value));
  (void)NextLink(h);
  std::string resolved = ResolveUrl(base, value);  // Location
  (void)UrlOrigin(resolved);
  (void)RedactUrl(resolved);
  return 0;
}
