// util/text.h: the small text helpers option parsers and error messages share
// (sizes, device names, lists cut for one-line errors).
// Thread safety: pure functions.
#pragma once

#include <cstddef>
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

}  // namespace hubload::util
