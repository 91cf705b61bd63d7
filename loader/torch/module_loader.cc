// Loading state dicts into torch::nn::Module (assign / copy), shard by shard.
#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <unordered_map>

#include "hubload/torch_loader.h"
#include "hubload/reasons.h"
#include "loader/torch/internal.h"

namespace hubload {
namespace fs = std::filesystem;

namespace {

struct Entry {
  at::Tensor tensor;  // the module's handle (same TensorImpl as registered)
  size_t group = 0;   // tie group
};

std::vector<std::regex> Compile(const std::vector<std::string>& patterns, Status* err) {
  std::vector<std::regex> out;
  for (const auto& p : patterns) {
    try {
      out.emplace_back(p, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      *err = Status(Code::kInvalidArgument, "invalid ignore regex '" + p + "': " + e.what(), reason::kInvalidRegex);
    }
  }
  return out;
}

bool AnySearch(const std::vector<std::regex>& rs, const std::string& s) {
  for (const auto& r : rs)
    if (std::regex_search(s, r)) return true;
  return false;
}

std::string JoinNames(const std::vector<std::string>& v, size_t max = 20) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < max; ++i) {
    if (i) s += ", ";
    s += v[i];
  }
  if (v.size() > max) s += ", ... (" + std::to_string(v.size()) + " in all)";
  return s;
}

}  // namespace

struct ModuleLoader::Impl {
  ModuleLoadOptions options;
  std::map<std::string, Entry> model;           // name -> entry
  std::vector<std::vector<std::string>> groups;  // tie groups
  std::vector<bool> group_loaded;
  std::set<std::string> loaded_names;
  std::set<std::string> unexpected;
  std::map<std::string, MismatchedKey> mismatched;
  std::vector<std::string> warnings;
  std::vector<std::regex> ignore_unexpected, ignore_missing;
  Status init_error;
  bool finished = false;
  uint64_t loaded = 0;

  Status ShapeError(const std::string& name, at::IntArrayRef ckpt, at::IntArrayRef model_shape,
                    const std::string& label) const {
    Status st(Code::kInvalidArgument,
              "tensor '" + name + "'" + (label.empty() ? "" : " in '" + label + "'") + " has shape " +
                  internal::ShapeString(ckpt) + " in the checkpoint but " + internal::ShapeString(model_shape) +
                  " in the model (set ignore_mismatched_sizes to keep the model's value)",
              reason::kShapeMismatch);
    st.mutable_context().tensor = name;
    st.mutable_context().file = label;
    return st;
  }

  std::vector<std::string> Missing() const {
    std::vector<std::string> out;
    for (const auto& [name, e] : model) {
      if (group_loaded[e.group] || mismatched.count(name)) continue;
      if (AnySearch(ignore_missing, name)) continue;
      out.push_back(name);
    }
    return out;
  }
  std::vector<std::string> Unexpected() const {
    std::vector<std::string> out;
    for (const auto& n : unexpected)
      if (!AnySearch(ignore_unexpected, n)) out.push_back(n);
    return out;
  }
};

ModuleLoader::ModuleLoader(torch::nn::Module& module, ModuleLoadOptions options) : impl_(new Impl) {
  impl_->options = std::move(options);
  impl_->ignore_unexpected = Compile(impl_->options.ignore_unexpected_regex, &impl_->init_error);
  impl_->ignore_missing = Compile(impl_->options.ignore_missing_regex, &impl_->init_error);
  std::set<std::string> non_persistent(impl_->options.non_persistent_buffers.begin(),
                                       impl_->options.non_persistent_buffers.end());
  std::vector<std::pair<std::string, at::Tensor>> all;
  for (auto& kv : module.named_parameters(/*recurse=*/true)) all.emplace_back(kv.key(), kv.value());
  for (auto& kv : module.named_buffers(/*recurse=*/true))
    if (!non_persistent.count(kv.key())) all.emplace_back(kv.key(), kv.value());
  // Tie groups: the same TensorImpl, or exact aliases of one storage.
  std::map<const void*, size_t> by_impl;
  std::map<std::tuple<const void*, int64_t, std::vector<int64_t>, std::vector<int64_t>, int>, size_t> by_view;
  for (auto& [name, t] : all) {
    size_t g;
    const void* impl = t.defined() ? static_cast<const void*>(t.unsafeGetTensorImpl()) : nullptr;
    auto it = impl ? by_impl.find(impl) : by_impl.end();
    if (it != by_impl.end()) {
      g = it->second;
    } else {
      std::optional<size_t> found;
      std::tuple<const void*, int64_t, std::vector<int64_t>, std::vector<int64_t>, int> key;
      bool has_view = t.defined() && t.has_storage() && t.numel() > 0 && t.storage().data() != nullptr;
      if (has_view) {
        key = {t.storage().data(), t.storage_offset(), t.sizes().vec(), t.strides().vec(),
               static_cast<int>(t.scalar_type())};
        auto v = by_view.find(key);
        if (v != by_view.end()) found = v->second;
      }
      if (found) {
        g = *found;
      } else {
        g = impl_->groups.size();
        impl_->groups.emplace_back();
        if (has_view) by_view[key] = g;
      }
      if (impl) by_impl[impl] = g;
    }
    impl_->groups[g].push_back(name);
    impl_->model[name] = Entry{t, g};
  }
  impl_->group_loaded.assign(impl_->groups.size(), false);
}

ModuleLoader::~ModuleLoader() { delete impl_; }

Status ModuleLoader::Expect(const std::vector<ExpectedKey>& keys, const std::string& label) {
  HUBLOAD_RETURN_IF_ERROR(impl_->init_error);
  std::set<std::string> present;
  std::vector<std::string> unexpected;
  for (const auto& [name, shape, shard] : keys) {
    present.insert(name);
    auto it = impl_->model.find(name);
    if (it == impl_->model.end()) {
      if (!AnySearch(impl_->ignore_unexpected, name)) unexpected.push_back(name);
      continue;
    }
    const at::Tensor& m = it->second.tensor;
    if (m.defined() && m.sizes().vec() != shape && !impl_->options.ignore_mismatched_sizes)
      return impl_->ShapeError(name, shape, m.sizes(), shard);
  }
  if (!impl_->options.strict) return Status::Ok();
  std::vector<bool> covered(impl_->groups.size(), false);
  for (const auto& [name, e] : impl_->model)
    if (present.count(name)) covered[e.group] = true;
  std::vector<std::string> missing;
  for (const auto& [name, e] : impl_->model)
    if (!covered[e.group] && !AnySearch(impl_->ignore_missing, name)) missing.push_back(name);
  if (!missing.empty())
    return Status(Code::kInvalidArgument,
                  "strict load: the checkpoint" + (label.empty() ? "" : " '" + label + "'") + " lacks " +
                      std::to_string(missing.size()) + " key(s) of the model: " + JoinNames(missing),
                  reason::kMissingKeys);
  if (!unexpected.empty())
    return Status(Code::kInvalidArgument,
                  "strict load: the checkpoint" + (label.empty() ? "" : " '" + label + "'") + " has " +
                      std::to_string(unexpected.size()) + " key(s) the model lacks: " + JoinNames(unexpected),
                  reason::kUnexpectedKeys);
  return Status::Ok();
}

Status ModuleLoader::AddTensors(StateDict&& tensors, const std::string& shard_label) {
  HUBLOAD_RETURN_IF_ERROR(impl_->init_error);
  if (impl_->finished) return Status(Code::kInvalidArgument, "ModuleLoader::AddTensors after Finish",
                                     reason::kFinished);
  StateDict batch = std::move(tensors);
  // Pass 1: check everything before touching the module.
  std::vector<size_t> to_load;
  std::set<std::string> in_batch;
  for (size_t i = 0; i < batch.size(); ++i) {
    const auto& [name, t] = batch[i];
    if (!in_batch.insert(name).second || impl_->loaded_names.count(name)) {
      Status st(Code::kInvalidArgument,
                "tensor '" + name + "' is given twice" + (shard_label.empty() ? "" : " (in '" + shard_label + "')"),
                reason::kDuplicateKey);
      st.mutable_context().tensor = name;
      return st;
    }
    auto it = impl_->model.find(name);
    if (it == impl_->model.end()) {
      impl_->unexpected.insert(name);
      continue;
    }
    const at::Tensor& m = it->second.tensor;
    if (m.defined() && !m.sizes().equals(t.sizes())) {
      if (!impl_->options.ignore_mismatched_sizes) return impl_->ShapeError(name, t.sizes(), m.sizes(), shard_label);
      impl_->mismatched[name] = MismatchedKey{name, t.sizes().vec(), m.sizes().vec(), shard_label};
      continue;
    }
    to_load.push_back(i);
  }
  // Pass 2: place.
  try {
    at::NoGradGuard no_grad;
    for (size_t i : to_load) {
      auto& [name, t] = batch[i];
      auto entry = impl_->model.find(name);  // pass 1 kept only names of the model
      if (entry == impl_->model.end()) return Status(Code::kInternal, "module load: " + name + " left the model");
      Entry& e = entry->second;
      std::set<const void*> done;
      if (impl_->options.mode == ModuleLoadMode::kAssign) {
        at::Tensor src = t;
        if (e.tensor.defined() && e.tensor.device() != src.device()) src = src.to(e.tensor.device());
        for (const auto& tied : impl_->groups[e.group]) {
          auto tied_entry = impl_->model.find(tied);
          if (tied_entry == impl_->model.end()) continue;
          at::Tensor& dst = tied_entry->second.tensor;
          if (!dst.defined()) continue;
          if (!done.insert(dst.unsafeGetTensorImpl()).second) continue;
          dst.set_data(src);
        }
      } else {
        if (e.tensor.defined()) e.tensor.copy_(t);
        // Exact aliases share the storage: one copy fills them all.
      }
      impl_->group_loaded[e.group] = true;
      impl_->loaded_names.insert(name);
      ++impl_->loaded;
    }
  } catch (const std::exception& ex) {
    return internal::FromTorchError(ex, "loading '" + shard_label + "' into the module");
  }
  batch.clear();  // release this shard's tensors (and, in copy mode, its mapping)
  return Status::Ok();
}

Result<LoadReport> ModuleLoader::Finish() {
  HUBLOAD_RETURN_IF_ERROR(impl_->init_error);
  if (impl_->finished) return Status(Code::kInvalidArgument, "ModuleLoader::Finish called twice", reason::kFinished);
  impl_->finished = true;
  LoadReport r;
  r.missing = impl_->Missing();
  r.unexpected = impl_->Unexpected();
  for (auto& [n, m] : impl_->mismatched) r.mismatched.push_back(m);
  r.loaded_tensors = impl_->loaded;
  if (!r.missing.empty())
    r.warnings.push_back("some weights of the model were not in the checkpoint: " + JoinNames(r.missing));
  if (!r.unexpected.empty())
    r.warnings.push_back("some weights of the checkpoint were not used: " + JoinNames(r.unexpected));
  for (const auto& m : r.mismatched)
    r.warnings.push_back("'" + m.name + "' keeps the model's value: checkpoint shape " +
                         internal::ShapeString(m.checkpoint_shape) + ", model shape " +
                         internal::ShapeString(m.model_shape));
  if (impl_->options.strict && !r.missing.empty())
    return Status(Code::kInvalidArgument,
                  "strict load: " + std::to_string(r.missing.size()) + " key(s) missing: " + JoinNames(r.missing),
                  reason::kMissingKeys);
  if (impl_->options.strict && !r.unexpected.empty())
    return Status(Code::kInvalidArgument,
                  "strict load: " + std::to_string(r.unexpected.size()) + " unexpected key(s): " +
                      JoinNames(r.unexpected),
                  reason::kUnexpectedKeys);
  return r;
}

StateDict ModuleStateDict(torch::nn::Module& module, const std::vector<std::string>& non_persistent_buffers) {
  std::set<std::string> skip(non_persistent_buffers.begin(), non_persistent_buffers.end());
  StateDict out;
  for (auto& kv : module.named_parameters(true)) out.emplace_back(kv.key(), kv.value());
  for (auto& kv : module.named_buffers(true))
    if (!skip.count(kv.key())) out.emplace_back(kv.key(), kv.value());
  return out;
}

}  // namespace hubload
