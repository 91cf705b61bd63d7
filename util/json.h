// util/json.h: the one checked boundary for JSON that comes from outside the
// process: Hub answers, cache files other tools wrote, checkpoint index files,
// request bodies `hubload serve` accepts.
//
// Rules: untrusted text is parsed only with ParseJson (no exceptions, nesting
// bounded), and read only through JsonIn, whose every accessor checks the
// type (and, for numbers, sign and range) before converting. A wrong type, a
// missing required field or a wrong shape is a Status — Code::kInvalidFormat,
// reason "BadJsonField" — whose message names the document (URL or file), the
// field path (`siblings[3].rfilename`) and what was expected:
//   "https://hub/api/models/a/b/tree/main: 'size' of [2] must be a non-negative
//    integer, got a string"
// nlohmann's throwing calls (`value()`, `get<>()`, `at()`, implicit
// conversions) are never used on untrusted values outside this file; every
// library compiles with JSON_USE_IMPLICIT_CONVERSIONS=0 (hubload_add_library)
// and tools/lint-json.sh (run by CI) rejects the explicit ones, json::parse
// and a dump() that can throw in hub/, cache/, loader/ and tools/.
//
// Thread safety: JsonIn is a read-only view (it borrows the parsed value,
// which must outlive it); views of one value may be used from several threads.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hubload/status.h"

namespace hubload::util {

/// Serializes `v` (nlohmann::json or nlohmann::ordered_json) with `indent`
/// spaces (-1: one line). Bytes that are not valid UTF-8 (a file or folder
/// name another tool wrote, a path from the command line) are written as
/// U+FFFD instead of throwing (nlohmann's default): the one way hubload turns
/// JSON into text (tools/lint-json.sh rejects a bare dump()). Never throws but
/// std::bad_alloc. Thread safety: pure.
template <typename BasicJson>
std::string DumpJson(const BasicJson& v, int indent = -1) {
  return v.dump(indent, ' ', false, BasicJson::error_handler_t::replace);
}

/// Nesting accepted by ParseJson (arrays and objects inside each other).
inline constexpr int kMaxJsonNesting = 64;

/// Parses untrusted JSON text. Errors: kInvalidFormat reason "BadJson" naming
/// `doc` and the byte offset, for invalid JSON, invalid UTF-8 in strings, or
/// nesting deeper than kMaxJsonNesting.
Result<nlohmann::json> ParseJson(std::string_view text, std::string_view doc);

/// A checked view of one untrusted JSON value.
class JsonIn {
 public:
  /// `doc` names the document in errors (a URL without credentials, or a path).
  JsonIn(const nlohmann::json& value, std::string doc);

  const nlohmann::json& raw() const { return *v_; }
  /// Field path of this value inside its document ("" for the top level).
  const std::string& path() const { return path_; }
  const std::string& doc() const { return *doc_; }

  bool IsNull() const { return v_->is_null(); }
  bool IsObject() const { return v_->is_object(); }
  bool IsArray() const { return v_->is_array(); }
  bool IsString() const { return v_->is_string(); }
  /// An object holding `key` (with any value, null included).
  bool Has(std::string_view key) const;

  // ---- this value ------------------------------------------------------
  Result<std::string> AsString() const;
  /// A JSON integer >= 0 that fits in uint64 (2.0 and "2" are refused).
  Result<uint64_t> AsUint() const;
  Result<int64_t> AsInt() const;
  Result<bool> AsBool() const;
  /// Any JSON number.
  Result<double> AsNumber() const;
  /// Elements of an array, with paths "<path>[i]". Error when not an array.
  Result<std::vector<JsonIn>> Elements() const;
  /// Members of an object in document order, with paths "<path>.<key>".
  Result<std::vector<std::pair<std::string, JsonIn>>> Members() const;
  /// OK when this value is an object (for documents that must be one).
  Status ExpectObject() const;
  Status ExpectArray() const;

  // ---- required members of an object -----------------------------------
  /// Error when this is not an object or `key` is absent; the value may be null.
  Result<JsonIn> Get(std::string_view key) const;
  Result<std::string> String(std::string_view key) const;
  Result<uint64_t> Uint(std::string_view key) const;
  Result<int64_t> Int(std::string_view key) const;
  Result<bool> Bool(std::string_view key) const;
  Result<JsonIn> Object(std::string_view key) const;
  Result<JsonIn> Array(std::string_view key) const;

  // ---- optional members: absent or null -> nullopt; another type -> error --
  Result<std::optional<JsonIn>> Find(std::string_view key) const;
  Result<std::optional<std::string>> OptString(std::string_view key) const;
  Result<std::optional<uint64_t>> OptUint(std::string_view key) const;
  Result<std::optional<int64_t>> OptInt(std::string_view key) const;
  Result<std::optional<bool>> OptBool(std::string_view key) const;
  Result<std::optional<JsonIn>> OptObject(std::string_view key) const;
  Result<std::optional<JsonIn>> OptArray(std::string_view key) const;
  /// Optional string with a default when absent or null.
  Result<std::string> StringOr(std::string_view key, std::string fallback) const;

  /// The error for this value: "<doc>: '<path>' must be <expected>, got <type>".
  Status Error(std::string_view expected) const;
  /// An error about this value with a free-form rule ("<doc>: '<path>' <rule>").
  Status Invalid(std::string_view rule) const;

  /// "a string", "an object", "a negative integer", ... (for messages).
  static std::string Describe(const nlohmann::json& v);

 private:
  JsonIn(const nlohmann::json* v, std::shared_ptr<const std::string> doc, std::string path)
      : v_(v), doc_(std::move(doc)), path_(std::move(path)) {}
  JsonIn Child(const nlohmann::json& v, std::string_view key) const;
  JsonIn Element(const nlohmann::json& v, size_t i) const;
  Status MissingError(std::string_view key) const;

  const nlohmann::json* v_;
  std::shared_ptr<const std::string> doc_;
  std::string path_;
};

}  // namespace hubload::util
