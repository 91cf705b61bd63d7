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
#include "loader/safetensors/internal.h"

namespace hubload::safetensors {

using internal::Quote;
using internal::ShapeString;

namespace {
Status Invalid(const std::string& tensor, const std::string& what, std::string reason = {}) {
  ErrorContext ctx;
  ctx.tensor = tensor;
  std::string msg = tensor.empty() ? what : "tensor " + Quote(tensor) + ": " + what;
  if (!reason.empty()) msg += " (" + reason + ")";
  return Status(Code::kInvalidArgument, std::move(msg), std::move(reason), std::move(ctx));
}
}  // namespace

Result<std::string> SerializeHeader(std::vector<TensorToWrite>* tensors,
                                    const std::map<std::string, std::string>& metadata) {
  if (!tensors) return Invalid({}, "SerializeHeader: tensors is null");
  std::set<std::string_view> names;
  for (const auto& t : *tensors) {
    if (t.name == "__metadata__") return Invalid(t.name, "\"__metadata__\" is reserved, not a tensor name");
    if (!internal::IsValidUtf8(t.name)) return Invalid(t.name, "name is not valid UTF-8");
    if (!names.insert(t.name).second) return Invalid(t.name, "name given twice", "DuplicateTensor");
    int bits_per = DtypeBits(t.dtype);
    if (bits_per == 0) return Invalid(t.name, "unknown dtype value");
    uint64_t elems = 1, bits = 0;
    for (uint64_t d : t.shape) {
      if (__builtin_mul_overflow(elems, d, &elems)) {
        return Invalid(t.name, "element count of shape " + ShapeString(t.shape) + " overflows", "ValidationOverflow");
      }
    }
    if (__builtin_mul_overflow(elems, static_cast<uint64_t>(bits_per), &bits)) {
      return Invalid(t.name, "bit size overflows", "ValidationOverflow");
    }
    if (bits % 8 != 0) {
      return Invalid(t.name,
                     "shape " + ShapeString(t.shape) + " of " + DtypeName(t.dtype) + " is not a whole number of bytes",
                     "MisalignedSlice");
    }
    if (t.nbytes != bits / 8) {
      return Invalid(t.name,
                     "given " + std::to_string(t.nbytes) + " bytes but shape " + ShapeString(t.shape) + " of " +
                         DtypeName(t.dtype) + " needs " + std::to_string(bits / 8),
                     "TensorInvalidInfo");
    }
    if (t.nbytes > 0 && t.data == nullptr) return Invalid(t.name, "data is null but nbytes > 0");
  }
  for (const auto& [k, v] : metadata) {
    if (!internal::IsValidUtf8(k) || !internal::IsValidUtf8(v)) {
      return Invalid({}, "metadata key " + Quote(k) + " or its value is not valid UTF-8");
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
                   "HeaderTooLarge");
  }
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  out += text;
  return out;
}

namespace internal {

Status WriteAll(int fd, const void* data, uint64_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, 1u << 30));
    ssize_t w = ::write(fd, p, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "write", path);
    }
    p += w;
    n -= static_cast<uint64_t>(w);
  }
  return Status::Ok();
}

namespace {
std::string DirOf(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}
}  // namespace

Status WriteAtomically(const std::string& path, std::string_view prefix,
                       const std::function<Status(int fd, const std::string& tmp)>& body) {
  std::string tmpl = path + ".tmp.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  int fd = ::mkostemp(buf.data(), O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "create temp file", path);
  std::string tmp(buf.data());
  auto fail = [&](Status st) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return st;
  };
  if (::fchmod(fd, 0644) != 0) return fail(ErrnoStatus(errno, "fchmod", tmp));
  Status st = WriteAll(fd, prefix.data(), prefix.size(), tmp);
  if (!st.ok()) return fail(st);
  if (body) {
    st = body(fd, tmp);
    if (!st.ok()) return fail(st);
  }
  if (::fsync(fd) != 0) return fail(ErrnoStatus(errno, "fsync", tmp));
  if (::close(fd) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return ErrnoStatus(e, "close", tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return ErrnoStatus(e, "rename to " + path, tmp);
  }
  int dfd = ::open(DirOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // best effort: some file systems refuse fsync on directories
    ::close(dfd);
  }
  return Status::Ok();
}

}  // namespace internal

Status WriteFile(const std::string& path, std::vector<TensorToWrite> tensors,
                 const std::map<std::string, std::string>& metadata) {
  auto serialized = SerializeHeader(&tensors, metadata);
  if (!serialized.ok()) return serialized.status().WithPrefix(path);
  return internal::WriteAtomically(path, *serialized, [&](int fd, const std::string& tmp) {
    for (const auto& t : tensors) {
      if (t.nbytes == 0) continue;
      HUBLOAD_RETURN_IF_ERROR(internal::WriteAll(fd, t.data, t.nbytes, tmp));
    }
    return Status::Ok();
  });
}

}  // namespace hubload::safetensors
