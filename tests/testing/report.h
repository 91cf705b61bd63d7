// Reading the one load report (hubload/load.h LoadReportJson) in tests.
#pragma once

#include <nlohmann/json.hpp>

namespace hubload::testing {

/// The report's "tensors" array as an object keyed by tensor name (the
/// report keeps checkpoint order in an array; tests look tensors up by name).
/// A report without the schema field (a foreign object) is returned as is.
inline nlohmann::json TensorsByName(const nlohmann::json& report) {
  nlohmann::json out = nlohmann::json::object();
  if (!report.is_object() || !report.contains("tensors")) return out;
  const nlohmann::json& t = report["tensors"];
  if (t.is_object()) return t;
  for (const auto& e : t)
    if (e.is_object() && e.contains("name") && e["name"].is_string()) out[e["name"].get<std::string>()] = e;
  return out;
}

}  // namespace hubload::testing
