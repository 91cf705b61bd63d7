// URL helpers, header list, huggingface_hub percent-encoding and fnmatch filters.
#include <algorithm>
#include <cctype>
#include <string>

#include "hub/url.h"
#include "hubload/hub.h"
#include "hubload/transport.h"
#include "util/text.h"

namespace hubload {
namespace {

// Python urllib.parse.quote: always-safe = letters, digits, "_.-~", plus `safe`.
std::string Quote(std::string_view s, std::string_view safe) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '_' || c == '.' || c == '-' || c == '~' || safe.find(static_cast<char>(c)) != std::string_view::npos) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

struct UrlParts {
  std::string scheme, userinfo, host, port, path, query;
  bool ok = false;
};

UrlParts ParseUrl(std::string_view url) {
  UrlParts p;
  size_t se = url.find("://");
  if (se == std::string_view::npos) return p;
  p.scheme = std::string(url.substr(0, se));
  std::transform(p.scheme.begin(), p.scheme.end(), p.scheme.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string_view rest = url.substr(se + 3);
  size_t auth_end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, auth_end);
  std::string_view tail = auth_end == std::string_view::npos ? std::string_view() : rest.substr(auth_end);
  size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    p.userinfo = std::string(authority.substr(0, at));
    authority = authority.substr(at + 1);
  }
  size_t colon = authority.rfind(':');
  size_t bracket = authority.rfind(']');
  if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket)) {
    p.host = std::string(authority.substr(0, colon));
    p.port = std::string(authority.substr(colon + 1));
  } else {
    p.host = std::string(authority);
  }
  std::transform(p.host.begin(), p.host.end(), p.host.begin(), [](unsigned char c) { return std::tolower(c); });
  size_t hash = tail.find('#');
  if (hash != std::string_view::npos) tail = tail.substr(0, hash);
  size_t q = tail.find('?');
  p.path = std::string(tail.substr(0, q));
  if (q != std::string_view::npos) p.query = std::string(tail.substr(q + 1));
  if (p.port.empty()) p.port = p.scheme == "https" ? "443" : p.scheme == "http" ? "80" : "";
  p.ok = !p.host.empty();
  return p;
}

}  // namespace

void HttpHeaders::Add(std::string name, std::string value) { items_.emplace_back(std::move(name), std::move(value)); }

void HttpHeaders::Set(const std::string& name, std::string value) {
  Remove(name);
  Add(name, std::move(value));
}

void HttpHeaders::Remove(const std::string& name) {
  items_.erase(std::remove_if(items_.begin(), items_.end(),
                              [&](const auto& kv) { return util::EqualsIgnoreCase(kv.first, name); }),
               items_.end());
}

std::optional<std::string> HttpHeaders::Get(std::string_view name) const {
  for (const auto& [k, v] : items_)
    if (util::EqualsIgnoreCase(k, name)) return v;
  return std::nullopt;
}

std::string RedactUrl(std::string_view url) {
  UrlParts p = ParseUrl(url);
  if (!p.ok) {
    size_t q = url.find('?');
    return std::string(url.substr(0, q));
  }
  std::string out = p.scheme + "://" + p.host;
  std::string_view raw = url;
  // Keep an explicit port as written.
  size_t se = raw.find("://");
  std::string_view rest = raw.substr(se + 3);
  std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  size_t at = authority.rfind('@');
  if (at != std::string_view::npos) authority = authority.substr(at + 1);
  size_t colon = authority.rfind(':');
  size_t bracket = authority.rfind(']');
  if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket))
    out += std::string(authority.substr(colon));
  out += p.path;
  return out;
}

std::string UrlOrigin(std::string_view url) {
  UrlParts p = ParseUrl(url);
  if (!p.ok) return {};
  return p.scheme + "://" + p.host + ":" + p.port;
}

std::string ResolveUrl(std::string_view base, std::string_view loc) {
  if (loc.find("://") != std::string_view::npos) {
    size_t first = loc.find_first_of("/?#");
    if (first == std::string_view::npos || loc.find("://") < first) return std::string(loc);
  }
  UrlParts b = ParseUrl(base);
  if (!b.ok) return std::string(loc);
  size_t se = base.find("://");
  std::string_view rest = base.substr(se + 3);
  std::string authority(rest.substr(0, rest.find_first_of("/?#")));
  if (loc.substr(0, 2) == "//") return b.scheme + ":" + std::string(loc);
  std::string prefix = b.scheme + "://" + authority;
  if (!loc.empty() && loc[0] == '/') return prefix + std::string(loc);
  if (!loc.empty() && loc[0] == '?') return prefix + b.path + std::string(loc);
  std::string dir = b.path.substr(0, b.path.rfind('/') + 1);
  if (dir.empty()) dir = "/";
  // Merge and remove dot segments (RFC 3986 §5.2.4).
  std::string merged = dir + std::string(loc);
  std::string query;
  size_t q = merged.find('?');
  if (q != std::string::npos) {
    query = merged.substr(q);
    merged = merged.substr(0, q);
  }
  std::vector<std::string> segs;
  size_t start = 1;
  while (start <= merged.size()) {
    size_t end = merged.find('/', start);
    if (end == std::string::npos) end = merged.size();
    std::string seg = merged.substr(start, end - start);
    if (seg == "..") {
      if (!segs.empty()) segs.pop_back();
      if (end == merged.size()) segs.emplace_back();
    } else if (seg == ".") {
      if (end == merged.size()) segs.emplace_back();
    } else {
      segs.push_back(seg);
    }
    start = end + 1;
  }
  std::string path;
  for (auto& s : segs) path += "/" + s;
  if (path.empty()) path = "/";
  return prefix + path + query;
}

std::string EncodeRevision(std::string_view revision) { return Quote(revision, ""); }
std::string EncodePath(std::string_view path) { return Quote(path, "/"); }

bool FnMatch(std::string_view pat, std::string_view name) {
  // Iterative glob with backtracking on the last '*'.
  size_t p = 0, n = 0, star_p = std::string_view::npos, star_n = 0;
  auto match_class = [&](size_t& pi, char c) -> int {  // returns 1 match, 0 no match, -1 not a class
    size_t i = pi + 1;
    bool neg = false;
    if (i < pat.size() && pat[i] == '!') {
      neg = true;
      ++i;
    }
    size_t first = i;
    bool found = false;
    while (i < pat.size() && (pat[i] != ']' || i == first)) {
      if (i + 2 < pat.size() && pat[i + 1] == '-' && pat[i + 2] != ']') {
        if (pat[i] <= c && c <= pat[i + 2]) found = true;
        i += 3;
      } else {
        if (pat[i] == c) found = true;
        ++i;
      }
    }
    if (i >= pat.size()) return -1;  // no closing ']': literal '['
    pi = i + 1;
    return found != neg ? 1 : 0;
  };
  while (n < name.size()) {
    if (p < pat.size()) {
      char pc = pat[p];
      if (pc == '*') {
        star_p = p++;
        star_n = n;
        continue;
      }
      if (pc == '?') {
        ++p;
        ++n;
        continue;
      }
      if (pc == '[') {
        size_t pi = p;
        int r = match_class(pi, name[n]);
        if (r == 1) {
          p = pi;
          ++n;
          continue;
        }
        if (r == -1 && name[n] == '[') {
          ++p;
          ++n;
          continue;
        }
      } else if (pc == name[n]) {
        ++p;
        ++n;
        continue;
      }
    }
    if (star_p == std::string_view::npos) return false;
    p = star_p + 1;
    n = ++star_n;
  }
  while (p < pat.size() && pat[p] == '*') ++p;
  return p == pat.size();
}

bool MatchesPatterns(const std::string& path_in, const std::vector<std::string>& allow,
                     const std::vector<std::string>& ignore) {
  auto norm = [](std::string s) {
    std::replace(s.begin(), s.end(), '\\', '/');
    if (!s.empty() && s.back() == '/') s += '*';
    return s;
  };
  std::string path = path_in;
  std::replace(path.begin(), path.end(), '\\', '/');
  if (!allow.empty()) {
    bool any = false;
    for (auto& a : allow)
      if (FnMatch(norm(a), path)) {
        any = true;
        break;
      }
    if (!any) return false;
  }
  for (auto& i : ignore)
    if (FnMatch(norm(i), path)) return false;
  return true;
}

}  // namespace hubload
