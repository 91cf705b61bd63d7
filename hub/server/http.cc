// Request/response values of the server (hub/server/http.h).
#include "hub/server/http.h"
#include "util/text.h"

#include <algorithm>
#include <cctype>

namespace hubload::server::internal {
namespace {

}  // namespace

std::string Request::Header(std::string_view name) const {
  for (auto& [k, v] : headers)
    if (util::EqualsIgnoreCase(k, name)) return v;
  return {};
}

std::string Request::Query(const std::string& k, const std::string& dflt) const {
  auto it = query.find(k);
  return it == query.end() ? dflt : it->second;
}

bool Request::QueryBool(const std::string& k) const {
  std::string v = Query(k);
  return v == "true" || v == "1" || v == "True";
}

void Response::Set(const std::string& k, const std::string& v) {
  for (auto& h : headers)
    if (util::EqualsIgnoreCase(h.first, k)) {
      h.second = v;
      return;
    }
  headers.push_back({k, v});
}

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

Response JsonResponse(int status, const nlohmann::json& j) {
  Response r;
  r.status = status;
  r.body = DumpJson(j);
  r.Set("Content-Type", "application/json; charset=utf-8");
  return r;
}

Response ErrorResponse(int status, const std::string& error_code, const std::string& message) {
  Response r = JsonResponse(status, nlohmann::json{{"error", message}});
  if (!error_code.empty()) r.Set("X-Error-Code", error_code);
  // A header value never carries CR/LF/NUL (messages may quote request paths).
  std::string header = message.substr(0, 1000);
  for (auto& c : header)
    if (c == '\r' || c == '\n' || c == '\0' || static_cast<unsigned char>(c) >= 0x80) c = '?';
  r.Set("X-Error-Message", header);
  return r;
}

std::optional<uint64_t> ParseDecimal(std::string_view s, size_t max_digits) {
  if (s.empty() || s.size() > std::min<size_t>(max_digits, 19)) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

std::vector<std::string> SplitRaw(const std::string& path) {
  std::vector<std::string> segs;
  size_t start = (!path.empty() && path[0] == '/') ? 1 : 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    segs.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  if (!segs.empty() && segs.back().empty()) segs.pop_back();
  return segs;
}

bool IsValidHostHeader(std::string_view host) {
  if (host.empty() || host.size() > 255) return false;
  size_t i = 0;
  if (host[0] == '[') {
    size_t close = host.find(']');
    if (close == std::string_view::npos || close < 2) return false;
    for (size_t k = 1; k < close; ++k)
      if (!(std::isxdigit(static_cast<unsigned char>(host[k])) || host[k] == ':' || host[k] == '.')) return false;
    i = close + 1;
  } else {
    while (i < host.size() && host[i] != ':') {
      char c = host[i];
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_')) return false;
      ++i;
    }
    if (i == 0) return false;
  }
  if (i == host.size()) return true;
  if (host[i] != ':' || host.size() - i - 1 < 1 || host.size() - i - 1 > 5) return false;
  for (size_t k = i + 1; k < host.size(); ++k)
    if (!std::isdigit(static_cast<unsigned char>(host[k]))) return false;
  return true;
}

}  // namespace hubload::server::internal
