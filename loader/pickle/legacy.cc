// The legacy (non-zip) torch.save format: torch/serialization.py _legacy_save
// writes pickle(MAGIC_NUMBER), pickle(PROTOCOL_VERSION = 1001),
// pickle(sys_info), the state-dict pickle, pickle(sorted storage keys), then
// for each key an int64 element count (native = little-endian) followed by
// the storage's bytes (torch/csrc/generic/serialization.cpp writeFileRaw).
#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

#include "hubload/reasons.h"
#include "loader/pickle/internal.h"

namespace hubload::pickle::internal {

namespace {

// 0x1950a86a20f9469cfc6c, little-endian (torch/serialization.py MAGIC_NUMBER).
constexpr uint8_t kMagic[10] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
constexpr int64_t kProtocolVersion = 1001;

// Runs `parse` over the bytes from `offset` on. Sources not in memory are read
// in a growing window (1 MiB, x4 each time the pickle ran past its end), so a
// 10 GB file costs a read of its pickles only.
template <typename T>
Result<T> WithBytes(const Source& src, uint64_t offset, const Limits& limits,
                    const std::function<Result<T>(const uint8_t*, size_t, bool*)>& parse) {
  const uint64_t avail = src.size() - offset;
  const uint64_t cap = std::min<uint64_t>(avail, limits.max_pickle_bytes);
  if (const uint8_t* mem = src.memory()) {
    bool truncated = false;
    Result<T> r = parse(mem + offset, static_cast<size_t>(cap), &truncated);
    if (!r.ok() && truncated && cap < avail) {
      return Error(reason::kPickleLimit, src.label(),
                   "a pickle longer than Limits::max_pickle_bytes " + std::to_string(limits.max_pickle_bytes));
    }
    return r;
  }
  std::string buf;
  uint64_t window = std::min<uint64_t>(cap, 1 << 20);
  while (true) {
    buf.resize(static_cast<size_t>(window));
    HUBLOAD_RETURN_IF_ERROR(src.ReadAt(offset, buf.data(), buf.size()));
    bool truncated = false;
    Result<T> r = parse(reinterpret_cast<const uint8_t*>(buf.data()), buf.size(), &truncated);
    if (r.ok() || !truncated || window == avail) return r;
    if (window == cap) {
      return Error(reason::kPickleLimit, src.label(),
                   "a pickle longer than Limits::max_pickle_bytes " + std::to_string(limits.max_pickle_bytes));
    }
    window = std::min<uint64_t>(cap, window * 4);
  }
}

Result<PlainValue> Plain(const Source& src, uint64_t* offset, const Limits& limits, const char* what) {
  size_t used = 0;
  HUBLOAD_ASSIGN_OR_RETURN(
      PlainValue v,
      (WithBytes<PlainValue>(src, *offset, limits, [&](const uint8_t* p, size_t n, bool* truncated) {
        return UnpicklePlain(p, n, src.label(), std::string("legacy ") + what + " pickle", limits, &used, truncated);
      })));
  *offset += used;
  return v;
}

}  // namespace

Result<Checkpoint> ReadLegacy(const Source& src, const Limits& limits) {
  uint64_t pos = 0;
  auto magic = Plain(src, &pos, limits, "magic number");
  if (!magic.ok() || magic->kind != PlainValue::kBigInt || magic->bytes.size() != sizeof kMagic ||
      std::memcmp(magic->bytes.data(), kMagic, sizeof kMagic) != 0) {
    return Error(reason::kNotTorchCheckpoint, src.label(),
                 "a pickle that does not start with torch.save's magic number: not a torch checkpoint "
                 "(an arbitrary pickle is never loaded)");
  }
  HUBLOAD_ASSIGN_OR_RETURN(PlainValue protocol, Plain(src, &pos, limits, "protocol version"));
  if (protocol.kind != PlainValue::kInt || protocol.i != kProtocolVersion) {
    return Error(reason::kZipUnsupported, src.label(),
                 "legacy protocol version is not 1001 (the only one torch.save writes)", {}, Code::kUnsupported);
  }
  HUBLOAD_ASSIGN_OR_RETURN(PlainValue sys_info, Plain(src, &pos, limits, "sys_info"));
  bool little = false, found = false;
  if (sys_info.kind == PlainValue::kDict) {
    for (size_t i = 0; i + 1 < sys_info.items.size(); i += 2) {
      if (sys_info.items[i].kind == PlainValue::kString && sys_info.items[i].bytes == "little_endian") {
        found = true;
        little = sys_info.items[i + 1].kind == PlainValue::kBool && sys_info.items[i + 1].i == 1;
      }
    }
  }
  if (!found) return Error(reason::kPickleMalformed, src.label(), "legacy sys_info has no little_endian entry");
  if (!little) {
    return Error(reason::kZipUnsupported, src.label(), "checkpoint written on a big-endian machine", {},
                 Code::kUnsupported);
  }

  size_t used = 0;
  HUBLOAD_ASSIGN_OR_RETURN(
      StateDictPickle sd,
      (WithBytes<StateDictPickle>(src, pos, limits, [&](const uint8_t* p, size_t n, bool* truncated) {
        return UnpickleStateDict(p, n, src.label(), "legacy state dict pickle", limits, /*legacy=*/true, &used,
                                 truncated);
      })));
  pos += used;
  HUBLOAD_ASSIGN_OR_RETURN(PlainValue keys, Plain(src, &pos, limits, "storage key list"));
  if (keys.kind != PlainValue::kList) {
    return Error(reason::kPickleMalformed, src.label(), "legacy storage key list is not a list");
  }
  std::vector<bool> placed(sd.storages.size(), false);
  for (const PlainValue& k : keys.items) {
    if (k.kind != PlainValue::kString && k.kind != PlainValue::kBytes) {
      return Error(reason::kPickleMalformed, src.label(), "legacy storage key list holds a non-string");
    }
    auto it = sd.by_key.find(k.bytes);
    if (it == sd.by_key.end()) {
      return Error(reason::kPickleMalformed, src.label(),
                   "legacy storage key list names " + util::Quoted(k.bytes) + ", which no tensor uses");
    }
    Storage& s = sd.storages[it->second];
    if (placed[it->second]) {
      return Error(reason::kPickleMalformed, src.label(),
                   "legacy storage key " + util::Quoted(k.bytes) + " listed twice");
    }
    placed[it->second] = true;
    uint8_t count_le[8];
    if (src.size() - pos < 8) {
      return Error(reason::kPickleStorageSize, src.label(),
                   "file ends before storage " + util::Quoted(s.key) + " (truncated)");
    }
    HUBLOAD_RETURN_IF_ERROR(src.ReadAt(pos, count_le, 8));
    uint64_t count = 0;
    for (int i = 0; i < 8; ++i) count |= static_cast<uint64_t>(count_le[i]) << (8 * i);
    if (count != s.numel) {
      return Error(reason::kPickleStorageSize, src.label(),
                   "storage " + util::Quoted(s.key) + " is recorded with " + std::to_string(count) +
                       " elements but the pickle declares " + std::to_string(s.numel));
    }
    s.offset = pos + 8;
    if (s.nbytes > src.size() - s.offset) {
      return Error(reason::kPickleStorageSize, src.label(),
                   "storage " + util::Quoted(s.key) + " (" + std::to_string(s.nbytes) +
                       " bytes) reaches past the end of the file (truncated)");
    }
    pos = s.offset + s.nbytes;
  }
  for (size_t i = 0; i < sd.storages.size(); ++i) {
    if (!placed[i]) {
      return Error(reason::kPickleStorageMissing, src.label(),
                   "storage key " + util::Quoted(sd.storages[i].key) + " is not in the legacy storage key list");
    }
  }
  Checkpoint out;
  out.format = Format::kLegacy;
  out.version = kProtocolVersion;
  if (pos != src.size()) {
    out.warnings.push_back(std::to_string(src.size() - pos) + " bytes after the last storage were ignored");
  }
  HUBLOAD_RETURN_IF_ERROR(FinishCheckpoint(std::move(sd), src, &out));
  return out;
}

}  // namespace hubload::pickle::internal
