// Dtype table and error helpers for the safetensors core.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <unordered_set>
#include <vector>

#include "hubload/safetensors.h"
#include "loader/safetensors/internal.h"

namespace hubload::safetensors {

namespace {
struct DtypeRow {
  Dtype dtype;
  const char* name;
  int bits;
};
// loading-semantics.md E.2 (Rust `Dtype` enum order and `bitsize()`).
constexpr DtypeRow kDtypes[kNumDtypes] = {
    {Dtype::BOOL, "BOOL", 8},       {Dtype::F4, "F4", 4},
    {Dtype::F6_E2M3, "F6_E2M3", 6}, {Dtype::F6_E3M2, "F6_E3M2", 6},
    {Dtype::U8, "U8", 8},           {Dtype::I8, "I8", 8},
    {Dtype::F8_E5M2, "F8_E5M2", 8}, {Dtype::F8_E4M3, "F8_E4M3", 8},
    {Dtype::F8_E8M0, "F8_E8M0", 8}, {Dtype::F8_E4M3FNUZ, "F8_E4M3FNUZ", 8},
    {Dtype::F8_E5M2FNUZ, "F8_E5M2FNUZ", 8}, {Dtype::I16, "I16", 16},
    {Dtype::U16, "U16", 16},        {Dtype::F16, "F16", 16},
    {Dtype::BF16, "BF16", 16},      {Dtype::I32, "I32", 32},
    {Dtype::U32, "U32", 32},        {Dtype::F32, "F32", 32},
    {Dtype::C64, "C64", 64},        {Dtype::F64, "F64", 64},
    {Dtype::I64, "I64", 64},        {Dtype::U64, "U64", 64},
};
}  // namespace

const char* DtypeName(Dtype d) {
  int i = static_cast<int>(d);
  return (i >= 0 && i < kNumDtypes) ? kDtypes[i].name : "?";
}

std::optional<Dtype> DtypeFromName(std::string_view name) {
  for (const auto& row : kDtypes) {
    if (name == row.name) return row.dtype;
  }
  return std::nullopt;
}

int DtypeBits(Dtype d) {
  int i = static_cast<int>(d);
  return (i >= 0 && i < kNumDtypes) ? kDtypes[i].bits : 0;
}

uint64_t TensorInfo::num_elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) return UINT64_MAX;
  }
  return n;
}

uint64_t TensorInfo::nbytes() const { return end >= begin ? end - begin : 0; }

namespace internal {

bool JsonDepthWithin(std::string_view text, int max_depth, size_t* top_level_keys) {
  int depth = 0;
  bool in_string = false;
  char last = 0;  // last significant character outside strings
  size_t keys = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // skip the escaped character
      } else if (c == '"') {
        in_string = false;
        last = '"';
      }
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    if (c == '"') {
      in_string = true;
      if (depth == 1 && (last == '{' || last == ',')) ++keys;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
    last = c;
  }
  if (top_level_keys) *top_level_keys = keys;
  return true;
}

namespace {
// SAX handler that only watches member names (nlohmann::json_sax interface).
class DupKeySax : public nlohmann::json_sax<nlohmann::json> {
 public:
  DupKeySax(std::string_view child, std::string* top, std::string* in_child)
      : child_(child), top_(top), in_child_(in_child) {}
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    stack_.push_back(true);
    if (stack_.size() == 2 && in_target_) target_object_ = true;
    return true;
  }
  bool end_object() override { return Pop(); }
  bool start_array(std::size_t) override {
    stack_.push_back(false);
    return true;
  }
  bool end_array() override { return Pop(); }
  bool key(string_t& k) override {
    if (stack_.size() == 1) {
      in_target_ = !child_.empty() && k == child_;
      if (!top_seen_.insert(k).second && top_->empty()) *top_ = k;
    } else if (stack_.size() == 2 && target_object_) {
      if (!child_seen_.insert(k).second && in_child_->empty()) *in_child_ = k;
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  bool Pop() {
    if (!stack_.empty()) stack_.pop_back();
    if (stack_.size() == 1) target_object_ = false;
    return true;
  }
  std::string_view child_;
  std::string* top_;
  std::string* in_child_;
  std::vector<bool> stack_;
  bool in_target_ = false, target_object_ = false;
  std::unordered_set<std::string> top_seen_, child_seen_;
};
}  // namespace

bool FindDuplicateKeys(std::string_view text, std::string_view child, std::string* top, std::string* in_child) {
  top->clear();
  in_child->clear();
  DupKeySax sax(child, top, in_child);
  return nlohmann::json::sax_parse(text.begin(), text.end(), &sax, nlohmann::json::input_format_t::json,
                                   /*strict=*/true);
}

std::string ShapeString(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  s += ']';
  return s;
}

Status FormatError(std::string_view reason, std::string_view label, std::string_view tensor,
                   const std::string& what) {
  std::string msg(label);
  msg += ": ";
  if (!tensor.empty()) {
    msg += "tensor " + util::Quoted(tensor) + ": ";
  }
  msg += what;
  msg += " (";
  msg += reason;
  msg += ")";
  ErrorContext ctx;
  ctx.file = std::string(label);
  ctx.tensor = std::string(tensor);
  return Status(Code::kInvalidFormat, std::move(msg), reason, std::move(ctx));
}

std::string RegexEscape(const std::string& s) {
  static const std::string kSpecial = R"(\^$.|?*+()[]{})";
  std::string out;
  for (char c : s) {
    if (kSpecial.find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

}  // namespace internal
}  // namespace hubload::safetensors
