// `hubload load` reports: JSON and text summaries of a loaded state dict.
#include <ATen/core/Tensor.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "hubload/torch_loader.h"

namespace hubload {

Result<std::string> LoadReportJson(const std::vector<std::string>& files, const StateDict& tensors,
                                   const std::vector<std::pair<std::string, double>>& timings_s,
                                   const std::vector<std::string>& warnings) {
  nlohmann::ordered_json j;
  j["files"] = files;
  nlohmann::ordered_json tj = nlohmann::ordered_json::object();
  for (const auto& [name, t] : tensors) {
    auto s = SummarizeTensor(t);
    if (!s.ok()) return s.status().WithPrefix("tensor '" + name + "'");
    nlohmann::ordered_json e;
    e["dtype"] = s->dtype;
    e["shape"] = s->shape;
    if (std::isfinite(s->sum)) e["sum"] = s->sum;
    else e["sum"] = nullptr;
    e["sha256"] = s->sha256;
    tj[name] = std::move(e);
  }
  j["tensors"] = std::move(tj);
  nlohmann::ordered_json tm = nlohmann::ordered_json::object();
  for (const auto& [k, v] : timings_s) tm[k] = v;
  j["timings"] = std::move(tm);
  j["warnings"] = warnings;
  return j.dump();
}

std::string LoadSummaryText(const std::vector<std::string>& files, const StateDict& tensors,
                            const std::vector<std::pair<std::string, double>>& timings_s) {
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_dtype;  // name -> (count, bytes)
  uint64_t total = 0;
  for (const auto& [name, t] : tensors) {
    auto d = SafetensorsDtype(t.scalar_type());
    std::string dn = d.ok() ? safetensors::DtypeName(*d) : std::string(c10::toString(t.scalar_type()));
    uint64_t b = static_cast<uint64_t>(t.numel()) * t.element_size();
    by_dtype[dn].first++;
    by_dtype[dn].second += b;
    total += b;
  }
  std::string out = std::to_string(tensors.size()) + " tensors, " + std::to_string(total) + " bytes, from " +
                    std::to_string(files.size()) + " file(s)\n";
  for (const auto& f : files) out += "  file " + f + "\n";
  for (const auto& [dn, cb] : by_dtype)
    out += "  " + dn + ": " + std::to_string(cb.first) + " tensors, " + std::to_string(cb.second) + " bytes\n";
  for (const auto& [k, v] : timings_s) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6f", v);
    out += "  " + k + ": " + buf + "\n";
  }
  return out;
}

}  // namespace hubload
