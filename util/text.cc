#include "util/text.h"

#include <cstdio>

#include "util/utf8.h"

namespace hubload::util {

namespace {

std::string Shown(std::string_view s, size_t max_bytes, bool quoted) {
  const bool utf8 = IsValidUtf8(s);
  size_t n = s.size() < max_bytes ? s.size() : max_bytes;
  if (utf8)  // never cut inside a character
    while (n < s.size() && n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  std::string out;
  out.reserve(n + 8);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f || (!utf8 && c >= 0x80)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      if (quoted && (c == '"' || c == '\\')) out += '\\';
      out += static_cast<char>(c);
    }
  }
  if (n < s.size()) out += "...";
  return out;
}

bool Digits5(std::string_view s) { return s.size() == 5 && AllDigits(s); }

}  // namespace

std::string Printable(std::string_view s, size_t max_bytes) { return Shown(s, max_bytes, false); }

std::string Quoted(std::string_view s, size_t max_bytes) { return "\"" + Shown(s, max_bytes, true) + "\""; }

std::optional<ShardSuffix> ParseShardSuffix(std::string_view stem) {
  constexpr size_t kLen = 15;  // "-NNNNN-of-MMMMM"
  if (stem.size() <= kLen) return std::nullopt;
  std::string_view t = stem.substr(stem.size() - kLen);
  if (t[0] != '-' || !Digits5(t.substr(1, 5)) || t.substr(6, 4) != "-of-" || !Digits5(t.substr(10, 5)))
    return std::nullopt;
  ShardSuffix r;
  r.prefix_len = stem.size() - kLen;
  r.shard = std::stoi(std::string(t.substr(1, 5)));
  r.count = std::stoi(std::string(t.substr(10, 5)));
  r.malformed = r.shard < 1 || r.shard > r.count;
  return r;
}

std::string FormatShardSuffix(size_t shard, size_t count) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "-%05zu-of-%05zu", shard, count);
  return buf;
}

}  // namespace hubload::util
