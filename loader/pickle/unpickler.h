// Private: the restricted pickle machine. It interprets the opcodes of
// protocols 2..5 that a state dict needs into a graph of compact value nodes;
// everything torch-specific (which globals exist, what REDUCE / BUILD /
// persistent ids mean) is delegated to a Hooks object. Nothing is imported or
// called: a GLOBAL becomes a node only if Hooks::Global accepts its name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hubload/pickle.h"
#include "hubload/status.h"

namespace hubload::pickle::internal {

enum class Kind : uint8_t {
  kNone,
  kBool,     // a = 0/1
  kInt,      // b = int64 bits
  kBigInt,   // bytes in the pool (little-endian two's complement, > 8 bytes)
  kFloat,    // b = double bits
  kStr,      // bytes in the pool (unicode: UTF-8 as pickled; py2 str: raw)
  kBytes,    // bytes in the pool
  kTuple,    // a = count, b = first index into tuple items
  kList,     // a = container index
  kDict,     // a = container index (items alternate key, value)
  kGlobal,   // a = hook-defined global id, b = hook-defined payload
  kStorage,  // a = hook-defined storage index
  kTensor,   // a = hook-defined tensor index
};

/// 16 bytes: the machine keeps millions of these for big state dicts.
struct Node {
  Kind kind = Kind::kNone;
  uint32_t a = 0;
  uint64_t b = 0;
};

const char* KindName(Kind k);

class Machine;

/// The torch semantics plugged into the machine. Each returns the node id to
/// push (REDUCE: to replace the callable) or an error Status.
class Hooks {
 public:
  virtual ~Hooks() = default;
  virtual Result<uint32_t> Global(Machine& m, std::string_view module, std::string_view name) = 0;
  virtual Result<uint32_t> PersistentLoad(Machine& m, uint32_t pid) = 0;
  virtual Result<uint32_t> Reduce(Machine& m, uint32_t callable, uint32_t args) = 0;
  virtual Status Build(Machine& m, uint32_t inst, uint32_t state) = 0;
};

class Machine {
 public:
  /// `label` names the file (ErrorContext::file); `where` the pickle inside
  /// it ("archive/data.pkl", "legacy sys_info"), in messages only.
  Machine(std::string_view label, std::string_view where, const Limits& limits, Hooks* hooks)
      : label_(label), where_(where), limits_(limits), hooks_(hooks) {}

  /// Runs one pickle from `data` up to and including its STOP; returns the
  /// resulting node and sets *consumed to the bytes read.
  Result<uint32_t> Run(const uint8_t* data, size_t n, size_t* consumed);

  // ---- node access (for hooks and callers) ------------------------------
  const Node& node(uint32_t id) const { return nodes_[id]; }
  Kind kind(uint32_t id) const { return nodes_[id].kind; }
  /// The pool bytes of a kStr / kBytes / kBigInt node.
  std::string_view bytes(uint32_t id) const;
  /// Items of a kTuple, kList or kDict node (dict: key, value, key, value...).
  std::span<const uint32_t> items(uint32_t id) const;
  int64_t int_value(uint32_t id) const { return static_cast<int64_t>(nodes_[id].b); }

  // ---- node creation (for hooks) -----------------------------------------
  Result<uint32_t> NewNode(Kind kind, uint32_t a = 0, uint64_t b = 0);
  Result<uint32_t> NewBytes(Kind kind, std::string_view bytes);
  Result<uint32_t> NewContainer(Kind kind, std::span<const uint32_t> items = {});

  /// "<label>: pickle byte <pos>: <what>" with `reason` (code kInvalidFormat
  /// unless given), at the opcode being run.
  Status Fail(std::string_view reason, const std::string& what, Code code = Code::kInvalidFormat) const;
  const std::string& label() const { return label_; }
  const Limits& limits() const { return limits_; }
  /// True after Run failed because the input ended (more bytes might help).
  bool truncated() const { return truncated_; }

 private:
  Status Step(uint8_t op, const uint8_t* p, size_t n, size_t* pos, bool* stop, uint32_t* result);
  Status Push(uint32_t id);
  Result<uint32_t> Pop();
  Result<uint32_t> Top() const;
  /// Removes the items above the last MARK (and the mark) into *out.
  Status PopMark(std::vector<uint32_t>* out);
  size_t Available() const { return stack_.size() - (marks_.empty() ? 0 : marks_.back()); }
  Status CountObjects(uint64_t n);
  Status Memo(uint64_t index);
  Status Get(uint64_t index);

  std::string label_;
  std::string where_;
  Limits limits_;
  Hooks* hooks_;
  size_t op_pos_ = 0;  // offset of the opcode being run, for messages
  bool truncated_ = false;
  uint64_t objects_ = 0;
  std::vector<Node> nodes_;
  std::string pool_;
  std::vector<uint32_t> tuple_items_;
  std::vector<std::vector<uint32_t>> containers_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint32_t, uint32_t> memo_;
  std::vector<uint32_t> scratch_;
};

}  // namespace hubload::pickle::internal
