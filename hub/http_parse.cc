// Parsers of server header values (hub/http_parse.h).
#include "hub/http_parse.h"

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
