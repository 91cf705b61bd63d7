// Parsers of server header values (hub/http_parse.h).
#include "hub/http_parse.h"

#include <curl/curl.h>

#include <cctype>
#include <cstdlib>
#include <limits>

#include "util/hex.h"

namespace hubload::hub_internal {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<int64_t> ParseDecimal(std::string_view v) {
  if (v.empty() || v.size() > 19) return std::nullopt;
  int64_t x = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    int d = c - '0';
    if (x > (std::numeric_limits<int64_t>::max() - d) / 10) return std::nullopt;
    x = x * 10 + d;
  }
  return x;
}

bool ParseContentRange(std::string_view v, int64_t* first, int64_t* total) {
  if (v.substr(0, 6) != "bytes ") return false;
  std::string_view r = v.substr(6);
  size_t slash = r.find('/');
  if (slash == std::string_view::npos) return false;
  std::string_view range = r.substr(0, slash), tot = r.substr(slash + 1);
  if (tot == "*") {
    *total = -1;
  } else {
    auto t = ParseDecimal(tot);
    if (!t) return false;
    *total = *t;
  }
  if (range == "*") {
    *first = -1;
    return true;
  }
  size_t dash = range.find('-');
  if (dash == std::string_view::npos) return false;
  auto a = ParseDecimal(range.substr(0, dash));
  auto b = ParseDecimal(range.substr(dash + 1));
  if (!a || !b || *b < *a || (*total >= 0 && *b >= *total)) return false;
  *first = *a;
  return true;
}

std::optional<std::string> NextLinkValue(std::string_view v) {
  size_t pos = 0;
  while (pos < v.size()) {
    size_t lt = v.find('<', pos);
    if (lt == std::string_view::npos) break;
    size_t gt = v.find('>', lt);
    if (gt == std::string_view::npos) break;
    size_t end = v.find(',', gt);
    std::string_view params = v.substr(gt + 1, end == std::string_view::npos ? std::string_view::npos : end - gt - 1);
    if (params.find("rel=\"next\"") != std::string_view::npos || params.find("rel=next") != std::string_view::npos)
      return std::string(v.substr(lt + 1, gt - lt - 1));
    if (end == std::string_view::npos) break;
    pos = end + 1;
  }
  return std::nullopt;
}

std::optional<std::string> NextLink(const HttpHeaders& h) {
  auto v = h.Get("Link");
  if (!v) return std::nullopt;
  return NextLinkValue(*v);
}

std::optional<double> RetryAfterSeconds(std::string_view v) {
  v = Trim(v);
  auto s = ParseDecimal(v);
  if (!s) return std::nullopt;  // HTTP-date: the caller's own backoff
  return static_cast<double>(*s);
}

std::optional<double> RetryAfterSecondsAt(std::string_view v, int64_t now_unix_s) {
  if (auto s = RetryAfterSeconds(v)) return s;
  v = Trim(v);
  if (v.empty() || v.size() > 64) return std::nullopt;
  const std::string date(v);  // curl_getdate needs a NUL-terminated string
  const time_t when = curl_getdate(date.c_str(), nullptr);
  if (when < 0) return std::nullopt;
  const int64_t d = static_cast<int64_t>(when) - now_unix_s;
  return d <= 0 ? 0.0 : static_cast<double>(d) + 1.0;
}

namespace {

// Value of `key=` (digits) in a structured-field parameter list such as
// "\"api\";r=0;t=55": the key must start the list or follow ';' or ' '.
int64_t Param(std::string_view v, std::string_view key) {
  for (size_t p = v.find(key); p != std::string_view::npos; p = v.find(key, p + 1)) {
    if (p > 0 && v[p - 1] != ';' && v[p - 1] != ' ' && v[p - 1] != '\t') continue;
    size_t b = p + key.size();
    while (b < v.size() && v[b] == ' ') ++b;
    if (b >= v.size() || v[b] != '=') continue;
    ++b;
    while (b < v.size() && v[b] == ' ') ++b;
    size_t e = b;
    while (e < v.size() && v[e] >= '0' && v[e] <= '9') ++e;
    if (auto n = ParseDecimal(v.substr(b, e - b))) return *n;
  }
  return -1;
}

// The last quoted string before the first parameter: the group name
// ("\"api\";r=0" and "\"fixed window\";\"api\";q=500" -> api).
std::string GroupOf(std::string_view v) {
  std::string_view head = v.substr(0, v.find('='));
  size_t q2 = head.rfind('"');
  if (q2 == std::string_view::npos || q2 == 0) return {};
  size_t q1 = head.rfind('"', q2 - 1);
  if (q1 == std::string_view::npos) return {};
  std::string g(head.substr(q1 + 1, q2 - q1 - 1));
  for (char c : g)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) return {};
  return g;
}

}  // namespace

std::optional<RateLimitInfo> ParseRateLimit(const HttpHeaders& h) {
  auto rl = h.Get("RateLimit");
  auto policy = h.Get("RateLimit-Policy");
  if (!rl && !policy) return std::nullopt;
  RateLimitInfo i;
  if (rl) {
    std::string_view v(*rl);
    i.group = GroupOf(v);
    i.remaining = Param(v, "r");
    i.reset_s = Param(v, "t");
    if (i.reset_s < 0)
      // "limit=, remaining=, reset="; a reset past any int64 (or NaN) is ignored (found by http_headers_fuzz).
      if (auto t = RateLimitResetSeconds(v); t && *t >= 0 && *t < 9.0e18) i.reset_s = static_cast<int64_t>(*t);
  }
  if (policy) {
    std::string_view v(*policy);
    i.quota = Param(v, "q");
    i.window_s = Param(v, "w");
    if (i.group.empty()) i.group = GroupOf(v);
  }
  return i;
}

std::optional<double> AnnouncedWait(const HttpHeaders& h, int64_t now_unix_s) {
  if (auto rl = ParseRateLimit(h); rl && rl->reset_s >= 0) return static_cast<double>(rl->reset_s);
  if (auto ra = h.Get("Retry-After")) return RetryAfterSecondsAt(*ra, now_unix_s);
  return std::nullopt;
}

std::optional<double> RateLimitResetSeconds(std::string_view v) {
  // Either "limit=N, remaining=N, reset=N" or a structured list whose items
  // carry ";t=N" (seconds to reset).
  for (std::string_view key : {std::string_view("reset="), std::string_view(";t=")}) {
    size_t p = 0;
    while ((p = v.find(key, p)) != std::string_view::npos) {
      if (key == "reset=" && p > 0 && std::isalnum(static_cast<unsigned char>(v[p - 1]))) {
        p += key.size();
        continue;
      }
      size_t b = p + key.size(), e = b;
      while (e < v.size() && v[e] >= '0' && v[e] <= '9') ++e;
      if (auto s = ParseDecimal(v.substr(b, e - b))) return static_cast<double>(*s);
      p = b;
    }
  }
  return std::nullopt;
}

bool IsHubEtag(std::string_view e) { return (e.size() == 40 || e.size() == 64) && util::IsLowerHex(e); }

std::string IfRangeValue(std::string_view raw_etag) {
  std::string v(raw_etag);
  if (v.rfind("W/", 0) == 0) v = v.substr(2);
  if (!v.empty() && v.front() != '"') v = "\"" + v + "\"";
  return v;
}

}  // namespace hubload::hub_internal
