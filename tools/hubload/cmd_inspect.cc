// `hubload inspect PATH [--json]`: validates a safetensors file or a sharded
// index (`*.index*.json`) and prints its tensors / shards.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "hubload/resolve.h"
#include "hubload/safetensors.h"
#include "tools/hubload/cli.h"

namespace {

namespace st = hubload::safetensors;

bool IsIndexPath(const std::string& path) {
  auto slash = path.find_last_of('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  auto w = hubload::ParseWeightsFileName(base);
  if (w) return w->kind == hubload::WeightsFileName::Kind::kIndex;
  // Other index names (e.g. consolidated.safetensors.index.json variants): any *.index*.json.
  return base.size() > 5 && base.compare(base.size() - 5, 5, ".json") == 0 && base.find(".index") != std::string::npos;
}

std::string ShapeText(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int InspectIndex(const std::string& path, bool as_json) {
  auto r = st::ReadIndex(path);
  if (!r.ok()) return hubload::cli::Fail("inspect", r.status().ToString());
  const st::Index& idx = *r;
  if (as_json) {
    nlohmann::ordered_json j;
    j["weight_map"] = idx.weight_map;
    j["shards"] = idx.shards;
    j["total_size"] = idx.total_size ? nlohmann::ordered_json(*idx.total_size) : nlohmann::ordered_json(nullptr);
    j["metadata"] = idx.metadata;
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("index %s: %zu tensors in %zu shards", path.c_str(), idx.weight_map.size(), idx.shards.size());
  if (idx.total_size) std::printf(", total_size %llu bytes", static_cast<unsigned long long>(*idx.total_size));
  std::printf("\n");
  for (const auto& [k, v] : idx.metadata) std::printf("metadata %s = %s\n", k.c_str(), v.c_str());
  for (const auto& s : idx.shards) {
    std::printf("shard %s: %zu tensors\n", s.c_str(), idx.tensors_by_shard.at(s).size());
  }
  return 0;
}

int InspectFile(const std::string& path, bool as_json) {
  auto r = st::ReadMetadata(path);
  if (!r.ok()) return hubload::cli::Fail("inspect", r.status().ToString());
  const st::Header& h = *r;
  if (as_json) {
    nlohmann::ordered_json j;
    j["metadata"] = h.metadata;
    nlohmann::ordered_json ts = nlohmann::ordered_json::object();
    for (const auto& t : h.tensors) {
      nlohmann::ordered_json e;
      e["dtype"] = st::DtypeName(t.dtype);
      e["shape"] = t.shape;
      e["data_offsets"] = {t.begin, t.end};
      ts[t.name] = std::move(e);
    }
    j["tensors"] = std::move(ts);
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("file %s: %zu bytes, header %llu bytes, data starts at %llu\n", path.c_str(),
              static_cast<size_t>(h.file_size), static_cast<unsigned long long>(h.header_len),
              static_cast<unsigned long long>(h.data_start));
  for (const auto& [k, v] : h.metadata) std::printf("metadata %s = %s\n", k.c_str(), v.c_str());
  for (const auto& t : h.tensors) {
    std::printf("%s  %s  %s  [%llu, %llu)  %llu bytes\n", t.name.c_str(), st::DtypeName(t.dtype),
                ShapeText(t.shape).c_str(), static_cast<unsigned long long>(t.begin),
                static_cast<unsigned long long>(t.end), static_cast<unsigned long long>(t.nbytes()));
  }
  uint64_t params = 0;
  for (const auto& t : h.tensors) params += t.num_elements();
  std::printf("total: %zu tensors, %llu elements, %llu data bytes\n", h.tensors.size(),
              static_cast<unsigned long long>(params), static_cast<unsigned long long>(h.data_size()));
  return 0;
}

hubload::cli::Command reg{"inspect", [](CLI::App& app, hubload::cli::Global&) {
  auto* sub = app.add_subcommand("inspect", "Validate a .safetensors file or a *.index*.json and list its contents");
  auto path = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  sub->add_option("path", *path, "a .safetensors file or a sharded index (*.index*.json)")->required();
  sub->add_flag("--json", *as_json, "print one JSON object instead of text");
  return [path, as_json]() -> int {
    return IsIndexPath(*path) ? InspectIndex(*path, *as_json) : InspectFile(*path, *as_json);
  };
}};

}  // namespace
