// torch.save checkpoint -> safetensors file (pickle.h ConvertToSafetensors):
// what users do with a Python script today (`save_file({k: v.contiguous()})`),
// from the restricted reader's description, without LibTorch.
#include <cstring>

#include "hubload/pickle.h"
#include "hubload/reasons.h"

namespace hubload::pickle {

namespace {

// The tensor's elements in row-major order, copied out of its storage
// (`storage` spans the storage's bytes). Bounds are checked here too.
Status Gather(const Tensor& t, std::span<const uint8_t> storage, const std::string& label,
              std::vector<uint8_t>* out) {
  const uint64_t es = ElementSize(t.dtype);
  const uint64_t n = t.num_elements();
  out->resize(n * es);
  if (n == 0) return Status::Ok();
  uint64_t last = t.storage_offset;  // highest element index touched
  for (size_t d = 0; d < t.shape.size(); ++d) last += (t.shape[d] - 1) * t.stride[d];
  if ((last + 1) * es > storage.size()) {
    Status st(Code::kInvalidFormat,
              label + ": tensor '" + t.name + "' reaches past its storage (" + std::to_string((last + 1) * es) +
                  " > " + std::to_string(storage.size()) + " bytes)",
              reason::kPickleTensorOutOfRange);
    st.mutable_context().file = label;
    st.mutable_context().tensor = t.name;
    return st;
  }
  const size_t rank = t.shape.size();
  std::vector<uint64_t> idx(rank, 0);
  uint64_t off = t.storage_offset;
  uint8_t* dst = out->data();
  for (uint64_t i = 0; i < n; ++i) {
    std::memcpy(dst + i * es, storage.data() + off * es, es);
    for (size_t d = rank; d-- > 0;) {  // odometer step, innermost first
      if (++idx[d] < t.shape[d]) {
        off += t.stride[d];
        break;
      }
      off -= (t.shape[d] - 1) * t.stride[d];
      idx[d] = 0;
    }
  }
  return Status::Ok();
}

}  // namespace

Status ConvertToSafetensors(const PickleFile& file, const std::string& out_path) {
  const Checkpoint& ck = file.checkpoint();
  const std::string& label = file.path();
  std::vector<safetensors::TensorToWrite> tensors;
  std::vector<std::vector<uint8_t>> copies;  // gathered views, alive until written
  copies.reserve(ck.tensors.size());
  for (const Tensor& t : ck.tensors) {
    if (t.storage >= ck.storages.size())
      return Status(Code::kInvalidFormat, label + ": tensor '" + t.name + "' names no storage",
                    reason::kPickleStorageMissing);
    std::span<const uint8_t> s = file.data(ck.storages[t.storage]);
    safetensors::TensorToWrite w;
    w.name = t.name;
    w.dtype = t.dtype;
    w.shape = t.shape;
    const uint64_t es = ElementSize(t.dtype);
    if (t.is_contiguous() && (t.storage_offset + t.num_elements()) * es <= s.size()) {
      w.data = s.data() + t.storage_offset * es;  // straight from the mapping
      w.nbytes = t.nbytes();
    } else {
      copies.emplace_back();
      HUBLOAD_RETURN_IF_ERROR(Gather(t, s, label, &copies.back()));
      w.data = copies.back().data();
      w.nbytes = copies.back().size();
    }
    tensors.push_back(std::move(w));
  }
  Status st = safetensors::WriteFile(out_path, std::move(tensors));
  if (!st.ok()) return st.WithPrefix("converting '" + label + "' to '" + out_path + "'");
  return Status::Ok();
}

}  // namespace hubload::pickle
