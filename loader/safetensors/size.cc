// The one size grammar (hubload/size.h).
#include "hubload/size.h"

#include <limits>
#include <string>

#include "hubload/reasons.h"
#include "util/text.h"

namespace hubload {
namespace {

__extension__ typedef unsigned __int128 U128;  // exact size arithmetic (GCC/Clang)

using util::AllDigits;
constexpr auto Trim = util::TrimBlanks;

Status BadSize(std::string_view text, const std::string& why) {
  return Status(Code::kInvalidArgument,
                "invalid size '" + std::string(text) + "': " + why +
                    " (write an integer number of bytes or a number with a unit: B, KB, MB, GB, TB (powers of 10) "
                    "or KiB, MiB, GiB, TiB (powers of 2), e.g. \"10GB\", \"1.5GiB\")",
                reason::kInvalidMemorySize);
}

}  // namespace

Result<uint64_t> ParseMemorySize(std::string_view text) {
  std::string_view t = Trim(text);
  if (t.empty()) return BadSize(text, "empty");
  // Split into the number (digits with at most one '.') and the unit.
  size_t i = 0;
  while (i < t.size() && ((t[i] >= '0' && t[i] <= '9') || t[i] == '.')) ++i;
  std::string_view number = t.substr(0, i);
  std::string_view unit = Trim(t.substr(i));
  const size_t dot = number.find('.');
  std::string_view int_part = number.substr(0, dot);
  std::string_view frac_part = dot == std::string_view::npos ? std::string_view() : number.substr(dot + 1);
  if (number.empty() || (int_part.empty() && frac_part.empty()) ||
      (dot != std::string_view::npos && frac_part.find('.') != std::string_view::npos))
    return BadSize(text, "no number");
  if ((!int_part.empty() && !AllDigits(int_part)) || (!frac_part.empty() && !AllDigits(frac_part)))
    return BadSize(text, "no number");
  if (frac_part.size() > 18) return BadSize(text, "too many decimals");

  U128 multiplier = 0;
  struct UnitDef {
    const char* name;
    U128 bytes;
  };
  static constexpr U128 kK = 1000, kKi = 1024;
  static const UnitDef kUnits[] = {
      {"", 1},
      {"B", 1},
      {"KB", kK},
      {"MB", kK * kK},
      {"GB", kK * kK * kK},
      {"TB", kK * kK * kK * kK},
      {"KiB", kKi},
      {"MiB", kKi * kKi},
      {"GiB", kKi * kKi * kKi},
      {"TiB", kKi * kKi * kKi * kKi},
  };
  for (const auto& u : kUnits) {
    if (util::EqualsIgnoreCase(unit, u.name)) {
      multiplier = u.bytes;
      break;
    }
  }
  if (multiplier == 0) return BadSize(text, "unknown unit '" + std::string(unit) + "'");
  // accelerate's convert_file_size_to_int reads a lowercase final 'b' of a
  // decimal unit ("10Gb", "10gb") as bits; rather than guess, refuse it.
  if (unit.size() >= 1 && unit.back() == 'b' && !(unit.size() == 3 && util::AsciiLower(unit[1]) == 'i'))
    return BadSize(text, "a lowercase 'b' is ambiguous (accelerate reads \"Gb\" as gigabits); write \"B\" for bytes");
  if (unit.empty() && dot != std::string_view::npos) return BadSize(text, "a fractional number of bytes");

  // Exact decimal arithmetic: whole + frac / 10^len(frac), times the unit,
  // rounded down (accelerate: int(float(number) * unit)).
  U128 whole = 0;
  for (char c : int_part) {
    whole = whole * 10 + static_cast<unsigned>(c - '0');
    if (whole > std::numeric_limits<uint64_t>::max()) return BadSize(text, "larger than 2^64 bytes");
  }
  U128 frac = 0, scale = 1;
  for (char c : frac_part) {
    frac = frac * 10 + static_cast<unsigned>(c - '0');
    scale *= 10;
  }
  const U128 bytes = whole * multiplier + (frac * multiplier) / scale;
  if (bytes > std::numeric_limits<uint64_t>::max()) return BadSize(text, "larger than 2^64 bytes");
  return static_cast<uint64_t>(bytes);
}

}  // namespace hubload
