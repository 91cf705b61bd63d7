// libFuzzer entry for the pickle checkpoint reader. The first input byte picks
// the layer: 0 = a whole file (zip via minizip, or legacy), 1 = a bare
// state-dict pickle through the restricted unpickler, 2 = a legacy header
// pickle. Whatever the reader accepts must describe the input consistently:
// every storage inside the file, every tensor's extent inside its storage.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "hubload/pickle.h"
#include "loader/pickle/internal.h"

namespace pk = hubload::pickle;

namespace {

void CheckDescription(const pk::Checkpoint& ck, size_t size) {
  for (const auto& s : ck.storages) {
    if (s.offset > size || s.nbytes > size - s.offset) std::abort();
    if (s.nbytes != s.numel * pk::ElementSize(s.dtype)) std::abort();
  }
  for (const auto& t : ck.tensors) {
    if (t.storage >= ck.storages.size() || t.shape.size() != t.stride.size()) std::abort();
    if (t.num_elements() == 0) continue;
    unsigned __int128 last = t.storage_offset;
    for (size_t i = 0; i < t.shape.size(); ++i) last += static_cast<unsigned __int128>(t.shape[i] - 1) * t.stride[i];
    if ((last + 1) * pk::ElementSize(t.dtype) > ck.storages[t.storage].nbytes) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  pk::Limits limits;
  limits.max_objects = 1 << 20;  // keeps every run small; the defaults are far larger
  limits.max_stack = 1 << 18;
  limits.max_memo = 1 << 16;
  const uint8_t* body = data + 1;
  const size_t n = size - 1;
  switch (data[0] % 3) {
    case 0: {
      auto r = pk::ReadCheckpoint(std::span<const uint8_t>(body, n), "fuzz.bin", limits);
      if (r.ok()) CheckDescription(*r, n);
      break;
    }
    case 1: {
      size_t used = 0;
      auto r = pk::internal::UnpickleStateDict(body, n, "fuzz.bin", "data.pkl", limits, data[0] & 4, &used);
      if (r.ok() && used > n) std::abort();
      break;
    }
    default: {
      size_t used = 0;
      auto r = pk::internal::UnpicklePlain(body, n, "fuzz.bin", "header", limits, &used);
      if (r.ok() && used > n) std::abort();
      break;
    }
  }
  return 0;
}
