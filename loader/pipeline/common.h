// Internal (not installed): small helpers shared by the CPU and device
// fetch-and-load paths (pipeline.cc, device_pipeline.cc). Torch-free.
#pragma once

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "hubload/reasons.h"
#include "hubload/safetensors.h"
#include "hubload/status.h"

namespace hubload::pipeline_internal {

using Clock = std::chrono::steady_clock;

/// Seconds between two steady-clock points.
inline double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

/// Last '/'-separated component of a path.
inline std::string Basename(const std::string& p) {
  auto pos = p.find_last_of('/');
  return pos == std::string::npos ? p : p.substr(pos + 1);
}

/// Fills the empty context fields of `st` (repo_id, revision, file).
inline Status WithContext(Status st, const std::string& repo_id, const std::string& revision,
                          const std::string& file) {
  if (st.ok()) return st;
  ErrorContext& c = st.mutable_context();
  if (c.repo_id.empty()) c.repo_id = repo_id;
  if (c.revision.empty()) c.revision = revision;
  if (c.file.empty()) c.file = file;
  return st;
}

/// The index over the tensors of shard `file` (safetensors TensorInfo or
/// pickle tensors: anything with a `.name`). Strict: any disagreement fails
/// (safetensors::CheckShardNamesAgainstIndex). Lenient
/// (PretrainedRequest::lenient_index, B49): the tensors the index does not
/// map to this shard are erased from `tensors` and returned, file order.
template <typename T>
Result<std::vector<std::string>> ApplyIndexToShard(const safetensors::Index& index, const std::string& file,
                                                   bool lenient, std::vector<T>* tensors) {
  std::vector<std::string_view> names;
  names.reserve(tensors->size());
  for (const auto& t : *tensors) names.push_back(t.name);
  if (!lenient) {
    Status st = safetensors::CheckShardNamesAgainstIndex(index, Basename(file), names);
    if (st.ok()) return std::vector<std::string>{};
    if (st.reason() == reason::kIndexTensorUnlisted || st.reason() == reason::kIndexTensorInOtherShard)  // the way out
      return Status(st.code(),
                    st.message() + "; to load the tensors the index maps and skip the others, use lenient_index "
                                   "(hubload load --lenient-index)",
                    st.reason(), st.context());
    return st;
  }
  HUBLOAD_ASSIGN_OR_RETURN(std::vector<std::string> skipped,
                           safetensors::ShardTensorsNotMappedHere(index, Basename(file), names));
  if (skipped.empty()) return skipped;
  const std::set<std::string> drop(skipped.begin(), skipped.end());
  tensors->erase(std::remove_if(tensors->begin(), tensors->end(), [&](const T& t) { return drop.count(t.name) > 0; }),
                 tensors->end());
  return skipped;
}

}  // namespace hubload::pipeline_internal
