// util/text.h: the small text helpers option parsers and error messages share
// (sizes, device names, lists cut for one-line errors, untrusted names shown in
// messages, the "-NNNNN-of-MMMMM" shard suffix of weights file names).
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hubload::util {

/// `s` without leading and trailing spaces and tabs.
inline std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/// ASCII lower case of `c` (locale-independent; other bytes unchanged).
inline char AsciiLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

/// `s` with ASCII letters in lower case.
inline std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = AsciiLower(c);
  return out;
}

/// ASCII case-insensitive equality (HTTP header names, URL schemes and hosts,
/// file extensions, size units).
inline bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (AsciiLower(a[i]) != AsciiLower(b[i])) return false;
  return true;
}

/// EqualsIgnoreCase of the end of `s` and `suffix`.
inline bool EndsWithIgnoreCase(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && EqualsIgnoreCase(s.substr(s.size() - suffix.size()), suffix);
}

/// True when `s` is non-empty and only ASCII digits.
inline bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

/// "a, b, c ... and N more": the first `max_items` of `items` joined by ", ",
/// then the count of the rest (long lists in one-line errors; the full list
/// belongs in --json). max_items 0 = all.
inline std::string JoinCut(const std::vector<std::string>& items, size_t max_items = 10) {
  std::string s;
  const size_t n = items.size();
  const size_t shown = max_items == 0 ? n : (n < max_items ? n : max_items);
  for (size_t i = 0; i < shown; ++i) {
    if (i) s += ", ";
    s += items[i];
  }
  if (shown < n) s += " ... and " + std::to_string(n - shown) + " more";
  return s;
}

/// `s` fit for a one-line message: control bytes and DEL as \xNN, bytes >= 0x80
/// kept when `s` is valid UTF-8 and shown as \xNN when it is not; cut after
/// `max_bytes` bytes of `s` with "...". Used for every untrusted name (repo
/// paths, tensor names, pickle strings) an error message quotes.
std::string Printable(std::string_view s, size_t max_bytes = 200);

/// Printable(s) in double quotes, with '"' and '\' backslash-escaped.
std::string Quoted(std::string_view s, size_t max_bytes = 200);

/// The shard suffix of a file-name stem: "NAME-00002-of-00005" (five digits
/// each, as huggingface_hub's split_torch_state_dict_into_shards and
/// llama.cpp's gguf-split name shards).
struct ShardSuffix {
  size_t prefix_len = 0;  ///< length of NAME
  int shard = 0;          ///< 1-based
  int count = 0;
  bool malformed = false;  ///< the form is there but shard is 0 or above count
};

/// The suffix at the end of `stem`; nullopt when `stem` does not end in
/// "-NNNNN-of-MMMMM" after at least one character. A malformed one (shard 0,
/// or shard > count) is returned with `malformed` set.
std::optional<ShardSuffix> ParseShardSuffix(std::string_view stem);

/// The suffix of shard `shard` (1-based) of `count`: "-00002-of-00005".
std::string FormatShardSuffix(size_t shard, size_t count);

}  // namespace hubload::util
