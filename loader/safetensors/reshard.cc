// Lossless, byte-level resharding of safetensors checkpoints, and the steps
// it shares with SaveSharded (index file, stale-file removal).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "hubload/dtype_policy.h"
#include "hubload/reasons.h"
#include "hubload/resolve.h"
#include "hubload/split.h"
#include "loader/safetensors/internal.h"
#include "util/file_io.h"
#include "util/json.h"

namespace hubload {
namespace fs = std::filesystem;
using safetensors::Dtype;

namespace safetensors::internal {

Status WriteShardIndex(const std::string& path, uint64_t total_size, const nlohmann::ordered_json& metadata,
                       const std::map<std::string, std::string>& weight_map) {
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  meta["total_size"] = total_size;
  for (const auto& [k, v] : metadata.items())
    if (k != "total_size") meta[k] = v;
  nlohmann::ordered_json wm = nlohmann::ordered_json::object();
  for (const auto& [tensor, file] : weight_map) wm[tensor] = file;
  nlohmann::ordered_json idx = nlohmann::ordered_json::object();
  idx["metadata"] = std::move(meta);
  idx["weight_map"] = std::move(wm);
  std::string text;
  try {
    text = util::DumpJson(idx, 2) + "\n";
  } catch (const std::exception& e) {  // invalid UTF-8 in a name
    return Status(Code::kInvalidArgument, "cannot write the index '" + path + "': " + e.what(), reason::kInvalidName);
  }
  util::AtomicWriteOptions o;
  o.durable = true;
  return util::AtomicWriteFile(path, text, o);
}

std::vector<std::string> RemoveStaleShardFiles(const std::string& dir, const std::string& weights_name,
                                               const std::string& variant, const std::set<std::string>& keep) {
  // Exactly `{stem}[.V].safetensors`, `{stem}[.V]-NNNNN-of-NNNNN.safetensors` and the index name
  // (the current naming; other variants and legacy names are never touched).
  const std::string index_name = IndexFilename(weights_name, variant);
  auto stale = [&](const std::string& fname) {
    if (fname == index_name) return true;
    auto w = ParseWeightsFileName(fname);
    return w && !w->pickle && !w->legacy_variant && w->kind != WeightsFileName::Kind::kIndex &&
           w->stem == weights_name && w->variant == variant;
  };
  std::vector<std::string> to_remove;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::string fname = it->path().filename().string();
    std::error_code ec2;
    if (!it->is_regular_file(ec2) || keep.count(fname) || !stale(fname)) continue;
    to_remove.push_back(fname);
  }
  std::sort(to_remove.begin(), to_remove.end());
  // An index that no longer belongs to this save goes first, so that no index ever names deleted shards.
  std::stable_partition(to_remove.begin(), to_remove.end(), [&](const std::string& f) { return f == index_name; });
  std::vector<std::string> removed;
  for (const auto& f : to_remove) {
    std::error_code ec2;
    if (fs::remove(fs::path(dir) / f, ec2)) removed.push_back(f);
  }
  return removed;
}

}  // namespace safetensors::internal

namespace {

struct Source {
  std::string path;
  safetensors::SafetensorsFile file;
};

struct Item {
  const Source* src = nullptr;
  const safetensors::TensorInfo* info = nullptr;
  Dtype out_dtype = Dtype::F32;
  uint64_t out_nbytes = 0;  // bytes as written (as converted to out_dtype)
};

// One merged string map; `origin` remembers which file gave each key.
Status MergeMetadata(const std::map<std::string, std::string>& add, const std::string& file,
                     std::map<std::string, std::string>* into, std::map<std::string, std::string>* origin) {
  for (const auto& [k, v] : add) {
    auto [it, inserted] = into->emplace(k, v);
    if (inserted) {
      (*origin)[k] = file;
      continue;
    }
    if (it->second == v) continue;
    Status st(Code::kInvalidFormat,
              "__metadata__ key '" + k + "' is '" + it->second + "' in '" + (*origin)[k] + "' but '" + v + "' in '" +
                  file + "': resharding would have to drop one of them",
              reason::kMetadataConflict);
    st.mutable_context().file = file;
    return st;
  }
  return Status::Ok();
}

// The source index's metadata (total_size left out): each value as written, and as text
// (strings as they are, other values as compact JSON) for a file's __metadata__.
struct IndexMetadata {
  nlohmann::ordered_json raw = nlohmann::ordered_json::object();
  std::map<std::string, std::string> text;
};

Result<IndexMetadata> ReadIndexMetadata(const std::string& index_path) {
  IndexMetadata out;
  if (index_path.empty()) return out;
  HUBLOAD_ASSIGN_OR_RETURN(std::string text, util::ReadSmallFile(index_path));
  HUBLOAD_ASSIGN_OR_RETURN(nlohmann::json doc, util::ParseJson(text, index_path));
  util::JsonIn in(doc, index_path);
  HUBLOAD_ASSIGN_OR_RETURN(auto meta, in.OptObject("metadata"));
  if (!meta) return out;
  HUBLOAD_ASSIGN_OR_RETURN(auto members, meta->Members());
  for (const auto& [k, v] : members) {
    if (k == "total_size") continue;
    out.raw[k] = nlohmann::ordered_json(v.raw());
    if (v.IsString()) {
      HUBLOAD_ASSIGN_OR_RETURN(out.text[k], v.AsString());
    } else {
      out.text[k] = util::DumpJson(v.raw());
    }
  }
  return out;
}

// Writes one output file: header, then every tensor's bytes; source pages released as written.
// `written(n)` is told the tensor bytes of this shard written so far.
Status WriteShard(const std::string& path, std::vector<safetensors::TensorToWrite> tensors,
                  const std::map<std::string, std::string>& metadata, const std::set<std::string>& mapped,
                  const std::function<void(uint64_t)>& written) {
  HUBLOAD_ASSIGN_OR_RETURN(std::string prefix, safetensors::SerializeHeader(&tensors, metadata));
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  return safetensors::internal::WriteAtomically(path, prefix, [&](int fd, const std::string& tmp) {
    constexpr uint64_t kPiece = 64ull << 20;
    uint64_t done = 0;
    for (const auto& t : tensors) {
      const uint8_t* p = static_cast<const uint8_t*>(t.data);
      for (uint64_t off = 0; off < t.nbytes; off += kPiece) {
        const uint64_t n = std::min(kPiece, t.nbytes - off);
        HUBLOAD_RETURN_IF_ERROR(util::WriteAll(fd, p + off, n, tmp));
        done += n;
        if (written) written(done);
        if (!mapped.count(t.name)) continue;
        const uintptr_t a = (reinterpret_cast<uintptr_t>(p + off) + page - 1) & ~(page - 1);
        const uintptr_t b = reinterpret_cast<uintptr_t>(p + off + n) & ~(page - 1);
        if (b > a) ::madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);
      }
    }
    return Status::Ok();
  });
}

Status Invalid(const std::string& what) {
  return Status(Code::kInvalidArgument, "reshard: " + what, reason::kInvalidArgument);
}

}  // namespace

Result<ReshardResult> ReshardCheckpoint(const ReshardSource& src, const std::string& out_dir,
                                        const ReshardOptions& options) {
  if (options.max_shard_size == 0) return Invalid("max_shard_size must be at least 1 byte");
  if (src.files.empty()) return Invalid("no source file");
  if (options.float_dtype) {
    const Dtype d = *options.float_dtype;
    if (d != Dtype::F32 && d != Dtype::F16 && d != Dtype::BF16)
      return Invalid(std::string("float_dtype must be F32, F16 or BF16, not ") + safetensors::DtypeName(d));
    if (!options.convert) return Invalid("float_dtype is set but no converter is given");
  }
  for (char c : options.variant)
    if (c == '/' || c == '\\' || c == '.' || c == ' ' || c == '\t')
      return Invalid("invalid variant '" + options.variant + "'");
  ReshardResult result;
  std::string weights_name = options.weights_name;
  if (weights_name.empty())
    weights_name = src.weights_name == "diffusion_pytorch_model" ? "diffusion_pytorch_model" : "model";
  if (weights_name.find('/') != std::string::npos) return Invalid("invalid weights name '" + weights_name + "'");
  safetensors::Index index;
  if (!src.index_file.empty()) {
    HUBLOAD_ASSIGN_OR_RETURN(index, safetensors::ReadIndex(src.index_file));
  }

  std::vector<Source> sources;
  sources.reserve(src.files.size());
  std::map<std::string, std::string> file_meta, origin;
  for (const auto& path : src.files) {
    HUBLOAD_ASSIGN_OR_RETURN(auto file, safetensors::SafetensorsFile::Open(path));
    if (!src.index_file.empty())
      HUBLOAD_RETURN_IF_ERROR(
          safetensors::CheckShardAgainstIndex(index, fs::path(path).filename().string(), file.header()));
    HUBLOAD_RETURN_IF_ERROR(MergeMetadata(file.header().metadata, path, &file_meta, &origin));
    sources.push_back({path, std::move(file)});
  }
  HUBLOAD_ASSIGN_OR_RETURN(IndexMetadata index_meta, ReadIndexMetadata(src.index_file));

  // Plan: every tensor in load order with the dtype it is stored as.
  std::vector<SplitEntry> entries;
  std::map<std::string, Item> items;
  uint64_t storage = 0;
  for (const auto& s : sources) {
    for (const auto& info : s.file.header().tensors) {
      Item item{&s, &info, info.dtype, 0};
      if (options.float_dtype && IsFloatingDtype(info.dtype) && info.dtype != *options.float_dtype) {
        item.out_dtype = *options.float_dtype;
        if (!(info.dtype == Dtype::F16 || info.dtype == Dtype::BF16 || info.dtype == Dtype::F32 ||
              info.dtype == Dtype::F64 || info.dtype == Dtype::F8_E4M3 || info.dtype == Dtype::F8_E5M2 ||
              info.dtype == Dtype::F8_E8M0)) {
          Status st(Code::kUnsupported,
                    "tensor '" + info.name + "' of '" + s.path + "' has dtype " + safetensors::DtypeName(info.dtype) +
                        ", which hubload cannot convert to " + safetensors::DtypeName(*options.float_dtype) +
                        " (reshard without a dtype keeps it as stored)",
                    reason::kUnsupportedDtype);
          st.mutable_context().tensor = info.name;
          st.mutable_context().file = s.path;
          return st;
        }
      }
      const uint64_t n = info.num_elements();
      const uint64_t bytes = item.out_dtype == info.dtype
                                 ? info.nbytes()
                                 : n * static_cast<uint64_t>(safetensors::DtypeBits(item.out_dtype)) / 8;
      item.out_nbytes = bytes;
      entries.push_back({info.name, bytes, ++storage});
      if (!items.emplace(info.name, item).second) break;  // SplitStateDict names the duplicate
    }
  }
  HUBLOAD_ASSIGN_OR_RETURN(StateDictSplit split, SplitStateDict(entries, options.max_shard_size,
                                                                ShardFilenamePattern(weights_name, options.variant)));
  result.total_size = split.total_size;
  if (split.filename_to_tensors.empty())  // no tensor at all: still one (empty) file, with the metadata
    split.filename_to_tensors.emplace_back(AddVariant(weights_name + ".safetensors", options.variant),
                                           std::vector<std::string>{});

  std::map<std::string, std::string> out_meta = file_meta;
  if (!split.is_sharded && !src.index_file.empty())
    HUBLOAD_RETURN_IF_ERROR(MergeMetadata(index_meta.text, src.index_file, &out_meta, &origin));
  out_meta.emplace("format", "pt");

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return util::IoError("cannot create", out_dir, ec.value());
  ReshardProgress prog;
  prog.bytes_total = split.total_size;
  prog.files_total = split.filename_to_tensors.size();
  for (const auto& [fname, names] : split.filename_to_tensors) {
    prog.file = fname;
    prog.file_bytes_done = 0;
    prog.file_bytes_total = 0;
    for (const auto& name : names)
      if (const auto it = items.find(name); it != items.end()) prog.file_bytes_total += it->second.out_nbytes;
    const uint64_t before = prog.bytes_done;
    auto report = [&](uint64_t n) {
      prog.file_bytes_done = n;
      prog.bytes_done = before + n;
      if (options.on_progress) options.on_progress(prog);
    };
    report(0);
    std::vector<safetensors::TensorToWrite> tw;
    std::vector<ConvertedTensorBytes> converted;  // alive until the shard is written
    std::set<std::string> mapped;
    for (const auto& name : names) {
      const auto found = items.find(name);
      if (found == items.end())
        return Status(Code::kInternal, "reshard: the split names " + name + ", which is not a source tensor");
      const Item& item = found->second;
      safetensors::TensorToWrite w;
      w.name = name;
      w.dtype = item.out_dtype;
      w.shape = item.info->shape;
      if (item.out_dtype == item.info->dtype) {
        auto bytes = item.src->file.data(*item.info);
        w.data = bytes.data();
        w.nbytes = bytes.size();
        mapped.insert(name);
      } else {
        auto c = options.convert(item.src->file, *item.info, item.out_dtype);
        if (!c.ok()) {
          ErrorContext ctx;
          ctx.file = item.src->path;
          ctx.tensor = name;
          return c.status().Annotate(ctx);
        }
        w.data = c->data;
        w.nbytes = c->nbytes;
        converted.push_back(std::move(c).value());
      }
      tw.push_back(std::move(w));
    }
    Status st = WriteShard((fs::path(out_dir) / fname).string(), std::move(tw), out_meta, mapped, report);
    if (!st.ok()) return st.WithPrefix("writing shard '" + fname + "'");
    result.files.push_back(fname);
    ++prog.files_done;
    report(prog.file_bytes_total);
  }
  if (split.is_sharded) {
    nlohmann::ordered_json meta = index_meta.raw;
    if (src.index_file.empty())
      for (const auto& [k, v] : file_meta)
        if (k != "format") meta[k] = v;
    result.index_file = IndexFilename(weights_name, options.variant);
    HUBLOAD_RETURN_IF_ERROR(safetensors::internal::WriteShardIndex((fs::path(out_dir) / result.index_file).string(),
                                                                   split.total_size, meta, split.tensor_to_filename));
  }
  std::set<std::string> keep(result.files.begin(), result.files.end());
  if (!result.index_file.empty()) keep.insert(result.index_file);
  result.removed_stale = safetensors::internal::RemoveStaleShardFiles(out_dir, weights_name, options.variant, keep);
  return result;
}

}  // namespace hubload
