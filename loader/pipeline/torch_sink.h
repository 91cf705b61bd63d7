// Internal (loader/pipeline): the LibTorch sink of the load driver, shared by
// the CPU entry points (torch_sinks.cc) and the distributed load.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "hubload/dtype_policy.h"
#include "hubload/torch_loader.h"
#include "hubload/torch_pickle.h"
#include "loader/pipeline/driver.h"
#include "loader/torch/internal.h"

namespace hubload::pipeline_internal {

/// Updates `rec` with what the tensor became (dtype, bytes, digests).
inline Status Describe(const at::Tensor& t, bool digests, TensorRecord* rec) {
  auto d = SafetensorsDtype(t.scalar_type());
  if (d.ok()) rec->dtype = safetensors::DtypeName(*d);
  rec->bytes = static_cast<uint64_t>(t.numel()) * static_cast<uint64_t>(t.element_size());
  rec->device = "cpu";
  if (digests) {
    HUBLOAD_ASSIGN_OR_RETURN(TensorSummary s, SummarizeTensor(t));
    rec->sha256 = s.sha256;
    rec->sum = s.sum;
  }
  return Status::Ok();
}

/// Makes at::Tensors from each shard as its bytes land and hands them on.
class TorchSink : public ShardSink {
 public:
  /// `on_tensor(shard index, name, tensor)` and `on_shard_end` may be null.
  /// `filter` (may be null) keeps a tensor when it returns true; a tensor it
  /// drops is never materialised and its record gets device "" (a rank's
  /// share of a distributed load).
  TorchSink(const PretrainedRequest& req, std::function<Status(size_t shard, std::string name, at::Tensor t)> on_tensor,
            std::function<Status(ShardData& shard)> on_shard_end,
            std::function<bool(const std::string& name)> filter = nullptr)
      : req_(req), on_tensor_(std::move(on_tensor)), on_shard_end_(std::move(on_shard_end)), filter_(std::move(filter)) {}

  Status OnShardStart(ShardData& shard) override {
    file_.reset();
    if (shard.planned().format == ShardFormat::kSafetensors) AddConversions(shard.header().tensors);
    return Status::Ok();
  }
  Status OnTensor(ShardData& shard, const safetensors::TensorInfo& info, TensorRecord* rec) override {
    if (filter_ && !filter_(info.name)) {
      rec->device.clear();
      return Status::Ok();
    }
    auto t = Load(shard, info);
    if (!t.ok()) return internal::NameTensor(t.status(), info.name);
    HUBLOAD_RETURN_IF_ERROR(Describe(*t, req_.digests, rec));
    return Deliver(shard, info.name, std::move(*t));
  }
  /// Pickle shards (verified, whole): views over the mapping that share storages.
  Status OnWholeShard(ShardData& shard, std::vector<TensorRecord>* records) override {
    HUBLOAD_ASSIGN_OR_RETURN(auto mapping, shard.Mapping());
    HUBLOAD_ASSIGN_OR_RETURN(pickle::PickleFile file, pickle::PickleFile::FromMapping(mapping));
    std::vector<safetensors::TensorInfo> described;
    for (const auto& r : *records) {
      safetensors::TensorInfo t;
      t.name = r.name;
      if (auto d = safetensors::DtypeFromName(r.source_dtype)) t.dtype = *d;
      else continue;
      described.push_back(std::move(t));
    }
    AddConversions(described);
    size_t k = 0;
    return ForEachPickleTensor(file, req_.load, [&](const std::string& name, at::Tensor t) -> Status {
      TensorRecord* rec = k < records->size() && (*records)[k].name == name ? &(*records)[k] : nullptr;
      ++k;
      if (filter_ && !filter_(name)) {
        if (rec) rec->device.clear();
        return Status::Ok();
      }
      TensorRecord scratch;
      HUBLOAD_RETURN_IF_ERROR(Describe(t, req_.digests, rec ? rec : &scratch));
      return Deliver(shard, name, std::move(t));
    });
  }
  /// `removed` goes to on_tensor with the kept tensor itself (shared, not
  /// copied) and the kept tensor's shard, when the filter keeps both.
  Status OnAlias(const std::string& removed, const std::string& kept) override {
    auto it = kept_.find(kept);
    if (it == kept_.end() || (filter_ && !filter_(removed))) return Status::Ok();
    auto [shard, t] = it->second;
    kept_.erase(it);  // nothing more holds it here
    return on_tensor_ ? on_tensor_(shard, removed, std::move(t)) : Status::Ok();
  }
  Status OnShardEnd(ShardData& shard) override {
    file_.reset();  // the shard's mapping is released unless zero-copy tensors hold it
    return on_shard_end_ ? on_shard_end_(shard) : Status::Ok();
  }
  /// Every dtype widening or narrowing of the load, one warning per kind
  /// (tensor names counted, the first few named), in checkpoint order
  /// (info->tensors), whatever order the shards' headers arrived in.
  Status Finish(PretrainedInfo* info) override {
    std::unordered_map<std::string, size_t> pos;
    for (size_t i = 0; i < info->tensors.size(); ++i) pos.emplace(info->tensors[i].name, i);
    auto at = [&](const std::string& name) {
      auto it = pos.find(name);
      return it == pos.end() ? pos.size() : it->second;
    };
    auto first = [&](const DtypeConversion& c) { return c.tensors.empty() ? pos.size() : at(c.tensors.front()); };
    for (auto& c : conversions_)
      std::stable_sort(c.tensors.begin(), c.tensors.end(),
                       [&](const std::string& a, const std::string& b) { return at(a) < at(b); });
    std::stable_sort(conversions_.begin(), conversions_.end(),
                     [&](const DtypeConversion& a, const DtypeConversion& b) { return first(a) < first(b); });
    for (const auto& c : conversions_) info->warnings.push_back("dtype conversion: " + DescribeDtypeConversion(c));
    return Status::Ok();
  }

 private:
  // Hands a tensor on, keeping a handle when an alias will need it.
  Status Deliver(ShardData& shard, const std::string& name, at::Tensor t) {
    if (shard.IsAliasTarget(name)) kept_[name] = {shard.index(), t};
    return on_tensor_ ? on_tensor_(shard.index(), name, std::move(t)) : Status::Ok();
  }
  // One tensor of a safetensors shard whose bytes have landed.
  Result<at::Tensor> Load(ShardData& shard, const safetensors::TensorInfo& info) {
    const LoadOptions& options = req_.load;
    auto to = LoadedSafetensorsDtype(info.dtype, info.name, options);
    if (to.ok() && (*to != info.dtype || options.force_copy)) {
      // A fresh tensor anyway: pread into a reused buffer costs no page faults
      // on a mapping (nor releasing them afterwards).
      HUBLOAD_ASSIGN_OR_RETURN(int fd, shard.Descriptor());
      return LoadTensorFromFd(fd, shard.header().data_start + info.begin, info, options, shard.planned().local_path);
    }
    // The mapping may be renewed when the download restarted or the file was verified.
    HUBLOAD_ASSIGN_OR_RETURN(auto mapping, shard.Mapping());
    if (!file_ || file_->mapping() != mapping) {
      HUBLOAD_ASSIGN_OR_RETURN(auto f, safetensors::SafetensorsFile::FromParts(mapping, shard.header()));
      file_ = std::move(f);
    }
    return LoadTensor(*file_, info, options);
  }
  // The conversions LoadTensor applies to the tensors this sink keeps.
  void AddConversions(const std::vector<safetensors::TensorInfo>& tensors) {
    safetensors::Header kept;
    for (const auto& t : tensors)
      if (!filter_ || filter_(t.name)) kept.tensors.push_back(t);
    AddDtypeConversions(kept, req_.load, &conversions_);
  }
  const PretrainedRequest& req_;
  std::function<Status(size_t, std::string, at::Tensor)> on_tensor_;
  std::function<Status(ShardData&)> on_shard_end_;
  std::function<bool(const std::string&)> filter_;
  std::optional<safetensors::SafetensorsFile> file_;
  std::vector<DtypeConversion> conversions_;
  std::map<std::string, std::pair<size_t, at::Tensor>> kept_;  // alias targets: name -> (shard, tensor)
};

}  // namespace hubload::pipeline_internal
