// safetensors writer: header serialization in the Rust writer's order and an
// atomic (temp file + fsync + rename + dir fsync) file write.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "hubload/safetensors.h"
#include "hubload/reasons.h"
#include "loader/safetensors/internal.h"

namespace hubload::safetensors {

using internal::ShapeString;

namespace {
Status Invalid(const std::string& tensor, const std::string& what, std::string_view reason = {}) {
  ErrorContext ctx;
  ctx.tensor = tensor;
  std::string msg = tensor.empty() ? what : "tensor " + util::Quoted(tensor) + ": " + what;
  if (!reason.empty()) msg += " (" + std::string(reason) + ")";
  return Status(Code::kInvalidArgument, std::move(msg), reason, std::move(ctx));
}
}  // namespace

Result<std::string> SerializeHeader(std::vector<TensorToWrite>* tensors,
                                    const std::map<std::string, std::string>& metadata) {
  if (!tensors) return Invalid({}, "SerializeHeader: tensors is null");
  std::set<std::string_view> names;
  for (const auto& t : *tensors) {
    if (t.name == "__metadata__") return Invalid(t.name, "\"__metadata__\" is reserved, not a tensor name");
    if (!internal::IsValidUtf8(t.name)) return Invalid(t.name, "name is not valid UTF-8");
    if (!names.insert(t.name).second) return Invalid(t.name, "name given twice", reason::kDuplicateTensor);
    int bits_per = DtypeBits(t.dtype);
    if (bits_per == 0) return Invalid(t.name, "unknown dtype value");
    uint64_t elems = 1, bits = 0;
    for (uint64_t d : t.shape) {
      if (__builtin_mul_overflow(elems, d, &elems)) {
        return Invalid(t.name, "element count of shape " + ShapeString(t.shape) + " overflows",
                       reason::kValidationOverflow);
      }
    }
    if (__builtin_mul_overflow(elems, static_cast<uint64_t>(bits_per), &bits)) {
      return Invalid(t.name, "bit size overflows", reason::kValidationOverflow);
    }
    if (bits % 8 != 0) {
      return Invalid(t.name,
                     "shape " + ShapeString(t.shape) + " of " + DtypeName(t.dtype) + " is not a whole number of bytes",
                     reason::kMisalignedSlice);
    }
    if (t.nbytes != bits / 8) {
      return Invalid(t.name,
                     "given " + std::to_string(t.nbytes) + " bytes but shape " + ShapeString(t.shape) + " of " +
                         DtypeName(t.dtype) + " needs " + std::to_string(bits / 8),
                     reason::kTensorInvalidInfo);
    }
    if (t.nbytes > 0 && t.data == nullptr) return Invalid(t.name, "data is null but nbytes > 0");
  }
  for (const auto& [k, v] : metadata) {
    if (!internal::IsValidUtf8(k) || !internal::IsValidUtf8(v)) {
      return Invalid({}, "metadata key " + util::Quoted(k) + " or its value is not valid UTF-8");
    }
  }
  // Rust `prepare`: dtype descending (enum order), then name ascending.
  std::sort(tensors->begin(), tensors->end(), [](const TensorToWrite& a, const TensorToWrite& b) {
    if (a.dtype != b.dtype) return static_cast<int>(a.dtype) > static_cast<int>(b.dtype);
    return a.name < b.name;
  });
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    j["__metadata__"] = std::move(m);
  }
  uint64_t off = 0;
  for (const auto& t : *tensors) {
    nlohmann::ordered_json e = nlohmann::ordered_json::object();
    e["dtype"] = DtypeName(t.dtype);
    e["shape"] = t.shape;
    uint64_t end;
    if (__builtin_add_overflow(off, t.nbytes, &end)) return Invalid(t.name, "total size overflows");
    e["data_offsets"] = {off, end};
    off = end;
    j[t.name] = std::move(e);
  }
  std::string text;
  try {
    text = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);  // names checked UTF-8 above
  } catch (const std::exception& e) {
    return Status(Code::kInternal, std::string("SerializeHeader: ") + e.what());
  }
  while (text.size() % 8 != 0) text += ' ';
  if (text.size() > kMaxHeaderSize) {
    return Invalid({}, "header would be " + std::to_string(text.size()) + " bytes, over the limit",
                   reason::kHeaderTooLarge);
  }
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  out += text;
  return out;
}

namespace internal {

Status WriteAtomically(const std::string& path, std::string_view prefix, const util::AtomicWriteBody& body) {
  return util::AtomicWriteFileWith(
      path,
      [&](int fd, const std::string& tmp) {
        HUBLOAD_RETURN_IF_ERROR(util::WriteAll(fd, prefix.data(), prefix.size(), tmp));
        return body ? body(fd, tmp) : Status::Ok();
      },
      {.mode = 0644, .durable = true, .create_parents = false});
}

}  // namespace internal

Status WriteFile(const std::string& path, std::vector<TensorToWrite> tensors,
                 const std::map<std::string, std::string>& metadata) {
  auto serialized = SerializeHeader(&tensors, metadata);
  if (!serialized.ok()) return serialized.status().WithPrefix(path);
  return internal::WriteAtomically(path, *serialized, [&](int fd, const std::string& tmp) {
    for (const auto& t : tensors) {
      if (t.nbytes == 0) continue;
      HUBLOAD_RETURN_IF_ERROR(util::WriteAll(fd, t.data, t.nbytes, tmp));
    }
    return Status::Ok();
  });
}

}  // namespace hubload::safetensors
