// util/percent.h: percent-encoding (RFC 3986 §2.1) and query strings
// (application/x-www-form-urlencoded), over Boost.URL. The Hub's URLs carry
// percent-encoded revisions ("refs%2Fpr%2F1") and paths; request bodies of
// huggingface_hub's paths-info call are form-encoded.
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hubload::util {

/// Decodes every "%XX" of `text`; with `plus_as_space` also '+' -> ' ' (form
/// and query encoding). nullopt when a '%' is not followed by two hex digits.
/// Any other byte (also NUL once decoded) is kept as is.
std::optional<std::string> PercentDecode(std::string_view text, bool plus_as_space = false);

/// Encodes every byte outside the RFC 3986 unreserved set (A-Z a-z 0-9 - . _ ~)
/// and outside `keep` as "%XX" (upper-case hex, as Python's urllib.parse.quote):
/// PercentEncode("a b/#", "/") == "a%20b/%23".
std::string PercentEncode(std::string_view text, std::string_view keep = "");

/// Splits a query string or form body ("a=1&b=x+y&flag") into decoded
/// (key, value) pairs in order ('+' is a space; a key without '=' has an empty
/// value; empty pieces are skipped). nullopt when an escape is malformed.
std::optional<std::vector<std::pair<std::string, std::string>>> ParseQuery(std::string_view query);

}  // namespace hubload::util
