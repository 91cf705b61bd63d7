// `hubload inspect PATH [--json]`: validates a safetensors file, a torch.save
// checkpoint (described by the restricted reader, nothing loaded or run) or a
// sharded index (`*.index*.json`) and prints its tensors / shards.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "hubload/pickle.h"
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
  auto w = hubload::ParseWeightsFileName(path.substr(path.find_last_of('/') + 1));
  auto r = st::ReadIndex(path, w && w->pickle ? ".bin" : ".safetensors");
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

/// A torch.save checkpoint (`pytorch_model.bin`): its description, read by the
/// restricted reader (pickle.h) without loading any tensor or running any code.
int InspectPickle(const std::string& path, bool as_json) {
  auto r = hubload::pickle::ReadCheckpointFile(path);
  if (!r.ok()) return hubload::cli::Fail("inspect", r.status().ToString());
  const hubload::pickle::Checkpoint& ck = *r;
  const char* format = ck.format == hubload::pickle::Format::kZip ? "zip" : "legacy";
  if (as_json) {
    nlohmann::ordered_json j;
    j["format"] = format;
    j["archive"] = ck.archive;
    nlohmann::ordered_json ts = nlohmann::ordered_json::object();
    for (const auto& t : ck.tensors) {
      const auto& s = ck.storages[t.storage];
      ts[t.name] = {{"dtype", st::DtypeName(t.dtype)},    {"shape", t.shape},
                    {"stride", t.stride},                 {"storage_offset", t.storage_offset},
                    {"storage", s.key},                   {"storage_file_offset", s.offset},
                    {"storage_bytes", s.nbytes}};
    }
    j["tensors"] = std::move(ts);
    j["warnings"] = ck.warnings;
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("torch checkpoint %s (%s format): %zu tensors in %zu storages\n", path.c_str(), format,
              ck.tensors.size(), ck.storages.size());
  uint64_t elements = 0, bytes = 0;
  for (const auto& t : ck.tensors) {
    const auto& s = ck.storages[t.storage];
    uint64_t n = 1;
    for (uint64_t d : t.shape) n *= d;
    elements += n;
    std::printf("%s  %s  %s  stride %s  storage %s +%llu\n", t.name.c_str(), st::DtypeName(t.dtype),
                ShapeText(t.shape).c_str(), ShapeText(t.stride).c_str(), s.key.c_str(),
                static_cast<unsigned long long>(t.storage_offset));
  }
  for (const auto& s : ck.storages) bytes += s.nbytes;
  std::printf("total: %zu tensors, %llu elements, %llu storage bytes\n", ck.tensors.size(),
              static_cast<unsigned long long>(elements), static_cast<unsigned long long>(bytes));
  for (const auto& w : ck.warnings) std::printf("warning: %s\n", w.c_str());
  return 0;
}

bool IsPicklePath(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  uint8_t head[16] = {0};
  ssize_t n = ::read(fd, head, sizeof head);
  ::close(fd);
  return n > 0 && hubload::pickle::LooksLikeTorchCheckpoint(std::span<const uint8_t>(head, static_cast<size_t>(n)));
}

hubload::cli::Command reg{"inspect", [](CLI::App& app, hubload::cli::Global&) {
  auto* sub = app.add_subcommand(
      "inspect", "Validate a .safetensors file, a torch.save checkpoint (.bin) or a *.index*.json and list its contents");
  auto path = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  sub->add_option("path", *path, "a .safetensors file, a .bin checkpoint or a sharded index (*.index*.json)")
      ->required();
  sub->add_flag("--json", *as_json, "print one JSON object instead of text");
  return [path, as_json]() -> int {
    if (IsIndexPath(*path)) return InspectIndex(*path, *as_json);
    if (IsPicklePath(*path)) return InspectPickle(*path, *as_json);
    return InspectFile(*path, *as_json);
  };
}};

}  // namespace
