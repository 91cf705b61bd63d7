// Sharded save and tensor summaries. ATen only (no torch::nn here); tensors
// themselves: load_tensor.cc.
#include <ATen/ATen.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <spdlog/spdlog.h>
#include <unordered_map>

#include "hubload/reasons.h"
#include "hubload/split.h"
#include "hubload/torch_loader.h"
#include "loader/safetensors/internal.h"
#include "loader/torch/internal.h"
#include "util/digest.h"

namespace hubload {
namespace fs = std::filesystem;
using safetensors::Dtype;

namespace internal {

Status FromTorchError(const std::exception& e, const std::string& what) {
  std::string msg = e.what();
  // c10::Error messages carry a long backtrace after the first line.
  auto nl = msg.find('\n');
  if (nl != std::string::npos) msg = msg.substr(0, nl);
  return Status(Code::kInternal, what + ": LibTorch error: " + msg, reason::kTorchError);
}

std::string ShapeString(at::IntArrayRef s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

}  // namespace internal

// ---------------------------------------------------------------------------
// Summaries.

Result<safetensors::Dtype> SafetensorsDtype(at::ScalarType t) {
  switch (t) {
    case at::kBool: return Dtype::BOOL;
    case at::kByte: return Dtype::U8;
    case at::kChar: return Dtype::I8;
    case at::kShort: return Dtype::I16;
    case at::kInt: return Dtype::I32;
    case at::kLong: return Dtype::I64;
    case at::kHalf: return Dtype::F16;
    case at::kBFloat16: return Dtype::BF16;
    case at::kFloat: return Dtype::F32;
    case at::kDouble: return Dtype::F64;
    case at::kComplexFloat: return Dtype::C64;
    default:
      return Status(Code::kUnsupported, std::string("LibTorch dtype ") + c10::toString(t) + " has no safetensors dtype",
                    reason::kUnsupportedDtype);
  }
}

Result<TensorSummary> SummarizeTensor(const at::Tensor& t) {
  TensorSummary s;
  HUBLOAD_ASSIGN_OR_RETURN(Dtype d, SafetensorsDtype(t.scalar_type()));
  s.dtype = safetensors::DtypeName(d);
  try {
    at::Tensor c = t.to(at::kCPU).contiguous();
    s.shape = c.sizes().vec();
    const size_t nbytes = c.numel() * c.element_size();
    util::Digest digest;
    if (nbytes) digest.Update(c.data_ptr(), nbytes);
    s.sha256 = digest.HexDigest();
    if (c.is_complex()) c = at::view_as_real(c);
    at::Tensor dbl = c.to(at::kDouble).contiguous();
    const double* p = dbl.data_ptr<double>();
    double sum = 0;
    for (int64_t i = 0, n = dbl.numel(); i < n; ++i) sum += p[i];  // sequential, element order
    s.sum = sum;
  } catch (const std::exception& e) {
    return internal::FromTorchError(e, "summary");
  }
  return s;
}

// ---------------------------------------------------------------------------
// Sharded save.

namespace {

struct Prepared {
  std::string name;
  at::Tensor tensor;  // contiguous CPU
  Dtype dtype;
};

std::string Quoted(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out;
}

// The name kept for tensors that are one storage viewed identically: the tie
// target SaveOptions::tied names for a member (B51 a), else the alphabetically
// first name, with a warning (B51 b: no tie was declared).
std::string KeptAliasName(const std::vector<std::string>& names, const std::map<std::string, std::string>& tied,
                          std::vector<std::string>* warnings) {
  std::string declared;
  for (const auto& n : names) {
    auto it = tied.find(n);
    if (it != tied.end() && std::find(names.begin(), names.end(), it->second) != names.end() &&
        (declared.empty() || it->second < declared))
      declared = it->second;
  }
  if (!declared.empty()) return declared;
  const std::string kept = *std::min_element(names.begin(), names.end());
  std::vector<std::string> dropped;
  for (const auto& n : names)
    if (n != kept) dropped.push_back(n);
  warnings->push_back("tensors " + Quoted(names) + " share one storage and no tie is declared (SaveOptions::tied): '" +
                      kept + "' (the alphabetically first name) is saved and " + Quoted(dropped) +
                      " recorded as aliases of it");
  return kept;
}

// Declared ties between tensors in different storages (B51 d, e): equal dtype,
// shape and values -> the alias is saved once, as its target; different ->
// both are saved, with a warning (a tie that no longer holds is never dropped).
void ApplyDeclaredTies(const StateDict& state_dict, const std::map<std::string, std::string>& tied,
                       SaveResult* result) {
  std::map<std::string, const at::Tensor*> by_name;
  for (const auto& [n, t] : state_dict) by_name[n] = &t;
  for (const auto& [alias, target] : tied) {
    auto a = by_name.find(alias);
    auto t = by_name.find(target);
    if (alias == target || a == by_name.end() || t == by_name.end() || result->aliases.count(alias)) continue;
    std::string kept = target;
    if (auto k = result->aliases.find(target); k != result->aliases.end()) kept = k->second;
    if (kept == alias) continue;  // the tie is already the other way round
    const at::Tensor& x = *a->second;
    const at::Tensor& y = *t->second;
    std::string differs;
    if (x.scalar_type() != y.scalar_type()) {
      differs = "dtypes differ";
    } else if (x.sizes() != y.sizes()) {
      differs = "shapes differ (" + internal::ShapeString(x.sizes()) + " vs " + internal::ShapeString(y.sizes()) + ")";
    } else if (!at::equal(x.to(at::kCPU), y.to(at::kCPU))) {
      differs = "values differ";
    }
    if (differs.empty()) {
      result->aliases[alias] = kept;
    } else {
      result->warnings.push_back("tie '" + alias + "' -> '" + target + "' is declared but the tensors' " + differs +
                                 ": both are saved");
    }
  }
}

}  // namespace

Result<SaveResult> SaveSharded(const StateDict& state_dict, const std::string& dir, const SaveOptions& options) {
  uint64_t max_shard = 0;
  if (auto* b = std::get_if<uint64_t>(&options.max_shard_size)) {
    max_shard = *b;
    if (max_shard == 0)
      return Status(Code::kInvalidArgument, "max_shard_size must be > 0", reason::kInvalidSize);
  } else {
    HUBLOAD_ASSIGN_OR_RETURN(max_shard, ParseMaxShardSize(std::get<std::string>(options.max_shard_size)));
  }
  if (options.weights_name.empty() || options.weights_name.find('/') != std::string::npos)
    return Status(Code::kInvalidArgument, "invalid weights name '" + options.weights_name + "'", reason::kInvalidName);
  for (char c : options.variant)
    if (c == '/' || c == '\\' || c == '.' || std::isspace(static_cast<unsigned char>(c)))
      return Status(Code::kInvalidArgument, "invalid variant '" + options.variant + "'", reason::kInvalidVariant);

  SaveResult result;
  std::vector<SplitEntry> entries;
  std::map<std::string, Prepared> prepared;
  try {
    // Group tensors by storage to find aliases (huggingface_hub _remove_duplicate_names).
    struct View {
      std::string name;
      int64_t offset;
      std::vector<int64_t> sizes, strides;
      at::ScalarType dtype;
      uint64_t begin, end;
    };
    std::map<std::pair<uintptr_t, uint64_t>, std::vector<View>> groups;
    std::set<std::string> seen;
    for (const auto& [name, t] : state_dict) {
      if (!seen.insert(name).second)
        return Status(Code::kInvalidArgument, "state dict entry '" + name + "' appears twice",
                      reason::kDuplicateTensor);
      if (!t.defined())
        return Status(Code::kInvalidArgument, "state dict entry '" + name + "' is an undefined tensor",
                      reason::kInvalidTensor);
      auto d = SafetensorsDtype(t.scalar_type());
      if (!d.ok()) return d.status().WithPrefix("tensor '" + name + "'");
      if (t.numel() == 0 || !t.has_storage() || t.storage().data() == nullptr) continue;
      uint64_t isz = t.element_size();
      uint64_t lo = t.storage_offset(), hi = t.storage_offset();
      for (int64_t i = 0; i < t.dim(); ++i) hi += static_cast<uint64_t>((t.size(i) - 1) * t.stride(i));
      groups[{reinterpret_cast<uintptr_t>(t.storage().data()), t.storage().nbytes()}].push_back(
          {name, t.storage_offset(), t.sizes().vec(), t.strides().vec(), t.scalar_type(), lo * isz, (hi + 1) * isz});
    }
    std::unordered_map<std::string, uint64_t> storage_of;
    uint64_t next_id = 1;
    for (auto& [key, views] : groups) {
      uint64_t id = next_id++;
      std::vector<std::vector<View*>> aliases;  // exact-alias classes
      for (auto& v : views) {
        storage_of[v.name] = id;
        bool placed = false;
        for (auto& cls : aliases) {
          View* r = cls[0];
          if (r->offset == v.offset && r->sizes == v.sizes && r->strides == v.strides && r->dtype == v.dtype) {
            cls.push_back(&v);
            placed = true;
            break;
          }
        }
        if (!placed) aliases.push_back({&v});
      }
      for (size_t i = 0; i < aliases.size(); ++i)
        for (size_t j = i + 1; j < aliases.size(); ++j) {
          View* a = aliases[i][0];
          View* b = aliases[j][0];
          if (a->begin < b->end && b->begin < a->end)
            return Status(Code::kInvalidArgument,
                          "tensors '" + a->name + "' and '" + b->name +
                              "' share memory but are different views of it; safetensors stores each byte once — "
                              "clone one of them before saving",
                          reason::kSharedTensorOverlap);
        }
      for (auto& cls : aliases) {
        if (cls.size() < 2) continue;
        std::vector<std::string> names;
        for (View* v : cls) names.push_back(v->name);
        const std::string kept = KeptAliasName(names, options.tied, &result.warnings);
        for (const auto& n : names)
          if (n != kept) result.aliases[n] = kept;
      }
    }
    ApplyDeclaredTies(state_dict, options.tied, &result);
    // Bytes written per storage: each kept view's own bytes (a row of a large
    // storage counts as the row: B51); SplitStateDict sizes a storage group by
    // its first entry, so every entry carries the group's sum.
    std::unordered_map<uint64_t, uint64_t> group_bytes;
    for (const auto& [name, t] : state_dict) {
      auto sid = storage_of.find(name);
      if (result.aliases.count(name) || sid == storage_of.end()) continue;
      group_bytes[sid->second] += static_cast<uint64_t>(t.numel()) * t.element_size();
    }
    for (const auto& [name, t] : state_dict) {
      if (result.aliases.count(name)) continue;
      at::Tensor c = t.to(at::kCPU).contiguous();  // views and channels-last: logical row-major bytes
      SplitEntry e;
      e.name = name;
      auto sid = storage_of.find(name);
      if (sid != storage_of.end()) {
        e.storage_id = sid->second;
        e.nbytes = group_bytes[sid->second];
      } else {
        e.nbytes = static_cast<uint64_t>(t.numel()) * t.element_size();
      }
      entries.push_back(e);
      prepared[name] = {name, c, *SafetensorsDtype(t.scalar_type())};
    }
  } catch (const std::exception& e) {
    return internal::FromTorchError(e, "preparing the state dict");
  }

  const std::string pattern = ShardFilenamePattern(options.weights_name, options.variant);
  HUBLOAD_ASSIGN_OR_RETURN(StateDictSplit split, SplitStateDict(entries, max_shard, pattern));
  result.total_size = split.total_size;

  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    Status st(Code::kIOError, "cannot create '" + dir + "': " + ec.message(), reason::kMkdirFailed);
    st.mutable_context().file = dir;
    return st;
  }

  std::map<std::string, std::string> file_meta = {{"format", "pt"}};
  if (!split.is_sharded) {
    for (const auto& [k, v] : options.metadata) file_meta[k] = v;
    for (const auto& [k, v] : result.aliases) file_meta[k] = v;
    file_meta["format"] = "pt";
  }
  for (const auto& [fname, names] : split.filename_to_tensors) {
    std::vector<safetensors::TensorToWrite> tw;
    for (const auto& n : names) {
      const auto found = prepared.find(n);
      if (found == prepared.end())
        return Status(Code::kInternal, "save: the split names " + n + ", which is not in the state dict");
      const Prepared& p = found->second;
      safetensors::TensorToWrite w;
      w.name = n;
      w.dtype = p.dtype;
      for (int64_t s : p.tensor.sizes()) w.shape.push_back(static_cast<uint64_t>(s));
      w.nbytes = static_cast<uint64_t>(p.tensor.numel()) * p.tensor.element_size();
      w.data = w.nbytes ? p.tensor.data_ptr() : nullptr;
      tw.push_back(std::move(w));
    }
    std::string path = (fs::path(dir) / fname).string();
    Status st = safetensors::WriteFile(path, std::move(tw), file_meta);
    if (!st.ok()) return st.WithPrefix("saving shard '" + fname + "'");
    result.files.push_back(fname);
  }
  const std::string index_name = IndexFilename(options.weights_name, options.variant);
  if (split.is_sharded) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : options.metadata) meta[k] = v;
    for (const auto& [k, v] : result.aliases) meta[k] = v;
    std::map<std::string, std::string> wm;
    for (const auto& [tname, fname] : split.tensor_to_filename)
      if (!result.aliases.count(tname)) wm[tname] = fname;
    HUBLOAD_RETURN_IF_ERROR(safetensors::internal::WriteShardIndex((fs::path(dir) / index_name).string(),
                                                                   split.total_size, meta, wm));
    result.index_file = index_name;
  }
  std::set<std::string> keep(result.files.begin(), result.files.end());
  if (!result.index_file.empty()) keep.insert(result.index_file);
  result.removed_stale = safetensors::internal::RemoveStaleShardFiles(dir, options.weights_name, options.variant, keep);
  for (const auto& w : result.warnings) spdlog::warn("save to {}: {}", dir, w);
  return result;
}

}  // namespace hubload
