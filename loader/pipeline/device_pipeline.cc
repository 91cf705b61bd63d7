// Fetch-and-load to devices (hubload/device_pipeline.h): the load driver with
// shard headers read first, a placement plan, and a device sink that streams
// each shard through the staging loader while its bytes land. Torch-free.
#include "hubload/device_pipeline.h"
#include "hubload/dtype_policy.h"
#include "hubload/reasons.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include "loader/pipeline/driver.h"
#include "util/digest.h"

namespace hubload {
namespace {

using pipeline_internal::FetchPlan;
using pipeline_internal::PickleUnsupported;
using pipeline_internal::LoadHooks;
using pipeline_internal::ShardData;
using pipeline_internal::ShardSink;

constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();


/// The dtypes the staging path converts to a target dtype (StagingOptions).
bool IsConvertible(Dtype d) {
  return d == Dtype::BF16 || d == Dtype::F16 || d == Dtype::F8_E4M3 || d == Dtype::F8_E5M2 || d == Dtype::F32;
}

/// The GPUs a request names (max_memory, explicit map, single device): their count (max index + 1).
int NamedGpuCount(const DeviceMapOptions& map) {
  int n = 0;
  for (const auto& [key, bytes] : map.max_memory) {
    auto d = Device::Parse(key);
    if (d.ok() && d->kind == Device::Kind::kCuda) n = std::max(n, d->index + 1);
  }
  for (const auto& [prefix, d] : map.explicit_map)
    if (d.kind == Device::Kind::kCuda) n = std::max(n, d.index + 1);
  return n;
}

/// DeviceMapPlan::DeviceOf in O(name depth): the plan's prefixes in a hash map,
/// looked up from the whole name down to its first segment, then "".
class PlanIndex {
 public:
  explicit PlanIndex(const DeviceMapPlan& plan) {
    for (const auto& [prefix, dev] : plan.device_map) by_prefix_.emplace(prefix, dev);
  }
  Device Of(const std::string& name) const {
    std::string s = name;
    while (true) {
      auto it = by_prefix_.find(s);
      if (it != by_prefix_.end()) return it->second;
      const size_t dot = s.rfind('.');
      if (dot == std::string::npos) break;
      s.resize(dot);
    }
    auto it = by_prefix_.find("");
    return it != by_prefix_.end() ? it->second : Device{};
  }

 private:
  std::unordered_map<std::string, Device> by_prefix_;
};

/// Streams each shard to its devices (StagingLoader::LoadShard reads through
/// the driver, so it waits for bytes as they land); tensors planned on disk
/// are skipped.
class DeviceSink : public ShardSink {
 public:
  DeviceSink(StagingLoader* loader, const PlanIndex* index, DeviceStateDict* out, bool digests)
      : loader_(loader), index_(index), out_(out), digests_(digests) {}
  bool WholeShard() const override { return true; }
  Status OnWholeShard(ShardData& shard, std::vector<TensorRecord>* records) override {
    const auto place = [&](const std::string& name) { return index_->Of(name); };
    safetensors::Header h = shard.header();
    h.tensors.erase(std::remove_if(h.tensors.begin(), h.tensors.end(),
                                   [&](const safetensors::TensorInfo& t) {
                                     return place(t.name).kind == Device::Kind::kDisk;
                                   }),
                    h.tensors.end());
    h.by_name.clear();
    const size_t before = out_->tensors().size();
    ShardReader reader = [&shard](uint64_t offset, void* dst, uint64_t bytes) { return shard.Read(offset, dst, bytes); };
    HUBLOAD_RETURN_IF_ERROR(loader_->LoadShard(shard.file(), h, reader, place, out_));
    std::unordered_map<std::string, const DeviceTensor*> loaded;
    for (size_t i = before; i < out_->tensors().size(); ++i) loaded[out_->tensors()[i].name] = &out_->tensors()[i];
    for (TensorRecord& r : *records) {
      const Device d = place(r.name);
      r.device = d.ToString();
      auto it = loaded.find(r.name);
      if (it == loaded.end()) continue;  // left on disk
      r.dtype = safetensors::DtypeName(it->second->dtype);
      r.bytes = it->second->bytes;
      if (digests_) {
        HUBLOAD_ASSIGN_OR_RETURN(std::vector<uint8_t> host, out_->CopyToHost(*it->second));
        r.sha256 = util::Sha256Hex(std::string_view(reinterpret_cast<const char*>(host.data()), host.size()));
      }
    }
    return Status::Ok();
  }
  /// The removed name shares the kept tensor's device memory (nothing when
  /// the kept tensor was left on disk).
  Status OnAlias(const std::string& removed, const std::string& kept) override {
    const DeviceTensor* k = out_->Find(kept);
    if (!k) return Status::Ok();
    DeviceTensor alias = *k;
    alias.name = removed;
    alias.alias_of = kept;
    out_->tensors().push_back(std::move(alias));
    return Status::Ok();
  }

 private:
  StagingLoader* loader_;
  const PlanIndex* index_;
  DeviceStateDict* out_;
  bool digests_;
};

}  // namespace

std::vector<TensorFootprint> DeviceFootprints(const safetensors::Header& header, std::optional<Dtype> target_dtype) {
  std::vector<TensorFootprint> out;
  out.reserve(header.tensors.size());
  for (const auto& t : header.tensors) {
    uint64_t bytes = t.nbytes();
    if (target_dtype && IsConvertible(t.dtype))
      bytes = t.num_elements() * static_cast<uint64_t>(safetensors::DtypeBits(*target_dtype)) / 8;
    out.push_back({t.name, bytes});
  }
  return out;
}

Result<DeviceLoadResult> FetchAndLoadToDevice(const HubClient& client, const PretrainedRequest& req,
                                              const DeviceLoadOptions& options) {
  if (!req.load.keep_in_fp32.empty())
    return Status(Code::kUnsupported,
                  "keep_in_fp32 is not supported when loading to devices (the staging path converts every floating "
                  "tensor to the same dtype); load with the CPU pipeline or without a target dtype",
                  reason::kUnsupportedOption);
  DeviceLoadResult out;
  std::vector<std::string> warnings;
  // Placement and backend first: a bad option fails before any request.
  DeviceMapOptions map;
  std::string what;
  std::optional<Dtype> target;
  std::shared_ptr<DeviceBackend> backend;
  std::vector<uint64_t> gpu_free;
  // ---- placement options and backend, validated before any request ----
  auto placement = [&]() -> Status {
  if (options.device_map) {
    map = *options.device_map;
    what = std::string("device_map '") + StrategyName(map.strategy) + "'";
  } else {
    const std::string text = options.device.empty() ? (req.device.empty() ? "cpu" : req.device) : options.device;
    HUBLOAD_ASSIGN_OR_RETURN(Device d, Device::Parse(text));
    if (d.kind == Device::Kind::kDisk)
      return Status(Code::kInvalidArgument,
                    "device 'disk' is only a device_map target (tensors planned on disk are not loaded)",
                    reason::kInvalidDevice);
    map.strategy = DeviceMapOptions::Strategy::kExplicit;
    map.explicit_map = {{"", d}};
    what = "device '" + d.ToString() + "'";
  }
  target = TargetDtypeToDtype(req.load.dtype);
  // Which GPUs exist and how much is free.
  backend = options.backend;
  std::string no_cuda;  // why there is no backend
  if (!backend) {
    auto b = MakeCudaBackend();
    if (b.ok()) backend = *b;
    else no_cuda = b.status().message();
  }
  if (backend) {
    // With a target dtype the staging loader converts on the device through one
    // scratch buffer per ring slot: keep that room free on every GPU.
    uint64_t scratch = 0;
    if (target) {
      const uint64_t slots = static_cast<uint64_t>(std::max(options.staging.num_buffers, 0));
      scratch = options.staging.buffer_bytes > kUnlimited / std::max<uint64_t>(slots, 1)
                    ? kUnlimited
                    : slots * options.staging.buffer_bytes;
    }
    for (int i = 0; i < backend->device_count(); ++i) {
      auto f = backend->free_memory(i);
      if (!f.ok()) return f.status().WithPrefix(backend->name() + " backend: free memory of cuda:" + std::to_string(i));
      gpu_free.push_back(*f > scratch ? *f - scratch : 0);
    }
  } else {
    int named = NamedGpuCount(map);
    if (options.device_map) {
      // `--device cuda:N` next to a device_map names the GPUs to plan for as well.
      const std::string text = options.device.empty() ? req.device : options.device;
      auto d = Device::Parse(text.empty() ? "cpu" : text);
      if (d.ok() && d->kind == Device::Kind::kCuda) named = std::max(named, d->index + 1);
    }
    if (named > 0 && !options.plan_only) {
      Status st(Code::kUnsupported,
                what + " needs a GPU but none is usable (" + no_cuda +
                    "); use plan_only (hubload load --plan-only) to compute the placement without a GPU, or the fake "
                    "backend (--device-backend fake) to run the whole path on the CPU",
                reason::kNoCudaDevice);
      return st;
    }
    for (int i = 0; i < named; ++i) {
      auto it = map.max_memory.find("cuda:" + std::to_string(i));
      gpu_free.push_back(it == map.max_memory.end() ? kUnlimited : it->second);
    }
    if (named > 0)
      warnings.push_back("no CUDA device (" + no_cuda + "): planning for the " + std::to_string(named) +
                             " GPU(s) named by the request, with the max_memory limits (unlimited where none)");
    else if (options.device_map)
      warnings.push_back("no CUDA device (" + no_cuda + "): " + what + " plans for zero GPUs");
  }
    return Status::Ok();
  };
  if (Status st = placement(); !st.ok()) {
    ErrorContext ctx;
    ctx.repo_id = req.repo_id;
    return st.Annotate(ctx);
  }
  out.gpu_free_bytes = gpu_free;

  std::unique_ptr<StagingLoader> loader;
  std::optional<PlanIndex> index;
  LoadHooks hooks;
  hooks.read_headers = true;
  hooks.before_run = [&](FetchPlan& plan, PretrainedInfo* info, bool* proceed) -> Status {
    for (auto& w : warnings) info->warnings.push_back(w);
    std::vector<TensorFootprint> footprints;
    for (const auto& s : plan.shards) {
      if (!s.header) return PickleUnsupported(s.file, req.repo_id, req.revision);
      auto fp = DeviceFootprints(*s.header, target);
      for (size_t i = 0; i < fp.size(); ++i) {
        const auto& t = s.header->tensors[i];
        PlannedTensor p;
        p.name = t.name;
        p.file = s.file;
        p.source_dtype = t.dtype;
        p.dtype = target && IsConvertible(t.dtype) ? *target : t.dtype;
        p.shape = t.shape;
        p.bytes = fp[i].bytes;
        out.planned.push_back(std::move(p));
      }
      footprints.insert(footprints.end(), fp.begin(), fp.end());
    }
    // Every conversion the staging path makes, named in the report (one warning per kind).
    std::vector<DtypeConversion> conversions;
    for (const auto& p : out.planned) {
      if (p.dtype == p.source_dtype) continue;
      auto it = std::find_if(conversions.begin(), conversions.end(),
                             [&](const DtypeConversion& c) { return c.from == p.source_dtype && c.to == p.dtype; });
      if (it == conversions.end())
        it = conversions.insert(conversions.end(),
                                {p.source_dtype, p.dtype, std::string("target dtype ") + safetensors::DtypeName(p.dtype), {}});
      it->tensors.push_back(p.name);
    }
    for (const auto& c : conversions) info->warnings.push_back("dtype conversion: " + DescribeDtypeConversion(c));
    auto planned = PlanDeviceMap(footprints, map, gpu_free);
    if (!planned.ok()) return planned.status().WithPrefix(req.repo_id);
    out.plan = std::move(*planned);
    index.emplace(out.plan);
    size_t k = 0;
    for (const auto& s : plan.shards)
      for (const auto& t : s.header->tensors) {
        PlannedTensor& p = out.planned[k++];
        p.device = index->Of(p.name);
        if (p.device.kind == Device::Kind::kDisk)
          out.disk_tensors.push_back(
              {t.name, s.file, s.local_path, t.dtype, t.shape, s.header->data_start + t.begin, t.nbytes()});
      }
    info->extra.strategy = options.device_map ? StrategyName(map.strategy) : "device";
    info->extra.plan_only = options.plan_only;
    info->extra.gpu_free_bytes = gpu_free;
    for (const auto& d : out.disk_tensors) info->extra.disk_tensors.push_back({d.name, d.file, d.offset, d.bytes});
    for (const auto& [prefix, dev] : out.plan.device_map) info->extra.device_map.emplace_back(prefix, dev.ToString());
    for (const auto& [dev, bytes] : out.plan.bytes_per_device) info->extra.bytes_per_device.emplace_back(dev, bytes);
    if (options.plan_only) {
      out.backend = backend ? backend->name() : "";
      info->extra.backend = out.backend;
      // The report lists every planned tensor.
      for (const auto& p : out.planned) {
        TensorRecord r;
        r.name = p.name;
        r.file = p.file;
        r.source_dtype = safetensors::DtypeName(p.source_dtype);
        r.dtype = safetensors::DtypeName(p.dtype);
        r.shape.assign(p.shape.begin(), p.shape.end());
        r.bytes = p.bytes;
        r.device = p.device.ToString();
        info->tensors.push_back(std::move(r));
      }
      *proceed = false;
      return Status::Ok();
    }
    if (!backend) {
      // Nothing goes to a GPU (checked above): host memory through a backend without devices.
      FakeDeviceOptions fo;
      fo.devices = 0;
      backend = MakeFakeDeviceBackend(fo);
      out.backend = "host";
    } else {
      out.backend = backend->name();
    }
    info->extra.backend = out.backend;
    StagingOptions so = options.staging;
    so.target_dtype = req.load.dtype;
    HUBLOAD_ASSIGN_OR_RETURN(loader, StagingLoader::Create(backend, so));
    out.tensors = DeviceStateDict(backend);
    return Status::Ok();
  };
  std::optional<DeviceSink> sink_holder;
  struct Deferred : ShardSink {
    std::optional<DeviceSink>* real;
    bool WholeShard() const override { return true; }
    Status OnWholeShard(ShardData& shard, std::vector<TensorRecord>* records) override {
      return (*real)->OnWholeShard(shard, records);
    }
    Status OnAlias(const std::string& removed, const std::string& kept) override {
      return (*real)->OnAlias(removed, kept);
    }
  } sink;
  sink.real = &sink_holder;
  auto before = hooks.before_run;
  hooks.before_run = [&](FetchPlan& plan, PretrainedInfo* info, bool* proceed) -> Status {
    HUBLOAD_RETURN_IF_ERROR(before(plan, info, proceed));
    if (*proceed) sink_holder.emplace(loader.get(), &*index, &out.tensors, req.digests);
    return Status::Ok();
  };
  HUBLOAD_ASSIGN_OR_RETURN(out.info, pipeline_internal::RunLoad(&client, req, sink, hooks));
  if (loader) {
    out.staging = loader->stats();
    out.info.extra.staging = {{"bytes_read", out.staging.bytes_read},
                              {"bytes_copied", out.staging.bytes_copied},
                              {"buffer_waits", out.staging.buffer_waits}};
  }
  return out;
}

}  // namespace hubload
