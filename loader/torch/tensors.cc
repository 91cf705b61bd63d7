// safetensors -> at::Tensor (zero-copy / converted), local checkpoints, sharded
// save, tensor summaries. ATen only (no torch::nn here).
#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "hubload/split.h"
#include "hubload/torch_loader.h"
#include "loader/torch/convert.h"
#include "loader/torch/internal.h"

namespace hubload {
namespace fs = std::filesystem;
using safetensors::Dtype;

namespace internal {

Status FromTorchError(const std::exception& e, const std::string& what) {
  std::string msg = e.what();
  // c10::Error messages carry a long backtrace after the first line.
  auto nl = msg.find('\n');
  if (nl != std::string::npos) msg = msg.substr(0, nl);
  return Status(Code::kInternal, what + ": LibTorch error: " + msg, "TorchError");
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

namespace {

std::optional<at::ScalarType> NativeType(Dtype d) {
  switch (d) {
    case Dtype::BOOL: return at::kBool;
    case Dtype::U8: return at::kByte;
    case Dtype::I8: return at::kChar;
    case Dtype::I16: return at::kShort;
    case Dtype::I32: return at::kInt;
    case Dtype::I64: return at::kLong;
    case Dtype::F16: return at::kHalf;
    case Dtype::BF16: return at::kBFloat16;
    case Dtype::F32: return at::kFloat;
    case Dtype::F64: return at::kDouble;
    case Dtype::C64: return at::kComplexFloat;
    default: return std::nullopt;
  }
}

bool IsFloating(Dtype d) {
  switch (d) {
    case Dtype::F16:
    case Dtype::BF16:
    case Dtype::F32:
    case Dtype::F64:
    case Dtype::F8_E4M3:
    case Dtype::F8_E5M2:
    case Dtype::F8_E8M0:
      return true;
    default:
      return false;
  }
}

std::optional<convert::Fp8> Fp8Format(Dtype d) {
  switch (d) {
    case Dtype::F8_E4M3: return convert::Fp8::kE4M3FN;
    case Dtype::F8_E5M2: return convert::Fp8::kE5M2;
    case Dtype::F8_E8M0: return convert::Fp8::kE8M0;
    default: return std::nullopt;
  }
}

bool KeepInFp32(const std::string& name, const std::vector<std::string>& keep) {
  if (keep.empty()) return false;
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    std::string_view comp(name.data() + start, (dot == std::string::npos ? name.size() : dot) - start);
    for (const auto& k : keep)
      if (comp == k) return true;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return false;
}

Status Unsupported(const safetensors::TensorInfo& info, const std::string& why) {
  Status st(Code::kUnsupported,
            "tensor '" + info.name + "' has dtype " + safetensors::DtypeName(info.dtype) + ", which " + why,
            "UnsupportedDtype");
  st.mutable_context().tensor = info.name;
  return st;
}

Result<std::vector<int64_t>> Sizes(const safetensors::TensorInfo& info) {
  std::vector<int64_t> s;
  for (uint64_t d : info.shape) {
    if (d > static_cast<uint64_t>(INT64_MAX)) {
      Status st(Code::kUnsupported, "tensor '" + info.name + "' has a dimension larger than 2^63-1", "ShapeTooLarge");
      st.mutable_context().tensor = info.name;
      return st;
    }
    s.push_back(static_cast<int64_t>(d));
  }
  return s;
}

std::string FileLabel(const safetensors::SafetensorsFile& file) {
  return file.mapping() ? file.mapping()->path() : std::string("<unmapped>");
}

}  // namespace

Result<at::ScalarType> LoadedDtype(Dtype d, const std::string& name, const LoadOptions& options) {
  auto native = NativeType(d);
  auto fp8 = Fp8Format(d);
  safetensors::TensorInfo info;
  info.name = name;
  info.dtype = d;
  if (!native && !fp8) {
    if (d == Dtype::U16) return at::kInt;
    if (d == Dtype::U32) return at::kLong;
    if (d == Dtype::U64) return at::kLong;
    return Unsupported(info, "LibTorch 1.13 cannot represent and hubload does not convert");
  }
  if (!IsFloating(d)) return *native;
  bool converting = options.dtype != TargetDtype::kAuto || !native;
  if (converting && KeepInFp32(name, options.keep_in_fp32)) return at::kFloat;
  switch (options.dtype) {
    case TargetDtype::kF32: return at::kFloat;
    case TargetDtype::kF16: return at::kHalf;
    case TargetDtype::kBF16: return at::kBFloat16;
    case TargetDtype::kAuto: break;
  }
  return native ? *native : at::kBFloat16;  // float8 under auto: exact bf16
}

Result<at::Tensor> LoadTensor(const safetensors::SafetensorsFile& file, const safetensors::TensorInfo& info,
                              const LoadOptions& options) {
  auto bytes = file.data(info);
  if (bytes.size() != info.nbytes()) {
    Status st(Code::kInvalidFormat, "tensor '" + info.name + "' lies outside '" + FileLabel(file) + "'",
              "TensorOutOfRange");
    st.mutable_context().tensor = info.name;
    return st;
  }
  return internal::TensorFromBytes(info, bytes, file.mapping(), options, FileLabel(file));
}

namespace internal {

std::optional<at::ScalarType> NativeScalarType(Dtype d) { return NativeType(d); }

Result<at::Tensor> TensorFromBytes(const safetensors::TensorInfo& info, std::span<const uint8_t> bytes,
                                   std::shared_ptr<const void> keepalive, const LoadOptions& options,
                                   const std::string& label) {
  HUBLOAD_ASSIGN_OR_RETURN(at::ScalarType target, LoadedDtype(info.dtype, info.name, options));
  HUBLOAD_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, Sizes(info));
  const uint64_t n = info.num_elements();
  try {
    auto cpu = at::TensorOptions().device(at::kCPU);
    auto native = NativeType(info.dtype);
    if (native) {
      at::Tensor t;
      const size_t item = at::elementSize(*native);
      bool aligned = reinterpret_cast<uintptr_t>(bytes.data()) % item == 0;
      if (n == 0) {
        t = at::empty(sizes, cpu.dtype(*native));
      } else if (info.dtype == Dtype::BF16 && target == at::kFloat) {
        t = at::empty(sizes, cpu.dtype(at::kFloat));  // exact widening, without the generic cast
        convert::BF16ToF32(bytes.data(), t.data_ptr<float>(), n);
        return t;
      } else if (aligned && !options.force_copy) {
        std::shared_ptr<const void> keep = std::move(keepalive);
        t = at::from_blob(const_cast<uint8_t*>(bytes.data()), sizes, [keep](void*) mutable { keep.reset(); },
                          cpu.dtype(*native));
      } else {
        t = at::empty(sizes, cpu.dtype(*native));
        std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
      }
      if (t.scalar_type() != target) t = t.to(target);
      return t;
    }
    if (auto fp8 = Fp8Format(info.dtype)) {
      if (target == at::kBFloat16) {
        at::Tensor t = at::empty(sizes, cpu.dtype(at::kBFloat16));
        convert::Fp8ToBF16(*fp8, bytes.data(), static_cast<uint16_t*>(t.data_ptr()), n);
        return t;
      }
      at::Tensor t = at::empty(sizes, cpu.dtype(at::kFloat));
      convert::Fp8ToF32(*fp8, bytes.data(), t.data_ptr<float>(), n);
      if (target != at::kFloat) t = t.to(target);  // fp16: round to nearest even
      return t;
    }
    if (info.dtype == Dtype::U16) {
      at::Tensor t = at::empty(sizes, cpu.dtype(at::kInt));
      convert::WidenU16(bytes.data(), t.data_ptr<int32_t>(), n);
      return t;
    }
    if (info.dtype == Dtype::U32) {
      at::Tensor t = at::empty(sizes, cpu.dtype(at::kLong));
      convert::WidenU32(bytes.data(), t.data_ptr<int64_t>(), n);
      return t;
    }
    if (info.dtype == Dtype::U64) {
      at::Tensor t = at::empty(sizes, cpu.dtype(at::kLong));
      size_t bad = 0;
      if (!convert::NarrowU64(bytes.data(), t.data_ptr<int64_t>(), n, &bad))
        return Unsupported(info, "holds a value >= 2^63 at element " + std::to_string(bad) +
                                     " (U64 is loaded as int64 only when every value fits)");
      return t;
    }
  } catch (const std::exception& e) {
    return internal::FromTorchError(e, "tensor '" + info.name + "' of '" + label + "'");
  }
  return Unsupported(info, "is not handled");
}

}  // namespace internal

Status ForEachTensor(const safetensors::SafetensorsFile& file, const LoadOptions& options,
                     const std::function<Status(const std::string&, at::Tensor)>& fn) {
  for (const auto& info : file.header().tensors) {
    auto t = LoadTensor(file, info, options);
    if (!t.ok()) return t.status().WithPrefix("'" + FileLabel(file) + "'");
    Status st = fn(info.name, std::move(t).value());
    if (!st.ok()) return st.WithPrefix("tensor '" + info.name + "'");
  }
  return Status::Ok();
}

Result<StateDict> LoadTensors(const safetensors::SafetensorsFile& file, const LoadOptions& options) {
  StateDict out;
  out.reserve(file.header().tensors.size());
  HUBLOAD_RETURN_IF_ERROR(ForEachTensor(file, options, [&](const std::string& name, at::Tensor t) {
    out.emplace_back(name, std::move(t));
    return Status::Ok();
  }));
  return out;
}

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
                    "UnsupportedDtype");
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
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    EVP_Digest(nbytes ? c.data_ptr() : "", nbytes, md, &mdlen, EVP_sha256(), nullptr);
    static const char* hex = "0123456789abcdef";
    for (unsigned i = 0; i < mdlen; ++i) {
      s.sha256 += hex[md[i] >> 4];
      s.sha256 += hex[md[i] & 15];
    }
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

Status WriteTextAtomic(const std::string& path, const std::string& text) {
  std::string tmpl = path + ".tmp.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  int fd = mkstemp(buf.data());
  if (fd < 0) return Status(Code::kIOError, "cannot create a temp file next to '" + path + "': " + std::strerror(errno));
  (void)::fchmod(fd, 0644);  // mkstemp makes 0600; an index is as readable as its shards (writer.cc)
  const char* p = text.data();
  size_t left = text.size();
  int err = 0;
  while (left > 0) {
    ssize_t w = ::write(fd, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      err = errno;
      break;
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  if (!err && ::fsync(fd) != 0) err = errno;
  ::close(fd);
  if (!err && std::rename(buf.data(), path.c_str()) != 0) err = errno;
  if (err) {
    ::unlink(buf.data());
    Code c = (err == ENOSPC || err == EDQUOT || err == EFBIG) ? Code::kDiskFull : Code::kIOError;
    Status st(c, "cannot write '" + path + "': " + std::strerror(err), "WriteFailed");
    st.mutable_context().file = path;
    return st;
  }
  return Status::Ok();
}

struct Prepared {
  std::string name;
  at::Tensor tensor;  // contiguous CPU
  Dtype dtype;
};

}  // namespace

Result<SaveResult> SaveSharded(const StateDict& state_dict, const std::string& dir, const SaveOptions& options) {
  uint64_t max_shard = 0;
  if (auto* b = std::get_if<uint64_t>(&options.max_shard_size)) {
    max_shard = *b;
    if (max_shard == 0) return Status(Code::kInvalidArgument, "max_shard_size must be > 0", "InvalidSize");
  } else {
    HUBLOAD_ASSIGN_OR_RETURN(max_shard, ParseSizeToInt(std::get<std::string>(options.max_shard_size)));
    if (max_shard == 0) return Status(Code::kInvalidArgument, "max_shard_size must be > 0", "InvalidSize");
  }
  if (options.weights_name.empty() || options.weights_name.find('/') != std::string::npos)
    return Status(Code::kInvalidArgument, "invalid weights name '" + options.weights_name + "'", "InvalidName");
  for (char c : options.variant)
    if (c == '/' || c == '\\' || c == '.' || std::isspace(static_cast<unsigned char>(c)))
      return Status(Code::kInvalidArgument, "invalid variant '" + options.variant + "'", "InvalidVariant");

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
        return Status(Code::kInvalidArgument, "state dict entry '" + name + "' appears twice", "DuplicateTensor");
      if (!t.defined())
        return Status(Code::kInvalidArgument, "state dict entry '" + name + "' is an undefined tensor", "InvalidTensor");
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
                          "SharedTensorOverlap");
        }
      for (auto& cls : aliases) {
        if (cls.size() < 2) continue;
        std::string kept = cls[0]->name;
        for (View* v : cls) kept = std::min(kept, v->name);
        for (View* v : cls)
          if (v->name != kept) result.aliases[v->name] = kept;
      }
    }
    for (const auto& [name, t] : state_dict) {
      if (result.aliases.count(name)) continue;
      at::Tensor c = t.to(at::kCPU).contiguous();
      SplitEntry e;
      e.name = name;
      auto sid = storage_of.find(name);
      if (sid != storage_of.end()) {
        e.storage_id = sid->second;
        e.nbytes = t.storage().nbytes();  // huggingface_hub sizes the whole storage
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
    Status st(Code::kIOError, "cannot create '" + dir + "': " + ec.message(), "MkdirFailed");
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
      const Prepared& p = prepared.at(n);
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
    meta["total_size"] = split.total_size;
    for (const auto& [k, v] : options.metadata)
      if (k != "total_size") meta[k] = v;
    for (const auto& [k, v] : result.aliases) meta[k] = v;
    nlohmann::ordered_json wm = nlohmann::ordered_json::object();
    for (const auto& [tname, fname] : split.tensor_to_filename)
      if (!result.aliases.count(tname)) wm[tname] = fname;
    nlohmann::ordered_json idx = {{"metadata", meta}, {"weight_map", wm}};
    HUBLOAD_RETURN_IF_ERROR(WriteTextAtomic((fs::path(dir) / index_name).string(), idx.dump(2) + "\n"));
    result.index_file = index_name;
  }

  // Stale files of exactly this weights name and variant (B27).
  // Exactly `{stem}[.V].safetensors`, `{stem}[.V]-NNNNN-of-NNNNN.safetensors` and the
  // index name (the current naming; other variants and legacy names are never touched).
  auto stale = [&](const std::string& fname) {
    if (fname == index_name) return true;
    auto w = ParseWeightsFileName(fname);
    return w && !w->pickle && !w->legacy_variant && w->kind != WeightsFileName::Kind::kIndex &&
           w->stem == options.weights_name && w->variant == options.variant;
  };
  std::set<std::string> keep(result.files.begin(), result.files.end());
  if (!result.index_file.empty()) keep.insert(result.index_file);
  std::vector<std::string> to_remove;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::string fname = it->path().filename().string();
    std::error_code ec2;
    if (!it->is_regular_file(ec2) || keep.count(fname) || !stale(fname)) continue;
    to_remove.push_back(fname);
  }
  std::sort(to_remove.begin(), to_remove.end());
  // An index that no longer belongs to this save goes first, so that no index ever names deleted shards.
  std::stable_partition(to_remove.begin(), to_remove.end(), [&](const std::string& f) { return f == index_name; });
  for (const auto& f : to_remove) {
    std::error_code ec2;
    if (fs::remove(fs::path(dir) / f, ec2)) result.removed_stale.push_back(f);
  }
  return result;
}

}  // namespace hubload
