// The server's request and response values (no Beast here: handlers, the
// router and the fuzz targets see plain strings; connection.cc converts).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "hubload/server_faults.h"
#include "util/json.h"

namespace hubload::server::internal {

namespace fs = std::filesystem;

struct Request {
  std::string method;
  std::string target;    // raw request target
  std::string raw_path;  // target without the query, still percent-encoded
  std::string path;      // decoded raw_path (logs, stats, fault matching)
  /// raw_path below the path prefix (routing); raw_path when no prefix is set.
  std::string route_path;
  std::multimap<std::string, std::string> query;
  bool query_ok = true;  // false: a malformed escape in the query string
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-case
  std::string body;
  std::string token;  // bearer token, "" = anonymous
  bool cdn = false;
  /// Validated Host header ("host[:port]"), "" when missing or invalid.
  std::string host;
  /// The rate-limit count of this request (its headers go on the answer).
  std::optional<Faults::RateDecision> rate;

  /// Value of header `name` (case-insensitive), "" when absent.
  std::string Header(std::string_view name) const;
  std::string Query(const std::string& k, const std::string& dflt = "") const;
  /// "true", "1" or "True" (the spellings huggingface_hub and js send).
  bool QueryBool(const std::string& k) const;
};

struct Response {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // File body (when has_file): bytes [offset, offset+length) of `file`.
  bool has_file = false;
  fs::path file;
  uint64_t offset = 0, length = 0;
  bool close = false;
  /// Signed-URL byte budget (Faults::SetSignedUrlByteBudget): the body is cut
  /// after `budget_bytes` bytes and the unused part is given back to `budget_sig`.
  std::string budget_sig;
  uint64_t budget_bytes = 0;
  /// The answer comes from a snapshot the store cannot prove complete.
  bool unproven = false;

  void Set(const std::string& k, const std::string& v);
  uint64_t BodySize() const { return has_file ? length : body.size(); }
};

/// `"etag"` (the Hub's strong etag spelling).
std::string Quote(const std::string& s);

/// JSON text that never throws (invalid UTF-8 replaced): util/json.h.
using util::DumpJson;
Response JsonResponse(int status, const nlohmann::json& j);
/// {"error": message} with X-Error-Message (and X-Error-Code when given).
Response ErrorResponse(int status, const std::string& error_code, const std::string& message);

/// A decimal of 1..max_digits digits (max 19: always fits uint64), else nullopt
/// (signs, spaces, hex and empty strings are refused).
std::optional<uint64_t> ParseDecimal(std::string_view s, size_t max_digits = 19);

/// Raw '/'-separated segments of a path ("/a/b/" -> {"a", "b"}).
std::vector<std::string> SplitRaw(const std::string& path);

/// True when `host` is a plain host[:port] as a Host header may carry it:
/// 1..255 bytes of [A-Za-z0-9.-_], an optional [IPv6] literal, an optional
/// :port of 1..5 digits; no path, space, CR, LF.
bool IsValidHostHeader(std::string_view host);

}  // namespace hubload::server::internal
