// Device names and max_memory specs (hubload/device.h part 1; sizes: hubload/size.h).
#include <charconv>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "hubload/device.h"
#include "hubload/reasons.h"
#include "util/text.h"

namespace hubload {
namespace {

using util::AllDigits;
constexpr auto Trim = util::TrimBlanks;

/// A CUDA ordinal: decimal digits, no sign, at most 9 digits (fits an int).
bool ParseOrdinal(std::string_view s, int* out) {
  if (!AllDigits(s) || s.size() > 9) return false;
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return false;
  *out = v;
  return true;
}

}  // namespace

Result<Device> Device::Parse(std::string_view text) {
  std::string_view t = Trim(text);
  Device d;
  if (t == "cpu") {
    d.kind = Kind::kCpu;
    return d;
  }
  if (t == "disk") {
    d.kind = Kind::kDisk;
    return d;
  }
  if (t == "cuda") {
    d.kind = Kind::kCuda;
    d.index = 0;
    return d;
  }
  int idx = 0;
  if (t.substr(0, 5) == "cuda:" && ParseOrdinal(t.substr(5), &idx)) {
    d.kind = Kind::kCuda;
    d.index = idx;
    return d;
  }
  if (ParseOrdinal(t, &idx)) {  // accelerate device_map values: an int is a GPU ordinal
    d.kind = Kind::kCuda;
    d.index = idx;
    return d;
  }
  return Status(Code::kInvalidArgument,
                "unknown device '" + std::string(text) +
                    "': expected \"cpu\", \"cuda\", \"cuda:N\", a GPU ordinal N, or \"disk\"",
                reason::kInvalidDevice);
}

std::string Device::ToString() const {
  switch (kind) {
    case Kind::kCpu: return "cpu";
    case Kind::kDisk: return "disk";
    case Kind::kCuda: return "cuda:" + std::to_string(index);
  }
  return "cpu";
}

Result<std::map<std::string, uint64_t>> ParseMaxMemory(std::string_view spec) {
  std::map<std::string, uint64_t> out;
  std::string_view rest = spec;
  if (Trim(rest).empty())
    return Status(Code::kInvalidArgument, "empty max_memory spec (expected e.g. \"0=10GB,cpu=30GB\")",
                  reason::kInvalidMaxMemory);
  while (true) {
    size_t comma = rest.find(',');
    std::string_view item = Trim(rest.substr(0, comma));
    size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      return Status(Code::kInvalidArgument,
                    "max_memory entry '" + std::string(item) + "' in '" + std::string(spec) +
                        "' is not DEVICE=SIZE (e.g. \"0=10GB\", \"cuda:1=20GiB\", \"cpu=30GB\", \"disk=100GB\")",
                    reason::kInvalidMaxMemory);
    auto dev = Device::Parse(Trim(item.substr(0, eq)));
    if (!dev.ok()) return dev.status().WithPrefix("max_memory '" + std::string(spec) + "'");
    auto size = ParseMemorySize(Trim(item.substr(eq + 1)));
    if (!size.ok()) return size.status().WithPrefix("max_memory '" + std::string(spec) + "'");
    std::string key = dev->ToString();
    if (!out.emplace(key, *size).second)
      return Status(Code::kInvalidArgument,
                    "max_memory '" + std::string(spec) + "' gives device " + key + " twice", reason::kInvalidMaxMemory);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return out;
}

}  // namespace hubload
