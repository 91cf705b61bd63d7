// `hubload inspect PATH [--json] [--strict]`: validates a safetensors file, a
// torch.save checkpoint (described by the restricted reader, nothing loaded or
// run) or a sharded index (`*.index*.json`) and prints its tensors / shards.
// An index is cross-checked with the shards beside it as `load` checks them
// (safetensors::CheckIndexAgainstShards: absent, misplaced, stored twice,
// unlisted tensors, absent shards): exit 1 naming every problem (the first
// ten in text, all in --json). metadata.total_size against the tensors' bytes:
// a warning, an error under --strict.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "hubload/pickle.h"
#include "hubload/resolve.h"
#include "hubload/safetensors.h"
#include "tools/hubload/cli.h"
#include "util/json.h"

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

// The tensors (name, data bytes) of one shard beside the index, read from
// its header (safetensors) or by the restricted reader (.bin), never loaded.
hubload::safetensors::ShardTensors ReadShardTensors(const std::string& dir, const std::string& shard, bool pickle) {
  st::ShardTensors out;
  out.shard = shard;
  const std::string file = dir + shard;
  if (::access(file.c_str(), F_OK) != 0) {
    out.present = false;
    return out;
  }
  if (pickle) {
    auto ck = hubload::pickle::ReadCheckpointFile(file);
    if (!ck.ok()) {
      out.unreadable = ck.status().message();
      return out;
    }
    for (const auto& t : ck->tensors) {
      uint64_t n = 1;
      for (uint64_t d : t.shape) n *= d;
      out.tensors.emplace_back(t.name, n * static_cast<uint64_t>(st::DtypeBits(t.dtype)) / 8);
    }
    return out;
  }
  auto h = st::ReadMetadata(file);
  if (!h.ok()) {
    out.unreadable = h.status().message();
    return out;
  }
  for (const auto& t : h->tensors) out.tensors.emplace_back(t.name, t.nbytes());
  return out;
}

constexpr size_t kMaxListed = 10;  // problems printed before "... and N more"

int InspectIndex(const std::string& path, bool as_json, bool strict) {
  auto w = hubload::ParseWeightsFileName(path.substr(path.find_last_of('/') + 1));
  const bool pickle = w && w->pickle;
  auto r = st::ReadIndex(path, pickle ? ".bin" : ".safetensors");
  if (!r.ok()) return hubload::cli::FailStatus("inspect", r.status(), as_json);
  const st::Index& idx = *r;
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
  std::vector<st::ShardTensors> shards;
  for (const auto& s : idx.shards) shards.push_back(ReadShardTensors(dir, s, pickle));
  // An index alone (no shard beside it) is validated by itself, as before.
  const bool cross_checked = std::any_of(shards.begin(), shards.end(), [](const auto& s) { return s.present; });
  const st::IndexCheck check = cross_checked ? st::CheckIndexAgainstShards(idx, shards) : st::IndexCheck{};
  std::vector<std::string> warnings;
  if (!check.total_size_warning.empty()) warnings.push_back(path + ": " + check.total_size_warning);
  const bool failed = !check.problems.empty() || (strict && !warnings.empty());
  if (as_json) {
    nlohmann::ordered_json j;
    j["weight_map"] = idx.weight_map;
    j["shards"] = idx.shards;
    j["total_size"] = idx.total_size ? nlohmann::ordered_json(*idx.total_size) : nlohmann::ordered_json(nullptr);
    j["cross_checked"] = cross_checked;
    j["tensor_bytes"] = cross_checked ? nlohmann::ordered_json(check.tensor_bytes) : nlohmann::ordered_json(nullptr);
    j["metadata"] = idx.metadata;
    nlohmann::ordered_json problems = nlohmann::ordered_json::array();
    for (const auto& p : check.problems)
      problems.push_back({{"reason", p.reason}, {"shard", p.shard}, {"tensor", p.tensor}, {"message", p.message}});
    j["problems"] = std::move(problems);
    j["warnings"] = warnings;
    j["ok"] = !failed;
    std::printf("%s\n", hubload::util::DumpJson(j, 2).c_str());
    return failed ? 1 : 0;
  }
  std::printf("index %s: %zu tensors in %zu shards", path.c_str(), idx.weight_map.size(), idx.shards.size());
  if (idx.total_size) std::printf(", total_size %llu bytes", static_cast<unsigned long long>(*idx.total_size));
  std::printf("\n");
  for (const auto& [k, v] : idx.metadata) std::printf("metadata %s = %s\n", k.c_str(), v.c_str());
  for (const auto& s : idx.shards) {
    auto t = idx.tensors_by_shard.find(s);
    std::printf("shard %s: %zu tensors\n", s.c_str(), t == idx.tensors_by_shard.end() ? size_t{0} : t->second.size());
  }
  if (!cross_checked) std::printf("no shard beside the index: not cross-checked with the shards\n");
  for (const auto& wline : warnings) std::fprintf(stderr, "%s: %s\n", strict ? "error" : "warning", wline.c_str());
  if (check.problems.empty()) return failed ? 1 : 0;
  std::string msg = path + ": " + std::to_string(check.problems.size()) + " problem(s) between the index and its shards:";
  for (size_t i = 0; i < check.problems.size() && i < kMaxListed; ++i) msg += "\n  " + check.problems[i].message;
  if (check.problems.size() > kMaxListed)
    msg += "\n  ... and " + std::to_string(check.problems.size() - kMaxListed) + " more (the full list: --json)";
  return hubload::cli::Fail("inspect", msg);
}

int InspectFile(const std::string& path, bool as_json) {
  auto r = st::ReadMetadata(path);
  if (!r.ok()) return hubload::cli::FailStatus("inspect", r.status(), as_json);
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
    std::printf("%s\n", hubload::util::DumpJson(j, 2).c_str());
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
  if (!r.ok()) return hubload::cli::FailStatus("inspect", r.status(), as_json);
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
    std::printf("%s\n", hubload::util::DumpJson(j, 2).c_str());
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
  auto strict = std::make_shared<bool>(false);
  sub->add_flag("--json", *as_json, "print one JSON object instead of text");
  sub->add_flag("--strict", *strict,
                "an index whose metadata.total_size differs from the tensors' bytes is an error (else a warning)");
  return [path, as_json, strict]() -> int {
    if (IsIndexPath(*path)) return InspectIndex(*path, *as_json, *strict);
    if (IsPicklePath(*path)) return InspectPickle(*path, *as_json);
    return InspectFile(*path, *as_json);
  };
}};

}  // namespace
