// Private helpers shared by the safetensors sources (not installed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hubload/status.h"

namespace hubload::safetensors::internal {

/// Offset of the first byte that breaks UTF-8 (RFC 3629: no overlongs, no
/// surrogates U+D800..DFFF, nothing above U+10FFFF), or npos when valid.
size_t FindInvalidUtf8(const uint8_t* p, size_t n);
inline bool IsValidUtf8(std::string_view s) {
  return FindInvalidUtf8(reinterpret_cast<const uint8_t*>(s.data()), s.size()) == std::string_view::npos;
}

/// Maximum bracket nesting accepted before handing text to nlohmann::json
/// (its DOM and destructor recurse; a fuzzer finds `[[[[...` stack overflows).
inline constexpr int kMaxJsonDepth = 64;

/// True when the bracket nesting of JSON `text` (outside string literals)
/// never exceeds `max_depth`.
bool JsonDepthWithin(std::string_view text, int max_depth);

/// `"name"` with JSON-ish quoting for messages (control bytes escaped, long names cut).
std::string Quote(std::string_view s);

/// "[2,3,4]".
std::string ShapeString(const std::vector<uint64_t>& shape);

/// A kInvalidFormat Status: "<label>: tensor "<tensor>": <what> (<reason>)",
/// with ErrorContext file/tensor set ("tensor ..." omitted when tensor is empty).
Status FormatError(std::string_view reason, std::string_view label, std::string_view tensor,
                   const std::string& what);

/// A Status for a failed syscall on `path` (errno `err`): kNotFound for ENOENT,
/// kDiskFull for ENOSPC/EDQUOT/EFBIG, kIOError otherwise.
Status ErrnoStatus(int err, const std::string& what, const std::string& path);

}  // namespace hubload::safetensors::internal
