// The restricted pickle machine (opcode names and semantics: CPython
// Lib/pickle.py and Lib/pickletools.py; the subset follows
// torch/_weights_only_unpickler.py, plus the protocol 4/5 framing, short
// strings, bytes and MEMOIZE/STACK_GLOBAL, which are cheap to check).
#include "loader/pickle/unpickler.h"

#include <cstring>

#include "loader/pickle/internal.h"
#include "util/hex.h"
#include "hubload/reasons.h"

namespace hubload::pickle::internal {

namespace {

// Opcodes (pickletools.py).
enum Op : uint8_t {
  kMark = '(',
  kStop = '.',
  kPop = '0',
  kPopMark = '1',
  kDup = '2',
  kBinInt = 'J',
  kBinInt1 = 'K',
  kBinInt2 = 'M',
  kNoneOp = 'N',
  kBinPersId = 'Q',
  kReduce = 'R',
  kBinString = 'T',
  kShortBinString = 'U',
  kBinUnicode = 'X',
  kAppend = 'a',
  kBuild = 'b',
  kGlobalOp = 'c',
  kDictOp = 'd',
  kEmptyDict = '}',
  kAppends = 'e',
  kBinGet = 'h',
  kInst = 'i',
  kLongBinGet = 'j',
  kListOp = 'l',
  kEmptyList = ']',
  kBinPut = 'q',
  kLongBinPut = 'r',
  kSetItem = 's',
  kTupleOp = 't',
  kEmptyTuple = ')',
  kSetItems = 'u',
  kBinFloat = 'G',
  kBinBytes = 'B',
  kShortBinBytes = 'C',
  kProto = 0x80,
  kTuple1 = 0x85,
  kTuple2 = 0x86,
  kTuple3 = 0x87,
  kNewTrue = 0x88,
  kNewFalse = 0x89,
  kLong1 = 0x8a,
  kLong4 = 0x8b,
  kShortBinUnicode = 0x8c,
  kBinUnicode8 = 0x8d,
  kBinBytes8 = 0x8e,
  kStackGlobal = 0x93,
  kMemoize = 0x94,
  kFrame = 0x95,
};

// Names of the opcodes that are refused, for messages.
const char* RefusedOpName(uint8_t op) {
  switch (op) {
    case 'F': return "FLOAT (text)";
    case 'I': return "INT (text)";
    case 'L': return "LONG (text)";
    case 'P': return "PERSID (text)";
    case 'S': return "STRING (text)";
    case 'V': return "UNICODE (text)";
    case 'g': return "GET (text)";
    case 'p': return "PUT (text)";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return nullptr;
  }
}

uint64_t LoadLE(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kNone: return "None";
    case Kind::kBool: return "a bool";
    case Kind::kInt: return "an int";
    case Kind::kBigInt: return "a long int";
    case Kind::kFloat: return "a float";
    case Kind::kStr: return "a string";
    case Kind::kBytes: return "bytes";
    case Kind::kTuple: return "a tuple";
    case Kind::kList: return "a list";
    case Kind::kDict: return "a dict";
    case Kind::kGlobal: return "a class or function";
    case Kind::kStorage: return "a storage";
    case Kind::kTensor: return "a tensor";
  }
  return "?";
}

std::string_view Machine::bytes(uint32_t id) const {
  const Node& nd = nodes_[id];
  return std::string_view(pool_).substr(nd.b, nd.a);
}

std::span<const uint32_t> Machine::items(uint32_t id) const {
  const Node& nd = nodes_[id];
  if (nd.kind == Kind::kTuple) return std::span<const uint32_t>(tuple_items_.data() + nd.b, nd.a);
  if (nd.kind == Kind::kList || nd.kind == Kind::kDict) return containers_[nd.a];
  return {};
}

Status Machine::Fail(std::string_view reason, const std::string& what, Code code) const {
  return Error(reason, label_, where_ + " byte " + std::to_string(op_pos_) + ": " + what, {}, code);
}

Status Machine::CountObjects(uint64_t n) {
  objects_ += n;
  if (objects_ > limits_.max_objects) {
    return Fail(reason::kPickleLimit,
                "more than " + std::to_string(limits_.max_objects) + " values (Limits::max_objects)");
  }
  return Status::Ok();
}

Result<uint32_t> Machine::NewNode(Kind kind, uint32_t a, uint64_t b) {
  HUBLOAD_RETURN_IF_ERROR(CountObjects(1));
  nodes_.push_back(Node{kind, a, b});
  return static_cast<uint32_t>(nodes_.size() - 1);
}

Result<uint32_t> Machine::NewBytes(Kind kind, std::string_view bytes) {
  if (bytes.size() > limits_.max_string_bytes || bytes.size() > UINT32_MAX) {
    return Fail(reason::kPickleLimit, "a string of " + std::to_string(bytes.size()) + " bytes (Limits::max_string_bytes " +
                                          std::to_string(limits_.max_string_bytes) + ")");
  }
  uint64_t off = pool_.size();
  pool_.append(bytes);
  return NewNode(kind, static_cast<uint32_t>(bytes.size()), off);
}

Result<uint32_t> Machine::NewContainer(Kind kind, std::span<const uint32_t> items) {
  HUBLOAD_RETURN_IF_ERROR(CountObjects(items.size()));
  if (kind == Kind::kTuple) {
    uint64_t start = tuple_items_.size();
    tuple_items_.insert(tuple_items_.end(), items.begin(), items.end());
    return NewNode(Kind::kTuple, static_cast<uint32_t>(items.size()), start);
  }
  containers_.emplace_back(items.begin(), items.end());
  return NewNode(kind, static_cast<uint32_t>(containers_.size() - 1));
}

Status Machine::Push(uint32_t id) {
  if (stack_.size() >= limits_.max_stack) {
    return Fail(reason::kPickleLimit, "more than " + std::to_string(limits_.max_stack) + " values on the stack");
  }
  stack_.push_back(id);
  return Status::Ok();
}

Result<uint32_t> Machine::Pop() {
  if (Available() == 0) return Fail(reason::kPickleMalformed, "stack underflow");
  uint32_t v = stack_.back();
  stack_.pop_back();
  return v;
}

Result<uint32_t> Machine::Top() const {
  if (Available() == 0) return Fail(reason::kPickleMalformed, "stack underflow");
  return stack_.back();
}

Status Machine::PopMark(std::vector<uint32_t>* out) {
  if (marks_.empty()) return Fail(reason::kPickleMalformed, "no MARK to pop to");
  size_t m = marks_.back();
  marks_.pop_back();
  out->assign(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
  stack_.resize(m);
  return Status::Ok();
}

Status Machine::Memo(uint64_t index) {
  HUBLOAD_ASSIGN_OR_RETURN(uint32_t top, Top());
  if (index > UINT32_MAX) return Fail(reason::kPickleMalformed, "memo index out of range");
  auto [it, inserted] = memo_.try_emplace(static_cast<uint32_t>(index), top);
  if (!inserted) {
    it->second = top;
  } else if (memo_.size() > limits_.max_memo) {
    return Fail(reason::kPickleLimit, "more than " + std::to_string(limits_.max_memo) + " memo entries");
  }
  return Status::Ok();
}

Status Machine::Get(uint64_t index) {
  auto it = index <= UINT32_MAX ? memo_.find(static_cast<uint32_t>(index)) : memo_.end();
  if (it == memo_.end()) return Fail(reason::kPickleMalformed, "memo entry " + std::to_string(index) + " is not set");
  return Push(it->second);
}

Result<uint32_t> Machine::Run(const uint8_t* data, size_t n, size_t* consumed) {
  size_t pos = 0;
  bool stop = false;
  uint32_t result = 0;
  while (!stop) {
    op_pos_ = pos;
    if (pos >= n) {
      truncated_ = true;
      return Fail(reason::kPickleMalformed, "truncated (no STOP opcode)");
    }
    uint8_t op = data[pos++];
    HUBLOAD_RETURN_IF_ERROR(Step(op, data, n, &pos, &stop, &result));
  }
  if (consumed) *consumed = pos;
  return result;
}

Status Machine::Step(uint8_t op, const uint8_t* p, size_t n, size_t* pos, bool* stop, uint32_t* result) {
  // Reads `len` argument bytes (a truncated argument is an error, never a read past n).
  auto arg = [&](size_t len, const uint8_t** out) -> Status {
    if (n - *pos < len) {
      truncated_ = true;
      return Fail(reason::kPickleMalformed, "truncated inside an opcode argument");
    }
    *out = p + *pos;
    *pos += len;
    return Status::Ok();
  };
  auto push_new = [&](Result<uint32_t> r) -> Status {
    if (!r.ok()) return r.status();
    return Push(*r);
  };
  // A length-prefixed string/bytes value: checked against the limit and the
  // remaining input before anything is allocated.
  auto sized = [&](int len_bytes, Kind kind) -> Status {
    const uint8_t* lp = nullptr;
    HUBLOAD_RETURN_IF_ERROR(arg(static_cast<size_t>(len_bytes), &lp));
    uint64_t len = LoadLE(lp, len_bytes);
    if (op == kBinString && (len >> 31)) return Fail(reason::kPickleMalformed, "negative string length");
    if (len > limits_.max_string_bytes) {
      return Fail(reason::kPickleLimit, "declared string length " + std::to_string(len) +
                                            " exceeds Limits::max_string_bytes " +
                                            std::to_string(limits_.max_string_bytes));
    }
    const uint8_t* s = nullptr;
    HUBLOAD_RETURN_IF_ERROR(arg(static_cast<size_t>(len), &s));
    return push_new(NewBytes(kind, std::string_view(reinterpret_cast<const char*>(s), len)));
  };
  auto tuple_of = [&](size_t k) -> Status {
    if (Available() < k) return Fail(reason::kPickleMalformed, "stack underflow");
    scratch_.assign(stack_.end() - static_cast<std::ptrdiff_t>(k), stack_.end());
    stack_.resize(stack_.size() - k);
    return push_new(NewContainer(Kind::kTuple, scratch_));
  };
  auto line = [&](std::string_view* out) -> Status {
    size_t limit = std::min<size_t>(n - *pos, 1024);
    const void* nl = std::memchr(p + *pos, '\n', limit);
    if (!nl) {
      truncated_ = limit < 1024;
      return Fail(reason::kPickleMalformed, "GLOBAL name not terminated within 1024 bytes");
    }
    size_t len = static_cast<const uint8_t*>(nl) - (p + *pos);
    *out = std::string_view(reinterpret_cast<const char*>(p + *pos), len);
    *pos += len + 1;
    return Status::Ok();
  };
  auto global = [&](std::string_view module, std::string_view name) -> Status {
    return push_new(hooks_->Global(*this, module, name));
  };
  // APPEND(S) / SETITEM(S): scratch_ goes into the list / dict on top of the stack.
  auto extend = [&](Kind want, const char* what) -> Status {
    HUBLOAD_ASSIGN_OR_RETURN(uint32_t target, Top());
    if (kind(target) != want) {
      return Fail(reason::kPickleMalformed, std::string(what) + " " + KindName(kind(target)) + ", not " + KindName(want));
    }
    HUBLOAD_RETURN_IF_ERROR(CountObjects(scratch_.size()));
    auto& c = containers_[nodes_[target].a];
    c.insert(c.end(), scratch_.begin(), scratch_.end());
    return Status::Ok();
  };
  const uint8_t* a = nullptr;

  switch (op) {
    case kProto:
      HUBLOAD_RETURN_IF_ERROR(arg(1, &a));
      if (*a > 5) return Fail(reason::kPickleOpcode, "pickle protocol " + std::to_string(*a) + " (at most 5 known)");
      return Status::Ok();
    case kFrame:  // protocol 4 framing: a buffering hint, the content follows inline
      return arg(8, &a);
    case kStop: {
      HUBLOAD_ASSIGN_OR_RETURN(*result, Pop());
      *stop = true;
      return Status::Ok();
    }
    case kMark:
      if (marks_.size() >= limits_.max_depth) {
        return Fail(reason::kPickleLimit, "MARK nesting deeper than " + std::to_string(limits_.max_depth));
      }
      marks_.push_back(stack_.size());
      return Status::Ok();
    case kPop:
      if (Available() > 0) {
        stack_.pop_back();
        return Status::Ok();
      }
      return PopMark(&scratch_);
    case kPopMark:
      return PopMark(&scratch_);
    case kDup: {
      HUBLOAD_ASSIGN_OR_RETURN(uint32_t t, Top());
      return Push(t);
    }
    case kNoneOp: return push_new(NewNode(Kind::kNone));
    case kNewTrue: return push_new(NewNode(Kind::kBool, 1));
    case kNewFalse: return push_new(NewNode(Kind::kBool, 0));
    case kBinInt:
      HUBLOAD_RETURN_IF_ERROR(arg(4, &a));
      return push_new(NewNode(Kind::kInt, 0, static_cast<uint64_t>(static_cast<int64_t>(
                                                  static_cast<int32_t>(static_cast<uint32_t>(LoadLE(a, 4)))))));
    case kBinInt1:
      HUBLOAD_RETURN_IF_ERROR(arg(1, &a));
      return push_new(NewNode(Kind::kInt, 0, a[0]));
    case kBinInt2:
      HUBLOAD_RETURN_IF_ERROR(arg(2, &a));
      return push_new(NewNode(Kind::kInt, 0, LoadLE(a, 2)));
    case kLong1:
    case kLong4: {
      HUBLOAD_RETURN_IF_ERROR(arg(op == kLong1 ? 1 : 4, &a));
      uint64_t len = LoadLE(a, op == kLong1 ? 1 : 4);
      if (len > 64) return Fail(reason::kPickleLimit, "an integer of " + std::to_string(len) + " bytes (at most 64)");
      const uint8_t* v = nullptr;
      HUBLOAD_RETURN_IF_ERROR(arg(static_cast<size_t>(len), &v));
      if (len > 8) return push_new(NewBytes(Kind::kBigInt, std::string_view(reinterpret_cast<const char*>(v), len)));
      uint64_t x = LoadLE(v, static_cast<int>(len));
      if (len > 0 && len < 8 && (v[len - 1] & 0x80)) x |= ~uint64_t{0} << (8 * len);  // sign-extend
      return push_new(NewNode(Kind::kInt, 0, x));
    }
    case kBinFloat: {
      HUBLOAD_RETURN_IF_ERROR(arg(8, &a));
      uint64_t bits = 0;
      for (int i = 0; i < 8; ++i) bits = (bits << 8) | a[i];  // big-endian
      return push_new(NewNode(Kind::kFloat, 0, bits));
    }
    case kBinUnicode: return sized(4, Kind::kStr);
    case kShortBinUnicode: return sized(1, Kind::kStr);
    case kBinUnicode8: return sized(8, Kind::kStr);
    case kBinString: return sized(4, Kind::kStr);
    case kShortBinString: return sized(1, Kind::kStr);
    case kBinBytes: return sized(4, Kind::kBytes);
    case kShortBinBytes: return sized(1, Kind::kBytes);
    case kBinBytes8: return sized(8, Kind::kBytes);
    case kEmptyTuple: return tuple_of(0);
    case kTuple1: return tuple_of(1);
    case kTuple2: return tuple_of(2);
    case kTuple3: return tuple_of(3);
    case kTupleOp:
      HUBLOAD_RETURN_IF_ERROR(PopMark(&scratch_));
      return push_new(NewContainer(Kind::kTuple, scratch_));
    case kEmptyList: return push_new(NewContainer(Kind::kList));
    case kEmptyDict: return push_new(NewContainer(Kind::kDict));
    case kListOp:
      HUBLOAD_RETURN_IF_ERROR(PopMark(&scratch_));
      return push_new(NewContainer(Kind::kList, scratch_));
    case kDictOp:
      HUBLOAD_RETURN_IF_ERROR(PopMark(&scratch_));
      if (scratch_.size() % 2) return Fail(reason::kPickleMalformed, "DICT with an odd number of items");
      return push_new(NewContainer(Kind::kDict, scratch_));
    case kAppend:
    case kAppends: {
      if (op == kAppend) {
        HUBLOAD_ASSIGN_OR_RETURN(uint32_t v, Pop());
        scratch_.assign(1, v);
      } else {
        HUBLOAD_RETURN_IF_ERROR(PopMark(&scratch_));
      }
      return extend(Kind::kList, "APPEND to");
    }
    case kSetItem:
    case kSetItems: {
      if (op == kSetItem) {
        HUBLOAD_ASSIGN_OR_RETURN(uint32_t v, Pop());
        HUBLOAD_ASSIGN_OR_RETURN(uint32_t k, Pop());
        scratch_.assign({k, v});
      } else {
        HUBLOAD_RETURN_IF_ERROR(PopMark(&scratch_));
        if (scratch_.size() % 2) return Fail(reason::kPickleMalformed, "SETITEMS with an odd number of items");
      }
      return extend(Kind::kDict, "SETITEM on");
    }
    case kBinPut:
      HUBLOAD_RETURN_IF_ERROR(arg(1, &a));
      return Memo(a[0]);
    case kLongBinPut:
      HUBLOAD_RETURN_IF_ERROR(arg(4, &a));
      return Memo(LoadLE(a, 4));
    case kMemoize:
      return Memo(memo_.size());
    case kBinGet:
      HUBLOAD_RETURN_IF_ERROR(arg(1, &a));
      return Get(a[0]);
    case kLongBinGet:
      HUBLOAD_RETURN_IF_ERROR(arg(4, &a));
      return Get(LoadLE(a, 4));
    case kGlobalOp: {
      std::string_view module, name;
      HUBLOAD_RETURN_IF_ERROR(line(&module));
      HUBLOAD_RETURN_IF_ERROR(line(&name));
      return global(module, name);
    }
    case kStackGlobal: {
      HUBLOAD_ASSIGN_OR_RETURN(uint32_t name, Pop());
      HUBLOAD_ASSIGN_OR_RETURN(uint32_t module, Pop());
      if (kind(name) != Kind::kStr || kind(module) != Kind::kStr) {
        return Fail(reason::kPickleMalformed, "STACK_GLOBAL needs two strings");
      }
      return global(bytes(module), bytes(name));
    }
    case kBinPersId: {
      HUBLOAD_ASSIGN_OR_RETURN(uint32_t pid, Pop());
      return push_new(hooks_->PersistentLoad(*this, pid));
    }
    case kReduce: {
      HUBLOAD_ASSIGN_OR_RETURN(uint32_t args, Pop());
      HUBLOAD_ASSIGN_OR_RETURN(uint32_t callable, Top());
      HUBLOAD_ASSIGN_OR_RETURN(uint32_t r, hooks_->Reduce(*this, callable, args));
      stack_.back() = r;
      return Status::Ok();
    }
    case kBuild: {
      HUBLOAD_ASSIGN_OR_RETURN(uint32_t state, Pop());
      HUBLOAD_ASSIGN_OR_RETURN(uint32_t inst, Top());
      return hooks_->Build(*this, inst, state);
    }
    case kInst: {
      // Names the class it would import and call, without doing either.
      std::string_view module, name;
      if (line(&module).ok() && line(&name).ok()) {
        return Fail(reason::kPickleUnsafeGlobal,
                    "opcode INST would import and call " + util::Quoted(std::string(module) + "." + std::string(name)) +
                        ", which is not allowed (only plain state dicts are read)");
      }
      break;
    }
    default:
      break;
  }
  if (const char* refused = RefusedOpName(op)) {
    return Fail(reason::kPickleOpcode, std::string("opcode ") + refused + " (0x" + util::Hex(&op, 1) +
                                           ") is not allowed in a state dict");
  }
  return Fail(reason::kPickleMalformed, "unknown opcode 0x" + util::Hex(&op, 1));
}

}  // namespace hubload::pickle::internal
