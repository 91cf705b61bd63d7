// huggingface_hub's shard split and size parsing (loading-semantics.md C.1, C.2).
#include "hubload/split.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <unordered_map>

#include "hubload/resolve.h"

namespace hubload {
namespace {

Status SizeError(std::string_view text, const std::string& why) {
  return Status(Code::kInvalidArgument,
                "invalid size '" + std::string(text) + "': " + why +
                    " (expected a number followed by KB, MB, GB or TB, decimal units: 5GB = 5*10^9 bytes)",
                "InvalidSize");
}

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::string FormatSuffix(const std::string& pattern, const std::string& suffix) {
  auto pos = pattern.find("{suffix}");
  return pattern.substr(0, pos) + suffix + pattern.substr(pos + 8);
}

}  // namespace

Result<uint64_t> ParseSizeToInt(std::string_view text) {
  std::string s = Trim(text);
  if (s.size() < 2) return SizeError(text, "no unit");
  std::string unit = s.substr(s.size() - 2);
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double mult;
  if (unit == "KB") mult = 1e3;
  else if (unit == "MB") mult = 1e6;
  else if (unit == "GB") mult = 1e9;
  else if (unit == "TB") mult = 1e12;
  else return SizeError(text, "unit '" + unit + "' not supported");
  std::string num = Trim(std::string_view(s).substr(0, s.size() - 2));
  if (num.empty()) return SizeError(text, "no number");
  // Python float(): decimal digits, '.', exponent, sign. Refuse hex and words.
  for (char c : num) {
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
      return SizeError(text, "'" + num + "' is not a number");
  }
  errno = 0;
  char* end = nullptr;
  double value = std::strtod(num.c_str(), &end);
  if (end != num.c_str() + num.size()) return SizeError(text, "'" + num + "' is not a number");
  if (!std::isfinite(value) || value < 0) return SizeError(text, "the size must be finite and not negative");
  double bytes = value * mult;
  if (bytes >= 18446744073709551616.0) return SizeError(text, "too large");
  return static_cast<uint64_t>(bytes);  // truncation, as Python int()
}

Result<uint64_t> ParseMaxShardSize(std::string_view text) {
  std::string s = Trim(text);
  bool digits = !s.empty();
  for (char c : s) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  uint64_t v = 0;
  if (digits) {
    if (s.size() > 19) return SizeError(text, "too large");
    v = std::strtoull(s.c_str(), nullptr, 10);
  } else {
    HUBLOAD_ASSIGN_OR_RETURN(v, ParseSizeToInt(s));
  }
  if (v == 0) return SizeError(text, "max_shard_size must be at least 1 byte");
  return v;
}

std::string ShardFilenamePattern(const std::string& weights_name, const std::string& variant) {
  std::string name = AddVariant(weights_name + ".safetensors", variant);
  // name ends in ".safetensors": insert the suffix before it.
  return name.substr(0, name.size() - 12) + "{suffix}.safetensors";
}

std::string IndexFilename(const std::string& weights_name, const std::string& variant) {
  return AddVariant(weights_name + ".safetensors.index.json", variant);
}

Result<StateDictSplit> SplitStateDict(const std::vector<SplitEntry>& entries, uint64_t max_shard_size,
                                      const std::string& filename_pattern) {
  auto first = filename_pattern.find("{suffix}");
  if (first == std::string::npos || filename_pattern.find("{suffix}", first + 1) != std::string::npos)
    return Status(Code::kInvalidArgument,
                  "filename pattern '" + filename_pattern + "' must contain '{suffix}' exactly once", "InvalidPattern");
  if (max_shard_size == 0) return Status(Code::kInvalidArgument, "max_shard_size must be > 0", "InvalidSize");
  std::set<std::string> names;
  for (const auto& e : entries) {
    if (e.name.empty()) return Status(Code::kInvalidArgument, "state dict entry with an empty name", "InvalidName");
    if (!names.insert(e.name).second)
      return Status(Code::kInvalidArgument, "state dict entry '" + e.name + "' appears twice", "DuplicateTensor");
  }

  // storage id -> names (first is the sized one), in first-seen order.
  std::vector<std::vector<std::string>> storage_groups;
  std::unordered_map<uint64_t, size_t> storage_index;
  std::vector<std::vector<std::string>> shard_list;
  std::vector<std::string> current;
  uint64_t current_size = 0;
  uint64_t total = 0;

  for (const auto& e : entries) {
    if (e.storage_id) {
      auto it = storage_index.find(*e.storage_id);
      if (it != storage_index.end()) {
        storage_groups[it->second].push_back(e.name);
        continue;
      }
      storage_index.emplace(*e.storage_id, storage_groups.size());
      storage_groups.push_back({e.name});
    }
    if (e.nbytes > max_shard_size) {
      total += e.nbytes;
      shard_list.push_back({e.name});
      continue;
    }
    if (current_size + e.nbytes > max_shard_size) {
      shard_list.push_back(std::move(current));
      current.clear();
      current_size = 0;
    }
    current.push_back(e.name);
    current_size += e.nbytes;
    total += e.nbytes;
  }
  if (!current.empty()) shard_list.push_back(std::move(current));

  // Aliases join the shard of the first name of their storage.
  for (const auto& group : storage_groups) {
    if (group.size() < 2) continue;
    for (auto& shard : shard_list) {
      bool has = false;
      for (const auto& n : shard) has = has || n == group[0];
      if (!has) continue;
      for (size_t i = 1; i < group.size(); ++i) shard.push_back(group[i]);
      break;
    }
  }

  StateDictSplit out;
  out.total_size = total;
  const size_t n = shard_list.size();
  if (n == 0) return out;
  if (n == 1) {
    std::string fname = FormatSuffix(filename_pattern, "");
    std::vector<std::string> all;
    for (const auto& e : entries) {
      all.push_back(e.name);
      out.tensor_to_filename[e.name] = fname;
    }
    out.filename_to_tensors.emplace_back(fname, std::move(all));
    return out;
  }
  out.is_sharded = true;
  for (size_t i = 0; i < n; ++i) {
    char suffix[64];
    std::snprintf(suffix, sizeof suffix, "-%05zu-of-%05zu", i + 1, n);
    std::string fname = FormatSuffix(filename_pattern, suffix);
    for (const auto& name : shard_list[i]) out.tensor_to_filename[name] = fname;
    out.filename_to_tensors.emplace_back(fname, std::move(shard_list[i]));
  }
  return out;
}

}  // namespace hubload
