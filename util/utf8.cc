#include "util/utf8.h"

namespace hubload::util {

bool NextCodePoint(std::string_view s, size_t* pos, uint32_t* cp) {
  size_t i = *pos;
  if (i >= s.size()) return false;
  const uint8_t c = static_cast<uint8_t>(s[i]);
  if (c < 0x80) {
    *cp = c;
    *pos = i + 1;
    return true;
  }
  size_t len;
  uint32_t v;
  uint32_t min;
  if ((c & 0xE0) == 0xC0) {
    len = 2, v = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, v = c & 0x0F, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4, v = c & 0x07, min = 0x10000;
  } else {
    return false;  // continuation byte or 0xF8..0xFF as a lead
  }
  if (s.size() - i < len) return false;
  for (size_t k = 1; k < len; ++k) {
    const uint8_t cc = static_cast<uint8_t>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return false;
    v = (v << 6) | (cc & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return false;
  *cp = v;
  *pos = i + len;
  return true;
}

size_t FindInvalidUtf8(const uint8_t* p, size_t n) {
  std::string_view s(reinterpret_cast<const char*>(p), n);
  size_t i = 0;
  uint32_t cp = 0;
  while (i < n) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {  // fast path for ASCII
      ++i;
      continue;
    }
    if (!NextCodePoint(s, &i, &cp)) return i;
  }
  return std::string_view::npos;
}

}  // namespace hubload::util
