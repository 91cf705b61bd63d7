// The checked JSON reader (util/json.h). This is the only file of the library
// that calls nlohmann's converting accessors on untrusted values, each after a
// type check.
#include "util/json.h"
#include "hubload/reasons.h"

#include <limits>

namespace hubload::util {
namespace {

using nlohmann::json;

// SAX pass that bounds nesting before a DOM is built (the DOM parser and
// destructor recurse on deep input).
class DepthSax : public nlohmann::json_sax<json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return Push(); }
  bool key(string_t&) override { return true; }
  bool end_object() override { return Pop(); }
  bool start_array(std::size_t) override { return Push(); }
  bool end_array() override { return Pop(); }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    error_position = position;
    error = ex.what();
    return false;
  }
  int depth = 0;
  bool too_deep = false;
  size_t error_position = 0;
  std::string error;

 private:
  bool Push() {
    if (++depth > kMaxJsonNesting) {
      too_deep = true;
      return false;
    }
    return true;
  }
  bool Pop() {
    --depth;
    return true;
  }
};

Status ParseError(std::string_view doc, const std::string& what) {
  ErrorContext ctx;
  std::string d(doc);
  if (d.rfind("http://", 0) == 0 || d.rfind("https://", 0) == 0) ctx.url = d;
  else ctx.file = d;
  return Status(Code::kInvalidFormat, d + ": " + what, reason::kBadJson, std::move(ctx));
}

}  // namespace

Result<nlohmann::json> ParseJson(std::string_view text, std::string_view doc) {
  DepthSax sax;
  bool ok = json::sax_parse(text.begin(), text.end(), &sax, json::input_format_t::json, /*strict=*/true);
  if (sax.too_deep)
    return ParseError(doc, "JSON nested deeper than " + std::to_string(kMaxJsonNesting) + " levels");
  if (!ok) {
    std::string msg = "invalid JSON";
    if (!sax.error.empty()) {
      // nlohmann's text: "[json.exception.parse_error.101] parse error at line 1, column 5: ..."
      size_t p = sax.error.find("] ");
      msg += " (" + (p == std::string::npos ? sax.error : sax.error.substr(p + 2)) + ")";
    }
    return ParseError(doc, msg);
  }
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return ParseError(doc, "invalid JSON");
  return j;
}

JsonIn::JsonIn(const nlohmann::json& value, std::string doc)
    : v_(&value), doc_(std::make_shared<const std::string>(std::move(doc))) {}

std::string JsonIn::Describe(const nlohmann::json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
      return v.get_ref<const json::number_integer_t&>() < 0 ? "a negative integer" : "an integer";
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a non-integer number";
    case json::value_t::binary: return "binary data";
    case json::value_t::discarded: return "an invalid value";
  }
  return "an unknown value";
}

Status JsonIn::Invalid(std::string_view rule) const {
  ErrorContext ctx;
  const std::string& d = *doc_;
  if (d.rfind("http://", 0) == 0 || d.rfind("https://", 0) == 0) ctx.url = d;
  else ctx.file = d;
  std::string where = path_.empty() ? std::string("the document") : "'" + path_ + "'";
  return Status(Code::kInvalidFormat, d + ": " + where + " " + std::string(rule), reason::kBadJsonField,
                std::move(ctx));
}

Status JsonIn::Error(std::string_view expected) const {
  return Invalid("must be " + std::string(expected) + ", got " + Describe(*v_));
}

Status JsonIn::MissingError(std::string_view key) const {
  std::string p = path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  JsonIn missing(v_, doc_, p);
  return missing.Invalid("is required but absent");
}

JsonIn JsonIn::Child(const nlohmann::json& v, std::string_view key) const {
  return JsonIn(&v, doc_, path_.empty() ? std::string(key) : path_ + "." + std::string(key));
}

JsonIn JsonIn::Element(const nlohmann::json& v, size_t i) const {
  return JsonIn(&v, doc_, path_ + "[" + std::to_string(i) + "]");
}

bool JsonIn::Has(std::string_view key) const {
  return v_->is_object() && v_->find(key) != v_->end();
}

Status JsonIn::ExpectObject() const { return v_->is_object() ? Status::Ok() : Error("an object"); }
Status JsonIn::ExpectArray() const { return v_->is_array() ? Status::Ok() : Error("an array"); }

Result<std::string> JsonIn::AsString() const {
  if (!v_->is_string()) return Error("a string");
  return v_->get_ref<const json::string_t&>();
}

Result<uint64_t> JsonIn::AsUint() const {
  if (v_->is_number_unsigned()) return v_->get_ref<const json::number_unsigned_t&>();
  if (v_->is_number_integer()) {
    int64_t x = v_->get_ref<const json::number_integer_t&>();
    if (x >= 0) return static_cast<uint64_t>(x);
  }
  return Error("a non-negative integer");
}

Result<int64_t> JsonIn::AsInt() const {
  if (v_->is_number_integer() && !v_->is_number_unsigned()) return v_->get_ref<const json::number_integer_t&>();
  if (v_->is_number_unsigned()) {
    uint64_t x = v_->get_ref<const json::number_unsigned_t&>();
    if (x <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return static_cast<int64_t>(x);
    return Error("an integer within the signed 64-bit range");
  }
  return Error("an integer");
}

Result<bool> JsonIn::AsBool() const {
  if (!v_->is_boolean()) return Error("a boolean");
  return v_->get_ref<const json::boolean_t&>();
}

Result<double> JsonIn::AsNumber() const {
  if (v_->is_number_float()) return v_->get_ref<const json::number_float_t&>();
  if (v_->is_number_unsigned()) return static_cast<double>(v_->get_ref<const json::number_unsigned_t&>());
  if (v_->is_number_integer()) return static_cast<double>(v_->get_ref<const json::number_integer_t&>());
  return Error("a number");
}

Result<std::vector<JsonIn>> JsonIn::Elements() const {
  if (!v_->is_array()) return Error("an array");
  std::vector<JsonIn> out;
  out.reserve(v_->size());
  size_t i = 0;
  for (const auto& e : *v_) out.push_back(Element(e, i++));
  return out;
}

Result<std::vector<std::pair<std::string, JsonIn>>> JsonIn::Members() const {
  if (!v_->is_object()) return Error("an object");
  std::vector<std::pair<std::string, JsonIn>> out;
  out.reserve(v_->size());
  for (auto it = v_->begin(); it != v_->end(); ++it) out.emplace_back(it.key(), Child(it.value(), it.key()));
  return out;
}

Result<JsonIn> JsonIn::Get(std::string_view key) const {
  if (!v_->is_object()) return Error("an object");
  auto it = v_->find(key);
  if (it == v_->end()) return MissingError(key);
  return Child(*it, key);
}

Result<std::optional<JsonIn>> JsonIn::Find(std::string_view key) const {
  if (!v_->is_object()) return Error("an object");
  auto it = v_->find(key);
  if (it == v_->end() || it->is_null()) return std::optional<JsonIn>();
  return std::optional<JsonIn>(Child(*it, key));
}

#define HUBLOAD_JSON_REQUIRED(Name, Type, Conv)                \
  Result<Type> JsonIn::Name(std::string_view key) const {      \
    HUBLOAD_ASSIGN_OR_RETURN(JsonIn v, Get(key));              \
    return v.Conv();                                           \
  }
HUBLOAD_JSON_REQUIRED(String, std::string, AsString)
HUBLOAD_JSON_REQUIRED(Uint, uint64_t, AsUint)
HUBLOAD_JSON_REQUIRED(Int, int64_t, AsInt)
HUBLOAD_JSON_REQUIRED(Bool, bool, AsBool)
#undef HUBLOAD_JSON_REQUIRED

Result<JsonIn> JsonIn::Object(std::string_view key) const {
  HUBLOAD_ASSIGN_OR_RETURN(JsonIn v, Get(key));
  HUBLOAD_RETURN_IF_ERROR(v.ExpectObject());
  return v;
}

Result<JsonIn> JsonIn::Array(std::string_view key) const {
  HUBLOAD_ASSIGN_OR_RETURN(JsonIn v, Get(key));
  HUBLOAD_RETURN_IF_ERROR(v.ExpectArray());
  return v;
}

namespace {
template <typename T>
Result<std::optional<T>> Optional(const Result<std::optional<JsonIn>>& found, Result<T> (JsonIn::*conv)() const) {
  if (!found.ok()) return found.status();
  if (!found->has_value()) return std::optional<T>();
  Result<T> x = ((**found).*conv)();
  if (!x.ok()) return x.status();
  return std::optional<T>(std::move(*x));
}
}  // namespace

Result<std::optional<std::string>> JsonIn::OptString(std::string_view key) const {
  return Optional<std::string>(Find(key), &JsonIn::AsString);
}
Result<std::optional<uint64_t>> JsonIn::OptUint(std::string_view key) const {
  return Optional<uint64_t>(Find(key), &JsonIn::AsUint);
}
Result<std::optional<int64_t>> JsonIn::OptInt(std::string_view key) const {
  return Optional<int64_t>(Find(key), &JsonIn::AsInt);
}
Result<std::optional<bool>> JsonIn::OptBool(std::string_view key) const {
  return Optional<bool>(Find(key), &JsonIn::AsBool);
}

Result<std::optional<JsonIn>> JsonIn::OptObject(std::string_view key) const {
  HUBLOAD_ASSIGN_OR_RETURN(std::optional<JsonIn> v, Find(key));
  if (v) HUBLOAD_RETURN_IF_ERROR(v->ExpectObject());
  return v;
}

Result<std::optional<JsonIn>> JsonIn::OptArray(std::string_view key) const {
  HUBLOAD_ASSIGN_OR_RETURN(std::optional<JsonIn> v, Find(key));
  if (v) HUBLOAD_RETURN_IF_ERROR(v->ExpectArray());
  return v;
}

Result<std::string> JsonIn::StringOr(std::string_view key, std::string fallback) const {
  HUBLOAD_ASSIGN_OR_RETURN(std::optional<std::string> v, OptString(key));
  return v ? std::move(*v) : std::move(fallback);
}

}  // namespace hubload::util
