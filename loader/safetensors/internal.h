// Private helpers shared by the safetensors sources (not installed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hubload/status.h"
#include "util/utf8.h"

namespace hubload::safetensors::internal {

/// `s` with every ECMAScript regex metacharacter escaped (for std::regex patterns built from names).
std::string RegexEscape(const std::string& s);

/// UTF-8 validation (RFC 3629), one copy in util/utf8.h.
using util::FindInvalidUtf8;
using util::IsValidUtf8;

/// Maximum bracket nesting accepted before handing text to nlohmann::json
/// (its DOM and destructor recurse; a fuzzer finds `[[[[...` stack overflows).
inline constexpr int kMaxJsonDepth = 64;

/// True when the bracket nesting of JSON `text` (outside string literals)
/// never exceeds `max_depth`. When `top_level_keys` is given, it receives the
/// number of member names of the top-level object as written in the text
/// (meaningful only for text that then parses as a JSON object): comparing it
/// with the parsed object's size reveals duplicate names in one linear scan.
bool JsonDepthWithin(std::string_view text, int max_depth, size_t* top_level_keys = nullptr);

/// Finds the first duplicate member name of the top-level object of `text`
/// (returned in *top), and, if `child` is non-empty, the first duplicate name
/// inside the top-level member called `child` (in *in_child). Uses nlohmann's
/// SAX interface (linear). Returns false when `text` is not valid JSON.
bool FindDuplicateKeys(std::string_view text, std::string_view child, std::string* top, std::string* in_child);

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
