// Fetch-and-load pipeline (hubload/pipeline.h).
#include "hubload/pipeline.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <utility>

#include "loader/pipeline/completion_queue.h"

#include "loader/pipeline/common.h"

namespace hubload {
namespace {

namespace fs = std::filesystem;
using pipeline_internal::Clock;
using pipeline_internal::CompletedFile;
using pipeline_internal::CompletionQueue;

using pipeline_internal::Basename;
using pipeline_internal::Seconds;
using pipeline_internal::WithContext;

/// Internal sinks: on_shard may fail (ModuleLoader::AddTensors).
struct Sinks {
  std::function<Status(const std::string&, at::Tensor)> on_tensor;
  std::function<Status(const std::string&, uint64_t)> on_shard;
  std::function<void(const std::string&)> on_file_downloaded;
  std::function<void(uint64_t, uint64_t)> on_progress;
};

/// What the core tells its blocking wrappers besides PretrainedInfo.
struct Extra {
  /// Index metadata (sharded) or the single file's __metadata__: where
  /// huggingface_hub save_torch_state_dict records "removed -> kept" aliases.
  std::map<std::string, std::string> alias_metadata;
};

/// Resolution result, before any shard is fetched.
struct Plan {
  bool local = false;
  bool sharded = false;
  safetensors::Index index;
  /// Files to fetch (Hub: repo-relative) or read (local paths), index order.
  std::vector<std::string> files;
};

bool IsLocal(const PretrainedRequest& req) {
  if (req.source == PretrainedRequest::Source::kLocal) return true;
  if (req.source == PretrainedRequest::Source::kHub) return false;
  std::error_code ec;
  return fs::exists(req.repo_id, ec);
}

ResolveOptions ToResolveOptions(const PretrainedRequest& req) {
  ResolveOptions ro;
  ro.subfolder = req.subfolder;
  ro.variant = req.variant;
  ro.allow_variant_fallback = req.allow_variant_fallback;
  ro.convention = req.convention;
  ro.allow_pickle = true;  // resolved so that the error can name the file
  return ro;
}

Status PickleUnsupported(const std::string& file, const std::string& repo_id, const std::string& revision) {
  Status st(Code::kUnsupported,
            "'" + file + "' in " + repo_id +
                " is a pickle (.bin) checkpoint; hubload never unpickles (no pickled code is executed) and "
                "loads safetensors only — convert it to safetensors (e.g. the safetensors convert script) "
                "and load the .safetensors weights",
            "PickleUnsupported");
  return WithContext(st, repo_id, revision, file);
}

std::string CacheDirOf(const HubClient& client) {
  const std::string& d = client.options().config.cache_dir;
  return d.empty() ? HubConfig::FromEnvironment().cache_dir : d;
}

/// Resolves a local path (folder, .safetensors file or index file).
Result<Plan> PlanLocal(const PretrainedRequest& req, PretrainedInfo* info) {
  HUBLOAD_ASSIGN_OR_RETURN(LocalCheckpointFiles lc, ResolveLocalCheckpoint(req.repo_id, ToResolveOptions(req)));
  Plan plan;
  plan.local = true;
  plan.sharded = !lc.index_path.empty();
  plan.index = std::move(lc.index);
  plan.files = lc.files;
  info->source = "local";
  std::error_code ec;
  info->root = fs::is_directory(req.repo_id, ec) ? req.repo_id : fs::path(req.repo_id).parent_path().string();
  info->resolved = lc.resolved;
  info->index_file = lc.index_path;
  info->files = lc.files;
  info->local_files = lc.files;
  for (const auto& f : lc.files) {
    auto sz = fs::file_size(f, ec);
    if (!ec) info->weights_bytes += sz;
  }
  return plan;
}

/// Lists the repo, resolves the weights, fetches the index, checks the shards.
Result<Plan> PlanHub(const HubClient& client, const PretrainedRequest& req, PretrainedInfo* info) {
  HUBLOAD_ASSIGN_OR_RETURN(RepoListing listing, client.ListFiles(req.repo_id, req.revision, req.repo_type));
  info->source = "hub";
  info->commit = listing.commit;
  info->root = RepoCache(CacheDirOf(client), req.repo_id, req.repo_type).SnapshotDir(listing.commit);
  std::vector<std::string> paths;
  std::map<std::string, uint64_t> sizes;
  paths.reserve(listing.files.size());
  for (const auto& f : listing.files) {
    paths.push_back(f.path);
    sizes[f.path] = f.size;
  }
  auto resolved = ResolveWeights(paths, ToResolveOptions(req));
  if (!resolved.ok())
    return WithContext(resolved.status().WithPrefix(req.repo_id + "@" + req.revision), req.repo_id, req.revision, "");
  info->resolved = *resolved;
  if (resolved->is_pickle) return PickleUnsupported(resolved->weights_file, req.repo_id, req.revision);
  Plan plan;
  if (resolved->kind == ResolvedWeights::kSingleFile) {
    plan.files = {resolved->weights_file};
  } else {
    plan.sharded = true;
    info->index_file = resolved->weights_file;
    FileRequest fr;
    fr.repo_id = req.repo_id;
    fr.filename = resolved->weights_file;
    fr.revision = listing.commit;  // every file from the listed commit
    fr.repo_type = req.repo_type;
    HUBLOAD_ASSIGN_OR_RETURN(std::string index_local, client.Download(fr));
    auto index = safetensors::ReadIndex(index_local);
    if (!index.ok())
      return WithContext(index.status().WithPrefix(req.repo_id + "@" + req.revision + " " + resolved->weights_file),
                         req.repo_id, req.revision, resolved->weights_file);
    plan.index = std::move(*index);
    // B23 / B25 / unsafe names: all checked against the listing before any shard download.
    auto shards = ShardPaths(*resolved, plan.index, paths);
    if (!shards.ok())
      return WithContext(shards.status().WithPrefix(req.repo_id + "@" + req.revision + " " + resolved->weights_file),
                         req.repo_id, req.revision, resolved->weights_file);
    plan.files = std::move(*shards);
  }
  info->files = plan.files;
  for (const auto& f : plan.files) {
    info->weights_bytes += sizes[f];
    info->local_files.push_back(RepoCache(CacheDirOf(client), req.repo_id, req.repo_type).PointerPath(listing.commit, f));
  }
  return plan;
}

Result<PretrainedInfo> Run(const HubClient& client, const PretrainedRequest& req, const Sinks& sinks, Extra* extra) {
  const auto t0 = Clock::now();
  if (req.repo_id.empty()) return Status(Code::kInvalidArgument, "empty repo_id (a Hub repo id or a local path)", "EmptyRepoId");
  if (!(req.device.empty() || req.device == "cpu")) {
    Status st(Code::kUnsupported,
              "device '" + req.device + "' is not supported for " + req.repo_id + ": hubload loads to \"cpu\" only",
              "UnsupportedDevice");
    return WithContext(st, req.repo_id, req.revision, "");
  }
  if (req.max_shards_in_flight < 1)
    return Status(Code::kInvalidArgument,
                  "max_shards_in_flight must be >= 1 (got " + std::to_string(req.max_shards_in_flight) + ")",
                  "InvalidArgument");

  PretrainedInfo info;
  info.repo_id = req.repo_id;
  const bool local = IsLocal(req);
  if (!local && req.source == PretrainedRequest::Source::kAuto) {
    Status valid = ValidateRepoId(req.repo_id);
    if (!valid.ok()) {
      Status st(Code::kNotFound,
                "'" + req.repo_id + "' is neither an existing local path nor a valid Hub repo id (" + valid.message() +
                    ")",
                "NotFound");
      return WithContext(st, req.repo_id, "", req.repo_id);
    }
  }
  info.revision = local ? "" : req.revision;
  auto planned = local ? PlanLocal(req, &info) : PlanHub(client, req, &info);
  if (!planned.ok()) return WithContext(planned.status(), req.repo_id, info.revision, "");
  Plan plan = std::move(*planned);
  info.warnings = info.resolved.warnings;

  // ---- producer: downloads (or local files) into the completion queue ----
  const size_t capacity = req.overlap ? static_cast<size_t>(req.max_shards_in_flight) : plan.files.size() + 1;
  CompletionQueue queue(capacity);
  std::atomic<bool> cancel{false};
  std::mutex mu;  // guards producer_status, download_done
  Status producer_status;
  Clock::time_point download_done = t0;

  auto file_done = [&](const std::string& file, const std::string& local_path) {
    if (cancel.load()) return;
    if (sinks.on_file_downloaded) sinks.on_file_downloaded(file);
    queue.Push(CompletedFile{file, local_path});
  };
  auto producer = [&]() {
    Status st;
    if (plan.local) {
      for (const auto& f : plan.files) {
        if (cancel.load()) break;
        file_done(f, f);
      }
    } else {
      DownloadCallbacks dc;
      dc.on_file_done = file_done;
      const uint64_t listed_total = info.weights_bytes;
      if (sinks.on_progress)
        dc.on_progress = [&, listed_total](uint64_t done, uint64_t total) {
          sinks.on_progress(done, std::max(total, listed_total));
        };
      dc.cancel_flag = &cancel;
      st = client.DownloadFiles(req.repo_id, info.commit, req.repo_type, plan.files, dc);
      if (st.ok() && req.revision != info.commit && !client.options().config.offline) {
        // Record revision -> commit so that offline mode finds this snapshot (huggingface_hub writes refs too).
        Status ref = RepoCache(CacheDirOf(client), req.repo_id, req.repo_type).WriteRef(req.revision, info.commit);
        if (!ref.ok()) st = ref;
      }
    }
    {
      std::lock_guard<std::mutex> l(mu);
      producer_status = st;
      download_done = Clock::now();
    }
    if (!st.ok()) {
      cancel = true;
      queue.Cancel();
    } else {
      queue.Close();
    }
  };

  // ---- loader (this thread) ----
  Status loader_status;
  std::optional<Clock::time_point> first_tensor;
  double load_s = 0;
  std::thread producer_thread(producer);
  if (!req.overlap) producer_thread.join();  // baseline: everything downloaded first
  while (!cancel.load()) {
    std::optional<CompletedFile> item = queue.Pop();
    if (!item) break;
    const auto ts = Clock::now();
    info.load_order.push_back(item->file);
    Status st = [&]() -> Status {
      try {
        auto opened = safetensors::SafetensorsFile::Open(item->local_path);
        if (!opened.ok()) return opened.status();
        const safetensors::SafetensorsFile& file = *opened;
        if (plan.sharded) {
          HUBLOAD_RETURN_IF_ERROR(safetensors::CheckShardAgainstIndex(plan.index, Basename(item->file), file.header()));
        } else if (extra) {
          extra->alias_metadata = file.header().metadata;
        }
        uint64_t n = 0;
        HUBLOAD_RETURN_IF_ERROR(ForEachTensor(file, req.load, [&](const std::string& name, at::Tensor t) -> Status {
          if (cancel.load()) return Status(Code::kCancelled, "load of " + req.repo_id + " cancelled", "Cancelled");
          if (!first_tensor) first_tensor = Clock::now();
          ++n;
          return sinks.on_tensor ? sinks.on_tensor(name, std::move(t)) : Status::Ok();
        }));
        info.num_tensors += n;
        if (sinks.on_shard) HUBLOAD_RETURN_IF_ERROR(sinks.on_shard(item->file, n));
        return Status::Ok();
      } catch (const std::exception& e) {  // a throwing sink must not leave the producer running
        return Status(Code::kInternal, std::string("exception while loading: ") + e.what(), "Exception");
      }
    }();  // the shard's mapping is released here unless zero-copy tensors hold it
    load_s += Seconds(ts, Clock::now());
    if (!st.ok()) {
      std::string where = info.source == "hub" ? req.repo_id + "@" + req.revision + " " + item->file : item->file;
      loader_status = st.WithPrefix(where);
      loader_status.mutable_context().file = item->file;  // the repo path, not the snapshot path
      loader_status = WithContext(loader_status, req.repo_id, info.revision, item->file);
      cancel = true;
      queue.Cancel();
      break;
    }
  }
  if (producer_thread.joinable()) producer_thread.join();
  if (!loader_status.ok()) return loader_status;
  if (!producer_status.ok()) return WithContext(producer_status, req.repo_id, info.revision, "");
  if (plan.sharded && extra) extra->alias_metadata = plan.index.metadata;

  const auto t_end = Clock::now();
  info.timings.time_to_first_tensor_s = first_tensor ? Seconds(t0, *first_tensor) : 0;
  info.timings.download_s = plan.local ? 0 : Seconds(t0, download_done);
  info.timings.load_s = load_s;
  info.timings.total_s = Seconds(t0, t_end);
  return info;
}

Sinks ToSinks(const PretrainedCallbacks& cb) {
  Sinks s;
  s.on_tensor = cb.on_tensor;
  if (cb.on_shard)
    s.on_shard = [f = cb.on_shard](const std::string& file, uint64_t n) {
      f(file, n);
      return Status::Ok();
    };
  s.on_file_downloaded = cb.on_file_downloaded;
  s.on_progress = cb.on_progress;
  return s;
}

}  // namespace

Result<PretrainedInfo> FetchAndLoad(const HubClient& client, const PretrainedRequest& req,
                                    const PretrainedCallbacks& cb) {
  return Run(client, req, ToSinks(cb), nullptr);
}

Result<PretrainedStateDict> LoadStateDict(const HubClient& client, const PretrainedRequest& req) {
  std::map<std::string, StateDict> by_file;
  StateDict pending;
  Sinks s;
  s.on_tensor = [&](const std::string& name, at::Tensor t) {
    pending.emplace_back(name, std::move(t));
    return Status::Ok();
  };
  s.on_shard = [&](const std::string& file, uint64_t) {
    by_file[file] = std::move(pending);
    pending.clear();
    return Status::Ok();
  };
  Extra extra;
  HUBLOAD_ASSIGN_OR_RETURN(PretrainedInfo info, Run(client, req, s, &extra));
  PretrainedStateDict out;
  for (const auto& f : info.files) {
    auto it = by_file.find(f);
    if (it == by_file.end()) continue;
    for (auto& kv : it->second) out.tensors.push_back(std::move(kv));
  }
  // Restore aliases saved as "removed -> kept" metadata (huggingface_hub save_torch_state_dict),
  // as LoadCheckpoint does for local checkpoints.
  std::unordered_map<std::string, size_t> pos;
  for (size_t i = 0; i < out.tensors.size(); ++i) pos[out.tensors[i].first] = i;
  for (const auto& [removed, kept] : extra.alias_metadata) {
    auto k = pos.find(kept);
    if (k == pos.end() || pos.count(removed) || removed == "format" || removed == "total_size") continue;
    out.tensors.emplace_back(removed, out.tensors[k->second].second);
  }
  out.info = std::move(info);
  return out;
}

Result<PretrainedModuleLoad> LoadModule(const HubClient& client, const PretrainedRequest& req,
                                        torch::nn::Module& module, const ModuleLoadOptions& module_options) {
  ModuleLoader loader(module, module_options);
  StateDict pending;
  Sinks s;
  s.on_tensor = [&](const std::string& name, at::Tensor t) {
    pending.emplace_back(name, std::move(t));
    return Status::Ok();
  };
  s.on_shard = [&](const std::string& file, uint64_t) {
    StateDict batch = std::move(pending);
    pending.clear();
    return loader.AddTensors(std::move(batch), file);  // the loader releases the batch when placed
  };
  HUBLOAD_ASSIGN_OR_RETURN(PretrainedInfo info, Run(client, req, s, nullptr));
  auto report = loader.Finish();
  if (!report.ok()) return WithContext(report.status().WithPrefix(req.repo_id), req.repo_id, info.revision, "");
  PretrainedModuleLoad out;
  out.report = std::move(*report);
  for (const auto& w : out.report.warnings) info.warnings.push_back(w);
  out.info = std::move(info);
  return out;
}

// ---------------------------------------------------------------------------
// Pipelines.

Result<std::vector<PipelineComponent>> ParseModelIndex(const std::string& json_text, const std::string& label) {
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    Status st(Code::kInvalidFormat, "'" + label + "' is not a JSON object (model_index.json of a diffusers pipeline)",
              "InvalidModelIndex");
    st.mutable_context().file = label;
    return st;
  }
  std::vector<PipelineComponent> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    if (key.empty() || key[0] == '_') continue;
    const auto& v = it.value();
    if (!v.is_array() || v.size() != 2 || !v[0].is_string() || !v[1].is_string()) continue;
    out.push_back({key, v[0].get<std::string>(), v[1].get<std::string>()});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

Result<std::vector<PipelineComponent>> ListComponents(const HubClient& client, const PretrainedRequest& req) {
  std::string text, label;
  if (IsLocal(req)) {
    label = (fs::path(req.repo_id) / "model_index.json").string();
    std::ifstream in(label, std::ios::binary);
    if (!in) {
      Status st(Code::kNotFound, "'" + req.repo_id + "' has no model_index.json: not a diffusers pipeline folder",
                "NotAPipeline");
      return WithContext(st, req.repo_id, "", label);
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  } else {
    FileRequest fr;
    fr.repo_id = req.repo_id;
    fr.filename = "model_index.json";
    fr.revision = req.revision;
    fr.repo_type = req.repo_type;
    auto path = client.Download(fr);
    if (!path.ok()) {
      if (path.status().code() == Code::kEntryNotFound) {
        Status st(Code::kNotFound,
                  req.repo_id + "@" + req.revision + " has no model_index.json: not a diffusers pipeline repo",
                  "NotAPipeline", path.status().context());
        return WithContext(st, req.repo_id, req.revision, "model_index.json");
      }
      return path.status();
    }
    label = req.repo_id + "/model_index.json";
    std::ifstream in(*path, std::ios::binary);
    if (!in) return Status(Code::kIOError, "cannot read " + *path, "IOError");
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  return ParseModelIndex(text, label);
}

Result<PretrainedStateDict> LoadComponent(const HubClient& client, const PretrainedRequest& req,
                                          const std::string& name) {
  HUBLOAD_ASSIGN_OR_RETURN(auto components, ListComponents(client, req));
  std::string present;
  bool found = false;
  for (const auto& c : components) {
    present += (present.empty() ? "" : ", ") + c.name;
    if (c.name == name) found = true;
  }
  if (!found) {
    Status st(Code::kNotFound,
              "pipeline " + req.repo_id + " has no component '" + name + "' in model_index.json (components: " +
                  (present.empty() ? "(none)" : present) + ")",
              "ComponentNotFound");
    return WithContext(st, req.repo_id, IsLocal(req) ? "" : req.revision, "model_index.json");
  }
  PretrainedRequest r = req;
  r.subfolder = name;
  return LoadStateDict(client, r);
}

Result<PretrainedPipeline> LoadPipeline(const HubClient& client, const PretrainedRequest& req) {
  HUBLOAD_ASSIGN_OR_RETURN(auto components, ListComponents(client, req));
  const bool local = IsLocal(req);
  std::vector<std::string> paths;
  std::string revision = local ? "" : req.revision;
  PretrainedRequest base = req;
  if (local) {
    HUBLOAD_ASSIGN_OR_RETURN(paths, ListLocalFiles(req.repo_id));
  } else {
    HUBLOAD_ASSIGN_OR_RETURN(RepoListing listing, client.ListFiles(req.repo_id, req.revision, req.repo_type));
    for (const auto& f : listing.files) paths.push_back(f.path);
    base.revision = listing.commit;  // every component from the same commit
  }
  // Resolve every component before any weights download.
  PretrainedPipeline out;
  out.components = components;
  std::vector<std::string> with_weights, fallbacks;
  bool any_variant = false;
  for (const auto& c : components) {
    PretrainedRequest r = base;
    r.subfolder = c.name;
    ResolveOptions ro = ToResolveOptions(r);
    ro.allow_variant_fallback = true;
    auto res = ResolveWeights(paths, ro);
    if (!res.ok()) {
      // A folder without any weights (scheduler, tokenizer) is skipped; with a
      // variant asked, ResolveWeights reports VariantNotFound there, so check
      // the folder without the variant.
      ResolveOptions plain = ro;
      plain.variant.clear();
      auto any = ResolveWeights(paths, plain);
      if (!any.ok() && any.status().reason() == "WeightsNotFound") {
        out.skipped.push_back(c.name);
        continue;
      }
      return WithContext(res.status().WithPrefix(req.repo_id + " component " + c.name), req.repo_id, revision, c.name);
    }
    with_weights.push_back(c.name);
    if (!req.variant.empty()) {
      if (res->variant_used == req.variant) any_variant = true;
      else fallbacks.push_back(c.name);
    }
  }
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  if (!req.variant.empty() && !any_variant && !with_weights.empty()) {
    Status st(Code::kNotFound,
              "no component of pipeline " + req.repo_id + " has '" + req.variant + "' variant weights (components: " +
                  join(with_weights) + ")",
              "VariantNotFound");
    return WithContext(st, req.repo_id, revision, "");
  }
  if (!fallbacks.empty() && !req.allow_variant_fallback) {
    Status st(Code::kNotFound,
              "components of pipeline " + req.repo_id + " without '" + req.variant + "' variant weights: " +
                  join(fallbacks) + " (allow the variant fallback to load their non-variant weights)",
              "VariantNotFound");
    return WithContext(st, req.repo_id, revision, "");
  }
  for (const auto& f : fallbacks)
    out.warnings.push_back("component '" + f + "' has no '" + req.variant +
                           "' variant weights: its non-variant weights are loaded");
  for (const auto& name : with_weights) {
    PretrainedRequest r = base;
    r.subfolder = name;
    if (std::find(fallbacks.begin(), fallbacks.end(), name) != fallbacks.end()) r.variant.clear();  // warned above
    auto sd = LoadStateDict(client, r);
    if (!sd.ok()) return sd.status().WithPrefix("component " + name);
    sd->info.revision = req.revision;
    for (const auto& w : sd->info.warnings) out.warnings.push_back(name + ": " + w);
    out.loaded.emplace(name, std::move(*sd));
  }
  return out;
}

}  // namespace hubload
