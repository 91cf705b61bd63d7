// Test-only writers, independent of the library: pickle opcodes typed in from
// CPython's Lib/pickletools.py, zip archives written by libzip (not minizip,
// which the reader uses), and a state-dict pickle laid out as torch.save's
// protocol-2 output (torch/_tensor.py __reduce_ex__, serialization.py
// persistent_id).
#pragma once

#include <zip.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hubload::testing {

class PickleBytes {
 public:
  PickleBytes& Proto(int p) { return Raw({static_cast<char>(0x80), static_cast<char>(p)}); }
  PickleBytes& Global(const std::string& module, const std::string& name) {
    out_ += 'c' + module + '\n' + name + '\n';
    return *this;
  }
  PickleBytes& StackGlobal(const std::string& module, const std::string& name) {
    return Str(module).Str(name).Raw({static_cast<char>(0x93)});
  }
  PickleBytes& Mark() { return Raw({'('}); }
  PickleBytes& Tuple() { return Raw({'t'}); }
  PickleBytes& Tuple1() { return Raw({static_cast<char>(0x85)}); }
  PickleBytes& EmptyTuple() { return Raw({')'}); }
  PickleBytes& EmptyDict() { return Raw({'}'}); }
  PickleBytes& EmptyList() { return Raw({']'}); }
  PickleBytes& Reduce() { return Raw({'R'}); }
  PickleBytes& Build() { return Raw({'b'}); }
  PickleBytes& SetItems() { return Raw({'u'}); }
  PickleBytes& SetItem() { return Raw({'s'}); }
  PickleBytes& Append() { return Raw({'a'}); }
  PickleBytes& PersId() { return Raw({'Q'}); }
  PickleBytes& None() { return Raw({'N'}); }
  PickleBytes& False() { return Raw({static_cast<char>(0x89)}); }
  PickleBytes& Stop() { return Raw({'.'}); }
  PickleBytes& Put(uint8_t i) { return Raw({'q', static_cast<char>(i)}); }
  PickleBytes& Get(uint8_t i) { return Raw({'h', static_cast<char>(i)}); }
  PickleBytes& Str(const std::string& s) {  // BINUNICODE
    out_ += 'X';
    Le(s.size(), 4);
    out_ += s;
    return *this;
  }
  PickleBytes& Int(int64_t v) {  // BININT (32-bit) or LONG1 8 bytes
    if (v >= INT32_MIN && v <= INT32_MAX) {
      out_ += 'J';
      Le(static_cast<uint32_t>(static_cast<int32_t>(v)), 4);
    } else {
      out_ += static_cast<char>(0x8a);
      out_ += static_cast<char>(8);
      Le(static_cast<uint64_t>(v), 8);
    }
    return *this;
  }
  PickleBytes& Ints(const std::vector<int64_t>& v) {
    Mark();
    for (int64_t x : v) Int(x);
    return Tuple();
  }
  PickleBytes& Raw(std::initializer_list<char> bytes) {
    out_.append(bytes.begin(), bytes.end());
    return *this;
  }
  PickleBytes& Append(const std::string& bytes) {
    out_ += bytes;
    return *this;
  }
  void Le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }

  // ---- torch.save shapes --------------------------------------------------
  /// collections.OrderedDict() on the stack.
  PickleBytes& NewOrderedDict() { return Global("collections", "OrderedDict").EmptyTuple().Reduce(); }
  /// ('storage', torch.<storage_class>, key, 'cpu', numel) as a persistent id.
  PickleBytes& Storage(const std::string& storage_class, const std::string& key, int64_t numel,
                       const std::string& module = "torch") {
    Mark().Str("storage").Global(module, storage_class).Str(key).Str("cpu").Int(numel).Tuple();
    return PersId();
  }
  /// _rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict()).
  PickleBytes& TensorV2(const std::string& storage_class, const std::string& key, int64_t numel, int64_t offset,
                        const std::vector<int64_t>& size, const std::vector<int64_t>& stride) {
    Global("torch._utils", "_rebuild_tensor_v2").Mark();
    Storage(storage_class, key, numel).Int(offset).Ints(size).Ints(stride).False().NewOrderedDict();
    return Tuple().Reduce();
  }

  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

/// A state dict pickle {name: tensor...} as torch.save writes it
/// (OrderedDict, SETITEMS, STOP); `body` appends the items between MARK and SETITEMS.
template <typename F>
std::string StateDictPickle(F body) {
  PickleBytes p;
  p.Proto(2).NewOrderedDict().Mark();
  body(p);
  p.SetItems().Stop();
  return p.str();
}

/// Writes a zip archive at `path` with libzip: entries (name, bytes) in order,
/// stored (or deflated when `compress`). Returns false on a libzip error.
inline bool WriteZip(const std::string& path, const std::vector<std::pair<std::string, std::string>>& entries,
                     bool compress = false) {
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  if (!z) return false;
  for (const auto& [name, bytes] : entries) {
    zip_source_t* src = zip_source_buffer(z, bytes.data(), bytes.size(), 0);
    if (!src) return zip_discard(z), false;
    zip_int64_t idx = zip_file_add(z, name.c_str(), src, ZIP_FL_ENC_UTF_8);
    if (idx < 0) return zip_source_free(src), zip_discard(z), false;
    zip_set_file_compression(z, static_cast<zip_uint64_t>(idx), compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0);
  }
  return zip_close(z) == 0;
}

/// `n` little-endian float32 values 0, 1, 2, ... as bytes.
inline std::string FloatRange(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    float f = static_cast<float>(i);
    out.append(reinterpret_cast<const char*>(&f), 4);
  }
  return out;
}

}  // namespace hubload::testing
