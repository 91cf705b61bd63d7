// The torch meaning of a state-dict pickle: the allow-listed globals, the
// rebuild functions (torch/_utils.py: _rebuild_tensor_v2 / _v3,
// _rebuild_parameter[_with_state]; torch/_tensor.py: _rebuild_from_type_v2),
// persistent storage ids (torch/serialization.py persistent_load), and the
// extraction of the flat name -> tensor dict. Only descriptions are built.
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "hubload/reasons.h"
#include "loader/pickle/internal.h"
#include "loader/pickle/unpickler.h"
#include "util/utf8.h"

namespace hubload::pickle::internal {

namespace {

using safetensors::Dtype;

enum class G : uint32_t {
  kOrderedDict,
  kRebuildTensor,        // _rebuild_tensor(storage, offset, size, stride)
  kRebuildTensorV2,      // (storage, offset, size, stride, requires_grad, hooks[, metadata])
  kRebuildTensorV3,      // (storage, offset, size, stride, requires_grad, hooks, dtype[, metadata])
  kRebuildParameter,     // (data, requires_grad, hooks)
  kRebuildParameterWithState,  // (data, requires_grad, hooks, state)
  kRebuildFromTypeV2,    // (func, type, args, state)
  kTensorClass,
  kParameterClass,
  kTorchSize,
  kCodecsEncode,
  kStorageClass,         // payload: Dtype; untyped storages carry U8 with kUntyped
  kDtype,                // payload: Dtype
};
constexpr uint64_t kUntyped = 1ull << 32;

struct GlobalDef {
  G id;
  uint64_t payload = 0;
};

const std::unordered_map<std::string, GlobalDef>& AllowedGlobals() {
  static const auto* table = [] {
    auto* t = new std::unordered_map<std::string, GlobalDef>{
        {"collections.OrderedDict", {G::kOrderedDict}},
        {"torch._utils._rebuild_tensor", {G::kRebuildTensor}},
        {"torch._utils._rebuild_tensor_v2", {G::kRebuildTensorV2}},
        {"torch._utils._rebuild_tensor_v3", {G::kRebuildTensorV3}},
        {"torch._utils._rebuild_parameter", {G::kRebuildParameter}},
        {"torch._utils._rebuild_parameter_with_state", {G::kRebuildParameterWithState}},
        {"torch._tensor._rebuild_from_type_v2", {G::kRebuildFromTypeV2}},
        {"torch.Tensor", {G::kTensorClass}},
        {"torch._tensor.Tensor", {G::kTensorClass}},
        {"torch.nn.parameter.Parameter", {G::kParameterClass}},
        {"torch.Size", {G::kTorchSize}},
        {"_codecs.encode", {G::kCodecsEncode}},
        {"torch.UntypedStorage", {G::kStorageClass, kUntyped | static_cast<uint64_t>(Dtype::U8)}},
        {"torch.storage.UntypedStorage", {G::kStorageClass, kUntyped | static_cast<uint64_t>(Dtype::U8)}},
    };
    const std::pair<const char*, Dtype> storages[] = {
        {"FloatStorage", Dtype::F32},  {"DoubleStorage", Dtype::F64},       {"HalfStorage", Dtype::F16},
        {"BFloat16Storage", Dtype::BF16}, {"LongStorage", Dtype::I64},      {"IntStorage", Dtype::I32},
        {"ShortStorage", Dtype::I16},  {"CharStorage", Dtype::I8},          {"ByteStorage", Dtype::U8},
        {"BoolStorage", Dtype::BOOL},  {"ComplexFloatStorage", Dtype::C64},
    };
    for (const auto& [name, d] : storages) {
      t->emplace(std::string("torch.") + name, GlobalDef{G::kStorageClass, static_cast<uint64_t>(d)});
      t->emplace(std::string("torch.cuda.") + name, GlobalDef{G::kStorageClass, static_cast<uint64_t>(d)});
    }
    const std::pair<const char*, Dtype> dtypes[] = {
        {"float32", Dtype::F32},          {"float64", Dtype::F64},         {"float16", Dtype::F16},
        {"bfloat16", Dtype::BF16},        {"int64", Dtype::I64},           {"int32", Dtype::I32},
        {"int16", Dtype::I16},            {"int8", Dtype::I8},             {"uint8", Dtype::U8},
        {"bool", Dtype::BOOL},            {"complex64", Dtype::C64},       {"uint16", Dtype::U16},
        {"uint32", Dtype::U32},           {"uint64", Dtype::U64},          {"float8_e4m3fn", Dtype::F8_E4M3},
        {"float8_e5m2", Dtype::F8_E5M2},  {"float8_e8m0fnu", Dtype::F8_E8M0},
        {"float8_e4m3fnuz", Dtype::F8_E4M3FNUZ}, {"float8_e5m2fnuz", Dtype::F8_E5M2FNUZ},
    };
    for (const auto& [name, d] : dtypes) {
      t->emplace(std::string("torch.") + name, GlobalDef{G::kDtype, static_cast<uint64_t>(d)});
    }
    return t;
  }();
  return *table;
}

// Allowed by torch.load(weights_only=True) (torch/_weights_only_unpickler.py
// _get_allowed_globals) but not loaded by hubload: a clear "unsupported".
bool TorchAllowsButUnsupported(const std::string& full) {
  static const std::unordered_set<std::string> names = {
      "torch._utils._rebuild_qtensor", "torch._utils._rebuild_sparse_tensor",
      "torch._utils._rebuild_sparse_csr_tensor", "torch._utils._rebuild_meta_tensor_no_storage",
      "torch._utils._rebuild_nested_tensor", "torch._utils._rebuild_wrapper_subclass",
      "torch._utils._rebuild_device_tensor_from_numpy", "torch._utils._rebuild_device_tensor_from_cpu_tensor",
      "torch.serialization._get_layout", "torch.device", "collections.Counter", "builtins.set",
      "builtins.bytearray", "builtins.complex", "torch.storage.TypedStorage", "torch.complex128",
      "torch.complex32", "torch.ComplexDoubleStorage", "torch.cuda.ComplexDoubleStorage", "torch.QInt8Storage",
      "torch.QUInt8Storage", "torch.QInt32Storage", "torch.QUInt4x2Storage", "torch.QUInt2x4Storage",
      "torch.qint8", "torch.quint8", "torch.qint32", "torch.quint4x2", "torch.quint2x4",
      "torch.per_tensor_affine", "torch.per_tensor_symmetric", "torch.per_channel_affine",
      "torch.per_channel_symmetric", "torch.per_channel_affine_float_qparams", "torch.float4_e2m1fn_x2",
      "torch.bits8", "torch.bits16", "torch.bits1x8", "torch.bits2x4", "torch.bits4x2",
      "torch.sparse_coo", "torch.sparse_csr", "torch.strided"};
  return names.count(full) > 0;
}

const char* GlobalName(G g) {
  switch (g) {
    case G::kOrderedDict: return "collections.OrderedDict";
    case G::kRebuildTensor: return "torch._utils._rebuild_tensor";
    case G::kRebuildTensorV2: return "torch._utils._rebuild_tensor_v2";
    case G::kRebuildTensorV3: return "torch._utils._rebuild_tensor_v3";
    case G::kRebuildParameter: return "torch._utils._rebuild_parameter";
    case G::kRebuildParameterWithState: return "torch._utils._rebuild_parameter_with_state";
    case G::kRebuildFromTypeV2: return "torch._tensor._rebuild_from_type_v2";
    case G::kTensorClass: return "torch.Tensor";
    case G::kParameterClass: return "torch.nn.parameter.Parameter";
    case G::kTorchSize: return "torch.Size";
    case G::kCodecsEncode: return "_codecs.encode";
    case G::kStorageClass: return "a storage class";
    case G::kDtype: return "a dtype";
  }
  return "?";
}

std::string Dims(const std::vector<uint64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out + "]";
}

// offset + sum((size_i - 1) * stride_i) must address an element inside the storage.
Status CheckExtent(std::string_view label, const Tensor& t, const Storage& s) {
  auto fail = [&](const std::string& what) {
    return Error(reason::kPickleTensorOutOfRange, label, "tensor " + util::Quoted(t.name) + ": " + what, t.name);
  };
  uint64_t numel = 1;
  for (uint64_t d : t.shape) {
    if (__builtin_mul_overflow(numel, d, &numel)) return fail("size " + Dims(t.shape) + " overflows");
  }
  if (numel == 0) return Status::Ok();  // no element is addressed
  uint64_t last = t.storage_offset;
  for (size_t i = 0; i < t.shape.size(); ++i) {
    uint64_t span = 0;
    if (__builtin_mul_overflow(t.shape[i] - 1, t.stride[i], &span) || __builtin_add_overflow(last, span, &last)) {
      return fail("size " + Dims(t.shape) + " x stride " + Dims(t.stride) + " overflows");
    }
  }
  uint64_t end = 0;
  if (__builtin_add_overflow(last, 1, &end) || __builtin_mul_overflow(end, ElementSize(t.dtype), &end) ||
      end > s.nbytes) {
    return fail("size " + Dims(t.shape) + ", stride " + Dims(t.stride) + ", storage_offset " +
                std::to_string(t.storage_offset) + " reaches past storage " + util::Quoted(s.key) + " (" +
                std::to_string(s.nbytes) + " bytes)");
  }
  return Status::Ok();
}

class TorchHooks final : public Hooks {
 public:
  TorchHooks(bool legacy) : legacy_(legacy) {}

  Result<uint32_t> Global(Machine& m, std::string_view module, std::string_view name) override {
    std::string full = std::string(module) + "." + std::string(name);
    const auto& table = AllowedGlobals();
    auto it = table.find(full);
    if (it != table.end()) return m.NewNode(Kind::kGlobal, static_cast<uint32_t>(it->second.id), it->second.payload);
    if (TorchAllowsButUnsupported(full)) {
      return m.Fail(reason::kPickleUnsupportedGlobal,
                    "global " + util::Quoted(full) +
                        " (allowed by torch.load(weights_only=True)) is not supported by hubload: only dense "
                        "tensors of plain state dicts are loaded",
                    Code::kUnsupported);
    }
    return m.Fail(reason::kPickleUnsafeGlobal,
                  "refusing global " + util::Quoted(full) +
                      ": not in the allow-list of a state dict (as torch.load(weights_only=True)); nothing "
                      "was imported or run");
  }

  Result<uint32_t> PersistentLoad(Machine& m, uint32_t pid) override {
    if (m.kind(pid) != Kind::kTuple) {
      return m.Fail(reason::kPickleMalformed, std::string("persistent id is ") + KindName(m.kind(pid)) +
                                                  ", not a ('storage', ...) tuple");
    }
    auto it = m.items(pid);
    if (it.empty() || !IsText(m, it[0]) || m.bytes(it[0]) != "storage") {
      return m.Fail(reason::kPickleMalformed, "persistent id is not a ('storage', ...) tuple");
    }
    const size_t want = legacy_ ? 6 : 5;
    if (it.size() != want && !(legacy_ && it.size() == 5)) {
      return m.Fail(reason::kPickleMalformed, "storage persistent id has " + std::to_string(it.size()) +
                                                  " elements, expected " + std::to_string(want));
    }
    if (m.kind(it[1]) != Kind::kGlobal || static_cast<G>(m.node(it[1]).a) != G::kStorageClass) {
      return m.Fail(reason::kPickleMalformed, "storage persistent id: element 1 is not a storage class");
    }
    if (!IsText(m, it[2]) || !IsText(m, it[3])) {
      return m.Fail(reason::kPickleMalformed, "storage persistent id: key and location must be strings");
    }
    HUBLOAD_ASSIGN_OR_RETURN(uint64_t numel, NonNegative(m, it[4], "storage numel"));
    if (it.size() == 6 && m.kind(it[5]) != Kind::kNone) {
      return m.Fail(reason::kPickleUnsupportedTensor, "legacy storage views (view_metadata) are not supported",
                    Code::kUnsupported);
    }
    const Dtype dtype = static_cast<Dtype>(m.node(it[1]).b & 0xffffffffu);
    const bool untyped = (m.node(it[1]).b & kUntyped) != 0;
    std::string key(m.bytes(it[2]));
    auto found = out_.by_key.find(key);
    if (found != out_.by_key.end()) {
      const Storage& s = out_.storages[found->second];
      if (s.dtype != dtype || s.numel != numel) {
        return m.Fail(reason::kPickleMalformed,
                      "storage key " + util::Quoted(key) + " is used with two different types or sizes");
      }
      return m.NewNode(Kind::kStorage, found->second, untyped);
    }
    uint64_t nbytes = 0;
    if (__builtin_mul_overflow(numel, ElementSize(dtype), &nbytes)) {
      return m.Fail(reason::kPickleMalformed, "storage " + util::Quoted(key) + ": numel x element size overflows");
    }
    Storage s;
    s.key = key;
    s.dtype = dtype;
    s.numel = numel;
    s.nbytes = nbytes;
    s.location = std::string(m.bytes(it[3]));
    out_.storages.push_back(std::move(s));
    uint32_t index = static_cast<uint32_t>(out_.storages.size() - 1);
    out_.by_key.emplace(std::move(key), index);
    return m.NewNode(Kind::kStorage, index, untyped);
  }

  Result<uint32_t> Reduce(Machine& m, uint32_t callable, uint32_t args) override {
    if (m.kind(callable) != Kind::kGlobal) {
      return m.Fail(reason::kPickleMalformed, std::string("REDUCE calls ") + KindName(m.kind(callable)));
    }
    if (m.kind(args) != Kind::kTuple) {
      return m.Fail(reason::kPickleMalformed, std::string("REDUCE arguments are ") + KindName(m.kind(args)));
    }
    return Call(m, static_cast<G>(m.node(callable).a), args, /*nested=*/false);
  }

  Status Build(Machine& m, uint32_t inst, uint32_t state) override {
    // OrderedDict.__reduce__ passes the instance __dict__ (the state dict's
    // `_metadata` attribute) as BUILD state: read and dropped.
    if (m.kind(inst) == Kind::kDict && (m.kind(state) == Kind::kDict || m.kind(state) == Kind::kNone)) {
      return Status::Ok();
    }
    return m.Fail(reason::kPickleOpcode, std::string("BUILD on ") + KindName(m.kind(inst)) + " with " +
                                             KindName(m.kind(state)) +
                                             " (only a dict's attributes may be set)");
  }

  StateDictPickle& out() { return out_; }
  const std::vector<Tensor>& protos() const { return protos_; }

 private:
  static bool IsText(const Machine& m, uint32_t id) {
    return m.kind(id) == Kind::kStr || m.kind(id) == Kind::kBytes;
  }
  static bool IsEmptyOrNone(const Machine& m, uint32_t id) {
    return m.kind(id) == Kind::kNone || (m.kind(id) == Kind::kDict && m.items(id).empty());
  }

  Result<uint64_t> NonNegative(Machine& m, uint32_t id, const char* what) {
    if (m.kind(id) != Kind::kInt || m.int_value(id) < 0 || m.int_value(id) > (int64_t{1} << 62)) {
      return m.Fail(reason::kPickleMalformed, std::string(what) + " is " + KindName(m.kind(id)) +
                                                  ", not an integer in [0, 2^62]");
    }
    return static_cast<uint64_t>(m.int_value(id));
  }

  Result<std::vector<uint64_t>> IntTuple(Machine& m, uint32_t id, const char* what) {
    if (m.kind(id) != Kind::kTuple) {
      return m.Fail(reason::kPickleMalformed, std::string(what) + " is " + KindName(m.kind(id)) + ", not a tuple");
    }
    auto it = m.items(id);
    if (it.size() > m.limits().max_dims) {
      return m.Fail(reason::kPickleLimit, std::string(what) + " has " + std::to_string(it.size()) +
                                              " dimensions (Limits::max_dims " +
                                              std::to_string(m.limits().max_dims) + ")");
    }
    std::vector<uint64_t> v;
    v.reserve(it.size());
    for (uint32_t e : it) {
      HUBLOAD_ASSIGN_OR_RETURN(uint64_t x, NonNegative(m, e, what));
      v.push_back(x);
    }
    return v;
  }

  Status CheckArgs(Machine& m, G g, size_t n, size_t lo, size_t hi) {
    if (n < lo || n > hi) {
      return m.Fail(reason::kPickleMalformed, std::string(GlobalName(g)) + " called with " + std::to_string(n) +
                                                  " arguments");
    }
    return Status::Ok();
  }

  Result<uint32_t> Call(Machine& m, G g, uint32_t args, bool nested) {
    auto a = m.items(args);
    switch (g) {
      case G::kOrderedDict: {
        HUBLOAD_RETURN_IF_ERROR(CheckArgs(m, g, a.size(), 0, 0));
        return m.NewContainer(Kind::kDict);
      }
      case G::kTorchSize: {
        HUBLOAD_RETURN_IF_ERROR(CheckArgs(m, g, a.size(), 1, 1));
        HUBLOAD_RETURN_IF_ERROR(IntTuple(m, a[0], "torch.Size argument").status());
        return a[0];
      }
      case G::kCodecsEncode: return Encode(m, a);
      case G::kRebuildTensor:
      case G::kRebuildTensorV2:
      case G::kRebuildTensorV3: return RebuildTensor(m, g, a);
      case G::kRebuildParameter:
      case G::kRebuildParameterWithState: {
        const bool with_state = g == G::kRebuildParameterWithState;
        HUBLOAD_RETURN_IF_ERROR(CheckArgs(m, g, a.size(), with_state ? 4 : 3, with_state ? 4 : 3));
        if (m.kind(a[0]) != Kind::kTensor) {
          return m.Fail(reason::kPickleMalformed, std::string(GlobalName(g)) + ": data is " + KindName(m.kind(a[0])));
        }
        if (with_state && !IsEmptyOrNone(m, a[3])) {
          return m.Fail(reason::kPickleUnsupportedTensor, "a Parameter with Python attributes is not supported",
                        Code::kUnsupported);
        }
        Tensor t = protos_[m.node(a[0]).a];
        t.is_parameter = true;
        t.requires_grad = Truthy(m, a[1]);
        return AddTensor(m, std::move(t));
      }
      case G::kRebuildFromTypeV2: {
        HUBLOAD_RETURN_IF_ERROR(CheckArgs(m, g, a.size(), 4, 4));
        if (nested || m.kind(a[0]) != Kind::kGlobal || m.kind(a[1]) != Kind::kGlobal ||
            m.kind(a[2]) != Kind::kTuple) {
          return m.Fail(reason::kPickleMalformed, "_rebuild_from_type_v2 needs (rebuild function, class, args, state)");
        }
        G func = static_cast<G>(m.node(a[0]).a);
        G cls = static_cast<G>(m.node(a[1]).a);
        if (cls != G::kTensorClass && cls != G::kParameterClass) {
          return m.Fail(reason::kPickleUnsupportedTensor,
                        std::string("tensor subclass ") + GlobalName(cls) + " is not supported", Code::kUnsupported);
        }
        if (!IsEmptyOrNone(m, a[3])) {
          return m.Fail(reason::kPickleUnsupportedTensor, "a tensor with Python attributes is not supported",
                        Code::kUnsupported);
        }
        if (func == G::kRebuildFromTypeV2 || func == G::kOrderedDict || func == G::kCodecsEncode ||
            func == G::kTorchSize || func == G::kStorageClass || func == G::kDtype || func == G::kTensorClass ||
            func == G::kParameterClass) {
          return m.Fail(reason::kPickleMalformed, std::string("_rebuild_from_type_v2 with ") + GlobalName(func));
        }
        HUBLOAD_ASSIGN_OR_RETURN(uint32_t t, Call(m, func, a[2], /*nested=*/true));
        if (m.kind(t) != Kind::kTensor) return t;
        if (cls == G::kParameterClass) {
          Tensor p = protos_[m.node(t).a];
          p.is_parameter = true;
          return AddTensor(m, std::move(p));
        }
        return t;
      }
      case G::kTensorClass:
      case G::kParameterClass:
      case G::kStorageClass:
      case G::kDtype:
        break;
    }
    return m.Fail(reason::kPickleMalformed, std::string("REDUCE calls ") + GlobalName(g) +
                                                ", which a state dict never calls");
  }

  static bool Truthy(const Machine& m, uint32_t id) {
    return (m.kind(id) == Kind::kBool && m.node(id).a != 0) || (m.kind(id) == Kind::kInt && m.node(id).b != 0);
  }

  // _codecs.encode(str, "latin1"): how protocol 2 pickles a bytes object.
  Result<uint32_t> Encode(Machine& m, std::span<const uint32_t> a) {
    HUBLOAD_RETURN_IF_ERROR(CheckArgs(m, G::kCodecsEncode, a.size(), 2, 2));
    if (m.kind(a[0]) != Kind::kStr || m.kind(a[1]) != Kind::kStr ||
        (m.bytes(a[1]) != "latin1" && m.bytes(a[1]) != "latin-1")) {
      return m.Fail(reason::kPickleMalformed, "_codecs.encode is only read as encode(str, 'latin1')");
    }
    std::string_view s = m.bytes(a[0]);
    std::string out;
    out.reserve(s.size());
    size_t pos = 0;
    uint32_t cp = 0;
    while (pos < s.size()) {
      if (!util::NextCodePoint(s, &pos, &cp) || cp > 0xFF) {
        return m.Fail(reason::kPickleMalformed, "_codecs.encode: text is not latin-1 encodable UTF-8");
      }
      out.push_back(static_cast<char>(cp));
    }
    return m.NewBytes(Kind::kBytes, out);
  }

  Result<uint32_t> RebuildTensor(Machine& m, G g, std::span<const uint32_t> a) {
    const size_t lo = g == G::kRebuildTensor ? 4 : g == G::kRebuildTensorV2 ? 6 : 7;
    const size_t hi = g == G::kRebuildTensor ? 4 : lo + 1;
    HUBLOAD_RETURN_IF_ERROR(CheckArgs(m, g, a.size(), lo, hi));
    if (m.kind(a[0]) != Kind::kStorage) {
      return m.Fail(reason::kPickleMalformed, std::string(GlobalName(g)) + ": storage is " + KindName(m.kind(a[0])));
    }
    const Storage& s = out_.storages[m.node(a[0]).a];
    Tensor t;
    t.storage = m.node(a[0]).a;
    t.dtype = s.dtype;
    HUBLOAD_ASSIGN_OR_RETURN(t.storage_offset, NonNegative(m, a[1], "storage_offset"));
    HUBLOAD_ASSIGN_OR_RETURN(t.shape, IntTuple(m, a[2], "size"));
    HUBLOAD_ASSIGN_OR_RETURN(t.stride, IntTuple(m, a[3], "stride"));
    if (t.shape.size() != t.stride.size()) {
      return m.Fail(reason::kPickleMalformed, "size has " + std::to_string(t.shape.size()) + " dimensions but stride " +
                                                  std::to_string(t.stride.size()));
    }
    if (g != G::kRebuildTensor) {
      t.requires_grad = Truthy(m, a[4]);
      if (m.kind(a[5]) != Kind::kDict && m.kind(a[5]) != Kind::kNone) {
        return m.Fail(reason::kPickleMalformed, "backward_hooks is " + std::string(KindName(m.kind(a[5]))));
      }
    }
    if (g == G::kRebuildTensorV3) {
      if (m.kind(a[6]) != Kind::kGlobal || static_cast<G>(m.node(a[6]).a) != G::kDtype) {
        return m.Fail(reason::kPickleMalformed, "_rebuild_tensor_v3: dtype is not a torch dtype");
      }
      t.dtype = static_cast<Dtype>(m.node(a[6]).b);
      if (s.dtype != t.dtype && !m.node(a[0]).b /* typed storage of another dtype */) {
        return m.Fail(reason::kPickleMalformed, "_rebuild_tensor_v3: a " + std::string(safetensors::DtypeName(s.dtype)) +
                                                    " storage viewed as " + safetensors::DtypeName(t.dtype));
      }
    }
    if (a.size() == hi && g != G::kRebuildTensor && !IsEmptyOrNone(m, a[hi - 1])) {
      return m.Fail(reason::kPickleUnsupportedTensor,
                    "tensor metadata (conjugate / negative bits, Python state) is not supported", Code::kUnsupported);
    }
    return AddTensor(m, std::move(t));
  }

  Result<uint32_t> AddTensor(Machine& m, Tensor t) {
    protos_.push_back(std::move(t));
    return m.NewNode(Kind::kTensor, static_cast<uint32_t>(protos_.size() - 1));
  }

  bool legacy_;
  StateDictPickle out_;
  std::vector<Tensor> protos_;
};

// Small header pickles of the legacy format: no global, no persistent id.
class PlainHooks final : public Hooks {
 public:
  Result<uint32_t> Global(Machine& m, std::string_view module, std::string_view name) override {
    return m.Fail(reason::kPickleUnsafeGlobal,
                  "refusing global " + util::Quoted(std::string(module) + "." + std::string(name)) +
                      " in a legacy header pickle (plain values only)");
  }
  Result<uint32_t> PersistentLoad(Machine& m, uint32_t) override {
    return m.Fail(reason::kPickleMalformed, "persistent id in a legacy header pickle");
  }
  Result<uint32_t> Reduce(Machine& m, uint32_t, uint32_t) override {
    return m.Fail(reason::kPickleMalformed, "REDUCE in a legacy header pickle");
  }
  Status Build(Machine& m, uint32_t, uint32_t) override {
    return m.Fail(reason::kPickleMalformed, "BUILD in a legacy header pickle");
  }
};

Result<PlainValue> ToPlain(const Machine& m, uint32_t id, uint32_t depth) {
  PlainValue v;
  if (depth > m.limits().max_depth) {
    return Error(reason::kPickleLimit, m.label(), "a legacy header pickle nests deeper than Limits::max_depth");
  }
  switch (m.kind(id)) {
    case Kind::kNone: v.kind = PlainValue::kNone; break;
    case Kind::kBool: v.kind = PlainValue::kBool; v.i = m.node(id).a; break;
    case Kind::kInt: v.kind = PlainValue::kInt; v.i = m.int_value(id); break;
    case Kind::kBigInt: v.kind = PlainValue::kBigInt; v.bytes = m.bytes(id); break;
    case Kind::kFloat: v.kind = PlainValue::kFloat; break;
    case Kind::kStr: v.kind = PlainValue::kString; v.bytes = m.bytes(id); break;
    case Kind::kBytes: v.kind = PlainValue::kBytes; v.bytes = m.bytes(id); break;
    case Kind::kTuple:
    case Kind::kList:
    case Kind::kDict:
      v.kind = m.kind(id) == Kind::kDict ? PlainValue::kDict : PlainValue::kList;
      for (uint32_t e : m.items(id)) {
        HUBLOAD_ASSIGN_OR_RETURN(PlainValue c, ToPlain(m, e, depth + 1));
        v.items.push_back(std::move(c));
      }
      break;
    default: v.kind = PlainValue::kOther; break;
  }
  return v;
}

}  // namespace

Result<PlainValue> UnpicklePlain(const uint8_t* data, size_t n, std::string_view label, std::string_view where,
                                 const Limits& limits, size_t* consumed, bool* truncated) {
  PlainHooks hooks;
  Machine m(label, where, limits, &hooks);
  auto root = m.Run(data, n, consumed);
  if (truncated) *truncated = m.truncated();
  if (!root.ok()) return root.status();
  return ToPlain(m, *root, 0);
}

Result<StateDictPickle> UnpickleStateDict(const uint8_t* data, size_t n, std::string_view label,
                                          std::string_view where, const Limits& limits, bool legacy,
                                          size_t* consumed, bool* truncated) {
  TorchHooks hooks(legacy);
  Machine m(label, where, limits, &hooks);
  auto run = m.Run(data, n, consumed);
  if (truncated) *truncated = m.truncated();
  if (!run.ok()) return run.status();
  const uint32_t root = *run;
  if (m.kind(root) != Kind::kDict) {
    return Error(reason::kPickleNotStateDict, label,
                 std::string("the pickle holds ") + KindName(m.kind(root)) + ", not a state dict (a dict of tensors)");
  }
  StateDictPickle& out = hooks.out();
  auto items = m.items(root);
  out.tensors.reserve(items.size() / 2);
  std::unordered_set<std::string_view> seen;
  seen.reserve(items.size() / 2);
  for (size_t i = 0; i + 1 < items.size(); i += 2) {
    if (m.kind(items[i]) != Kind::kStr) {
      return Error(reason::kPickleNotStateDict, label,
                   "state dict key " + std::to_string(i / 2) + " is " + KindName(m.kind(items[i])) + ", not a string");
    }
    std::string_view name = m.bytes(items[i]);
    if (!util::IsValidUtf8(name)) {
      return Error(reason::kPickleNotStateDict, label, "state dict key " + util::Quoted(name) + " is not valid UTF-8");
    }
    if (m.kind(items[i + 1]) != Kind::kTensor) {
      return Error(reason::kPickleNotStateDict, label,
                   "value of " + util::Quoted(name) + " is " + KindName(m.kind(items[i + 1])) +
                       ", not a tensor (only flat state dicts of tensors are read)",
                   name);
    }
    if (!seen.insert(name).second) {
      return Error(reason::kPickleNotStateDict, label, "key " + util::Quoted(name) + " appears twice", name);
    }
    Tensor t = hooks.protos()[m.node(items[i + 1]).a];
    t.name = std::string(name);
    HUBLOAD_RETURN_IF_ERROR(CheckExtent(label, t, out.storages[t.storage]));
    out.tensors.push_back(std::move(t));
  }
  return std::move(out);
}

}  // namespace hubload::pickle::internal
