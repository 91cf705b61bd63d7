// Test-only, independent decoding of safetensors bytes: reads the u64 length
// and nlohmann-parses the JSON directly, sharing no code with the library.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hubload::testing {

/// Bits per element, typed in from the safetensors spec table
/// (loading-semantics.md E.2), in the Rust enum order.
inline const std::vector<std::pair<std::string, int>>& SpecDtypes() {
  static const std::vector<std::pair<std::string, int>> t = {
      {"BOOL", 8},  {"F4", 4},          {"F6_E2M3", 6},     {"F6_E3M2", 6}, {"U8", 8},   {"I8", 8},
      {"F8_E5M2", 8}, {"F8_E4M3", 8},   {"F8_E8M0", 8},     {"F8_E4M3FNUZ", 8}, {"F8_E5M2FNUZ", 8},
      {"I16", 16},  {"U16", 16},        {"F16", 16},        {"BF16", 16},   {"I32", 32}, {"U32", 32},
      {"F32", 32},  {"C64", 64},        {"F64", 64},        {"I64", 64},    {"U64", 64}};
  return t;
}
inline int SpecBits(const std::string& name) {
  for (const auto& [n, b] : SpecDtypes())
    if (n == name) return b;
  return -1;
}
inline int SpecRank(const std::string& name) {
  for (size_t i = 0; i < SpecDtypes().size(); ++i)
    if (SpecDtypes()[i].first == name) return static_cast<int>(i);
  return -1;
}

struct RawTensor {
  std::string dtype;
  std::vector<uint64_t> shape;
  uint64_t begin = 0, end = 0;
};

struct RawHeader {
  bool ok = false;
  uint64_t n = 0;          // header length
  std::string text;        // header JSON text (with padding)
  nlohmann::json json;     // parsed header
  std::map<std::string, RawTensor> tensors;
  std::map<std::string, std::string> metadata;
  bool has_metadata = false;
};

inline RawHeader DecodeRaw(const std::vector<uint8_t>& bytes) {
  RawHeader r;
  if (bytes.size() < 8) return r;
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  if (n > bytes.size() - 8) return r;
  r.n = n;
  r.text.assign(reinterpret_cast<const char*>(bytes.data()) + 8, n);
  r.json = nlohmann::json::parse(r.text, nullptr, false);
  if (!r.json.is_object()) return r;
  for (auto& [k, v] : r.json.items()) {
    if (k == "__metadata__") {
      r.has_metadata = true;
      for (auto& [mk, mv] : v.items()) r.metadata[mk] = mv.get<std::string>();
      continue;
    }
    RawTensor t;
    t.dtype = v.at("dtype").get<std::string>();
    t.shape = v.at("shape").get<std::vector<uint64_t>>();
    t.begin = v.at("data_offsets").at(0).get<uint64_t>();
    t.end = v.at("data_offsets").at(1).get<uint64_t>();
    r.tensors[k] = t;
  }
  r.ok = true;
  return r;
}

/// u64 LE length + text + data bytes.
inline std::vector<uint8_t> BuildFile(const std::string& header_text, const std::vector<uint8_t>& data = {}) {
  std::vector<uint8_t> out(8);
  uint64_t n = header_text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  out.insert(out.end(), header_text.begin(), header_text.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

}  // namespace hubload::testing
