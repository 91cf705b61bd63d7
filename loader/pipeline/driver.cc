// The one fetch-and-load driver (loader/pipeline/driver.h).
#include "loader/pipeline/driver.h"
#include "loader/pipeline/shard_state.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

#include "hubload/reasons.h"
#include "loader/pipeline/common.h"
#include "util/file_io.h"
#include "util/text.h"
#include "util/progress.h"
#include "util/worker_pool.h"

namespace hubload::pipeline_internal {
namespace {

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
}  // namespace

// ---------------------------------------------------------------------------
// The driver

namespace {
// Nice increment of the conversion threads while downloads are in flight: CFS
// weight 110 against the download threads' 1024 (nice 0).
constexpr int kYieldingNice = 10;
}  // namespace

namespace {

/// Progress of one shard through the driver.
struct Progress {
  bool started = false;
  bool whole_done = false;
  size_t next = 0;                // next tensor (file order)
  uint64_t need = 8;              // bytes the next step needs (kNever: the verified file)
  uint64_t delivered_end = 0;     // bytes [0, delivered_end) handed to the sink
  int delivered_fd = -1;          // owned dup of the descriptor they were read through
  std::vector<TensorRecord> records;
};

/// Bytes [0, n) of two descriptors are equal (a download that restarted after
/// tensors were delivered from its first partial file).
Result<bool> SamePrefix(int a, int b, uint64_t n, const std::string& label) {
  std::vector<char> x(1 << 20), y(1 << 20);
  for (uint64_t off = 0; off < n;) {
    uint64_t k = std::min<uint64_t>(n - off, x.size());
    HUBLOAD_RETURN_IF_ERROR(PreadAll(a, off, x.data(), k, label));
    HUBLOAD_RETURN_IF_ERROR(PreadAll(b, off, y.data(), k, label));
    if (std::memcmp(x.data(), y.data(), static_cast<size_t>(k)) != 0) return false;
    off += k;
  }
  return true;
}

TensorRecord RecordOf(const std::string& file, const safetensors::TensorInfo& t) {
  TensorRecord r;
  r.name = t.name;
  r.file = file;
  r.source_dtype = safetensors::DtypeName(t.dtype);
  r.dtype = r.source_dtype;
  for (uint64_t d : t.shape) r.shape.push_back(static_cast<int64_t>(d));
  r.bytes = t.nbytes();
  return r;
}

class Driver {
 public:
  Driver(ShardState& state, const FetchPlan& plan, const PretrainedRequest& req, ShardSink& sink,
         PretrainedInfo* info, Clock::time_point t0)
      : state_(state), plan_(plan), req_(req), sink_(sink), info_(info), t0_(t0), prog_(plan.shards.size()) {
    for (size_t i = 0; i < plan.shards.size(); ++i) data_.emplace_back(&state, &plan.shards[i], i);
    if (plan.sharded) AddAliasTargets(plan.index.metadata);
    for (auto& d : data_) d.alias_targets_ = &alias_targets_;
  }
  ~Driver() {
    for (auto& p : prog_)
      if (p.delivered_fd >= 0) ::close(p.delivered_fd);
    for (auto& d : data_)
      if (d.mapping_fd_ >= 0) ::close(d.mapping_fd_);
  }

  Status Run() {
    std::vector<uint64_t> need(prog_.size());
    while (true) {
      for (size_t i = 0; i < prog_.size(); ++i) need[i] = prog_[i].need;
      HUBLOAD_ASSIGN_OR_RETURN(size_t i, state_.NextReady(need));
      if (i >= prog_.size()) return Status::Ok();
      const auto ts = Clock::now();
      Status st;
      try {
        st = Step(i);
      } catch (const std::exception& e) {  // a throwing sink must not leave the producer running
        st = Status(Code::kInternal, std::string("exception while loading: ") + e.what(), reason::kException);
      }
      info_->timings.load_s += Seconds(ts, Clock::now());
      if (!st.ok()) {
        const std::string& file = plan_.shards[i].file;
        ErrorContext ctx;
        ctx.file = file;
        // Index errors name the shard as the index does (relative to it): its file name is enough.
        if (st.message().find(std::filesystem::path(file).filename().string()) == std::string::npos)
          st = st.WithPrefix(file);
        if (info_->source == "hub" && st.message().find(info_->repo_id) == std::string::npos)
          st = st.WithPrefix(info_->repo_id + "@" + info_->revision);
        return st.Annotate(ctx);
      }
    }
  }

  /// Checkpoint-order records, aliases, counts.
  void Collect() {
    std::set<std::string> names;
    for (auto& p : prog_)
      for (auto& r : p.records) {
        names.insert(r.name);
        info_->tensors.push_back(std::move(r));
      }
    info_->num_tensors = info_->tensors.size();
    if (plan_.sharded) {  // metadata.total_size vs the checkpoint's bytes: a warning, as transformers tolerates it
      uint64_t bytes = 0;
      for (const TensorRecord& r : info_->tensors) {
        auto d = safetensors::DtypeFromName(r.source_dtype);
        uint64_t n = d ? static_cast<uint64_t>(safetensors::DtypeBits(*d)) : 0;
        for (int64_t x : r.shape) n *= static_cast<uint64_t>(x);
        bytes += n / 8;
      }
      std::string w = safetensors::TotalSizeWarning(plan_.index, bytes);
      if (!w.empty()) info_->warnings.push_back(info_->index_file + ": " + w);
    }
    // "removed -> kept" metadata written by huggingface_hub save_torch_state_dict.
    for (const auto& [removed, kept] : AliasMetadata()) {
      if (IsMetadataKey(removed) || names.count(removed) || !names.count(kept)) continue;
      info_->aliases.emplace_back(removed, kept);
    }
  }

  /// The sink restores each alias Collect found.
  Status RestoreAliases() {
    for (const auto& [removed, kept] : info_->aliases) {
      Status st = sink_.OnAlias(removed, kept);
      if (!st.ok()) return st.WithPrefix("alias '" + removed + "' of '" + kept + "'");
    }
    return Status::Ok();
  }

 private:
  // The index over shard `file`'s tensors (ApplyIndexToShard); lenient, the
  // tensors it does not map here are returned for WarnSkipped.
  template <typename T>
  Result<std::vector<std::string>> ApplyIndex(const std::string& file, std::vector<T>* tensors) {
    if (!plan_.sharded) return std::vector<std::string>{};
    return ApplyIndexToShard(plan_.index, file, req_.lenient_index, tensors);
  }
  // One warning naming the tensors of `file` the lenient index skipped; called
  // once per shard, for the header that is loaded (not a provisional one that
  // turned out to differ).
  void WarnSkipped(const std::string& file, const std::vector<std::string>& skipped) {
    if (!skipped.empty())
      info_->warnings.push_back(file + ": " + std::to_string(skipped.size()) +
                                " tensor(s) the index does not map to this shard are not loaded (the index is the "
                                "authority: lenient index): " + util::JoinCut(skipped));
  }

  // The shard's header with the index applied and checked against the plan;
  // nullopt when more bytes are needed (prog_[i].need is set).
  Result<std::optional<safetensors::Header>> ReadHeader(size_t i, int fd, uint64_t avail, bool verified) {
    Progress& p = prog_[i];
    const PlannedShard& shard = plan_.shards[i];
    const std::string& label = shard.file;  // the repo path, as errors name it
    const uint64_t size = verified ? avail : shard.size;
    if (avail < 8 && !verified) {
      p.need = 8;
      return std::optional<safetensors::Header>();
    }
    uint8_t len8[8];
    const uint64_t have8 = std::min<uint64_t>(8, avail);
    HUBLOAD_RETURN_IF_ERROR(PreadAll(fd, 0, len8, have8, label));
    HUBLOAD_ASSIGN_OR_RETURN(uint64_t need, safetensors::PeekHeaderLength(len8, have8, size, label));
    if (avail < need && !verified) {
      p.need = need;
      return std::optional<safetensors::Header>();
    }
    std::vector<uint8_t> head(need);
    HUBLOAD_RETURN_IF_ERROR(PreadAll(fd, 0, head.data(), need, label));
    HUBLOAD_ASSIGN_OR_RETURN(safetensors::Header h, safetensors::ParseHeader(head.data(), head.size(), size, label));
    HUBLOAD_ASSIGN_OR_RETURN(std::vector<std::string> skipped, ApplyIndex(shard.file, &h.tensors));
    if (shard.header && !SameHeader(*shard.header, h))
      return Status(Code::kInvalidFormat,
                    "the header of '" + shard.file + "' differs from the one read before downloading (" +
                        std::to_string(shard.header->tensors.size()) + " tensors planned, " +
                        std::to_string(h.tensors.size()) + " in the file); the file changed during the load",
                    reason::kHeaderChanged);
    WarnSkipped(shard.file, skipped);
    return std::optional<safetensors::Header>(std::move(h));
  }

  Status Step(size_t i) {
    Progress& p = prog_[i];
    ShardData& sd = data_[i];
    const PlannedShard& shard = plan_.shards[i];
    int fd;
    uint64_t avail, gen;
    bool verified;
    HUBLOAD_RETURN_IF_ERROR(state_.WaitFor(i, 0, false, &fd, &avail, &verified, &gen));
    if (shard.format == ShardFormat::kPickle) {
      if (!verified) {
        p.need = kNever;  // a zip's directory is at its end: the whole verified file is needed
        return Status::Ok();
      }
      // The description only (the zip directory and data.pkl); nothing is executed.
      HUBLOAD_ASSIGN_OR_RETURN(sd.checkpoint_, pickle::ReadCheckpointFd(fd, avail, shard.file));
      HUBLOAD_ASSIGN_OR_RETURN(std::vector<std::string> skipped, ApplyIndex(shard.file, &sd.checkpoint_.tensors));
      WarnSkipped(shard.file, skipped);
      for (const auto& t : sd.checkpoint_.tensors) {
        TensorRecord r;
        r.name = t.name;
        r.file = shard.file;
        r.source_dtype = safetensors::DtypeName(t.dtype);
        r.dtype = r.source_dtype;
        for (uint64_t d : t.shape) r.shape.push_back(static_cast<int64_t>(d));
        uint64_t n = 1;
        for (uint64_t d : t.shape) n *= d;
        r.bytes = n * pickle::ElementSize(t.dtype);
        p.records.push_back(std::move(r));
      }
      HUBLOAD_RETURN_IF_ERROR(sink_.OnShardStart(sd));
      HUBLOAD_RETURN_IF_ERROR(sink_.OnWholeShard(sd, &p.records));
      if (!p.records.empty()) FirstTensor();
      return End(i);
    }
    if (!p.started) {
      auto h = ReadHeader(i, fd, avail, verified);
      if (!h.ok()) {
        // Bytes not verified yet (a partial file, perhaps kept from an earlier
        // run) do not decide: the verified file does. Its download either
        // fails its sha256 check (the load fails with that) or is fetched
        // again, and its header is read anew.
        if (verified) return h.status();
        p.need = kNever;
        return Status::Ok();
      }
      if (!*h) return Status::Ok();  // more bytes needed (p.need set)
      sd.header_ = std::move(**h);
      if (!plan_.sharded) AddAliasTargets(sd.header_.metadata);
      for (const auto& t : sd.header_.tensors) p.records.push_back(RecordOf(shard.file, t));
      p.started = true;
      HUBLOAD_RETURN_IF_ERROR(sink_.OnShardStart(sd));
    }
    const auto& tensors = sd.header_.tensors;
    if (sink_.WholeShard() && !p.whole_done) {
      HUBLOAD_RETURN_IF_ERROR(sink_.OnWholeShard(sd, &p.records));  // reads through sd (blocking)
      p.whole_done = true;
      p.next = tensors.size();
      NoteDelivered(p, fd, sd.header_.file_size);
      if (!tensors.empty()) FirstTensor();
    }
    const bool streaming = req_.overlap;
    while (p.next < tensors.size()) {
      const auto& t = tensors[p.next];
      const uint64_t end = sd.header_.data_start + t.end;
      if (!verified && (!streaming || avail < end)) {
        p.need = streaming ? end : kNever;
        return Status::Ok();
      }
      sd.tensor_fd_ = fd;
      sd.tensor_generation_ = gen;
      Status delivered = sink_.OnTensor(sd, t, &p.records[p.next]);
      sd.tensor_fd_ = -1;
      HUBLOAD_RETURN_IF_ERROR(delivered);
      if (!verified) NoteDelivered(p, fd, end);
      FirstTensor();
      ++p.next;
    }
    if (!verified) {
      p.need = kNever;
      return Status::Ok();
    }
    // Bytes delivered from a partial file that is not the verified one must equal it.
    if (p.delivered_fd >= 0) {
      struct stat a{}, b{};
      if (::fstat(p.delivered_fd, &a) == 0 && ::fstat(fd, &b) == 0 && (a.st_ino != b.st_ino || a.st_dev != b.st_dev)) {
        HUBLOAD_ASSIGN_OR_RETURN(bool same, SamePrefix(p.delivered_fd, fd, p.delivered_end, shard.file));
        if (!same)
          return Status(Code::kCorruptDownload,
                        "'" + shard.file + "' was downloaded again after tensors were handed over from its first "
                        "partial file, and the verified bytes differ from them",
                        reason::kHashMismatch);
      }
    }
    return End(i);
  }

  void NoteDelivered(Progress& p, int fd, uint64_t end) {
    if (p.delivered_fd < 0) p.delivered_fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    p.delivered_end = std::max(p.delivered_end, end);
  }

  void FirstTensor() {
    if (!first_tensor_) {
      first_tensor_ = true;
      info_->timings.time_to_first_tensor_s = Seconds(t0_, Clock::now());
    }
  }

  Status End(size_t i) {
    HUBLOAD_RETURN_IF_ERROR(sink_.OnShardEnd(data_[i]));
    prog_[i].need = kNever;
    info_->load_order.push_back(plan_.shards[i].file);
    if (info_->timings.time_to_first_shard_s == 0) info_->timings.time_to_first_shard_s = Seconds(t0_, Clock::now());
    // The mapping made while downloading is released unless the sink's tensors hold it.
    data_[i].mapping_.reset();
    state_.MarkEnded(i);
    state_.ShardLoaded(plan_.shards[i].file);
    return Status::Ok();
  }

  static bool IsMetadataKey(const std::string& key) { return key == "format" || key == "total_size"; }
  // The alias metadata: the index's (sharded), else the single file's header.
  const std::map<std::string, std::string>& AliasMetadata() const {
    return plan_.sharded || data_.empty() ? plan_.index.metadata : data_[0].header_.metadata;
  }
  void AddAliasTargets(const std::map<std::string, std::string>& meta) {
    for (const auto& [removed, kept] : meta)
      if (!IsMetadataKey(removed)) alias_targets_.insert(kept);
  }

  ShardState& state_;
  const FetchPlan& plan_;
  const PretrainedRequest& req_;
  ShardSink& sink_;
  PretrainedInfo* info_;
  const Clock::time_point t0_;
  std::vector<Progress> prog_;
  std::vector<ShardData> data_;
  std::set<std::string> alias_targets_;
  bool first_tensor_ = false;
};

}  // namespace

Status RunDriver(ShardSource& source, const FetchPlan& plan, const PretrainedRequest& req, ShardSink& sink,
                 const DriverCallbacks& cb, Clock::time_point t0, PretrainedInfo* info) {
  ShardState state(plan, req.overlap ? req.max_shards_in_flight : 0, cb);
  Status driver_status;
  // Conversions yield the CPU to the downloads while these are in flight (PretrainedRequest::yield_cpu_to_downloads).
  std::optional<util::WorkerPool> low_priority;
  std::optional<util::PoolRoute> route;
  if (req.overlap && req.yield_cpu_to_downloads && !plan.local) {
    // Half the cores, at most the shared pool's size (or conversion_threads).
    size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency() / 2, 1, util::WorkerPool::Shared().size());
    if (req.load.conversion_threads > 0) threads = std::min(threads, req.load.conversion_threads);
    try {
      low_priority.emplace(threads, kYieldingNice);
      route.emplace(&*low_priority, state.downloading());
    } catch (const std::exception& e) {  // no thread to spare: conversions as without the option
      spdlog::debug("no low-priority conversion threads: {}", e.what());
    }
  }
  {
    Driver driver(state, plan, req, sink, info, t0);
    std::thread producer([&] {
      Status st;
      try {
        st = source.Run(state);
      } catch (const std::exception& e) {
        st = Status(Code::kInternal, std::string("exception in the shard source: ") + e.what(), reason::kException);
      }
      state.SourceFinished(st);
    });
    if (!req.overlap) producer.join();  // baseline: everything downloaded first
    driver_status = driver.Run();
    if (!driver_status.ok()) state.Cancel();
    if (producer.joinable()) producer.join();
    if (driver_status.ok()) {
      driver.Collect();
      driver_status = driver.RestoreAliases();
      if (driver_status.ok()) driver_status = sink.Finish(info);
    }
  }
  route.reset();  // before its pool
  if (!plan.local) info->timings.download_s = Seconds(t0, state.download_done());
  return driver_status;
}

// ---------------------------------------------------------------------------
// Sources

namespace {

class LocalSource : public ShardSource {
 public:
  explicit LocalSource(const FetchPlan& plan) : plan_(plan) {}
  Status Run(ShardEvents& events) override {
    for (const auto& s : plan_.shards) {
      if (events.cancel_flag()->load()) break;
      events.Done(s.file, s.local_path);
    }
    return Status::Ok();
  }

 private:
  const FetchPlan& plan_;
};

class HubSource : public ShardSource {
 public:
  HubSource(const HubClient& client, const PretrainedRequest& req, const PretrainedInfo& info, const FetchPlan& plan)
      : client_(client), req_(req), info_(info), plan_(plan) {}
  Status Run(ShardEvents& events) override {
    std::vector<std::string> files;
    for (const auto& s : plan_.shards) files.push_back(s.file);
    DownloadCallbacks dc;
    dc.on_file_done = [&](const std::string& file, const std::string& local_path) { events.Done(file, local_path); };
    dc.on_file_bytes = [&](const FileBytes& b) {
      events.Bytes(b.path_in_repo, b.fd, b.generation, b.contiguous_bytes);
    };
    const uint64_t listed_total = info_.weights_bytes;
    dc.on_progress = [&, listed_total](uint64_t done, uint64_t total) {
      events.Progress(done, std::max(total, listed_total));
    };
    dc.on_file_progress = [&](const std::string& file, uint64_t done, uint64_t total) {
      events.FileProgress(file, done, total);
    };
    dc.cancel_flag = events.cancel_flag();
    // Every file from the listed commit (the listing recorded the revision's ref).
    return client_.DownloadFiles(req_.repo_id, info_.commit, req_.repo_type, files, dc);
  }

 private:
  const HubClient& client_;
  const PretrainedRequest& req_;
  const PretrainedInfo& info_;
  const FetchPlan& plan_;
};

}  // namespace

std::unique_ptr<ShardSource> MakeLocalSource(const FetchPlan& plan) { return std::make_unique<LocalSource>(plan); }

std::unique_ptr<ShardSource> MakeHubSource(const HubClient& client, const PretrainedRequest& req,
                                           const PretrainedInfo& info, const FetchPlan& plan) {
  return std::make_unique<HubSource>(client, req, info, plan);
}

namespace {
// PretrainedRequest::progress fed from the driver's callbacks (chained after
// the hooks' own); one mutex keeps the figures and serialises the calls.
DriverCallbacks WithProgress(const DriverCallbacks& inner, const PretrainedRequest& req, const FetchPlan& plan,
                             const PretrainedInfo& info) {
  if (!req.progress) return inner;
  struct Relay {
    std::mutex mu;
    LoadProgress p;
    util::RateLimiter file_steps;  // per-file steps arrive per received chunk
  };
  auto r = std::make_shared<Relay>();
  r->p.shards_total = plan.shards.size();
  r->p.bytes_total = plan.local ? 0 : info.weights_bytes;
  auto emit = [r, fn = req.progress](auto&& update) {
    std::lock_guard<std::mutex> l(r->mu);
    update(r->p);
    fn(r->p);
  };
  DriverCallbacks cb = inner;
  cb.on_progress = [emit, f = inner.on_progress](uint64_t done, uint64_t total) {
    if (f) f(done, total);
    emit([&](LoadProgress& p) {
      p.bytes_downloaded = done;
      p.bytes_total = std::max(p.bytes_total, total);
      p.file.clear();
    });
  };
  cb.on_file_progress = [r, emit, f = inner.on_file_progress](const std::string& file, uint64_t done, uint64_t total) {
    if (f) f(file, done, total);
    if (!r->file_steps.Due(total != 0 && done >= total)) return;
    emit([&](LoadProgress& p) {
      p.file = file;
      p.file_bytes_done = done;
      p.file_bytes_total = total;
    });
  };
  cb.on_shard_loaded = [emit, f = inner.on_shard_loaded](const std::string& file) {
    if (f) f(file);
    emit([&](LoadProgress& p) {
      ++p.shards_loaded;
      p.file.clear();
    });
  };
  return cb;
}
}  // namespace

Result<PretrainedInfo> RunLoad(const HubClient* client, const PretrainedRequest& req, ShardSink& sink,
                               const LoadHooks& hooks) {
  const auto t0 = Clock::now();
  PretrainedInfo info;
  const bool local = IsLocalRequest(req);
  ErrorContext ctx;
  ctx.repo_id = req.repo_id;
  ctx.revision = local ? "" : req.revision;
  auto fail = [&](const Status& st) { return st.Annotate(ctx); };
  if (Status st = CheckRequest(req, local, &info); !st.ok()) return fail(st);
  auto planned = MakeFetchPlan(client, req, hooks.allow_pickle && !req.require_safetensors, &info);
  if (!planned.ok()) return fail(planned.status());
  FetchPlan plan = std::move(*planned);
  if (hooks.read_headers)
    if (Status st = ReadShardHeaders(client, req, info, &plan); !st.ok()) return fail(st);
  bool proceed = true;
  if (hooks.before_run)
    if (Status st = hooks.before_run(plan, &info, &proceed); !st.ok()) return fail(st);
  info.timings.plan_s = Seconds(t0, Clock::now());
  if (proceed) {
    std::unique_ptr<ShardSource> source = hooks.make_source ? hooks.make_source(plan, info)
                                          : plan.local      ? MakeLocalSource(plan)
                                                            : MakeHubSource(*client, req, info, plan);
    const DriverCallbacks callbacks = WithProgress(hooks.callbacks, req, plan, info);
    if (Status st = RunDriver(*source, plan, req, sink, callbacks, t0, &info); !st.ok()) return fail(st);
  }
  info.timings.total_s = Seconds(t0, Clock::now());
  return info;
}

}  // namespace hubload::pipeline_internal
