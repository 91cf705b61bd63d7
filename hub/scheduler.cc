// The load-ordered download scheduler (hub/scheduler.h).
#include "hub/scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "cache/free_space.h"
#include "hub/connections.h"
#include "hubload/reasons.h"
#include "util/worker_pool.h"

namespace hubload::hub_internal {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPoll = std::chrono::milliseconds(50);
// How long a later file waits for an earlier one still being prepared (its
// HEAD, its lock): longer means another process holds the blob's lock, and
// the rest need not wait for that.
constexpr auto kPrepareGrace = std::chrono::seconds(2);

struct Job {
  FileWork work;
  enum class St { kWaiting, kPreparing, kReady, kFinishing, kDone } st = St::kWaiting;
  Clock::time_point prepare_start;
  PreparedFile prep;
  std::unique_ptr<BytesAnnouncer> bytes;
  bool single_taken = false;
  // Ranged files.
  std::unique_ptr<RangedBlobWriter> rw;
  std::vector<char> taken;  // chunk handed to a connection (this round)
  size_t next_chunk = 0;
  int inflight = 0;
  bool probe_sent = false, probe_ok = false, whole = false;
  bool front_busy = false;          // a run from the first missing chunk is in flight (throughput order)
  bool streaming_whole = false;     // the probe was answered with the whole file (200)
  bool fallback = false;            // ranges unusable: one stream once inflight == 0
  bool hash_retried = false;        // fetched again after a sha256 mismatch: no further retry
  std::atomic<bool> abort{false};   // stops this file's chunk transfers
  // One retry allowance for every request of this file (resumes, chunks).
  std::shared_ptr<RetryBudget> budget = std::make_shared<RetryBudget>();
};

struct Task {
  enum class Kind { kSingle, kChunk, kFinalize } kind;
  size_t job = 0;
  size_t chunk = 0, chunk_end = 0;  // chunks [chunk, chunk_end) in one request
  bool probe = false;
  bool front = false;  // the file's run from its first missing chunk (throughput order)
};

class Scheduler {
 public:
  Scheduler(const Session& s, std::vector<FileWork> files, const DownloadCallbacks& cb, int max_connections)
      : s_(s), cb_(cb), ctl_(MakeController(s.opt, max_connections)) {
    max_conn_ = std::max(1, max_connections > 0 ? max_connections : s.opt.max_workers);
    if (s.opt.connections > 0) max_conn_ = std::min(max_conn_, s.opt.connections);
    for (auto& f : files) {
      auto j = std::make_unique<Job>();
      j->work = std::move(f);
      if (j->work.size) progress_.total += *j->work.size;
      jobs_.push_back(std::move(j));
    }
    cancel_.cb = &cb;
    progress_.cb = &cb;
    lookahead_ = std::max<size_t>(4, 2 * static_cast<size_t>(max_conn_));
    using Order = ClientOptions::DownloadOrder;
    load_order_ = s.opt.download_order == Order::kLoadOrder ||
                  (s.opt.download_order == Order::kAuto && static_cast<bool>(cb.on_file_bytes));
    local_paths_.resize(jobs_.size());
    t0_ = Clock::now();
  }

  ScheduleOutcome Run() {
    ScheduleOutcome out;
    const size_t n = jobs_.size();
    if (n > 0) {
      // Preparation loops and connection loops, all on one bounded pool.
      const size_t preps = std::min(n, static_cast<size_t>(std::max(2, max_conn_)));
      // One loop more than connections: a loop verifying a file it finished
      // does not count as a connection (RunTask), so another one takes its place.
      const size_t loops = preps + static_cast<size_t>(max_conn_) + 1;
      util::ParallelFor(loops, static_cast<int>(loops), nullptr, [&](size_t i) {
        if (i < preps) PrepLoop();
        else ConnLoop();
      });
    }
    progress_.Report(true);
    out.status = first_err_;
    if (out.status.ok() && cancel_.Cancelled()) {
      const ErrorContext& c = jobs_.empty() ? ErrorContext{} : jobs_[0]->work.ctx;
      ErrorContext ctx = c;
      ctx.file.clear();
      out.status = Status(Code::kCancelled, "download of " + c.repo_id + " cancelled",
                          reason::kCancelled, ctx);
    }
    out.failed_path = failed_path_;
    out.failed_code = failed_code_;
    out.local_paths = std::move(local_paths_);
    return out;
  }

 private:
  static ConnectionController MakeController(const ClientOptions& o, int max_connections) {
    int max = std::max(1, max_connections > 0 ? max_connections : o.max_workers);
    if (o.connections > 0) return ConnectionController::Pinned(std::min(o.connections, max));
    ConnectionController::Options co;
    co.max = max;
    co.start = std::min(4, max);
    return ConnectionController(co);
  }
  double Now() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }
  bool StoppedLocked() const { return cancel_.Cancelled(); }

  // ---- preparation -------------------------------------------------------
  void PrepLoop() {
    std::unique_lock<std::mutex> l(mu_);
    const size_t n = jobs_.size();
    while (true) {
      if (StoppedLocked() || next_prep_ >= n) return;
      if (next_prep_ >= frontier_ + lookahead_) {
        cv_.wait_for(l, kPoll);
        continue;
      }
      size_t i = next_prep_++;
      Job& j = *jobs_[i];
      j.st = Job::St::kPreparing;
      j.prepare_start = Clock::now();
      l.unlock();
      Prepare(i);
      l.lock();
    }
  }

  void Prepare(size_t i) {
    Job& j = *jobs_[i];
    auto r = j.work.prepare();
    if (!r.ok()) return Fail(i, r.status());
    PreparedFile p = std::move(*r);
    if (!j.work.size && p.size) progress_.total += *p.size;
    if (p.local_path) {
      std::string local = *p.local_path;
      j.prep = std::move(p);
      uint64_t cached = j.prep.cached_bytes > 0 ? j.prep.cached_bytes : j.work.size.value_or(0);
      if (cached > 0) progress_.Add(static_cast<int64_t>(cached));
      return Done(i, local);
    }
    if (!p.target) return Fail(i, Status(Code::kInternal, "prepared file has nothing to fetch", "", j.work.ctx));
    FetchTarget& t = *p.target;
    // B37 preflight: the bytes still missing must fit.
    if (s_.opt.check_free_space) {
      Status fs = cache_internal::CheckFreeSpace(t.dir, t.meta.size, t.single_partial, t.ranged_partial, j.work.ctx);
      if (!fs.ok()) return Fail(i, fs);
    }
    if (cb_.on_file_bytes) j.bytes = std::make_unique<BytesAnnouncer>(&cb_, j.work.path);  // else no bookkeeping
    if (UseRanges(s_, t)) {
      auto w = OpenRanged(s_, t, /*resume=*/true);
      if (!w.ok()) return Fail(i, w.status());
      j.rw = std::move(*w);
      j.taken.assign(j.rw->num_chunks(), 0);
      progress_.Add(static_cast<int64_t>(j.rw->bytes_received()));
    }
    std::lock_guard<std::mutex> l(mu_);
    j.prep = std::move(p);
    j.st = Job::St::kReady;
    cv_.notify_all();
  }

  // ---- connections -------------------------------------------------------
  void ConnLoop() {
    std::unique_lock<std::mutex> l(mu_);
    const size_t n = jobs_.size();
    while (true) {
      int before = ctl_.limit();
      ctl_.Sample(wire_.load(std::memory_order_relaxed), Now(), !starved_);
      starved_ = false;
      if (ctl_.limit() > before) cv_.notify_all();
      if (StoppedLocked() || done_ == n) return;
      std::optional<Task> t;
      if (active_ < ctl_.limit()) {
        t = TakeLocked();
        if (!t) starved_ = true;
      }
      if (!t) {
        cv_.wait_for(l, kPoll);
        continue;
      }
      ++active_;
      l.unlock();
      bool released = false;
      RunTask(*t, &released);
      l.lock();
      if (!released) --active_;
      cv_.notify_all();
    }
  }

  std::optional<size_t> NextChunkLocked(Job& j) {
    const size_t n = j.rw->num_chunks();
    while (j.next_chunk < n &&
           (j.taken[j.next_chunk] ||
            j.rw->chunk_received(j.next_chunk) == j.rw->chunk_end(j.next_chunk) - j.rw->chunk_begin(j.next_chunk)))
      ++j.next_chunk;
    if (j.next_chunk >= n) return std::nullopt;
    return j.next_chunk;
  }

  std::optional<Task> TakeLocked() { return load_order_ ? TakeLoadOrderLocked() : TakeThroughputLocked(); }

  // Scans the window in file order for work. What both orders share: an
  // earlier file still being prepared is about to be ready, so nothing later
  // starts before it (whichever HEAD answered first would otherwise take the
  // link; the scan stops, *stopped = true), unless its preparation waits for
  // another process (kPrepareGrace); a single-stream file not started yet is
  // the task. For a ready ranged file `ranged(j, i, &stop)` decides: a task,
  // or none, with stop = true to end the scan there.
  template <class Ranged>
  std::optional<Task> ScanWindowLocked(Ranged&& ranged, bool* stopped) {
    *stopped = true;
    const size_t end = std::min(jobs_.size(), frontier_ + lookahead_);
    for (size_t i = frontier_; i < end; ++i) {
      Job& j = *jobs_[i];
      if (j.st == Job::St::kWaiting) return std::nullopt;
      if (j.st == Job::St::kPreparing) {
        if (Clock::now() - j.prepare_start < kPrepareGrace) return std::nullopt;
        continue;
      }
      if (j.st != Job::St::kReady) continue;
      if (!j.rw) {
        if (j.single_taken) continue;
        j.single_taken = true;
        return Task{Task::Kind::kSingle, i};
      }
      bool stop = false;
      if (auto t = ranged(j, i, &stop)) return t;
      if (stop) return std::nullopt;
    }
    *stopped = false;
    return std::nullopt;
  }

  // Hands chunk k of ranged file j to a connection, with the chunks after it
  // up to `run` in all (those not handed out yet, not complete) in the same
  // request.
  Task TakeRunLocked(Job& j, size_t i, size_t k, size_t run, bool probe, bool front) {
    size_t e = k + 1;
    while (e < j.rw->num_chunks() && e - k < run && !j.taken[e] &&
           j.rw->chunk_received(e) < j.rw->chunk_end(e) - j.rw->chunk_begin(e))
      ++e;
    for (size_t c = k; c < e; ++c) j.taken[c] = 1;
    ++j.inflight;
    if (probe) j.probe_sent = true;
    if (front) j.front_busy = true;
    return Task{Task::Kind::kChunk, i, k, e, probe, front};
  }

  // The first request of ranged file j (sent alone: see TakeLoadOrderLocked),
  // or its verification when every chunk is already on disk (resumed).
  std::optional<Task> StartRangedLocked(Job& j, size_t i, size_t run) {
    auto k = NextChunkLocked(j);
    if (!k) {
      j.st = Job::St::kFinishing;
      return Task{Task::Kind::kFinalize, i};
    }
    return TakeRunLocked(j, i, *k, run, /*probe=*/true, /*front=*/!load_order_);
  }

  // Chunks one request of the throughput order covers from a file's first
  // missing byte. With at least as many files left as connections, a file has
  // its one connection: a run of up to 64 MiB, so a file of that size is one
  // GET (the server's read-ahead and the sha256 follow one stream). With fewer
  // files, spare connections share the file: one chunk per request, as in
  // load order, so the front is never the longest request.
  size_t RunChunksLocked(const Job& j) const {
    size_t files_left = jobs_.size() - frontier_;
    for (size_t i = frontier_; i < jobs_.size() && i < frontier_ + lookahead_; ++i)
      if (jobs_[i]->st == Job::St::kDone) --files_left;
    const size_t share = std::max<size_t>(1, static_cast<size_t>(ctl_.limit()) / std::max<size_t>(1, files_left));
    const size_t left = j.rw->num_chunks() - std::min(j.next_chunk, j.rw->num_chunks());
    const uint64_t chunk = std::max<uint64_t>(1, j.rw->chunk_end(0) - j.rw->chunk_begin(0));
    const size_t cap = static_cast<size_t>(std::max<uint64_t>(1, (64ull << 20) / chunk));
    return share > 1 ? 1 : std::max<size_t>(1, std::min(cap, left));
  }

  // The last chunk of j not handed out and not complete (spare connections
  // take a file from its end, away from its front run).
  std::optional<size_t> LastChunkLocked(Job& j) {
    for (size_t k = j.rw->num_chunks(); k-- > j.next_chunk;) {
      if (!j.taken[k] && j.rw->chunk_received(k) < j.rw->chunk_end(k) - j.rw->chunk_begin(k)) return k;
    }
    return std::nullopt;
  }

  // ClientOptions::DownloadOrder::kThroughput: first every file gets a run
  // from its first missing byte when it has none in flight (a new file, or
  // the chunks after the previous run: each file is written in order and
  // hashed from memory); then, when every file that can start has one, spare
  // connections take the last chunk left of the earliest unfinished file.
  std::optional<Task> TakeThroughputLocked() {
    bool stopped = false;
    auto t = ScanWindowLocked(
        [this](Job& j, size_t i, bool*) -> std::optional<Task> {
          if (j.fallback || j.front_busy) return std::nullopt;
          if (!j.probe_sent) return StartRangedLocked(j, i, RunChunksLocked(j));
          if (!j.probe_ok) return std::nullopt;  // answered whole (streaming) or about to fall back
          if (auto k = NextChunkLocked(j)) return TakeRunLocked(j, i, *k, RunChunksLocked(j), false, /*front=*/true);
          return std::nullopt;
        },
        &stopped);
    if (t || stopped) return t;
    const size_t end = std::min(jobs_.size(), frontier_ + lookahead_);
    for (size_t i = frontier_; i < end; ++i) {
      Job& j = *jobs_[i];
      if (j.st != Job::St::kReady || !j.rw || j.fallback || !j.probe_ok) continue;
      if (j.inflight >= s_.opt.max_ranges_per_file) continue;
      if (auto k = LastChunkLocked(j)) return TakeRunLocked(j, i, *k, 1, false, false);
    }
    return std::nullopt;
  }

  // ClientOptions::DownloadOrder::kLoadOrder.
  std::optional<Task> TakeLoadOrderLocked() {
    bool stopped = false;
    return ScanWindowLocked(
        [this](Job& j, size_t i, bool* stop) -> std::optional<Task> {
          if (j.fallback) return std::nullopt;
          if (!j.probe_sent) return StartRangedLocked(j, i, 1);
          // Until the earliest file's first range is answered nothing later
          // starts: on a shared link a later file would slow the earlier one
          // down (it is one round trip; a 200 answer frees the other
          // connections at once).
          if (!j.probe_ok) {
            *stop = !j.streaming_whole;
            return std::nullopt;
          }
          if (j.inflight >= s_.opt.max_ranges_per_file) return std::nullopt;
          if (auto k = NextChunkLocked(j)) return TakeRunLocked(j, i, *k, 1, false, false);
          // Every chunk is handed out: the next file starts once they are all
          // in (a free connection waits), so on a shared link the earliest
          // file keeps the whole link to its last byte. On a link capped per
          // connection the chunks of one wave end together; only stragglers
          // leave one idle.
          *stop = j.inflight > 0;
          return std::nullopt;
        },
        &stopped);
  }

  FileIo IoFor(Job& j) {
    FileIo io;
    io.progress = &progress_;
    io.cancel = &cancel_;
    io.cb = &cb_;
    io.bytes = j.bytes.get();
    io.wire_bytes = &wire_;
    io.budget = j.budget;
    io.on_retry = [this](int status) {
      if (status != 429 && status != 503) return;
      std::lock_guard<std::mutex> l(mu_);
      ctl_.Throttled(Now());
    };
    return io;
  }

  // Stops counting the calling loop as a connection (it verifies a file now:
  // no network) and wakes the others. Called with mu_ held.
  void ReleaseConnectionLocked(bool* released) {
    --active_;
    *released = true;
    cv_.notify_all();
  }

  // `*released`: the task stopped counting as a connection (see ConnLoop).
  void RunTask(const Task& t, bool* released) {
    Job& j = *jobs_[t.job];
    switch (t.kind) {
      case Task::Kind::kSingle: {
        FileIo io = IoFor(j);
        if (j.hash_retried) io.hash_retries = 0;
        auto r = FetchStream(s_, *j.prep.target, j.work.ctx, std::move(io));
        if (!r.ok()) return Fail(t.job, r.status());
        return Finish(t.job);
      }
      case Task::Kind::kFinalize: {
        std::unique_lock<std::mutex> l(mu_);
        ReleaseConnectionLocked(released);
        l.unlock();
        return FinalizeRanged(t.job);
      }
      case Task::Kind::kChunk:
        break;
    }
    bool whole = false;
    auto stop = [this, &j] { return j.abort.load() || cancel_.Cancelled(); };
    auto on_answer = [this, &j, probe = t.probe](bool ranged) {
      if (!probe) return;
      std::lock_guard<std::mutex> l(mu_);
      if (ranged) j.probe_ok = true;
      else j.streaming_whole = true;  // one connection carries the file: the others move on
      cv_.notify_all();
    };
    Status st = FetchChunk(s_, *j.rw, t.chunk, t.chunk_end, t.probe, *j.prep.target, j.work.ctx, IoFor(j), stop,
                           on_answer, &whole);
    std::unique_lock<std::mutex> l(mu_);
    --j.inflight;
    if (t.front) j.front_busy = false;
    if (whole) j.whole = true;
    if (!st.ok()) {
      if (!st.Is(reason::kRangesUnusable)) {
        l.unlock();
        return Fail(t.job, st);
      }
      if (!j.fallback) spdlog::warn("{}: {}; downloading it again on one connection", j.work.path, st.message());
      j.fallback = true;
      j.abort = true;
    }
    if (j.inflight > 0 || j.st != Job::St::kReady) return;
    if (j.fallback) {
      uint64_t had = j.rw->bytes_received();
      j.rw->Discard();
      j.rw.reset();
      j.abort = false;
      j.fallback = false;
      j.single_taken = false;
      j.streaming_whole = false;
      cv_.notify_all();
      l.unlock();
      progress_.Add(-static_cast<int64_t>(had));
      return;
    }
    if (j.whole || j.rw->contiguous_bytes() == j.rw->chunk_end(j.rw->num_chunks() - 1)) {
      j.st = Job::St::kFinishing;
      // The connections waiting for this file's last chunk move on to the next
      // file now, and another loop takes this connection's place, while this
      // one hashes what it has not hashed yet.
      ReleaseConnectionLocked(released);
      l.unlock();
      FinalizeRanged(t.job);
    }
  }

  // Verifies and renames a ranged file (job in kFinishing: no other thread touches it).
  void FinalizeRanged(size_t i) {
    Job& j = *jobs_[i];
    RangedBlobWriter& w = *j.rw;
    const int64_t size = j.prep.target->meta.size;
    uint64_t had = w.bytes_received();
    Status fl;
    for (size_t k = 0; k < w.num_chunks() && fl.ok(); ++k) fl = w.FlushChunk(k);
    if (!fl.ok()) return Fail(i, fl);
    if (j.bytes) j.bytes->Update(w.fd(), w.partial_path(), w.contiguous_bytes(), size, true);
    auto c = w.Commit();
    if (c.ok()) return Finish(i);
    if (!c.status().Is(reason::kHashMismatch)) return Fail(i, c.status());
    spdlog::warn("{}: {}; downloading it again on one connection", j.work.path, c.status().message());
    progress_.Add(-static_cast<int64_t>(had));
    std::lock_guard<std::mutex> l(mu_);
    j.rw.reset();
    j.single_taken = false;
    j.hash_retried = true;
    j.st = Job::St::kReady;
    cv_.notify_all();
  }

  void Finish(size_t i) {
    Job& j = *jobs_[i];
    auto f = j.prep.finish ? j.prep.finish() : Result<std::string>(j.prep.target->final_path);
    if (!f.ok()) return Fail(i, f.status());
    Done(i, *f);
  }

  void Done(size_t i, const std::string& local) {
    Job& j = *jobs_[i];
    j.prep.lock.reset();
    j.rw.reset();
    // Not serialised: a consumer may block here (the loaders' backpressure
    // holds a later shard) while the file it waits for completes (hub.h).
    if (cb_.on_file_done) cb_.on_file_done(j.work.path, local);
    std::lock_guard<std::mutex> l(mu_);
    j.st = Job::St::kDone;
    local_paths_[i] = local;
    ++done_;
    while (frontier_ < jobs_.size() && jobs_[frontier_]->st == Job::St::kDone) ++frontier_;
    cv_.notify_all();
  }

  void Fail(size_t i, const Status& st) {
    std::lock_guard<std::mutex> l(mu_);
    bool cancelled_by_other = st.code() == Code::kCancelled && cancel_.stop.load();
    if (first_err_.ok() && !cancelled_by_other) {
      first_err_ = WithCtx(st, jobs_[i]->work.ctx);
      failed_path_ = jobs_[i]->work.path;
      failed_code_ = st.code();
    }
    cancel_.stop = true;
    cv_.notify_all();
  }

  const Session& s_;
  const DownloadCallbacks& cb_;
  std::vector<std::unique_ptr<Job>> jobs_;
  std::mutex mu_;
  std::condition_variable cv_;
  Cancel cancel_;
  Progress progress_;
  std::atomic<uint64_t> wire_{0};
  ConnectionController ctl_;
  int max_conn_ = 1;
  bool load_order_ = true;  // ClientOptions::download_order resolved for this call
  int active_ = 0;
  bool starved_ = false;
  size_t frontier_ = 0;
  size_t next_prep_ = 0;
  size_t lookahead_ = 4;
  size_t done_ = 0;
  Status first_err_;
  std::string failed_path_;
  Code failed_code_ = Code::kOk;
  std::vector<std::string> local_paths_;
  Clock::time_point t0_;
};

}  // namespace

ScheduleOutcome RunDownloads(const Session& s, std::vector<FileWork> files, const DownloadCallbacks& cb,
                             int max_connections) {
  Scheduler sched(s, std::move(files), cb, max_connections);
  return sched.Run();
}

}  // namespace hubload::hub_internal
