// util/utf8.h: UTF-8 checks for untrusted text (safetensors headers, pickle
// strings). RFC 3629: no overlong forms, no surrogates U+D800..DFFF, nothing
// above U+10FFFF.
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace hubload::util {

/// Decodes the code point starting at s[*pos] into *cp and advances *pos past
/// it. Returns false (leaving *pos) when the bytes there are not valid UTF-8
/// or *pos >= s.size().
bool NextCodePoint(std::string_view s, size_t* pos, uint32_t* cp);

/// Offset of the first byte that breaks UTF-8, or std::string_view::npos when
/// all `n` bytes are valid.
size_t FindInvalidUtf8(const uint8_t* p, size_t n);
inline bool IsValidUtf8(std::string_view s) {
  return FindInvalidUtf8(reinterpret_cast<const uint8_t*>(s.data()), s.size()) == std::string_view::npos;
}

}  // namespace hubload::util
