// Sharded checkpoint index files (`*.safetensors.index.json`,
// loading-semantics.md B and A.6).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "hubload/reasons.h"
#include "hubload/safetensors.h"
#include "loader/safetensors/internal.h"

namespace hubload::safetensors {

using internal::FormatError;
using json = nlohmann::json;

namespace {

// Byte offset where nlohmann's parser gave up on `text` (its SAX interface
// reports it), for "not valid JSON" errors that say where (B49 vii).
size_t JsonErrorOffset(std::string_view text) {
  struct Sax {
    size_t at = 0;
    bool null() { return true; }
    bool boolean(bool) { return true; }
    bool number_integer(json::number_integer_t) { return true; }
    bool number_unsigned(json::number_unsigned_t) { return true; }
    bool number_float(json::number_float_t, const json::string_t&) { return true; }
    bool string(json::string_t&) { return true; }
    bool binary(json::binary_t&) { return true; }
    bool start_object(std::size_t) { return true; }
    bool key(json::string_t&) { return true; }
    bool end_object() { return true; }
    bool start_array(std::size_t) { return true; }
    bool end_array() { return true; }
    bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception&) {
      at = position;
      return false;
    }
  } sax;
  try {
    json::sax_parse(text.begin(), text.end(), &sax);
  } catch (...) {  // the SAX interface reports errors; nothing may escape anyway
  }
  return std::min(sax.at, text.size());  // 1-based; the end of input counts as one more
}

}  // namespace

bool IsValidShardName(std::string_view name, std::string_view suffix) {
  if (name.size() <= suffix.size()) return false;
  if (name.substr(name.size() - suffix.size()) != suffix) return false;
  for (char c : name) {
    if (c == '/' || c == '\\' || c == '\0') return false;
  }
  if (name.find("..") != std::string_view::npos) return false;
  if (name.find(':') != std::string_view::npos) return false;  // drive ("C:") or stream syntax
  return true;
}

Result<Index> ParseIndex(std::string_view json_text, std::string_view file_label, std::string_view shard_suffix) {
  if (!internal::IsValidUtf8(json_text)) {
    return FormatError(reason::kInvalidIndexJson, file_label, {}, "index is not valid UTF-8");
  }
  if (!internal::JsonDepthWithin(json_text, internal::kMaxJsonDepth)) {
    return FormatError(reason::kInvalidIndexJson, file_label, {},
                       "index JSON nests deeper than " + std::to_string(internal::kMaxJsonDepth) + " levels");
  }
  json j = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  std::string dup_top, dup_tensor;
  if (!j.is_discarded()) internal::FindDuplicateKeys(json_text, "weight_map", &dup_top, &dup_tensor);
  if (j.is_discarded()) {
    return FormatError(reason::kInvalidIndexJson, file_label, {},
                       "index is not valid JSON (parse error at byte " + std::to_string(JsonErrorOffset(json_text)) +
                           " of " + std::to_string(json_text.size()) + ")");
  }
  if (!j.is_object()) {
    return FormatError(reason::kInvalidIndexJson, file_label, {},
                       std::string("index is a JSON ") + j.type_name() + ", not an object");
  }
  if (!dup_top.empty()) {
    return FormatError(reason::kInvalidIndexJson, file_label, {},
                       "top-level key " + util::Quoted(dup_top) + " appears twice");
  }
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) {
    return FormatError(reason::kInvalidIndexJson, file_label, {},
                       wm == j.end() ? std::string("\"weight_map\" is missing")
                                     : std::string("\"weight_map\" is a JSON ") + wm->type_name() +
                                           ", not an object");
  }
  if (!dup_tensor.empty()) {
    return FormatError(reason::kDuplicateTensor, file_label, dup_tensor, "weight_map lists this tensor more than once");
  }
  Index idx;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it.value().is_string()) {
      return FormatError(reason::kInvalidIndexJson, file_label, it.key(),
                         std::string("weight_map value is a JSON ") + it.value().type_name() +
                             ", not a shard file name");
    }
    const std::string& shard = it.value().get_ref<const std::string&>();  // json: checked (is_string)
    if (!IsValidShardName(shard, shard_suffix)) {
      return FormatError(reason::kInvalidShardName, file_label, it.key(),
                         "shard name " + util::Quoted(shard) + " is not a plain file name ending in " +
                             std::string(shard_suffix) + " (no '/', '\\', '..', drive)");
    }
    idx.weight_map.emplace(it.key(), shard);
    idx.tensors_by_shard[shard].push_back(it.key());  // weight_map iterates in sorted order
  }
  for (const auto& [shard, names] : idx.tensors_by_shard) idx.shards.push_back(shard);
  auto md = j.find("metadata");
  if (md != j.end() && !md->is_null()) {
    if (!md->is_object()) {
      return FormatError(reason::kInvalidIndexJson, file_label, {},
                         std::string("\"metadata\" is a JSON ") + md->type_name() + ", not an object");
    }
    for (auto it = md->begin(); it != md->end(); ++it) {
      const json& v = it.value();
      if (it.key() == "total_size") {
        if (v.is_null()) continue;
        bool whole = false;
        if (v.is_number_unsigned()) {
          idx.total_size = v.get<uint64_t>();  // json: checked (is_number_unsigned)
          whole = true;
        } else if (v.is_number_float()) {
          const double d = v.get<double>();  // json: checked (is_number_float)
          whole = std::isfinite(d) && d >= 0 && d < 18446744073709551616.0 && std::floor(d) == d;
          if (whole) idx.total_size = static_cast<uint64_t>(d);
        }
        if (!whole) {
          return FormatError(reason::kInvalidTotalSize, file_label, {},
                             "metadata.total_size is " + v.dump(-1, ' ', false, json::error_handler_t::replace) + ", not a non-negative integer byte count");
        }
        continue;
      }
      idx.metadata.emplace(it.key(), v.is_string() ? v.get<std::string>()  // json: checked (is_string)
                                                   : v.dump(-1, ' ', false, json::error_handler_t::replace));
    }
  }
  return idx;
}

Result<Index> ReadIndex(const std::string& path, std::string_view shard_suffix) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int e = errno;
    return util::IoError("cannot open", path, e ? e : ENOENT);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return util::IoError("cannot read", path, EIO);
  std::string text = ss.str();
  return ParseIndex(text, path, shard_suffix);
}

namespace {

IndexProblem Problem(std::string_view reason, const std::string& shard, std::string_view tensor,
                     const std::string& what) {
  return IndexProblem{std::string(reason), shard, std::string(tensor),
                      FormatError(reason, shard, tensor, what).message()};
}

// Every disagreement between shard `label` (tensor `names`, file order) and
// the index, in a fixed order: listed-but-absent (index order), then
// unlisted / in another shard (file order). The index must list the shard.
std::vector<IndexProblem> ShardProblems(const Index& index, const std::string& label,
                                        const std::vector<std::string>& listed,
                                        std::span<const std::string_view> names, size_t limit) {
  std::vector<IndexProblem> out;
  std::vector<std::string_view> sorted(names.begin(), names.end());
  std::sort(sorted.begin(), sorted.end());
  for (const auto& name : listed) {
    if (out.size() >= limit) return out;
    if (!std::binary_search(sorted.begin(), sorted.end(), std::string_view(name)))
      out.push_back(Problem(reason::kIndexTensorMissing, label, name,
                            "the index puts this tensor in this shard but it is absent"));
  }
  for (std::string_view name : names) {
    if (out.size() >= limit) return out;
    auto w = index.weight_map.find(std::string(name));
    if (w == index.weight_map.end())
      out.push_back(Problem(reason::kIndexTensorUnlisted, label, name, "the shard holds a tensor the index does not list"));
    else if (w->second != label)
      out.push_back(Problem(reason::kIndexTensorInOtherShard, label, name,
                            "the shard holds this tensor but the index puts it in " + util::Quoted(w->second)));
  }
  return out;
}

}  // namespace

Status CheckShardNamesAgainstIndex(const Index& index, std::string_view shard_name,
                                   std::span<const std::string_view> names) {
  std::string label(shard_name);
  auto it = index.tensors_by_shard.find(label);
  if (it == index.tensors_by_shard.end()) {
    ErrorContext ctx;
    ctx.file = label;
    return Status(Code::kInvalidArgument, label + ": the index names no tensor in this shard", {}, std::move(ctx));
  }
  std::vector<IndexProblem> p = ShardProblems(index, label, it->second, names, 1);
  if (p.empty()) return Status::Ok();
  ErrorContext ctx;
  ctx.file = label;
  ctx.tensor = p[0].tensor;
  return Status(Code::kInvalidFormat, p[0].message, p[0].reason, std::move(ctx));
}

Result<std::vector<std::string>> ShardTensorsNotMappedHere(const Index& index, std::string_view shard_name,
                                                            std::span<const std::string_view> names) {
  std::string label(shard_name);
  auto it = index.tensors_by_shard.find(label);
  if (it == index.tensors_by_shard.end()) return CheckShardNamesAgainstIndex(index, shard_name, names);
  std::vector<std::string> out;
  for (IndexProblem& p : ShardProblems(index, label, it->second, names, SIZE_MAX)) {
    if (p.reason == reason::kIndexTensorMissing) {
      ErrorContext ctx;
      ctx.file = label;
      ctx.tensor = p.tensor;
      return Status(Code::kInvalidFormat, p.message, p.reason, std::move(ctx));
    }
    out.push_back(std::move(p.tensor));
  }
  return out;
}

IndexCheck CheckIndexAgainstShards(const Index& index, const std::vector<ShardTensors>& shards) {
  IndexCheck out;
  // Tensor -> the shards that hold it, for "stored twice".
  std::map<std::string, std::vector<std::string>> holders;
  bool all_read = true;
  for (const ShardTensors& s : shards)
    for (const auto& [name, bytes] : s.tensors) holders[name].push_back(s.shard);
  static const std::vector<std::string> kNone;
  std::set<std::string> twice_reported;
  for (const ShardTensors& s : shards) {
    auto it = index.tensors_by_shard.find(s.shard);
    const std::vector<std::string>& listed = it == index.tensors_by_shard.end() ? kNone : it->second;
    if (!s.present) {
      all_read = false;
      out.problems.push_back(Problem(reason::kIndexShardMissing, s.shard, {},
                                     "the index puts " + std::to_string(listed.size()) +
                                         " tensors in this shard but the file is absent"));
      continue;
    }
    if (!s.unreadable.empty()) {
      all_read = false;
      out.problems.push_back(Problem(reason::kIndexShardUnreadable, s.shard, {}, "cannot be read: " + s.unreadable));
      continue;
    }
    std::vector<std::string_view> names;
    names.reserve(s.tensors.size());
    for (const auto& [name, bytes] : s.tensors) {
      names.push_back(name);
      out.tensor_bytes += bytes;
    }
    for (IndexProblem& p : ShardProblems(index, s.shard, listed, names, SIZE_MAX)) {
      const auto& h = holders[p.tensor];
      if (p.reason == reason::kIndexTensorInOtherShard && h.size() > 1) {
        if (!twice_reported.insert(p.tensor).second) continue;
        std::string where;
        for (const auto& f : h) where += (where.empty() ? "" : ", ") + util::Quoted(f);
        const auto listed_in = index.weight_map.find(p.tensor);  // present: an "in other shard" problem
        const std::string in =
            listed_in == index.weight_map.end() ? std::string("no shard") : util::Quoted(listed_in->second);
        out.problems.push_back(Problem(reason::kIndexTensorStoredTwice, s.shard, p.tensor,
                                       "the tensor is stored in " + std::to_string(h.size()) + " shards (" + where +
                                           "); the index puts it in " + in));
        continue;
      }
      out.problems.push_back(std::move(p));
    }
  }
  if (all_read) out.total_size_warning = TotalSizeWarning(index, out.tensor_bytes);
  return out;
}

std::string TotalSizeWarning(const Index& index, uint64_t tensor_bytes) {
  if (!index.total_size || *index.total_size == tensor_bytes) return "";
  return "metadata.total_size is " + std::to_string(*index.total_size) + " bytes but the tensors hold " +
         std::to_string(tensor_bytes) + " bytes (" + std::string(reason::kTotalSizeMismatch) + ")";
}

Status CheckShardAgainstIndex(const Index& index, std::string_view shard_name, const Header& shard_header) {
  std::vector<std::string_view> names;
  names.reserve(shard_header.tensors.size());
  for (const auto& t : shard_header.tensors) names.push_back(t.name);
  return CheckShardNamesAgainstIndex(index, shard_name, names);
}

}  // namespace hubload::safetensors
