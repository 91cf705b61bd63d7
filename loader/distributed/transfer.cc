// The distributed prefetch (loader/distributed/transfer.h): the plan, the
// owners' downloads and the leaders' broadcast into every node cache.
#include "loader/distributed/transfer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "cache/blob_store.h"
#include "loader/distributed/plan.h"
#include "loader/distributed/records.h"
#include "hubload/reasons.h"

namespace hubload::distributed {

namespace {

// ---------------------------------------------------------------------------
// The plan: what every rank agrees on before bytes move.

}  // namespace

// Rendezvous on the plan: rank 0 lists (via `lister`), every leader reports
// what its node cache holds, rank 0 assigns owners, everyone reads the plan.
Result<Plan> AgreeOnPlan(Job& job, const RepoCache& cache, const Lister& lister) {
  if (job.env().rank == 0) {
    job.SetActivity("listing the repo");
    auto listed = lister();
    if (!listed.ok()) return job.Fail(listed.status().WithPrefix("rank 0"));
    HUBLOAD_RETURN_IF_ERROR(job.Set("listing", internal::ListingJson(*listed)));
  }
  job.SetActivity("waiting for rank 0's listing of the repo");
  HUBLOAD_RETURN_IF_ERROR(job.WaitKeys({"listing"}, "rank 0's listing of the repo", -1));
  HUBLOAD_ASSIGN_OR_RETURN(std::string lt, job.Get("listing"));
  auto parsed = internal::ParseListing(lt, "listing");
  if (!parsed.ok()) return job.Fail(parsed.status().WithPrefix("rank 0's listing of the repo"));
  Plan plan = std::move(*parsed);
  if (job.leader()) {
    std::string have;
    for (const auto& f : plan.files) have += cache.HasBlob(f.etag, static_cast<int64_t>(f.size)) ? '1' : '0';
    HUBLOAD_RETURN_IF_ERROR(job.Set("have/" + std::to_string(job.leader_index()), have));
  }
  if (job.env().rank == 0) {
    std::vector<std::string> keys;
    for (int l = 0; l < job.num_leaders(); ++l) keys.push_back("have/" + std::to_string(l));
    HUBLOAD_RETURN_IF_ERROR(job.WaitKeys(keys, "every node leader's cache report", job.opt().timeout_s));
    std::vector<internal::PlanInput> in(plan.files.size());
    for (size_t i = 0; i < plan.files.size(); ++i) in[i].size = plan.files[i].size;
    for (int l = 0; l < job.num_leaders(); ++l) {
      HUBLOAD_ASSIGN_OR_RETURN(std::string h, job.Get("have/" + std::to_string(l)));
      for (size_t i = 0; i < plan.files.size(); ++i) in[i].have.push_back(i < h.size() && h[i] == '1');
    }
    auto owners = internal::AssignOwners(in, job.num_leaders(), job.opt().assignment);
    HUBLOAD_RETURN_IF_ERROR(job.Set("plan", internal::OwnersJson(owners)));
  }
  HUBLOAD_RETURN_IF_ERROR(job.WaitKeys({"plan"}, "rank 0's plan", -1));
  HUBLOAD_ASSIGN_OR_RETURN(std::string pt, job.Get("plan"));
  auto owners = internal::ParseOwners(pt, "plan", plan.files.size(), job.num_leaders());
  if (!owners.ok()) return job.Fail(owners.status().WithPrefix("rank 0's plan"));
  for (size_t i = 0; i < plan.files.size(); ++i) plan.files[i].owner = (*owners)[i];
  return plan;
}

namespace {

// A receiving leader publishes its partial file at most once per this many bytes.
constexpr uint64_t kPublishBytes = 1ull << 20;

// ---------------------------------------------------------------------------
// Leader side: download owned files, broadcast every file some node lacks.

class Transfer {
 public:
  Transfer(Job& job, const HubClient& client, const PrefetchRequest& req, const Plan& plan, PrefetchReport* report)
      : job_(job), client_(client), req_(req), plan_(plan), report_(report),
        cache_(client.options().config.cache_dir, req.repo_id, req.repo_type),
        store_(cache_, client.options().lock, client.options().use_symlinks) {
    for (size_t i = 0; i < plan_.files.size(); ++i) {
      const auto& f = plan_.files[i];
      index_of_[f.path] = i;
      if (f.owner < 0) continue;
      progress_.bytes_total += f.size;
      ++progress_.files_total;
    }
  }

  ~Transfer() {
    cancel_ = true;
    if (downloader_.joinable()) downloader_.join();
  }

  Status Run() {
    const int me = job_.leader_index();
    // Files this node already holds: make sure the snapshot points at them.
    std::vector<std::string> to_download;
    for (size_t i = 0; i < plan_.files.size(); ++i) {
      const auto& f = plan_.files[i];
      bool have = cache_.HasBlob(f.etag, static_cast<int64_t>(f.size));
      if (have) {
        if (!cache_.CachedPointer(plan_.commit, f.path)) {
          auto l = store_.Link(plan_.commit, f.path, f.etag, /*new_blob=*/false);
          if (!l.ok()) return job_.Fail(l.status().WithPrefix("rank " + std::to_string(job_.env().rank)));
        }
        HUBLOAD_RETURN_IF_ERROR(MarkNodeDone(i));
      } else if (f.owner == me) {
        to_download.push_back(f.path);
      }
    }
    // Owner downloads run in the background while earlier files are broadcast.
    if (!to_download.empty()) {
      for (const auto& p : to_download) {
        pending_[p] = true;
        downloading_.insert(p);
      }
      downloader_ = std::thread([this, to_download] { Download(to_download); });
    }
    for (size_t i = 0; i < plan_.files.size(); ++i) {
      if (plan_.files[i].owner < 0) continue;
      HUBLOAD_RETURN_IF_ERROR(BroadcastFile(i));
    }
    if (!IsCommitHash(req_.revision)) {
      Status st = store_.WriteRef(req_.revision, plan_.commit);
      if (!st.ok()) return job_.Fail(st.WithPrefix("rank " + std::to_string(job_.env().rank)));
    }
    return job_.Set("nodecomplete/" + std::to_string(job_.node()), "1");
  }

 private:
  std::string Rank(int leader_index) const { return "rank " + std::to_string(job_.leader_ranks()[leader_index]); }

  // DistOptions::on_progress: file `i` has `done` bytes in this node's cache
  // (`complete`: it is in place).
  void Progress(size_t i, uint64_t done, bool complete) {
    const auto& f = plan_.files[i];
    if (!job_.opt().on_progress || f.owner < 0) return;
    std::lock_guard<std::mutex> l(progress_mu_);
    if (complete_.count(i)) return;
    uint64_t& mine = partial_[i];
    if (done < mine) return;  // an older report (download workers run concurrently)
    progress_.bytes_done += done - mine;
    mine = done;
    if (complete) {
      complete_.insert(i);
      ++progress_.files_done;
    }
    progress_.path = f.path;
    progress_.file_bytes_done = done;
    progress_.file_bytes_total = f.size;
    job_.opt().on_progress(progress_);
  }

  // Tells this node's ranks (this rank's own load included) how far the
  // partial file behind `fd` holds file i (records.h PartialFileRecord), so
  // that they load its tensors as they land. Best effort: a rank that misses
  // it loads the file once it is marked done.
  // `partial_path`: the path `fd` was opened by (FileBytes::partial_path, the
  // broadcast writer's partial); "" = unknown, nothing is published.
  void PublishPartial(size_t i, int fd, const std::string& partial_path, uint64_t bytes) {
    struct stat st{};
    if (fd < 0 || partial_path.empty() || ::fstat(fd, &st) != 0) return;
    std::error_code ec;
    const std::string path = std::filesystem::absolute(partial_path, ec).string();
    if (ec) return;
    internal::PartialFileRecord r{path, static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), bytes};
    (void)job_.Set(NodeBytesKey(job_.node(), i), internal::PartialFileJson(r));
  }

  Status MarkNodeDone(size_t i) {
    Progress(i, plan_.files[i].size, /*complete=*/true);
    return job_.Set(NodeDoneKey(job_.node(), i), "1");
  }

  void Download(std::vector<std::string> paths) {
    DownloadCallbacks cb;
    cb.cancel_flag = &cancel_;
    if (job_.opt().on_progress)
      cb.on_file_progress = [this](const std::string& path, uint64_t done, uint64_t) {
        auto it = index_of_.find(path);
        if (it != index_of_.end()) Progress(it->second, done, /*complete=*/false);
      };
    cb.on_file_bytes = [this](const FileBytes& fb) {
      auto it = index_of_.find(fb.path_in_repo);
      if (it != index_of_.end()) PublishPartial(it->second, fb.fd, fb.partial_path, fb.contiguous_bytes);
    };
    cb.on_file_done = [this](const std::string& path, const std::string&) {
      std::lock_guard<std::mutex> l(mu_);
      pending_[path] = false;
      cv_.notify_all();
    };
    Status st = client_.DownloadFiles(req_.repo_id, plan_.commit, req_.repo_type, paths, cb);
    std::lock_guard<std::mutex> l(mu_);
    download_status_ = st;
    download_finished_ = true;
    cv_.notify_all();
  }

  // Owner: waits for its download of `path`; publishes ready/<i> (ok or error).
  Status WaitOwnDownload(size_t i) {
    const auto& f = plan_.files[i];
    job_.SetActivity("downloading " + f.path + " from the Hub");
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      auto it = pending_.find(f.path);
      if (it == pending_.end() || !it->second) break;  // done (or held from the start)
      if (download_finished_) {
        Status st = download_status_.ok()
                        ? Status(Code::kInternal, "download of " + f.path + " ended without completing it")
                        : download_status_;
        l.unlock();
        st = st.WithPrefix("rank " + std::to_string(job_.env().rank) + " could not download " + f.path);
        st.mutable_context().file = f.path;
        return job_.Fail(st);
      }
      l.unlock();
      if (auto a = job_.Aborted()) return *a;
      l.lock();
      cv_.wait_for(l, std::chrono::milliseconds(20));
    }
    l.unlock();
    if (downloading_.count(f.path)) {
      report_->files[i].downloaded_here = true;
      report_->bytes_downloaded += f.size;
    }
    return Status::Ok();
  }

  Status BroadcastFile(size_t i) {
    const auto& f = plan_.files[i];
    const int me = job_.leader_index();
    const bool root = f.owner == me;
    const std::string myrank = "rank " + std::to_string(job_.env().rank);
    const std::string ready_key = "ready/" + std::to_string(i);
    if (job_.num_leaders() == 1) {  // a single node: the download is all there is
      HUBLOAD_RETURN_IF_ERROR(WaitOwnDownload(i));
      return MarkNodeDone(i);
    }
    if (root) {
      HUBLOAD_RETURN_IF_ERROR(WaitOwnDownload(i));
      HUBLOAD_RETURN_IF_ERROR(job_.Set(ready_key, "1"));
    } else {
      job_.SetActivity("waiting for " + Rank(f.owner) + " to fetch " + f.path);
      HUBLOAD_RETURN_IF_ERROR(job_.WaitKeys({ready_key}, Rank(f.owner) + " to fetch " + f.path, -1));
    }
    // Receiving side: the cache's one write protocol (cache/blob_store.h):
    // the blob's lock, a new partial, verification by name (sha256 for LFS,
    // git blob sha1 for regular files) and the rename.
    const cache_internal::BlobId id{f.etag, static_cast<int64_t>(f.size)};
    const bool have = store_.Has(id);
    std::optional<FileLock> lock;
    std::unique_ptr<BlobWriter> writer;
    if (!root && !have) {
      auto lk = store_.Lock(f.etag, job_.opt().timeout_s);
      if (!lk.ok()) return job_.Fail(lk.status().WithPrefix(myrank + " receiving " + f.path));
      lock.emplace(std::move(lk).value());
      if (!store_.Has(id)) {  // another process may have written it meanwhile
        auto w = store_.OpenStream(id, /*resume=*/false);
        if (!w.ok()) return job_.Fail(w.status().WithPrefix(myrank + " receiving " + f.path));
        writer = std::move(w).value();
      }
    }
    int src_fd = -1;
    if (root) {
      src_fd = ::open(cache_.BlobPath(f.etag).c_str(), O_RDONLY | O_CLOEXEC);
      if (src_fd < 0)
        return job_.Fail(Status(Code::kIOError, myrank + " cannot open its blob of " + f.path + " for broadcast",
                                "", ErrorContext{req_.repo_id, plan_.commit, f.path, "", "", 0, "", "", {}}));
    }
    struct FdCloser {
      int fd;
      ~FdCloser() {
        if (fd >= 0) ::close(fd);
      }
    } closer{src_fd};
    const uint64_t chunk = job_.opt().chunk_bytes;
    const uint64_t n_chunks = (f.size + chunk - 1) / chunk;
    job_.SetActivity(root ? "sending " + f.path + " (" + std::to_string(f.size) + " bytes)"
                          : "receiving " + f.path + " from " + Rank(f.owner));
    uint8_t* buf = job_.ChunkBuffer();
    uint64_t published = 0;
    for (uint64_t c = 0; c < n_chunks; ++c) {
      const uint64_t off = c * chunk;
      const uint64_t n = std::min(chunk, f.size - off);
      if (root) {
        uint64_t got = 0;
        while (got < n) {
          ssize_t r = ::pread(src_fd, buf + got, n - got, static_cast<off_t>(off + got));
          if (r <= 0)
            return job_.Fail(Status(Code::kIOError, myrank + " could not read its blob of " + f.path + " for broadcast",
                                    "", ErrorContext{req_.repo_id, plan_.commit, f.path, "", "", 0, "", "", {}}));
          got += static_cast<uint64_t>(r);
        }
      }
      const std::string what = "broadcast of " + f.path + " (chunk " + std::to_string(c + 1) + "/" +
                               std::to_string(n_chunks) + ", root " + Rank(f.owner) + ")";
      Status ws = job_.Broadcast(buf, n, f.owner, what);
      if (!ws.ok()) {
        if (writer) writer->Discard();
        return ws;
      }
      job_.CountChunk();
      if (root) {
        report_->bytes_sent += n;
      } else if (writer) {
        Status as = writer->Append(reinterpret_cast<const char*>(buf), n);
        if (!as.ok()) {
          writer->Discard();
          return job_.Fail(as.WithPrefix(myrank + " receiving " + f.path));
        }
        Progress(i, off + n, /*complete=*/false);
        if (off + n - published >= kPublishBytes || off + n == f.size) {
          Status fl = writer->Flush();
          if (!fl.ok()) {
            writer->Discard();
            return job_.Fail(fl.WithPrefix(myrank + " receiving " + f.path));
          }
          published = writer->flushed_bytes();
          PublishPartial(i, writer->fd(), writer->partial_path(), published);
        }
      }
    }
    bool writer_committed = false;
    if (writer) {
      auto committed = writer->Commit();
      if (!committed.ok()) {
        Status st = committed.status().WithPrefix(myrank + " received " + f.path + " from " + Rank(f.owner));
        st.mutable_context().file = f.path;
        return job_.Fail(st);
      }
      report_->files[i].received_here = true;
      report_->bytes_received += f.size;
      writer_committed = true;
    }
    writer.reset();
    lock.reset();
    if (!root && !cache_.CachedPointer(plan_.commit, f.path)) {
      auto l = store_.Link(plan_.commit, f.path, f.etag, /*new_blob=*/writer_committed);
      if (!l.ok()) return job_.Fail(l.status().WithPrefix(myrank));
    }
    return MarkNodeDone(i);
  }

  Job& job_;
  const HubClient& client_;
  const PrefetchRequest& req_;
  const Plan& plan_;
  PrefetchReport* report_;
  RepoCache cache_;
  cache_internal::BlobStore store_;
  std::thread downloader_;
  std::atomic<bool> cancel_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::mutex progress_mu_;  // serialises on_progress and guards the three below
  DistProgress progress_;
  std::map<size_t, uint64_t> partial_;  // plan index -> bytes in this node's cache
  std::set<size_t> complete_;
  std::map<std::string, size_t> index_of_;  // path -> plan index (download progress)
  std::map<std::string, bool> pending_;  // path -> still downloading
  std::set<std::string> downloading_;    // paths this leader fetches
  bool download_finished_ = false;
  Status download_status_;
};

}  // namespace

Result<Plan> ListForPrefetch(const HubClient& client, const PrefetchRequest& req) {
  // One listing of the revision (it resolves the commit): with the Hub down,
  // one warning naming the commit and at most one metadata timeout.
  HUBLOAD_ASSIGN_OR_RETURN(RepoListing listing, client.ListFiles(req.repo_id, req.revision, req.repo_type));
  Plan plan;
  plan.commit = listing.commit;
  for (const auto& f : listing.files) {
    if (!MatchesPatterns(f.path, req.allow_patterns, req.ignore_patterns)) continue;
    plan.files.push_back(PlanFile{f.path, f.etag(), f.size, -1});
  }
  return plan;
}

void FillReport(const Plan& plan, const Job& job, const RepoCache& cache, PrefetchReport* report) {
  report->commit = plan.commit;
  report->snapshot_dir = cache.SnapshotDir(plan.commit);
  report->leader = job.env().local_rank == 0;
  report->files.clear();
  for (size_t i = 0; i < plan.files.size(); ++i) {
    const PlanFile& f = plan.files[i];
    const int owner = f.owner >= 0 ? job.leader_ranks()[f.owner] : -1;
    report->files.push_back(PlannedFile{f.path, f.size, f.etag, owner, false, false});
  }
}

// Runs the byte-moving part on a leader, or waits for the node on others.
Status RunTransfer(Job& job, const HubClient& client, const PrefetchRequest& req, const Plan& plan,
                   PrefetchReport* report) {
  if (job.leader()) {
    Transfer t(job, client, req, plan, report);
    return t.Run();
  }
  job.SetActivity("waiting for node " + std::to_string(job.node()) + "'s files");
  return job.WaitKeys({"nodecomplete/" + std::to_string(job.node())},
                      "node " + std::to_string(job.node()) + "'s leader to complete the prefetch", -1);
}

Status CheckClient(const HubClient& client) {
  if (client.options().config.cache_dir.empty())
    return Status(Code::kInvalidArgument, "distributed prefetch needs the client's cache_dir (this node's cache folder)",
                  reason::kBadOption);
  return Status::Ok();
}

Result<PrefetchReport> Prefetch(const HubClient& client, const PrefetchRequest& request, const DistOptions& options) {
  HUBLOAD_RETURN_IF_ERROR(CheckClient(client));
  HUBLOAD_RETURN_IF_ERROR(ValidateRepoId(request.repo_id));
  Job job(options);
  HUBLOAD_RETURN_IF_ERROR(job.Start());
  HUBLOAD_RETURN_IF_ERROR(job.StartGroup());
  RepoCache cache(client.options().config.cache_dir, request.repo_id, request.repo_type);
  HUBLOAD_ASSIGN_OR_RETURN(Plan plan, AgreeOnPlan(job, cache, [&] { return ListForPrefetch(client, request); }));
  PrefetchReport report;
  FillReport(plan, job, cache, &report);
  HUBLOAD_RETURN_IF_ERROR(RunTransfer(job, client, request, plan, &report));
  job.SetActivity("at the final barrier");
  Status st = job.Barrier("prefetch");
  job.Shutdown(st.ok());
  if (!st.ok()) return st;
  return report;
}

}  // namespace hubload::distributed
