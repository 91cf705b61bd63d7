// The one load report (hubload/load.h) and the torch-free load vocabulary.
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "hubload/load.h"
#include "hubload/reasons.h"
#include "util/json.h"

namespace hubload {

Result<TargetDtype> ParseTargetDtype(const std::string& text) {
  if (text == "auto") return TargetDtype::kAuto;
  if (text == "fp32" || text == "float32" || text == "F32") return TargetDtype::kF32;
  if (text == "fp16" || text == "float16" || text == "F16") return TargetDtype::kF16;
  if (text == "bf16" || text == "bfloat16" || text == "BF16") return TargetDtype::kBF16;
  return Status(Code::kInvalidArgument, "unknown dtype '" + text + "' (expected auto, fp32, fp16 or bf16)",
                reason::kInvalidDtype);
}

const char* TargetDtypeName(TargetDtype d) {
  switch (d) {
    case TargetDtype::kAuto: return "auto";
    case TargetDtype::kF32: return "fp32";
    case TargetDtype::kF16: return "fp16";
    case TargetDtype::kBF16: return "bf16";
  }
  return "auto";
}

std::string LoadReportJson(const PretrainedInfo& info, int indent) {
  using J = nlohmann::ordered_json;
  J j;
  j["schema"] = kLoadReportSchema;
  j["source"] = info.source;
  j["repo_id"] = info.repo_id;
  j["revision"] = info.revision;
  j["commit"] = info.commit;
  j["root"] = info.root;
  j["index_file"] = info.index_file;
  j["files"] = info.files;
  j["load_order"] = info.load_order;
  j["weights_bytes"] = info.weights_bytes;
  J tensors = J::array();
  for (const auto& t : info.tensors) {
    J e;
    e["name"] = t.name;
    e["file"] = t.file;
    e["source_dtype"] = t.source_dtype;
    e["dtype"] = t.dtype;
    e["shape"] = t.shape;
    e["bytes"] = t.bytes;
    e["device"] = t.device;
    if (!t.sha256.empty()) e["sha256"] = t.sha256;
    if (t.sum) {
      if (std::isfinite(*t.sum)) e["sum"] = *t.sum;
      else e["sum"] = nullptr;
    }
    tensors.push_back(std::move(e));
  }
  j["tensors"] = std::move(tensors);
  J aliases = J::object();
  for (const auto& [removed, kept] : info.aliases) aliases[removed] = kept;
  j["aliases"] = std::move(aliases);
  const PretrainedTimings& tm = info.timings;
  j["timings"] = J{{"plan_s", tm.plan_s},
                   {"time_to_first_tensor_s", tm.time_to_first_tensor_s},
                   {"time_to_first_shard_s", tm.time_to_first_shard_s},
                   {"download_s", tm.download_s},
                   {"load_s", tm.load_s},
                   {"total_s", tm.total_s}};
  j["warnings"] = info.warnings;
  const LoadReportExtra& x = info.extra;
  if (!x.backend.empty() || !x.device_map.empty()) {
    J d;
    d["backend"] = x.backend;
    d["strategy"] = x.strategy;
    d["plan_only"] = x.plan_only;
    d["gpu_free_bytes"] = x.gpu_free_bytes;
    J map = J::object();
    for (const auto& [prefix, dev] : x.device_map) map[prefix] = dev;
    d["device_map"] = std::move(map);
    J bytes = J::object();
    for (const auto& [dev, n] : x.bytes_per_device) bytes[dev] = n;
    d["bytes_per_device"] = std::move(bytes);
    J disk = J::array();
    for (const auto& t : x.disk_tensors)
      disk.push_back(J{{"name", t.name}, {"file", t.file}, {"offset", t.offset}, {"bytes", t.bytes}});
    d["disk_tensors"] = std::move(disk);
    J staging = J::object();
    for (const auto& [k, v] : x.staging) staging[k] = v;
    d["staging"] = std::move(staging);
    j["device"] = std::move(d);
  }
  if (x.rank) {
    j["distributed"] = J{{"rank", *x.rank},
                         {"world_size", x.world_size},
                         {"bytes_downloaded", x.bytes_downloaded},
                         {"bytes_received", x.bytes_received}};
  }
  return util::DumpJson(j, indent);
}

std::string LoadSummaryText(const PretrainedInfo& info) {
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_kind;  // "BF16 on cpu" -> (count, bytes)
  uint64_t total = 0;
  for (const auto& t : info.tensors) {
    auto& e = by_kind[t.dtype + " on " + (t.device.empty() ? std::string("(skipped)") : t.device)];
    e.first++;
    e.second += t.bytes;
    total += t.bytes;
  }
  std::string out = std::to_string(info.tensors.size()) + " tensors, " + std::to_string(total) + " bytes, from " +
                    std::to_string(info.files.size()) + " file(s)";
  if (!info.commit.empty()) out += " at commit " + info.commit;
  out += "\n";
  for (const auto& f : info.files) out += "  file " + f + "\n";
  for (const auto& [k, cb] : by_kind)
    out += "  " + k + ": " + std::to_string(cb.first) + " tensors, " + std::to_string(cb.second) + " bytes\n";
  const PretrainedTimings& tm = info.timings;
  const std::pair<const char*, double> rows[] = {{"plan_s", tm.plan_s},
                                                 {"time_to_first_tensor_s", tm.time_to_first_tensor_s},
                                                 {"download_s", tm.download_s},
                                                 {"load_s", tm.load_s},
                                                 {"total_s", tm.total_s}};
  for (const auto& [k, v] : rows) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", v);
    out += std::string("  ") + k + ": " + buf + "\n";
  }
  for (const auto& w : info.warnings) out += "  warning: " + w + "\n";
  return out;
}

}  // namespace hubload
