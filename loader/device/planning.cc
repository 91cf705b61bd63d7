// device_map planning (hubload/device.h part 2): accelerate's
// infer_auto_device_map / get_balanced_memory on tensor names and sizes.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hubload/device.h"
#include "hubload/reasons.h"

namespace hubload {
namespace {

constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();

/// One node of the module tree built from dotted tensor names: the root "",
/// every dotted prefix of a tensor name (a module), and the tensors.
struct Node {
  std::string name;                       // full dotted name ("" = the whole model)
  int depth = 0;                          // number of segments
  std::vector<int> children;              // first-appearance (checkpoint) order
  std::map<std::string, int> by_segment;  // child segment -> node
  std::optional<size_t> tensor;           // this node is also a tensor
  uint64_t bytes = 0;                     // tensors at and under this node
  size_t num_tensors = 0;
};

struct Tree {
  std::vector<Node> nodes;  // nodes[0] is the root

  /// Calls fn(tensor index) for every tensor at or under `n`.
  template <typename Fn>
  void ForEachTensor(int n, Fn&& fn) const {
    const Node& node = nodes[n];
    if (node.tensor) fn(*node.tensor);
    for (int c : node.children) ForEachTensor(c, fn);
  }
};

std::vector<std::string_view> Split(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    out.push_back(s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return out;
}

Result<Tree> BuildTree(const std::vector<TensorFootprint>& tensors) {
  Tree t;
  t.nodes.emplace_back();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string& name = tensors[i].name;
    if (!name.empty() && name[0] == '.')
      return Status(Code::kInvalidArgument,
                    "tensor '" + name + "' starts with '.': a device_map prefix cannot name its empty first segment",
                    reason::kInvalidTensorName);
    int cur = 0;
    t.nodes[0].bytes += tensors[i].bytes;
    t.nodes[0].num_tensors++;
    if (!name.empty()) {
      for (std::string_view seg : Split(name)) {
        auto it = t.nodes[cur].by_segment.find(std::string(seg));
        int next;
        if (it == t.nodes[cur].by_segment.end()) {
          next = static_cast<int>(t.nodes.size());
          Node child;
          child.name = t.nodes[cur].depth == 0 ? std::string(seg) : t.nodes[cur].name + "." + std::string(seg);
          child.depth = t.nodes[cur].depth + 1;
          t.nodes[cur].by_segment.emplace(std::string(seg), next);
          t.nodes[cur].children.push_back(next);
          t.nodes.push_back(std::move(child));
        } else {
          next = it->second;
        }
        cur = next;
        t.nodes[cur].bytes += tensors[i].bytes;
        t.nodes[cur].num_tensors++;
      }
    }
    if (t.nodes[cur].tensor)
      return Status(Code::kInvalidArgument, "tensor '" + name + "' is listed twice in the checkpoint's tensors",
                    reason::kDuplicateTensor);
    t.nodes[cur].tensor = i;
  }
  return t;
}

/// no_split pattern: dotted segments, "*" matches any one segment.
bool MatchesPattern(const std::vector<std::string_view>& pattern, const Node& node) {
  if (node.depth == 0 || static_cast<int>(pattern.size()) != node.depth) return false;
  std::vector<std::string_view> segs = Split(node.name);
  for (size_t i = 0; i < pattern.size(); ++i)
    if (pattern[i] != "*" && pattern[i] != segs[i]) return false;
  return true;
}

std::string Bytes(uint64_t b) { return std::to_string(b) + " B"; }

struct Target {
  Device device;
  std::string key;                 // Device::ToString()
  uint64_t limit = kUnlimited;     // bytes the plan may use
  uint64_t used = 0;
};

std::string SpaceLeft(const std::vector<Target>& targets, bool disk_listed) {
  std::string s;
  for (const auto& t : targets) {
    if (!s.empty()) s += ", ";
    if (t.limit == kUnlimited)
      s += t.key + " unlimited (" + Bytes(t.used) + " used)";
    else
      s += t.key + " " + Bytes(t.limit - std::min(t.limit, t.used)) + " left of " + Bytes(t.limit);
  }
  if (!disk_listed) s += "; disk is not used unless max_memory lists it";
  return s;
}

struct Limits {
  std::vector<Target> targets;  // in placement order: GPUs, cpu, disk
  bool disk_listed = false;
  size_t num_gpus = 0;          // leading entries of `targets` that are GPUs
};

/// The devices a plan may use and their limits (before balancing).
Result<Limits> BuildTargets(const DeviceMapOptions& options, const std::vector<uint64_t>& gpu_free_bytes) {
  Limits out;
  std::map<int, uint64_t> gpu_limits;  // listed GPUs
  std::optional<uint64_t> cpu_limit, disk_limit;
  for (const auto& [key, bytes] : options.max_memory) {
    auto d = Device::Parse(key);
    if (!d.ok()) return d.status().WithPrefix("max_memory");
    if (d->kind == Device::Kind::kCuda) {
      if (d->index >= static_cast<int>(gpu_free_bytes.size()))
        return Status(Code::kInvalidArgument,
                      "max_memory names " + d->ToString() + " but only " + std::to_string(gpu_free_bytes.size()) +
                          " GPU(s) are available",
                      reason::kUnknownDevice);
      gpu_limits[d->index] = bytes;
    } else if (d->kind == Device::Kind::kCpu) {
      cpu_limit = bytes;
    } else {
      disk_limit = bytes;
    }
  }
  auto add_gpu = [&](int i, std::optional<uint64_t> listed) {
    Target t;
    t.device = Device{Device::Kind::kCuda, i};
    t.key = t.device.ToString();
    t.limit = listed ? std::min(*listed, gpu_free_bytes[i]) : gpu_free_bytes[i];
    out.targets.push_back(t);
  };
  if (!gpu_limits.empty()) {
    for (const auto& [i, b] : gpu_limits) add_gpu(i, b);
  } else {
    for (size_t i = 0; i < gpu_free_bytes.size(); ++i) add_gpu(static_cast<int>(i), std::nullopt);
  }
  out.num_gpus = out.targets.size();
  Target cpu;
  cpu.device = Device{Device::Kind::kCpu, 0};
  cpu.key = "cpu";
  cpu.limit = cpu_limit.value_or(kUnlimited);
  out.targets.push_back(cpu);
  if (disk_limit) {
    Target disk;
    disk.device = Device{Device::Kind::kDisk, 0};
    disk.key = "disk";
    disk.limit = *disk_limit;
    out.targets.push_back(disk);
    out.disk_listed = true;
  }
  return out;
}

/// get_balanced_memory: per-GPU limits that spread the model over the GPUs.
void Balance(const Tree& tree, const std::vector<std::vector<std::string_view>>& no_split, bool low_zero,
             Limits* limits) {
  std::vector<size_t> gpus;  // GPUs with a non-zero limit
  for (size_t i = 0; i < limits->num_gpus; ++i)
    if (limits->targets[i].limit > 0) gpus.push_back(i);
  if (gpus.empty()) return;
  if (gpus.size() == 1) low_zero = false;  // nothing to keep GPU 0 free for
  const uint64_t total = tree.nodes[0].bytes;
  uint64_t per_gpu = total / (low_zero ? gpus.size() - 1 : gpus.size());
  // Buffer: 1.25 x the larger of the biggest no-split module and the mean
  // size of the innermost modules (modules whose children are all tensors).
  uint64_t largest_no_split = 0, leaf_sum = 0, leaf_count = 0;
  for (size_t n = 1; n < tree.nodes.size(); ++n) {
    const Node& node = tree.nodes[n];
    if (node.children.empty()) continue;  // a tensor
    for (const auto& p : no_split)
      if (MatchesPattern(p, node)) largest_no_split = std::max(largest_no_split, node.bytes);
    bool innermost = std::all_of(node.children.begin(), node.children.end(),
                                 [&](int c) { return tree.nodes[c].children.empty(); });
    if (innermost) {
      leaf_sum += node.bytes;
      ++leaf_count;
    }
  }
  const uint64_t mean_leaf = leaf_count ? leaf_sum / leaf_count : 0;
  const uint64_t base = std::max(largest_no_split, mean_leaf);
  const uint64_t buffer = base / 4 * 5 + base % 4 * 5 / 4;  // floor(1.25 * base), overflow-free
  per_gpu = per_gpu > kUnlimited - buffer ? kUnlimited : per_gpu + buffer;
  // Every GPU but the last is capped; the last keeps its whole limit in case the buffer is short.
  for (size_t k = 0; k + 1 < gpus.size(); ++k) {
    if (low_zero && k == 0) continue;
    Target& t = limits->targets[gpus[k]];
    t.limit = std::min(t.limit, per_gpu);
  }
  if (low_zero) {
    // GPU 0 gets only what does not fit on the others.
    uint64_t others = 0;
    for (size_t k = 1; k < gpus.size(); ++k) {
      const uint64_t l = limits->targets[gpus[k]].limit;
      others = others > kUnlimited - l ? kUnlimited : others + l;
    }
    Target& t0 = limits->targets[gpus[0]];
    t0.limit = std::min(t0.limit, total > others ? total - others : 0);
  }
}

std::string DescribeNode(const Node& n) {
  return n.depth == 0 ? std::string("the whole model") : "'" + n.name + "'";
}

/// Coarsest prefixes: a node whose tensors all go to one device is one entry.
void Emit(const Tree& tree, int n, const std::vector<int>& uniform, const std::vector<int>& tensor_target,
          const std::vector<Target>& targets, std::vector<std::pair<std::string, Device>>* out) {
  const Node& node = tree.nodes[n];
  if (node.num_tensors == 0) return;
  if (uniform[n] >= 0) {
    out->emplace_back(node.name, targets[uniform[n]].device);
    return;
  }
  if (node.tensor) out->emplace_back(node.name, targets[tensor_target[*node.tensor]].device);
  for (int c : node.children) Emit(tree, c, uniform, tensor_target, targets, out);
}

/// Post-order: the single target of every tensor under n, or -1 when mixed.
int ComputeUniform(const Tree& tree, int n, const std::vector<int>& tensor_target, std::vector<int>* uniform) {
  const Node& node = tree.nodes[n];
  int u = -2;  // -2: no tensor seen yet
  auto merge = [&](int v) {
    if (v == -2) return;
    if (u == -2) u = v;
    else if (u != v) u = -1;
  };
  if (node.tensor) merge(tensor_target[*node.tensor]);
  for (int c : node.children) merge(ComputeUniform(tree, c, tensor_target, uniform));
  (*uniform)[n] = u == -2 ? -1 : u;
  return u;
}

DeviceMapPlan Finish(const Tree& tree, const std::vector<TensorFootprint>& tensors,
                     const std::vector<int>& tensor_target, const std::vector<Target>& targets) {
  DeviceMapPlan plan;
  std::vector<int> uniform(tree.nodes.size(), -1);
  if (!tensors.empty()) {
    ComputeUniform(tree, 0, tensor_target, &uniform);
    Emit(tree, 0, uniform, tensor_target, targets, &plan.device_map);
  }
  for (size_t i = 0; i < tensors.size(); ++i) plan.bytes_per_device[targets[tensor_target[i]].key] += tensors[i].bytes;
  return plan;
}

bool PrefixMatches(std::string_view prefix, std::string_view name) {
  if (prefix.empty()) return true;
  if (name.size() < prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return false;
  return name.size() == prefix.size() || name[prefix.size()] == '.';
}

// The first `segments` '.'-separated segments of `name`.
std::string FirstSegments(std::string_view name, size_t segments) {
  size_t end = 0;
  for (size_t k = 0; k < segments; ++k) {
    size_t dot = name.find('.', end);
    if (dot == std::string_view::npos) return std::string(name);
    end = dot + 1;
  }
  return std::string(name.substr(0, end ? end - 1 : 0));
}

// Levenshtein distance (for the "closest module" hint only).
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// Every explicit entry must match some tensor (a typo is not silently a
// no-op). kInvalidArgument naming each such entry and the module prefix of
// a tensor closest to it (same number of segments; one the entry's text
// starts, else the fewest edits).
Status CheckEntriesMatch(const std::vector<TensorFootprint>& tensors,
                         const std::vector<std::pair<std::string, Device>>& entries) {
  std::string bad;
  size_t n = 0;
  for (const auto& [prefix, dev] : entries) {
    if (std::any_of(tensors.begin(), tensors.end(), [&](const auto& t) { return PrefixMatches(prefix, t.name); }))
      continue;
    ++n;
    bad += (bad.empty() ? "" : "; ") + std::string("'") + prefix + "' -> " + dev.ToString();
    const size_t segments = static_cast<size_t>(std::count(prefix.begin(), prefix.end(), '.')) + 1;
    std::set<std::string> candidates;
    for (const auto& t : tensors) candidates.insert(FirstSegments(t.name, segments));
    // A module the entry is a plain-text prefix of ("lm" for "lm_head") first, then fewest edits.
    const std::string* closest = nullptr;
    std::pair<bool, size_t> best{true, 0};
    for (const auto& c : candidates) {
      std::pair<bool, size_t> d{c.rfind(prefix, 0) != 0, EditDistance(prefix, c)};
      if (!closest || d < best) {
        best = d;
        closest = &c;
      }
    }
    if (closest) bad += " (closest module: '" + *closest + "')";
  }
  if (n == 0) return Status::Ok();
  return Status(Code::kInvalidArgument,
                "device_map entr" + std::string(n == 1 ? "y " : "ies ") + bad + " match" + (n == 1 ? "es" : "") +
                    " no tensor of the checkpoint (a device_map key is a module prefix of tensor names, as in "
                    "accelerate)",
                reason::kDeviceMapEntryUnmatched);
}

Result<DeviceMapPlan> PlanExplicit(const std::vector<TensorFootprint>& tensors, const DeviceMapOptions& options,
                                   const std::vector<uint64_t>& gpu_free_bytes, const Tree& tree) {
  if (options.explicit_map.empty())
    return Status(Code::kInvalidArgument, "explicit device_map is empty (give PREFIX=DEVICE entries)",
                  reason::kInvalidDeviceMap);
  // Limits: GPUs from max_memory (capped by free memory) or free memory; cpu and disk unlimited unless listed.
  std::map<std::string, uint64_t> limit;
  for (const auto& [key, bytes] : options.max_memory) {
    auto d = Device::Parse(key);
    if (!d.ok()) return d.status().WithPrefix("max_memory");
    limit[d->ToString()] = bytes;
  }
  std::vector<Target> targets;
  std::map<std::string, size_t> target_of;
  std::set<std::string> prefixes;
  for (const auto& [prefix, dev] : options.explicit_map) {
    if (!prefixes.insert(prefix).second)
      return Status(Code::kInvalidArgument, "device_map gives prefix '" + prefix + "' twice",
                    reason::kInvalidDeviceMap);
    if (dev.kind == Device::Kind::kCuda && (dev.index < 0 || dev.index >= static_cast<int>(gpu_free_bytes.size())))
      return Status(Code::kInvalidArgument,
                    "device_map puts '" + prefix + "' on " + dev.ToString() + " but only " +
                        std::to_string(gpu_free_bytes.size()) + " GPU(s) are available",
                    reason::kUnknownDevice);
    std::string key = dev.ToString();
    if (target_of.count(key)) continue;
    Target t;
    t.device = dev;
    t.key = key;
    auto it = limit.find(key);
    if (dev.kind == Device::Kind::kCuda)
      t.limit = it == limit.end() ? gpu_free_bytes[dev.index] : std::min(it->second, gpu_free_bytes[dev.index]);
    else
      t.limit = it == limit.end() ? kUnlimited : it->second;
    target_of[key] = targets.size();
    targets.push_back(t);
  }
  HUBLOAD_RETURN_IF_ERROR(CheckEntriesMatch(tensors, options.explicit_map));
  std::vector<int> tensor_target(tensors.size(), -1);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::pair<std::string, Device>* best = nullptr;
    for (const auto& e : options.explicit_map)
      if (PrefixMatches(e.first, tensors[i].name) && (!best || e.first.size() > best->first.size())) best = &e;
    if (!best)
      return Status(Code::kInvalidArgument,
                    "device_map does not cover tensor '" + tensors[i].name +
                        "': no prefix matches it (add an entry for it or one of its modules, or \"\" for the rest)",
                    reason::kUncoveredTensor);
    size_t k = target_of[best->second.ToString()];
    Target& t = targets[k];
    if (t.limit != kUnlimited && (t.used > t.limit || tensors[i].bytes > t.limit - t.used)) {
      return Status(Code::kInvalidArgument,
                    "device_map entry '" + best->first + "' -> " + t.key + " does not fit: tensor '" + tensors[i].name +
                        "' (" + Bytes(tensors[i].bytes) + ") exceeds " + t.key + "'s limit of " + Bytes(t.limit) +
                        " (" + Bytes(t.used) + " already placed there)",
                    reason::kDoesNotFit);
    }
    t.used += tensors[i].bytes;
    tensor_target[i] = static_cast<int>(k);
  }
  return Finish(tree, tensors, tensor_target, targets);
}

std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

const char* StrategyName(DeviceMapOptions::Strategy strategy) {
  using S = DeviceMapOptions::Strategy;
  switch (strategy) {
    case S::kExplicit: return "explicit";
    case S::kAuto: return "auto";
    case S::kBalanced: return "balanced";
    case S::kBalancedLow0: return "balanced_low_0";
    case S::kSequential: return "sequential";
  }
  return "auto";
}

Result<DeviceMapOptions> ParseDeviceMap(std::string_view spec) {
  using S = DeviceMapOptions::Strategy;
  DeviceMapOptions o;
  const std::string_view t = TrimSpaces(spec);
  for (S s : {S::kAuto, S::kBalanced, S::kBalancedLow0, S::kSequential}) {
    if (t == StrategyName(s)) {
      o.strategy = s;
      return o;
    }
  }
  if (t.find('=') == std::string_view::npos)
    return Status(Code::kInvalidArgument,
                  "invalid device_map '" + std::string(spec) +
                      "': expected auto, balanced, balanced_low_0, sequential, or PREFIX=DEVICE,... (e.g. "
                      "\"text_model=0,lm_head=cpu\", \"=cuda:0\" for the whole model)",
                  reason::kInvalidDeviceMap);
  o.strategy = S::kExplicit;
  std::string_view rest = t;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = TrimSpaces(rest.substr(0, comma));
    const size_t eq = item.rfind('=');
    if (eq == std::string_view::npos)
      return Status(Code::kInvalidArgument,
                    "device_map entry '" + std::string(item) + "' in '" + std::string(spec) + "' is not PREFIX=DEVICE",
                    reason::kInvalidDeviceMap);
    auto dev = Device::Parse(TrimSpaces(item.substr(eq + 1)));
    if (!dev.ok()) return dev.status().WithPrefix("device_map entry '" + std::string(item) + "'");
    o.explicit_map.emplace_back(std::string(TrimSpaces(item.substr(0, eq))), *dev);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return o;
}

Device DeviceMapPlan::DeviceOf(std::string_view tensor_name) const {
  const std::pair<std::string, Device>* best = nullptr;
  for (const auto& e : device_map)
    if (PrefixMatches(e.first, tensor_name) && (!best || e.first.size() > best->first.size())) best = &e;
  return best ? best->second : Device{};
}

Result<DeviceMapPlan> PlanDeviceMap(const std::vector<TensorFootprint>& tensors, const DeviceMapOptions& options,
                                    const std::vector<uint64_t>& gpu_free_bytes) {
  HUBLOAD_ASSIGN_OR_RETURN(Tree tree, BuildTree(tensors));
  if (options.strategy == DeviceMapOptions::Strategy::kExplicit)
    return PlanExplicit(tensors, options, gpu_free_bytes, tree);

  std::vector<std::vector<std::string_view>> no_split;
  for (const auto& p : options.no_split_modules) {
    if (p.empty())
      return Status(Code::kInvalidArgument,
                    "empty no_split module pattern (write dotted module names, '*' for any one segment, e.g. "
                    "\"model.layers.*\")",
                    reason::kInvalidNoSplit);
    no_split.push_back(Split(p));
  }
  HUBLOAD_ASSIGN_OR_RETURN(Limits limits, BuildTargets(options, gpu_free_bytes));
  using S = DeviceMapOptions::Strategy;
  if (options.strategy == S::kAuto || options.strategy == S::kBalanced || options.strategy == S::kBalancedLow0)
    Balance(tree, no_split, options.strategy == S::kBalancedLow0, &limits);

  auto unsplittable = [&](const Node& n) {
    if (n.children.empty() || n.tensor) return true;  // a tensor (or a tensor that is also a module prefix)
    // A module holding only tensors (a Linear's weight + bias) is never split,
    // as accelerate never splits a module without child modules. The root is
    // not a module of the checkpoint: its top-level tensors are placed one by one.
    if (&n != &tree.nodes[0] && std::all_of(n.children.begin(), n.children.end(),
                                            [&](int c) { return tree.nodes[c].children.empty(); }))
      return true;
    for (const auto& p : no_split)
      if (MatchesPattern(p, n)) return true;
    return false;
  };

  std::vector<Target>& targets = limits.targets;
  std::vector<int> tensor_target(tensors.size(), -1);
  std::deque<int> queue;
  if (!tensors.empty()) queue.push_back(0);
  size_t cur = 0;
  while (!queue.empty()) {
    const int n = queue.front();
    queue.pop_front();
    const Node& node = tree.nodes[n];
    if (cur >= targets.size()) {
      std::string what = node.children.empty() ? "tensor " : (unsplittable(node) ? "module (not split) " : "module ");
      return Status(Code::kInvalidArgument,
                    "the model does not fit the device limits: " + what + DescribeNode(node) + " (" +
                        Bytes(node.bytes) + ") fits on no device after the ones before it were placed; space left: " +
                        SpaceLeft(targets, limits.disk_listed),
                    reason::kDoesNotFit);
    }
    Target& t = targets[cur];
    if (t.used <= t.limit && node.bytes <= t.limit - t.used) {
      t.used += node.bytes;
      tree.ForEachTensor(n, [&](size_t i) { tensor_target[i] = static_cast<int>(cur); });
      continue;
    }
    if (!unsplittable(node)) {
      for (auto it = node.children.rbegin(); it != node.children.rend(); ++it) queue.push_front(*it);
      continue;
    }
    ++cur;  // accelerate never goes back to an earlier device
    queue.push_front(n);
  }
  return Finish(tree, tensors, tensor_target, targets);
}

}  // namespace hubload
