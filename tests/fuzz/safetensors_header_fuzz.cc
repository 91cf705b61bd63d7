// libFuzzer entry: the input is a whole safetensors file for ParseHeader (and
// its prefixes for PeekHeaderLength), and index JSON text for ParseIndex. A
// parsed header is re-serialized and re-parsed: the writer must accept what the
// reader accepts and reproduce the same tensors.
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "hubload/safetensors.h"

namespace st = hubload::safetensors;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto peek = st::PeekHeaderLength(data, size, size, "fuzz.safetensors");
  auto h = st::ParseHeader(data, size, size, "fuzz.safetensors");
  if (h.ok() != peek.ok() && h.ok()) std::abort();  // a parsed header must have a valid length
  if (h.ok()) {
    for (const auto& t : h->tensors) {
      if (h->Find(t.name) != &t) std::abort();
      if (h->data_start + t.end > size) std::abort();
    }
    // Round trip through the writer (data bytes taken from the input).
    std::vector<st::TensorToWrite> ts;
    for (const auto& t : h->tensors) {
      ts.push_back({t.name, t.dtype, t.shape, data + h->data_start + t.begin, t.nbytes()});
    }
    auto prefix = st::SerializeHeader(&ts, h->metadata);
    if (!prefix.ok()) std::abort();
    std::string file = *prefix;
    for (const auto& t : ts) file.append(static_cast<const char*>(t.data), t.nbytes);
    auto again = st::ParseHeader(reinterpret_cast<const uint8_t*>(file.data()), file.size(), file.size(), "rt");
    if (!again.ok() || again->tensors.size() != h->tensors.size() || again->metadata != h->metadata) std::abort();
  }
  auto idx = st::ParseIndex(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.index.json");
  if (idx.ok()) {
    for (const auto& [name, shard] : idx->weight_map) {
      if (!st::IsValidShardName(shard)) std::abort();
    }
  }
  return 0;
}
