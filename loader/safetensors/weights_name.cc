// The Hugging Face weights file-name grammar (hubload/resolve.h ParseWeightsFileName).
#include <cctype>

#include "hubload/resolve.h"
#include "util/text.h"

namespace hubload {
namespace {

bool Plain(std::string_view s) {  // a stem or variant: non-empty, no '.', '/', '\\'
  if (s.empty()) return false;
  for (char c : s)
    if (c == '.' || c == '/' || c == '\\' || c == '\0') return false;
  return true;
}

}  // namespace

std::optional<WeightsFileName> ParseWeightsFileName(std::string_view name) {
  if (name.find('/') != std::string_view::npos || name.find('\\') != std::string_view::npos) return std::nullopt;
  WeightsFileName w;
  // Index files: stem.ext.index.json, stem.ext.index.V.json, stem.ext.V.index.json.
  if (name.ends_with(".json")) {
    for (std::string_view ext : {std::string_view(".safetensors."), std::string_view(".bin.")}) {
      size_t pos = name.find(ext);
      if (pos == std::string_view::npos) continue;
      std::string_view stem = name.substr(0, pos);
      std::string_view rest = name.substr(pos + ext.size());  // index.json | index.V.json | V.index.json
      if (!Plain(stem)) return std::nullopt;
      w.kind = WeightsFileName::Kind::kIndex;
      w.stem = std::string(stem);
      w.pickle = ext == ".bin.";
      if (rest == "index.json") return w;
      if (rest.rfind("index.", 0) == 0 && rest.ends_with(".json") && Plain(rest.substr(6, rest.size() - 11))) {
        w.variant = std::string(rest.substr(6, rest.size() - 11));
        return w;
      }
      if (rest.ends_with(".index.json") && Plain(rest.substr(0, rest.size() - 11))) {
        w.variant = std::string(rest.substr(0, rest.size() - 11));
        w.legacy_variant = true;
        return w;
      }
      return std::nullopt;
    }
    return std::nullopt;
  }
  std::string_view body;
  if (name.ends_with(".safetensors")) {
    body = name.substr(0, name.size() - 12);
  } else if (name.ends_with(".bin")) {
    body = name.substr(0, name.size() - 4);
    w.pickle = true;
  } else {
    return std::nullopt;
  }
  // body: stem | stem.V | stem-NNNNN-of-MMMMM | stem.V-NNNNN-of-MMMMM | stem-NNNNN-of-MMMMM.V (legacy)
  const size_t dot = body.find('.');
  std::string_view head = dot == std::string_view::npos ? body : body.substr(0, dot);
  std::string_view tail = dot == std::string_view::npos ? std::string_view() : body.substr(dot + 1);
  if (dot != std::string_view::npos && !Plain(tail)) {
    // more than one dot in the body
    return std::nullopt;
  }
  const auto head_shard = util::ParseShardSuffix(head);
  if (head_shard && !head_shard->malformed) {
    // stem-NNNNN-of-MMMMM[.V] (the legacy form when V follows)
    if (!Plain(head.substr(0, head_shard->prefix_len))) return std::nullopt;
    w.kind = WeightsFileName::Kind::kShard;
    w.stem = std::string(head.substr(0, head_shard->prefix_len));
    w.shard = head_shard->shard;
    w.num_shards = head_shard->count;
    if (!tail.empty()) {
      w.variant = std::string(tail);
      w.legacy_variant = true;
    }
    return w;
  }
  if (head_shard || !Plain(head)) return std::nullopt;  // a malformed shard suffix
  w.stem = std::string(head);
  if (tail.empty()) return w;  // stem.ext
  if (const auto tail_shard = util::ParseShardSuffix(tail)) {
    if (tail_shard->malformed || !Plain(tail.substr(0, tail_shard->prefix_len))) return std::nullopt;
    w.kind = WeightsFileName::Kind::kShard;
    w.variant = std::string(tail.substr(0, tail_shard->prefix_len));
    w.shard = tail_shard->shard;
    w.num_shards = tail_shard->count;
    return w;
  }
  w.variant = std::string(tail);  // stem.V.ext
  return w;
}

}  // namespace hubload
