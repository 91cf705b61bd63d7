// util/base64.h: standard base64 (RFC 4648, with padding) over OpenSSL's
// EVP_EncodeBlock / EVP_DecodeBlock, as the Hub's commit API carries small
// file contents and preupload samples.
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace hubload::util {

std::string Base64Encode(std::string_view bytes);
/// nullopt when `text` is not canonical padded base64 (length not a multiple
/// of 4, a character outside the alphabet, padding inside). Whitespace is not
/// accepted.
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace hubload::util
