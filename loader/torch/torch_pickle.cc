// pickle::Checkpoint -> at::Tensor views over the mapped file (see
// include/hubload/torch_pickle.h). ATen only.
#include "hubload/torch_pickle.h"
#include "hubload/reasons.h"

#include <ATen/ATen.h>

#include <cstring>
#include <memory>
#include <vector>

#include "loader/torch/internal.h"

namespace hubload {

namespace {

using safetensors::Dtype;

// Same-width integer type carrying the bits of a dtype LibTorch lacks, so a
// strided view can be gathered before the conversion.
std::optional<at::ScalarType> CarrierType(Dtype d) {
  switch (pickle::ElementSize(d)) {
    case 1: return at::kByte;
    case 2: return at::kShort;
    case 4: return at::kInt;
    case 8: return at::kLong;
    default: return std::nullopt;
  }
}

Status OutOfRange(const pickle::PickleFile& file, const pickle::Tensor& t, const std::string& what) {
  Status st(Code::kInvalidFormat, "'" + file.path() + "': tensor '" + t.name + "': " + what, reason::kTensorOutOfRange);
  st.mutable_context().file = file.path();
  st.mutable_context().tensor = t.name;
  return st;
}

class Loader {
 public:
  Loader(const pickle::PickleFile& file, const LoadOptions& options) : file_(file), options_(options) {
    const auto& ck = file.checkpoint();
    bases_.resize(ck.storages.size());
    align_.assign(ck.storages.size(), 1);
    last_use_.assign(ck.storages.size(), 0);
    for (size_t i = 0; i < ck.tensors.size(); ++i) {
      const auto& t = ck.tensors[i];
      if (t.storage >= ck.storages.size()) continue;  // reported when the tensor is made
      align_[t.storage] = std::max<uint64_t>(align_[t.storage], pickle::ElementSize(t.dtype));
      last_use_[t.storage] = i;
    }
  }

  Result<at::Tensor> Make(size_t index) {
    const auto& ck = file_.checkpoint();
    const pickle::Tensor& t = ck.tensors[index];
    if (t.storage >= ck.storages.size() || t.shape.size() != t.stride.size()) {
      return OutOfRange(file_, t, "its storage or geometry does not belong to this file");
    }
    safetensors::TensorInfo info;
    info.name = t.name;
    info.dtype = t.dtype;
    info.shape = t.shape;
    info.end = t.nbytes();
    HUBLOAD_ASSIGN_OR_RETURN(at::ScalarType target, LoadedDtype(t.dtype, t.name, options_));
    std::vector<int64_t> sizes(t.shape.begin(), t.shape.end());
    std::vector<int64_t> strides(t.stride.begin(), t.stride.end());
    const auto native = internal::NativeScalarType(t.dtype);
    const auto carrier = native ? native : CarrierType(t.dtype);
    if (!carrier) return OutOfRange(file_, t, "dtype without a LibTorch carrier");
    if (t.num_elements() == 0) return at::empty(sizes, at::TensorOptions().dtype(target));
    HUBLOAD_ASSIGN_OR_RETURN(at::Tensor base, Base(t));
    const int64_t elem = static_cast<int64_t>(pickle::ElementSize(t.dtype));
    at::Tensor typed = base.narrow(0, 0, base.numel() / elem * elem).view(*carrier);
    at::Tensor v = typed.as_strided(sizes, strides, static_cast<int64_t>(t.storage_offset));
    if (native && target == *native) return v;
    if (native) {
      at::Tensor out = at::empty(sizes, at::TensorOptions().dtype(target));
      out.copy_(v);
      return out;
    }
    at::Tensor c = v.contiguous();
    auto keep = std::make_shared<at::Tensor>(c);
    std::span<const uint8_t> bytes(static_cast<const uint8_t*>(c.data_ptr()), t.nbytes());
    return internal::TensorFromBytes(info, bytes, std::move(keep), options_, file_.path());
  }

  // Drops the loader's reference to storages whose last tensor was `index`.
  void Release(size_t index) {
    const auto& ck = file_.checkpoint();
    if (index < ck.tensors.size()) {
      uint32_t s = ck.tensors[index].storage;
      if (s < bases_.size() && last_use_[s] == index) bases_[s] = at::Tensor();
    }
  }

 private:
  // The storage as a 1-D uint8 tensor: a view of the mapping, or one copy.
  Result<at::Tensor> Base(const pickle::Tensor& t) {
    at::Tensor& base = bases_[t.storage];
    if (base.defined()) return base;
    const pickle::Storage& s = file_.checkpoint().storages[t.storage];
    auto bytes = file_.data(s);
    if (bytes.size() != s.nbytes) return OutOfRange(file_, t, "its storage lies outside the mapped file");
    const int64_t n = static_cast<int64_t>(s.nbytes);
    const bool aligned = reinterpret_cast<uintptr_t>(bytes.data()) % align_[t.storage] == 0;
    if (aligned && !options_.force_copy && n > 0) {
      std::shared_ptr<safetensors::MappedFile> keep = file_.mapping();
      base = at::from_blob(const_cast<uint8_t*>(bytes.data()), {n}, [keep](void*) mutable { keep.reset(); },
                           at::TensorOptions().dtype(at::kByte));
    } else {
      base = at::empty({n}, at::TensorOptions().dtype(at::kByte));
      if (n > 0) std::memcpy(base.data_ptr(), bytes.data(), bytes.size());
    }
    return base;
  }

  const pickle::PickleFile& file_;
  const LoadOptions& options_;
  std::vector<at::Tensor> bases_;
  std::vector<uint64_t> align_;
  std::vector<size_t> last_use_;
};

}  // namespace

Status ForEachPickleTensor(const pickle::PickleFile& file, const LoadOptions& options,
                           const std::function<Status(const std::string&, at::Tensor)>& fn) {
  Loader loader(file, options);
  const auto& tensors = file.checkpoint().tensors;
  for (size_t i = 0; i < tensors.size(); ++i) {
    Result<at::Tensor> t = Status(Code::kInternal, "unset");
    try {
      t = loader.Make(i);
      loader.Release(i);
    } catch (const std::exception& e) {
      t = internal::FromTorchError(e, "tensor '" + tensors[i].name + "' of '" + file.path() + "'");
    }
    if (!t.ok()) return t.status().WithPrefix("'" + file.path() + "'");
    Status st = fn(tensors[i].name, std::move(t).value());
    if (!st.ok()) return internal::NameTensor(st, tensors[i].name);
  }
  return Status::Ok();
}

Result<StateDict> LoadPickleTensors(const pickle::PickleFile& file, const LoadOptions& options) {
  StateDict out;
  out.reserve(file.checkpoint().tensors.size());
  HUBLOAD_RETURN_IF_ERROR(ForEachPickleTensor(file, options, [&](const std::string& name, at::Tensor t) {
    out.emplace_back(name, std::move(t));
    return Status::Ok();
  }));
  return out;
}

Result<StateDict> LoadPickleFile(const std::string& path, const LoadOptions& options, const pickle::Limits& limits) {
  HUBLOAD_ASSIGN_OR_RETURN(pickle::PickleFile file, pickle::PickleFile::Open(path, limits));
  return LoadPickleTensors(file, options);
}

}  // namespace hubload
