// The LibTorch sinks of the load driver (hubload/pipeline.h): the caller's
// callbacks, a state dict, a torch::nn::Module; and the local-checkpoint
// entry points, which run the same driver over local files.
#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "hubload/pipeline.h"
#include "hubload/reasons.h"
#include "loader/pipeline/driver.h"
#include "loader/pipeline/torch_sink.h"

namespace hubload {
namespace {

using pipeline_internal::LoadHooks;
using pipeline_internal::RunLoad;
using pipeline_internal::ShardData;
using pipeline_internal::ShardSink;
using pipeline_internal::TorchSink;

Status CheckCpu(const PretrainedRequest& req) {
  if (req.device.empty() || req.device == "cpu") return Status::Ok();
  ErrorContext ctx;
  ctx.repo_id = req.repo_id;
  return Status(Code::kUnsupported,
                "device '" + req.device + "' is not supported by the CPU loader for " + req.repo_id +
                    ": load to \"cpu\" here, or use FetchAndLoadToDevice (hubload load --device / --device-map)",
                reason::kUnsupportedDevice, ctx);
}

LoadHooks HooksFor(const PretrainedCallbacks& cb) {
  LoadHooks h;
  h.allow_pickle = true;
  h.callbacks.on_file_downloaded = cb.on_file_downloaded;
  h.callbacks.on_progress = cb.on_progress;
  return h;
}

/// The state dict of a whole load in checkpoint order, the restored aliases
/// (delivered by the driver after every shard) last.
StateDict Assemble(std::vector<StateDict>& by_shard, const PretrainedInfo& info) {
  StateDict out;
  for (auto& sd : by_shard)
    for (auto& kv : sd) out.push_back(std::move(kv));
  std::set<std::string> removed;
  for (const auto& a : info.aliases) removed.insert(a.first);
  std::stable_partition(out.begin(), out.end(), [&](const auto& kv) { return !removed.count(kv.first); });
  return out;
}

PretrainedRequest LocalRequest(const std::string& path, const ResolveOptions& ro, const LoadOptions& lo) {
  PretrainedRequest req;
  req.repo_id = path;
  req.source = PretrainedRequest::Source::kLocal;
  req.subfolder = ro.subfolder;
  req.variant = ro.variant;
  req.allow_variant_fallback = ro.allow_variant_fallback;
  req.convention = ro.convention;
  req.load = lo;
  return req;
}

Result<PretrainedStateDict> StateDictOf(const HubClient* client, const PretrainedRequest& req) {
  HUBLOAD_RETURN_IF_ERROR(CheckCpu(req));
  std::vector<StateDict> by_shard;
  TorchSink sink(
      req,
      [&](size_t shard, std::string name, at::Tensor t) {
        if (by_shard.size() <= shard) by_shard.resize(shard + 1);
        by_shard[shard].emplace_back(std::move(name), std::move(t));
        return Status::Ok();
      },
      nullptr);
  LoadHooks hooks;
  hooks.allow_pickle = true;  // the restricted reader (pickle.h): no pickled code is ever executed
  HUBLOAD_ASSIGN_OR_RETURN(PretrainedInfo info, RunLoad(client, req, sink, hooks));
  PretrainedStateDict out;
  out.tensors = Assemble(by_shard, info);
  out.info = std::move(info);
  return out;
}

Result<PretrainedModuleLoad> ModuleOf(const HubClient* client, const PretrainedRequest& req,
                                      torch::nn::Module& module, const ModuleLoadOptions& module_options,
                                      bool expect_up_front) {
  HUBLOAD_RETURN_IF_ERROR(CheckCpu(req));
  ModuleLoader loader(module, module_options);
  StateDict pending;
  TorchSink sink(
      req,
      [&](size_t, std::string name, at::Tensor t) {
        pending.emplace_back(std::move(name), std::move(t));
        return Status::Ok();
      },
      [&](ShardData& shard) {
        StateDict batch = std::move(pending);
        pending.clear();
        return loader.AddTensors(std::move(batch), shard.file());  // placed, then released by the loader
      });
  LoadHooks hooks;
  hooks.allow_pickle = true;
  if (expect_up_front) {
    // Every header first: strict and shape errors before anything is loaded.
    hooks.read_headers = true;
    hooks.before_run = [&](pipeline_internal::FetchPlan& plan, PretrainedInfo* info, bool*) -> Status {
      std::vector<ModuleLoader::ExpectedKey> keys;
      for (const auto& s : plan.shards) {
        if (s.header)
          for (const auto& t : s.header->tensors)
            keys.push_back({t.name, std::vector<int64_t>(t.shape.begin(), t.shape.end()), s.file});
        if (s.description)
          for (const auto& t : s.description->tensors)
            keys.push_back({t.name, std::vector<int64_t>(t.shape.begin(), t.shape.end()), s.file});
      }
      return loader.Expect(keys, info->resolved.weights_file);
    };
  }
  HUBLOAD_ASSIGN_OR_RETURN(PretrainedInfo info, RunLoad(client, req, sink, hooks));
  // Aliases saved as "removed -> kept" metadata, delivered by the driver after
  // the last shard (so still pending): the removed name gets the kept
  // tensor's value when the module has it (a module that ties the two already
  // counts it as loaded).
  if (!pending.empty()) {
    StateDict have = ModuleStateDict(module, module_options.non_persistent_buffers);
    std::set<std::string> names;
    for (const auto& kv : have) names.insert(kv.first);
    StateDict restored;
    for (auto& kv : pending)
      if (names.count(kv.first)) restored.push_back(std::move(kv));
    pending.clear();
    if (!restored.empty()) {
      Status st = loader.AddTensors(std::move(restored), "aliases restored from the checkpoint metadata");
      if (!st.ok()) {
        ErrorContext ctx;
        ctx.repo_id = req.repo_id;
        ctx.revision = info.revision;
        return st.Annotate(ctx);
      }
    }
  }
  auto report = loader.Finish();
  if (!report.ok()) {
    ErrorContext ctx;
    ctx.repo_id = req.repo_id;
    ctx.revision = info.revision;
    return report.status().WithPrefix(req.repo_id).Annotate(ctx);
  }
  PretrainedModuleLoad out;
  out.report = std::move(*report);
  for (const auto& w : out.report.warnings) info.warnings.push_back(w);
  out.info = std::move(info);
  return out;
}

}  // namespace

Result<PretrainedInfo> FetchAndLoad(const HubClient& client, const PretrainedRequest& req,
                                    const PretrainedCallbacks& cb) {
  HUBLOAD_RETURN_IF_ERROR(CheckCpu(req));
  std::map<size_t, uint64_t> counts;
  TorchSink sink(
      req,
      [&](size_t shard, std::string name, at::Tensor t) {
        ++counts[shard];
        return cb.on_tensor ? cb.on_tensor(name, std::move(t)) : Status::Ok();
      },
      [&](ShardData& shard) {
        if (cb.on_shard) cb.on_shard(shard.file(), counts[shard.index()]);
        return Status::Ok();
      });
  return RunLoad(&client, req, sink, HooksFor(cb));
}

Result<PretrainedStateDict> LoadStateDict(const HubClient& client, const PretrainedRequest& req) {
  return StateDictOf(&client, req);
}

Result<PretrainedModuleLoad> LoadModule(const HubClient& client, const PretrainedRequest& req,
                                        torch::nn::Module& module, const ModuleLoadOptions& module_options) {
  return ModuleOf(&client, req, module, module_options, /*expect_up_front=*/false);
}

Result<Checkpoint> LoadCheckpoint(const std::string& path, const ResolveOptions& resolve_options,
                                  const LoadOptions& load_options) {
  HUBLOAD_ASSIGN_OR_RETURN(PretrainedStateDict sd,
                           StateDictOf(nullptr, LocalRequest(path, resolve_options, load_options)));
  Checkpoint out;
  out.files = sd.info.files;
  out.tensors = std::move(sd.tensors);
  out.warnings = sd.info.warnings;
  out.resolved = sd.info.resolved;
  return out;
}

Result<LoadReport> LoadIntoModule(torch::nn::Module& module, const std::string& path,
                                  const ResolveOptions& resolve_options, const LoadOptions& load_options,
                                  const ModuleLoadOptions& module_options) {
  HUBLOAD_ASSIGN_OR_RETURN(PretrainedModuleLoad m, ModuleOf(nullptr, LocalRequest(path, resolve_options, load_options),
                                                             module, module_options, /*expect_up_front=*/true));
  LoadReport report = std::move(m.report);
  // Resolution warnings first, as the report lists them.
  std::vector<std::string> w = m.info.resolved.warnings;
  for (const auto& x : report.warnings) w.push_back(x);
  report.warnings = std::move(w);
  return report;
}

}  // namespace hubload
