// util/hex.h: lower-case hexadecimal, the spelling of sha256/sha1 names in the
// Hugging Face cache (blobs/<sha256>) and the Hub API (oid fields).
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace hubload::util {

/// Lower-case hex of `n` bytes ("\x01\xab" -> "01ab").
std::string Hex(const void* data, size_t n);
inline std::string Hex(std::string_view bytes) { return Hex(bytes.data(), bytes.size()); }

/// True when `s` is non-empty and only [0-9a-f] (lower case, as the Hub writes ids).
bool IsLowerHex(std::string_view s);

}  // namespace hubload::util
