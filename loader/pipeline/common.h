// Internal (not installed): small helpers shared by the CPU and device
// fetch-and-load paths (pipeline.cc, device_pipeline.cc). Torch-free.
#pragma once

#include <chrono>
#include <string>

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

}  // namespace hubload::pipeline_internal
