// Private helpers shared by the safetensors sources (not installed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "hubload/status.h"
#include "util/utf8.h"
#include "util/file_io.h"
#include "util/text.h"

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


/// "[2,3,4]".
std::string ShapeString(const std::vector<uint64_t>& shape);

/// A kInvalidFormat Status: "<label>: tensor "<tensor>": <what> (<reason>)",
/// with ErrorContext file/tensor set ("tensor ..." omitted when tensor is empty).
Status FormatError(std::string_view reason, std::string_view label, std::string_view tensor,
                   const std::string& what);

/// Writes `path` atomically and durably (util::AtomicWriteFileWith, mode
/// 0644, fsync of file and folder, the folder must exist): `prefix`, then
/// whatever `body(fd, tmp_path)` writes at the file position. On any error
/// (body's included) the temp file is removed and `path` is untouched.
Status WriteAtomically(const std::string& path, std::string_view prefix, const util::AtomicWriteBody& body);

/// Writes the index of a sharded save atomically and durably (util::AtomicWriteFile):
/// {"metadata": {"total_size": N, <metadata but total_size>}, "weight_map": {tensor: file}}
/// with indent 2 and a final newline (huggingface_hub save_torch_state_dict).
Status WriteShardIndex(const std::string& path, uint64_t total_size, const nlohmann::ordered_json& metadata,
                       const std::map<std::string, std::string>& weight_map);

/// Removes from `dir` the files of exactly this weights name and variant that a
/// sharded save did not write (`keep`): `{stem}.safetensors`,
/// `{stem}-NNNNN-of-NNNNN.safetensors` and the index name (stem = weights name
/// with the variant; B27); an index goes first, so no index names deleted
/// shards. Returns the removed basenames. Other files are never touched.
std::vector<std::string> RemoveStaleShardFiles(const std::string& dir, const std::string& weights_name,
                                               const std::string& variant, const std::set<std::string>& keep);

}  // namespace hubload::safetensors::internal
