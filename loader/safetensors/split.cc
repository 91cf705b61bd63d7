// huggingface_hub's shard split (loading-semantics.md C.1, C.2).
#include "hubload/split.h"

#include <cstdio>
#include <set>
#include <unordered_map>

#include "hubload/reasons.h"
#include "hubload/resolve.h"
#include "hubload/size.h"
#include "util/text.h"

namespace hubload {
namespace {

std::string FormatSuffix(const std::string& pattern, const std::string& suffix) {
  auto pos = pattern.find("{suffix}");
  return pattern.substr(0, pos) + suffix + pattern.substr(pos + 8);
}

}  // namespace

Result<uint64_t> ParseMaxShardSize(std::string_view text) {
  HUBLOAD_ASSIGN_OR_RETURN(uint64_t v, ParseMemorySize(text));
  if (v == 0)
    return Status(Code::kInvalidArgument, "invalid max_shard_size '" + std::string(text) + "': must be at least 1 byte",
                  reason::kInvalidSize);
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
                  "filename pattern '" + filename_pattern + "' must contain '{suffix}' exactly once",
                  reason::kInvalidPattern);
  if (max_shard_size == 0)
    return Status(Code::kInvalidArgument, "max_shard_size must be > 0", reason::kInvalidSize);
  std::set<std::string> names;
  for (const auto& e : entries) {
    if (e.name.empty()) return Status(Code::kInvalidArgument, "state dict entry with an empty name",
                                      reason::kInvalidName);
    if (!names.insert(e.name).second)
      return Status(Code::kInvalidArgument, "state dict entry '" + e.name + "' appears twice",
                    reason::kDuplicateTensor);
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
    std::string fname = FormatSuffix(filename_pattern, util::FormatShardSuffix(i + 1, n));
    for (const auto& name : shard_list[i]) out.tensor_to_filename[name] = fname;
    out.filename_to_tensors.emplace_back(fname, std::move(shard_list[i]));
  }
  return out;
}

}  // namespace hubload
