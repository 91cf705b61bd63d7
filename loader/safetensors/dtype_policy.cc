// The load dtype policy as a table over safetensors dtypes (torch-free).
#include "util/text.h"
#include "hubload/dtype_policy.h"

#include <string_view>

#include "hubload/reasons.h"

namespace hubload {
namespace {
using safetensors::Dtype;

bool KeepInFp32(const std::string& name, const std::vector<std::string>& keep) {
  if (keep.empty()) return false;
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    std::string_view comp(name.data() + start, (dot == std::string::npos ? name.size() : dot) - start);
    for (const auto& k : keep)
      if (comp == k) return true;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return false;
}

// Dtypes LibTorch 1.13 holds as they are.
bool Native(Dtype d) {
  switch (d) {
    case Dtype::BOOL:
    case Dtype::U8:
    case Dtype::I8:
    case Dtype::I16:
    case Dtype::I32:
    case Dtype::I64:
    case Dtype::F16:
    case Dtype::BF16:
    case Dtype::F32:
    case Dtype::F64:
    case Dtype::C64: return true;
    default: return false;
  }
}

bool DecodableFp8(Dtype d) { return d == Dtype::F8_E4M3 || d == Dtype::F8_E5M2 || d == Dtype::F8_E8M0; }

// Why `d` becomes `to` under `options` (d != to).
std::string Why(Dtype d, Dtype to, const std::string& name, const LoadOptions& options) {
  if (d == Dtype::U16) return "LibTorch 1.13 has no uint16";
  if (d == Dtype::U32) return "LibTorch 1.13 has no uint32";
  if (d == Dtype::U64) return "LibTorch 1.13 has no uint64; every value must be < 2^63";
  if (to == Dtype::F32 && options.dtype != TargetDtype::kF32 && KeepInFp32(name, options.keep_in_fp32))
    return "keep_in_fp32";
  if (options.dtype == TargetDtype::kAuto) return "LibTorch 1.13 has no float8; decoded exactly";
  return std::string("target dtype ") + safetensors::DtypeName(to);
}

}  // namespace

bool IsFloatingDtype(Dtype d) {
  switch (d) {
    case Dtype::F4:
    case Dtype::F6_E2M3:
    case Dtype::F6_E3M2:
    case Dtype::F8_E5M2:
    case Dtype::F8_E4M3:
    case Dtype::F8_E8M0:
    case Dtype::F8_E4M3FNUZ:
    case Dtype::F8_E5M2FNUZ:
    case Dtype::F16:
    case Dtype::BF16:
    case Dtype::F32:
    case Dtype::F64: return true;
    default: return false;
  }
}

Result<Dtype> LoadedSafetensorsDtype(Dtype d, const std::string& name, const LoadOptions& options) {
  if (d == Dtype::U16) return Dtype::I32;
  if (d == Dtype::U32 || d == Dtype::U64) return Dtype::I64;
  if (!Native(d) && !DecodableFp8(d)) {
    Status st(Code::kUnsupported,
              "tensor '" + name + "' has dtype " + safetensors::DtypeName(d) +
                  ", which LibTorch 1.13 cannot represent and hubload does not convert",
              reason::kUnsupportedDtype);
    st.mutable_context().tensor = name;
    return st;
  }
  if (!IsFloatingDtype(d)) return d;
  const bool converting = options.dtype != TargetDtype::kAuto || !Native(d);
  if (converting && KeepInFp32(name, options.keep_in_fp32)) return Dtype::F32;
  switch (options.dtype) {
    case TargetDtype::kF32: return Dtype::F32;
    case TargetDtype::kF16: return Dtype::F16;
    case TargetDtype::kBF16: return Dtype::BF16;
    case TargetDtype::kAuto: break;
  }
  return Native(d) ? d : Dtype::BF16;  // float8 under auto: exact bf16
}

void AddDtypeConversions(const safetensors::Header& header, const LoadOptions& options,
                         std::vector<DtypeConversion>* out) {
  if (!out) return;
  for (const auto& t : header.tensors) {
    auto to = LoadedSafetensorsDtype(t.dtype, t.name, options);
    if (!to.ok() || *to == t.dtype) continue;
    std::string why = Why(t.dtype, *to, t.name, options);
    DtypeConversion* entry = nullptr;
    for (auto& c : *out)
      if (c.from == t.dtype && c.to == *to && c.why == why) entry = &c;
    if (!entry) {
      out->push_back({t.dtype, *to, why, {}});
      entry = &out->back();
    }
    entry->tensors.push_back(t.name);
  }
}

std::string DescribeDtypeConversion(const DtypeConversion& c, size_t max_names) {
  const size_t n = c.tensors.size();
  std::string s = std::to_string(n) + (n == 1 ? " tensor " : " tensors ") + safetensors::DtypeName(c.from) + " -> " +
                  safetensors::DtypeName(c.to) + " (" + c.why + ")";
  if (n == 0 || max_names == 0) return s;
  return s + ": " + util::JoinCut(c.tensors, max_names);
}

}  // namespace hubload
