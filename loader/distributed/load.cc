// Multi-rank loading (include/hubload/distributed.h Load): the prefetch's
// plan and transfer feed the one load driver through the node cache; the
// torch sink keeps each rank's share.
#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "hubload/distributed.h"
#include "hubload/torch_loader.h"
#include "hubload/reasons.h"
#include "loader/distributed/records.h"
#include "loader/distributed/transfer.h"
#include "loader/pipeline/plan.h"
#include "loader/pipeline/torch_sink.h"

namespace hubload::distributed {

namespace {

/// The node cache as the load driver's shard source: a shard's bytes are
/// handed over as the node's leader writes them (its download's or its
/// broadcast's partial file, records.h PartialFileRecord), and the shard is
/// Done once this node's copy is complete and verified.
class NodeCacheSource : public pipeline_internal::ShardSource {
 public:
  NodeCacheSource(Job& job, const Plan& plan, const RepoCache& cache) : job_(job), plan_(plan), cache_(cache) {}
  Status Run(pipeline_internal::ShardEvents& events) override {
    std::vector<size_t> idx;
    for (const auto& s : plan_.extra.shards) {
      size_t i = 0;
      while (i < plan_.files.size() && plan_.files[i].path != s) ++i;
      if (i == plan_.files.size())
        return job_.Fail(Status(Code::kInternal, "shard " + s + " is not part of the plan"));
      idx.push_back(i);
    }
    std::vector<bool> done(idx.size(), false);
    std::vector<Partial> partial(idx.size());
    size_t remaining = idx.size();
    int sleep_ms = 1;
    while (remaining > 0) {
      if (events.cancel_flag()->load()) return Status(Code::kCancelled, "load cancelled", reason::kCancelled);
      if (auto a = job_.Aborted()) return *a;
      bool progressed = false;
      size_t watched = 0;
      // In load order: a shard is handed over once this node holds it.
      for (size_t k = 0; k < idx.size(); ++k) {
        if (done[k]) continue;
        HUBLOAD_ASSIGN_OR_RETURN(bool ready, job_.Check({NodeDoneKey(job_.node(), idx[k])}));
        const std::string& path = plan_.files[idx[k]].path;
        if (!ready) {
          // The earliest shards still being written: their bytes so far.
          if (watched++ < kWatchedPartials) {
            HUBLOAD_ASSIGN_OR_RETURN(bool grew, Grew(events, idx[k], &partial[k]));
            progressed = progressed || grew;
          }
          continue;
        }
        auto pointer = cache_.CachedPointer(plan_.commit, path);
        if (!pointer)
          return Status(Code::kNotFound, "rank " + std::to_string(job_.env().rank) + ": " + path +
                                             " is marked complete but missing from " + cache_.SnapshotDir(plan_.commit));
        job_.SetActivity("loading " + path);
        events.Done(path, *pointer);
        done[k] = true;
        --remaining;
        progressed = true;
      }
      if (!progressed) {
        SleepMs(sleep_ms);
        sleep_ms = std::min(sleep_ms * 2, 20);
      } else {
        sleep_ms = 1;
      }
    }
    return Status::Ok();
  }

 private:
  // How many not-yet-complete shards (the earliest) are watched for bytes.
  static constexpr size_t kWatchedPartials = 2;
  struct Partial {
    uint64_t dev = 0, ino = 0, bytes = 0, generation = 0;
  };

  // Hands over the bytes of plan file i that the leader's latest record
  // shows beyond what was handed over; true when it did. A record that does
  // not parse, names a file that is gone or another inode (the leader
  // restarted the file or finished it meanwhile) is skipped: the shard then
  // comes with its next record or once it is done.
  Result<bool> Grew(pipeline_internal::ShardEvents& events, size_t i, Partial* p) {
    const std::string key = NodeBytesKey(job_.node(), i);
    HUBLOAD_ASSIGN_OR_RETURN(bool has, job_.Check({key}));
    if (!has) return false;
    HUBLOAD_ASSIGN_OR_RETURN(std::string text, job_.Get(key));
    auto rec = internal::ParsePartialFile(text, key);
    if (!rec.ok() || rec->bytes > plan_.files[i].size) return false;
    const bool same_file = p->generation > 0 && rec->dev == p->dev && rec->ino == p->ino;
    if (same_file && rec->bytes <= p->bytes) return false;
    const int fd = ::open(rec->path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st{};
    const bool match = ::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_dev) == rec->dev &&
                       static_cast<uint64_t>(st.st_ino) == rec->ino;
    if (match) {
      if (!same_file) {
        ++p->generation;
        p->dev = rec->dev;
        p->ino = rec->ino;
      }
      p->bytes = rec->bytes;
      events.Bytes(plan_.files[i].path, fd, p->generation, p->bytes);  // keeps its own descriptor
    }
    ::close(fd);
    return match;
  }

  Job& job_;
  const Plan& plan_;
  const RepoCache& cache_;
};

PretrainedRequest PretrainedOf(const LoadRequest& r) {
  PretrainedRequest p;
  p.repo_id = r.repo_id;
  p.source = PretrainedRequest::Source::kHub;
  p.revision = r.revision;
  p.repo_type = r.repo_type;
  p.subfolder = r.resolve.subfolder;
  p.variant = r.resolve.variant;
  p.allow_variant_fallback = r.resolve.allow_variant_fallback;
  p.convention = r.resolve.convention;
  p.load = r.load;
  p.digests = r.digests;
  p.lenient_index = r.lenient_index;
  return p;
}

}  // namespace

Result<LoadResult> Load(const HubClient& client, const LoadRequest& request, const DistOptions& options,
                        const TensorCallback& on_tensor) {
  const auto t0 = Clock::now();
  HUBLOAD_RETURN_IF_ERROR(CheckClient(client));
  HUBLOAD_RETURN_IF_ERROR(ValidateRepoId(request.repo_id));
  const PretrainedRequest preq_load = PretrainedOf(request);
  // The checks of every other path (subfolder, ...), before the job starts.
  HUBLOAD_RETURN_IF_ERROR(pipeline_internal::CheckRequest(preq_load, /*local=*/false));

  Job job(options);
  HUBLOAD_RETURN_IF_ERROR(job.Start());
  HUBLOAD_RETURN_IF_ERROR(job.StartGroup());
  RepoCache cache(client.options().config.cache_dir, request.repo_id, request.repo_type);
  PrefetchRequest preq;
  preq.repo_id = request.repo_id;
  preq.revision = request.revision;
  preq.repo_type = request.repo_type;

  // Rank 0 makes the one fetch plan (as a single-process load would) over
  // one listing of the revision (with the Hub down: one warning, one
  // metadata timeout) and keeps the files that carry it: the index (when
  // sharded) and the shards.
  auto lister = [&]() -> Result<Plan> {
    HUBLOAD_ASSIGN_OR_RETURN(RepoListing listing,
                             client.ListFiles(request.repo_id, request.revision, request.repo_type));
    PretrainedInfo info;
    info.repo_id = request.repo_id;
    info.revision = request.revision;
    HUBLOAD_ASSIGN_OR_RETURN(
        pipeline_internal::FetchPlan fp,
        pipeline_internal::MakeFetchPlan(&client, preq_load, /*allow_pickle=*/false, &info, &listing));
    std::vector<std::string> wanted, shards;
    if (!info.index_file.empty()) wanted.push_back(info.index_file);
    for (const auto& s : fp.shards) shards.push_back(s.file);
    wanted.insert(wanted.end(), shards.begin(), shards.end());
    Plan plan;
    plan.commit = listing.commit;
    for (const auto& w : wanted)
      for (const auto& f : listing.files)
        if (f.path == w) plan.files.push_back(PlanFile{f.path, f.etag(), f.size, -1});
    plan.extra.shards = shards;
    plan.extra.index_file = info.index_file;
    plan.extra.weights_file = info.resolved.weights_file;
    plan.extra.warnings = info.warnings;
    return plan;
  };
  HUBLOAD_ASSIGN_OR_RETURN(Plan plan, AgreeOnPlan(job, cache, lister));
  LoadResult out;
  FillReport(plan, job, cache, &out.prefetch);

  // This rank's view of the plan (every rank builds the same one).
  PretrainedInfo& info = out.info;
  info.source = "hub";
  info.repo_id = request.repo_id;
  info.revision = request.revision;
  info.commit = plan.commit;
  info.root = cache.SnapshotDir(plan.commit);
  info.index_file = plan.extra.index_file;
  info.resolved.weights_file = plan.extra.weights_file;
  info.resolved.kind = info.index_file.empty() ? ResolvedWeights::kSingleFile : ResolvedWeights::kSharded;
  for (const auto& w : plan.extra.warnings) info.warnings.push_back(w);
  pipeline_internal::FetchPlan fp;
  fp.sharded = !info.index_file.empty();
  for (const auto& s : plan.extra.shards) {
    pipeline_internal::PlannedShard ps;
    ps.file = s;
    ps.local_path = cache.PointerPath(plan.commit, s);
    for (const auto& f : plan.files)
      if (f.path == s) ps.size = f.size;
    info.files.push_back(ps.file);
    info.local_files.push_back(ps.local_path);
    info.weights_bytes += ps.size;
    fp.shards.push_back(std::move(ps));
  }
  info.timings.plan_s = std::chrono::duration<double>(Clock::now() - t0).count();
  info.extra.rank = job.env().rank;
  info.extra.world_size = job.env().world_size;

  // Bytes move on a background thread (leaders); the driver loads each shard
  // once it is complete in the node cache.
  Status transfer_status;
  std::thread mover([&] { transfer_status = RunTransfer(job, client, preq, plan, &out.prefetch); });
  auto load = [&]() -> Status {
    if (fp.sharded) {
      size_t idx = 0;
      while (idx < plan.files.size() && plan.files[idx].path != info.index_file) ++idx;
      HUBLOAD_RETURN_IF_ERROR(job.WaitKeys({NodeDoneKey(job.node(), idx)},
                                           "the index " + info.index_file, -1));
      auto pointer = cache.CachedPointer(plan.commit, info.index_file);
      if (!pointer) return Status(Code::kNotFound, info.index_file + " is missing from " + info.root,
                                  reason::kNotFound);
      HUBLOAD_ASSIGN_OR_RETURN(fp.index, safetensors::ReadIndex(*pointer));
    }
    pipeline_internal::TorchSink sink(
        preq_load,
        [&](size_t shard, std::string name, at::Tensor t) {
          return on_tensor ? on_tensor(name, t, fp.shards[shard].file) : Status::Ok();
        },
        nullptr, request.filter);
    NodeCacheSource source(job, plan, cache);
    return pipeline_internal::RunDriver(source, fp, preq_load, sink, {}, t0, &info);
  };
  Status st = load();
  if (!st.ok() && st.code() != Code::kCancelled) {
    ErrorContext ctx;
    ctx.repo_id = request.repo_id;
    ctx.revision = request.revision;
    st = job.Fail(st.WithPrefix("rank " + std::to_string(job.env().rank)).Annotate(ctx));
  }
  mover.join();
  if (st.ok()) st = transfer_status;
  if (st.ok()) {
    job.SetActivity("at the final barrier");
    st = job.Barrier("load");
  }
  job.Shutdown(st.ok());
  if (!st.ok()) return st;
  // The report lists the tensors this rank took.
  info.tensors.erase(std::remove_if(info.tensors.begin(), info.tensors.end(),
                                    [](const TensorRecord& r) { return r.device.empty(); }),
                     info.tensors.end());
  info.num_tensors = info.tensors.size();
  info.extra.bytes_downloaded = out.prefetch.bytes_downloaded;
  info.extra.bytes_received = out.prefetch.bytes_received;
  info.timings.total_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

}  // namespace hubload::distributed
