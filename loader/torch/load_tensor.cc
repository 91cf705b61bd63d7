// safetensors tensor -> at::Tensor: zero-copy views of the mapping, or fresh
// (huge-page) tensors filled by the chunked converter from the mapping or a
// file descriptor. The dtype policy itself is hubload/dtype_policy.h.
#include <ATen/ATen.h>

#include <cstring>

#include "hubload/reasons.h"
#include "hubload/torch_loader.h"
#include "loader/torch/convert.h"
#include "loader/torch/internal.h"

namespace hubload {
using safetensors::Dtype;

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

Status Unconvertible(const safetensors::TensorInfo& info, Dtype to) {
  Status st(Code::kUnsupported,
            "tensor '" + info.name + "' has dtype " + safetensors::DtypeName(info.dtype) +
                ", which hubload cannot load as " + safetensors::DtypeName(to),
            reason::kUnsupportedDtype);
  st.mutable_context().tensor = info.name;
  return st;
}

Result<std::vector<int64_t>> Sizes(const safetensors::TensorInfo& info) {
  std::vector<int64_t> s;
  for (uint64_t d : info.shape) {
    if (d > static_cast<uint64_t>(INT64_MAX)) {
      Status st(Code::kUnsupported, "tensor '" + info.name + "' has a dimension larger than 2^63-1",
                reason::kShapeTooLarge);
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

// A fresh contiguous CPU tensor; large ones on huge-page memory freed with the tensor.
at::Tensor FreshTensor(const std::vector<int64_t>& sizes, at::ScalarType type, uint64_t nbytes) {
  auto options = at::TensorOptions().device(at::kCPU).dtype(type);
  if (nbytes >= convert::kHugeOutputBytes) {
    if (void* p = convert::AllocateOutput(nbytes)) {
      try {
        return at::from_blob(
            p, sizes, [nbytes](void* q) { convert::FreeOutput(q, nbytes); }, options);
      } catch (...) {
        convert::FreeOutput(p, nbytes);
        throw;
      }
    }
  }
  return at::empty(sizes, options);
}

struct Plan {
  Dtype to;
  at::ScalarType type;
  std::vector<int64_t> sizes;
  uint64_t n = 0;
};

Result<Plan> PlanTensor(const safetensors::TensorInfo& info, const LoadOptions& options) {
  Plan p;
  HUBLOAD_ASSIGN_OR_RETURN(p.to, LoadedSafetensorsDtype(info.dtype, info.name, options));
  auto type = NativeType(p.to);
  if (!type || !convert::CanConvert(info.dtype, p.to)) return Unconvertible(info, p.to);
  p.type = *type;
  HUBLOAD_ASSIGN_OR_RETURN(p.sizes, Sizes(info));
  p.n = info.num_elements();
  return p;
}

Result<at::Tensor> Converted(const Plan& p, const safetensors::TensorInfo& info, const convert::Source& src,
                             const std::string& label, size_t threads) {
  try {
    at::Tensor t = FreshTensor(p.sizes, p.type, convert::BytesOf(p.to, p.n));
    if (p.n == 0) return t;
    HUBLOAD_RETURN_IF_ERROR(
        convert::ConvertChunked(src, info.dtype, p.to, p.n, static_cast<uint8_t*>(t.data_ptr()), label, info.name,
                                threads));
    return t;
  } catch (const std::exception& e) {
    return internal::FromTorchError(e, "tensor '" + info.name + "' of '" + label + "'");
  }
}

}  // namespace

Result<at::ScalarType> LoadedDtype(Dtype d, const std::string& name, const LoadOptions& options) {
  HUBLOAD_ASSIGN_OR_RETURN(Dtype to, LoadedSafetensorsDtype(d, name, options));
  auto type = NativeType(to);
  if (!type) {
    safetensors::TensorInfo info;
    info.name = name;
    info.dtype = d;
    return Unconvertible(info, to);
  }
  return *type;
}

namespace internal {

std::optional<at::ScalarType> NativeScalarType(Dtype d) { return NativeType(d); }

Result<at::Tensor> TensorFromBytes(const safetensors::TensorInfo& info, std::span<const uint8_t> bytes,
                                   std::shared_ptr<const void> keepalive, const LoadOptions& options,
                                   const std::string& label, bool in_file_mapping) {
  HUBLOAD_ASSIGN_OR_RETURN(Plan p, PlanTensor(info, options));
  if (bytes.size() != info.nbytes() || convert::BytesOf(info.dtype, p.n) != info.nbytes()) {
    Status st(Code::kInvalidFormat, "tensor '" + info.name + "' lies outside '" + label + "'",
              reason::kTensorOutOfRange);
    st.mutable_context().tensor = info.name;
    return st;
  }
  const bool aligned = reinterpret_cast<uintptr_t>(bytes.data()) % at::elementSize(p.type) == 0;
  if (p.to == info.dtype && p.n > 0 && aligned && !options.force_copy) {
    try {
      std::shared_ptr<const void> keep = std::move(keepalive);
      return at::from_blob(
          const_cast<uint8_t*>(bytes.data()), p.sizes, [keep](void*) mutable { keep.reset(); },
          at::TensorOptions().device(at::kCPU).dtype(p.type));
    } catch (const std::exception& e) {
      return FromTorchError(e, "tensor '" + info.name + "' of '" + label + "'");
    }
  }
  convert::Source src;
  src.bytes = bytes.data();
  src.release_pages = in_file_mapping;
  return Converted(p, info, src, label, options.conversion_threads);
}

}  // namespace internal

Result<at::Tensor> LoadTensor(const safetensors::SafetensorsFile& file, const safetensors::TensorInfo& info,
                              const LoadOptions& options) {
  auto bytes = file.data(info);
  if (bytes.size() != info.nbytes()) {
    Status st(Code::kInvalidFormat, "tensor '" + info.name + "' lies outside '" + FileLabel(file) + "'",
              reason::kTensorOutOfRange);
    st.mutable_context().tensor = info.name;
    return st;
  }
  // The bytes are in the file's read-only MAP_SHARED mapping: converted pages may be released.
  return internal::TensorFromBytes(info, bytes, file.mapping(), options, FileLabel(file), /*in_file_mapping=*/true);
}

Result<at::Tensor> LoadTensorFromFd(int fd, uint64_t offset, const safetensors::TensorInfo& info,
                                    const LoadOptions& options, const std::string& label) {
  HUBLOAD_ASSIGN_OR_RETURN(Plan p, PlanTensor(info, options));
  uint64_t end = 0;
  if (fd < 0 || convert::BytesOf(info.dtype, p.n) != info.nbytes() ||
      __builtin_add_overflow(offset, info.nbytes(), &end) || end > static_cast<uint64_t>(INT64_MAX)) {
    Status st(Code::kInvalidArgument,
              "LoadTensorFromFd: tensor '" + info.name + "' of '" + label + "': bad descriptor, offset or byte count",
              reason::kInvalidTensorSource);
    st.mutable_context().tensor = info.name;
    st.mutable_context().file = label;
    return st;
  }
  convert::Source src;
  src.fd = fd;
  src.offset = offset;
  return Converted(p, info, src, label, options.conversion_threads);
}

Status internal::NameTensor(const Status& st, const std::string& name) {
  return st.message().find("'" + name + "'") == std::string::npos ? st.WithPrefix("tensor '" + name + "'") : st;
}

Status ForEachTensor(const safetensors::SafetensorsFile& file, const LoadOptions& options,
                     const std::function<Status(const std::string&, at::Tensor)>& fn) {
  for (const auto& info : file.header().tensors) {
    auto t = LoadTensor(file, info, options);
    if (!t.ok()) return t.status().WithPrefix("'" + FileLabel(file) + "'");
    Status st = fn(info.name, std::move(t).value());
    if (!st.ok()) return internal::NameTensor(st, info.name);
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

}  // namespace hubload
