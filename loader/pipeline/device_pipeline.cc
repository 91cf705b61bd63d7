// Fetch-and-load to devices (hubload/device_pipeline.h): headers first, plan,
// then shards through the staging loader as they are downloaded.
//
// pipeline.h is included only for PretrainedRequest and ResolveLocalCheckpoint
// (local checkpoints resolve exactly as on the CPU path); no tensor type is used.
#include "hubload/device_pipeline.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>

#include "hubload/cache.h"
#include "hubload/pipeline.h"
#include "loader/pipeline/completion_queue.h"

#include "loader/pipeline/common.h"

namespace hubload {
namespace {

namespace fs = std::filesystem;
using pipeline_internal::Clock;
using pipeline_internal::CompletedFile;
using pipeline_internal::CompletionQueue;

constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();

using pipeline_internal::Basename;
using pipeline_internal::Seconds;
using pipeline_internal::WithContext;

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

std::string CacheDirOf(const HubClient& client) {
  const std::string& d = client.options().config.cache_dir;
  return d.empty() ? HubConfig::FromEnvironment().cache_dir : d;
}

/// One weights file: where it is and its validated header.
struct Shard {
  std::string file;        // repo-relative (Hub) or local path
  std::string local_path;  // snapshot pointer (Hub) or local path
  uint64_t size = 0;
  safetensors::Header header;
};

struct Resolution {
  bool local = false;
  bool sharded = false;
  safetensors::Index index;
  std::vector<Shard> shards;  // index order
};

Status PickleUnsupported(const std::string& file, const std::string& repo_id, const std::string& revision) {
  Status st(Code::kUnsupported,
            "'" + file + "' in " + repo_id +
                " is a pickle (.bin) checkpoint; hubload never unpickles and loads safetensors only — convert it "
                "to safetensors and load the .safetensors weights",
            "PickleUnsupported");
  return WithContext(st, repo_id, revision, file);
}

Result<Resolution> ResolveHub(const HubClient& client, const PretrainedRequest& req, DeviceLoadResult* out) {
  HUBLOAD_ASSIGN_OR_RETURN(RepoListing listing, client.ListFiles(req.repo_id, req.revision, req.repo_type));
  out->source = "hub";
  out->commit = listing.commit;
  std::vector<std::string> paths;
  std::map<std::string, uint64_t> sizes;
  for (const auto& f : listing.files) {
    paths.push_back(f.path);
    sizes[f.path] = f.size;
  }
  const std::string where = req.repo_id + "@" + req.revision;
  auto resolved = ResolveWeights(paths, ToResolveOptions(req));
  if (!resolved.ok()) return WithContext(resolved.status().WithPrefix(where), req.repo_id, req.revision, "");
  out->resolved = *resolved;
  if (resolved->is_pickle) return PickleUnsupported(resolved->weights_file, req.repo_id, req.revision);
  Resolution r;
  std::vector<std::string> files;
  if (resolved->kind == ResolvedWeights::kSingleFile) {
    files = {resolved->weights_file};
  } else {
    r.sharded = true;
    out->index_file = resolved->weights_file;
    FileRequest fr;
    fr.repo_id = req.repo_id;
    fr.filename = resolved->weights_file;
    fr.revision = listing.commit;
    fr.repo_type = req.repo_type;
    HUBLOAD_ASSIGN_OR_RETURN(std::string index_local, client.Download(fr));
    auto index = safetensors::ReadIndex(index_local);
    if (!index.ok())
      return WithContext(index.status().WithPrefix(where + " " + resolved->weights_file), req.repo_id, req.revision,
                         resolved->weights_file);
    r.index = std::move(*index);
    auto shards = ShardPaths(*resolved, r.index, paths);
    if (!shards.ok())
      return WithContext(shards.status().WithPrefix(where + " " + resolved->weights_file), req.repo_id, req.revision,
                         resolved->weights_file);
    files = std::move(*shards);
  }
  RepoCache cache(CacheDirOf(client), req.repo_id, req.repo_type);
  for (const auto& f : files) {
    Shard s;
    s.file = f;
    s.local_path = cache.PointerPath(listing.commit, f);
    s.size = sizes[f];
    r.shards.push_back(std::move(s));
  }
  return r;
}

Result<Resolution> ResolveLocal(const PretrainedRequest& req, DeviceLoadResult* out) {
  HUBLOAD_ASSIGN_OR_RETURN(LocalCheckpointFiles lc, ResolveLocalCheckpoint(req.repo_id, ToResolveOptions(req)));
  out->source = "local";
  out->resolved = lc.resolved;
  out->index_file = lc.index_path;
  Resolution r;
  r.local = true;
  r.sharded = !lc.index_path.empty();
  r.index = std::move(lc.index);
  for (const auto& f : lc.files) {
    Shard s;
    s.file = f;
    s.local_path = f;
    std::error_code ec;
    auto sz = fs::file_size(f, ec);
    s.size = ec ? 0 : sz;
    r.shards.push_back(std::move(s));
  }
  return r;
}

/// Reads the header of every shard without downloading it: two ranged reads
/// per Hub file (8 bytes, then N), two preads per local file.
Status ReadHeaders(const HubClient& client, const PretrainedRequest& req, const std::string& commit,
                   Resolution* r) {
  for (Shard& s : r->shards) {
    if (r->local) {
      HUBLOAD_ASSIGN_OR_RETURN(s.header, safetensors::ReadMetadata(s.local_path));
    } else {
      const std::string label = req.repo_id + "@" + req.revision + " " + s.file;
      FileRequest fr;
      fr.repo_id = req.repo_id;
      fr.filename = s.file;
      fr.revision = commit;
      fr.repo_type = req.repo_type;
      HUBLOAD_ASSIGN_OR_RETURN(std::string prefix, client.ReadRange(fr, 0, 8));
      HUBLOAD_ASSIGN_OR_RETURN(uint64_t need,
                               safetensors::PeekHeaderLength(reinterpret_cast<const uint8_t*>(prefix.data()),
                                                             prefix.size(), s.size, label));
      if (need > prefix.size()) {
        HUBLOAD_ASSIGN_OR_RETURN(std::string rest, client.ReadRange(fr, prefix.size(), need - prefix.size()));
        prefix += rest;
      }
      HUBLOAD_ASSIGN_OR_RETURN(s.header, safetensors::ParseHeader(reinterpret_cast<const uint8_t*>(prefix.data()),
                                                                  prefix.size(), s.size, label));
    }
    if (r->sharded) HUBLOAD_RETURN_IF_ERROR(safetensors::CheckShardAgainstIndex(r->index, Basename(s.file), s.header));
  }
  return Status::Ok();
}

std::optional<Dtype> TargetDtypeOf(const PretrainedRequest& req, const DeviceLoadOptions& options) {
  if (options.staging.target_dtype) return options.staging.target_dtype;
  switch (req.load.dtype) {
    case TargetDtype::kAuto: return std::nullopt;
    case TargetDtype::kF32: return Dtype::F32;
    case TargetDtype::kF16: return Dtype::F16;
    case TargetDtype::kBF16: return Dtype::BF16;
  }
  return std::nullopt;
}

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

bool SameHeader(const safetensors::Header& a, const safetensors::Header& b) {
  if (a.data_start != b.data_start || a.file_size != b.file_size || a.tensors.size() != b.tensors.size()) return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& x = a.tensors[i];
    const auto& y = b.tensors[i];
    if (x.name != y.name || x.dtype != y.dtype || x.shape != y.shape || x.begin != y.begin || x.end != y.end)
      return false;
  }
  return true;
}

/// A ShardReader over an open file descriptor (pread, EINTR-safe).
ShardReader PreadReader(int fd, const std::string& path) {
  return [fd, path](uint64_t offset, void* dst, uint64_t bytes) -> Status {
    auto* p = static_cast<uint8_t*>(dst);
    while (bytes > 0) {
      const size_t chunk = static_cast<size_t>(std::min<uint64_t>(bytes, 1ull << 30));
      ssize_t n = ::pread(fd, p, chunk, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        Status st(Code::kIOError, "cannot read '" + path + "' at offset " + std::to_string(offset) + ": " +
                                      std::strerror(errno),
                  "IOError");
        st.mutable_context().file = path;
        return st;
      }
      if (n == 0) {
        Status st(Code::kIOError, "'" + path + "' ends before offset " + std::to_string(offset) + " (truncated?)",
                  "IOError");
        st.mutable_context().file = path;
        return st;
      }
      p += n;
      offset += static_cast<uint64_t>(n);
      bytes -= static_cast<uint64_t>(n);
    }
    return Status::Ok();
  };
}

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
  const auto t0 = Clock::now();
  if (req.repo_id.empty())
    return Status(Code::kInvalidArgument, "empty repo_id (a Hub repo id or a local path)", "EmptyRepoId");
  if (req.max_shards_in_flight < 1)
    return Status(Code::kInvalidArgument,
                  "max_shards_in_flight must be >= 1 (got " + std::to_string(req.max_shards_in_flight) + ")",
                  "InvalidArgument");
  if (!req.load.keep_in_fp32.empty())
    return Status(Code::kUnsupported,
                  "keep_in_fp32 is not supported when loading to devices (the staging path converts every floating "
                  "tensor to the same dtype); load with the CPU pipeline or without a target dtype",
                  "UnsupportedOption");

  DeviceLoadResult out;
  out.repo_id = req.repo_id;
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
  out.revision = local ? "" : req.revision;

  // ---- placement options (validated before any request) ----
  DeviceMapOptions map;
  std::string what;  // the placement, for messages
  if (options.device_map) {
    map = *options.device_map;
    what = std::string("device_map '") + StrategyName(map.strategy) + "'";
  } else {
    const std::string text = options.device.empty() ? (req.device.empty() ? "cpu" : req.device) : options.device;
    HUBLOAD_ASSIGN_OR_RETURN(Device d, Device::Parse(text));
    if (d.kind == Device::Kind::kDisk)
      return Status(Code::kInvalidArgument,
                    "device 'disk' is only a device_map target (tensors planned on disk are not loaded)",
                    "InvalidDevice");
    map.strategy = DeviceMapOptions::Strategy::kExplicit;
    map.explicit_map = {{"", d}};
    what = "device '" + d.ToString() + "'";
  }
  const std::optional<Dtype> target = TargetDtypeOf(req, options);

  // ---- backend: which GPUs exist and how much is free ----
  std::shared_ptr<DeviceBackend> backend = options.backend;
  std::string no_cuda;  // why there is no backend
  if (!backend) {
    auto b = MakeCudaBackend();
    if (b.ok()) backend = *b;
    else no_cuda = b.status().message();
  }
  std::vector<uint64_t> gpu_free;
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
                "NoCudaDevice");
      return WithContext(st, req.repo_id, out.revision, "");
    }
    for (int i = 0; i < named; ++i) {
      auto it = map.max_memory.find("cuda:" + std::to_string(i));
      gpu_free.push_back(it == map.max_memory.end() ? kUnlimited : it->second);
    }
    if (named > 0)
      out.warnings.push_back("no CUDA device (" + no_cuda + "): planning for the " + std::to_string(named) +
                             " GPU(s) named by the request, with the max_memory limits (unlimited where none)");
    else if (options.device_map)
      out.warnings.push_back("no CUDA device (" + no_cuda + "): " + what + " plans for zero GPUs");
  }
  out.gpu_free_bytes = gpu_free;

  // ---- resolve, read headers, plan ----
  auto resolved = local ? ResolveLocal(req, &out) : ResolveHub(client, req, &out);
  if (!resolved.ok()) return WithContext(resolved.status(), req.repo_id, out.revision, "");
  Resolution res = std::move(*resolved);
  for (const auto& w : out.resolved.warnings) out.warnings.push_back(w);
  for (const auto& s : res.shards) {
    out.files.push_back(s.file);
    out.weights_bytes += s.size;
  }
  {
    Status st = ReadHeaders(client, req, out.commit, &res);
    if (!st.ok()) return WithContext(st, req.repo_id, out.revision, "");
  }
  std::vector<TensorFootprint> footprints;
  for (const Shard& s : res.shards) {
    auto fp = DeviceFootprints(s.header, target);
    for (size_t i = 0; i < fp.size(); ++i) {
      const auto& t = s.header.tensors[i];
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
  {
    auto plan = PlanDeviceMap(footprints, map, gpu_free);
    if (!plan.ok()) return WithContext(plan.status().WithPrefix(req.repo_id), req.repo_id, out.revision, "");
    out.plan = std::move(*plan);
  }
  const PlanIndex index(out.plan);
  size_t k = 0;
  for (const Shard& s : res.shards) {
    for (const auto& t : s.header.tensors) {
      PlannedTensor& p = out.planned[k++];
      p.device = index.Of(p.name);
      if (p.device.kind == Device::Kind::kDisk)
        out.disk_tensors.push_back(
            {t.name, s.file, s.local_path, t.dtype, t.shape, s.header.data_start + t.begin, t.nbytes()});
    }
  }
  out.timings.plan_s = Seconds(t0, Clock::now());
  if (options.plan_only) {
    out.backend = backend ? backend->name() : "";
    out.timings.total_s = Seconds(t0, Clock::now());
    return out;
  }

  // ---- load ----
  if (!backend) {
    // Nothing goes to a GPU (checked above): host memory through a backend without devices.
    FakeDeviceOptions fo;
    fo.devices = 0;
    backend = std::make_shared<FakeDeviceBackend>(fo);
    out.backend = "host";
  } else {
    out.backend = backend->name();
  }
  StagingOptions so = options.staging;
  so.target_dtype = target;
  HUBLOAD_ASSIGN_OR_RETURN(std::unique_ptr<StagingLoader> loader, StagingLoader::Create(backend, so));
  out.tensors = DeviceStateDict(backend);
  std::map<std::string, const Shard*> by_file;
  for (const Shard& s : res.shards) by_file[s.file] = &s;

  const size_t capacity = req.overlap ? static_cast<size_t>(req.max_shards_in_flight) : res.shards.size() + 1;
  CompletionQueue queue(capacity);
  std::atomic<bool> cancel{false};
  std::mutex mu;  // guards producer_status, download_done
  Status producer_status;
  Clock::time_point download_done = t0;
  auto file_done = [&](const std::string& file, const std::string& local_path) {
    if (cancel.load()) return;
    queue.Push(CompletedFile{file, local_path});
  };
  auto producer = [&]() {
    Status st;
    if (res.local) {
      for (const Shard& s : res.shards) {
        if (cancel.load()) break;
        file_done(s.file, s.local_path);
      }
    } else {
      std::vector<std::string> files;
      for (const Shard& s : res.shards) files.push_back(s.file);
      DownloadCallbacks dc;
      dc.on_file_done = file_done;
      dc.cancel_flag = &cancel;
      st = client.DownloadFiles(req.repo_id, out.commit, req.repo_type, files, dc);
      if (st.ok() && req.revision != out.commit && !client.options().config.offline)
        st = RepoCache(CacheDirOf(client), req.repo_id, req.repo_type).WriteRef(req.revision, out.commit);
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

  Status loader_status;
  std::optional<Clock::time_point> first_shard;
  double load_s = 0;
  const auto place = [&](const std::string& name) { return index.Of(name); };
  // One shard: re-read its header (it must be the one planned with), drop the
  // tensors planned on disk, stream the rest to their devices.
  const auto load_shard = [&](const CompletedFile& item) -> Status {
    const Shard& shard = *by_file.at(item.file);
    HUBLOAD_ASSIGN_OR_RETURN(safetensors::Header now, safetensors::ReadMetadata(item.local_path));
    if (!SameHeader(now, shard.header))
      return Status(Code::kInvalidFormat,
                    "the header of '" + item.file + "' differs from the one read before downloading (" +
                        std::to_string(shard.header.tensors.size()) + " tensors planned, " +
                        std::to_string(now.tensors.size()) + " in the file); the file changed during the load",
                    "HeaderChanged");
    safetensors::Header h = shard.header;
    h.tensors.erase(std::remove_if(h.tensors.begin(), h.tensors.end(),
                                   [&](const safetensors::TensorInfo& t) {
                                     return place(t.name).kind == Device::Kind::kDisk;
                                   }),
                    h.tensors.end());
    h.by_name.clear();
    const int fd = ::open(item.local_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return Status(Code::kIOError, "cannot open '" + item.local_path + "': " + std::strerror(errno), "IOError");
    Status loaded = loader->LoadShard(item.file, h, PreadReader(fd, item.local_path), place, &out.tensors);
    ::close(fd);
    return loaded;
  };
  std::thread producer_thread(producer);
  if (!req.overlap) producer_thread.join();
  while (!cancel.load()) {
    std::optional<CompletedFile> item = queue.Pop();
    if (!item) break;
    const auto ts = Clock::now();
    out.load_order.push_back(item->file);
    Status st;
    try {
      st = load_shard(*item);
    } catch (const std::exception& e) {  // the producer thread must still be joined
      st = Status(Code::kInternal, std::string("exception while loading: ") + e.what(), "Exception");
    }
    load_s += Seconds(ts, Clock::now());
    if (!st.ok()) {
      const std::string where = local ? item->file : req.repo_id + "@" + req.revision + " " + item->file;
      loader_status = st.WithPrefix(where);
      loader_status.mutable_context().file = item->file;
      loader_status = WithContext(loader_status, req.repo_id, out.revision, item->file);
      cancel = true;
      queue.Cancel();
      break;
    }
    if (!first_shard) first_shard = Clock::now();
  }
  if (producer_thread.joinable()) producer_thread.join();
  if (!loader_status.ok()) return loader_status;
  if (!producer_status.ok()) return WithContext(producer_status, req.repo_id, out.revision, "");

  out.staging = loader->stats();
  const auto t_end = Clock::now();
  out.timings.time_to_first_shard_s = first_shard ? Seconds(t0, *first_shard) : 0;
  out.timings.download_s = res.local ? 0 : Seconds(t0, download_done);
  out.timings.load_s = load_s;
  out.timings.total_s = Seconds(t0, t_end);
  return out;
}

}  // namespace hubload
