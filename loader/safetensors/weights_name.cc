// The Hugging Face weights file-name grammar (hubload/resolve.h ParseWeightsFileName).
#include <cctype>

#include "hubload/resolve.h"

namespace hubload {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool Digits5(std::string_view s) {
  if (s.size() != 5) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

bool Plain(std::string_view s) {  // a stem or variant: non-empty, no '.', '/', '\\'
  if (s.empty()) return false;
  for (char c : s)
    if (c == '.' || c == '/' || c == '\\' || c == '\0') return false;
  return true;
}

/// "xxx-NNNNN-of-MMMMM" at the end of `s`: fills shard/num and returns the
/// prefix length, or npos; *malformed is set when the form is there but the
/// numbers are impossible (shard 0, or above the count).
size_t ShardSuffix(std::string_view s, int* shard, int* num, bool* malformed) {
  constexpr size_t kLen = 15;  // "-NNNNN-of-MMMMM"
  if (s.size() <= kLen) return std::string_view::npos;
  std::string_view t = s.substr(s.size() - kLen);
  if (t[0] != '-' || !Digits5(t.substr(1, 5)) || t.substr(6, 4) != "-of-" || !Digits5(t.substr(10, 5)))
    return std::string_view::npos;
  int a = std::stoi(std::string(t.substr(1, 5))), b = std::stoi(std::string(t.substr(10, 5)));
  if (a < 1 || a > b) {
    *malformed = true;
    return std::string_view::npos;
  }
  *shard = a;
  *num = b;
  return s.size() - kLen;
}

}  // namespace

std::optional<WeightsFileName> ParseWeightsFileName(std::string_view name) {
  if (name.find('/') != std::string_view::npos || name.find('\\') != std::string_view::npos) return std::nullopt;
  WeightsFileName w;
  // Index files: stem.ext.index.json, stem.ext.index.V.json, stem.ext.V.index.json.
  if (EndsWith(name, ".json")) {
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
      if (rest.rfind("index.", 0) == 0 && EndsWith(rest, ".json") && Plain(rest.substr(6, rest.size() - 11))) {
        w.variant = std::string(rest.substr(6, rest.size() - 11));
        return w;
      }
      if (EndsWith(rest, ".index.json") && Plain(rest.substr(0, rest.size() - 11))) {
        w.variant = std::string(rest.substr(0, rest.size() - 11));
        w.legacy_variant = true;
        return w;
      }
      return std::nullopt;
    }
    return std::nullopt;
  }
  std::string_view body;
  if (EndsWith(name, ".safetensors")) {
    body = name.substr(0, name.size() - 12);
  } else if (EndsWith(name, ".bin")) {
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
  int a = 0, b = 0;
  bool malformed = false;
  if (size_t p = ShardSuffix(head, &a, &b, &malformed); p != std::string_view::npos) {
    // stem-NNNNN-of-MMMMM[.V] (the legacy form when V follows)
    if (!Plain(head.substr(0, p))) return std::nullopt;
    w.kind = WeightsFileName::Kind::kShard;
    w.stem = std::string(head.substr(0, p));
    w.shard = a;
    w.num_shards = b;
    if (!tail.empty()) {
      w.variant = std::string(tail);
      w.legacy_variant = true;
    }
    return w;
  }
  if (malformed || !Plain(head)) return std::nullopt;
  w.stem = std::string(head);
  if (tail.empty()) return w;  // stem.ext
  if (size_t p = ShardSuffix(tail, &a, &b, &malformed); p != std::string_view::npos) {
    if (!Plain(tail.substr(0, p))) return std::nullopt;
    w.kind = WeightsFileName::Kind::kShard;
    w.variant = std::string(tail.substr(0, p));
    w.shard = a;
    w.num_shards = b;
    return w;
  }
  if (malformed) return std::nullopt;
  w.variant = std::string(tail);  // stem.V.ext
  return w;
}

}  // namespace hubload
