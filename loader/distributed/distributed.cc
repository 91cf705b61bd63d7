// Cluster prefetch and multi-rank loading on c10d (TCPStore + ProcessGroupGloo).
// The only TU of hubload_distributed that includes LibTorch (~40 s to build).
// Protocol and failure model: include/hubload/distributed.h.
#include <openssl/evp.h>
#include <signal.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "hubload/distributed.h"
#include "hubload/torch_loader.h"
#include "loader/distributed/plan.h"
#include "loader/pipeline/plan.h"
#include "loader/pipeline/torch_sink.h"

namespace hubload::distributed {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
std::chrono::milliseconds Ms(double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000.0)); }
void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

std::vector<uint8_t> B(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }
std::string S(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

std::string Fmt1(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

bool IsSha256Hex(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// Objects that must never be destroyed: a process group whose collective
// failed may have worker threads blocked until the Gloo timeout; destroying it
// would join them. Reachable from a global, so not a leak for LeakSanitizer.
void Bury(c10::intrusive_ptr<c10d::ProcessGroupGloo> pg) {
  static auto* graveyard = new std::vector<c10::intrusive_ptr<c10d::ProcessGroupGloo>>();
  static std::mutex mu;
  std::lock_guard<std::mutex> l(mu);
  graveyard->push_back(std::move(pg));
}

// Error published in the store: the first failing rank's Status.
json ErrorJson(int rank, const Status& st) {
  return json{{"rank", rank},
              {"code", static_cast<int>(st.code())},
              {"reason", st.reason()},
              {"message", st.message()},
              {"file", st.context().file}};
}
Status ErrorFromJson(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status(Code::kInternal, "job failed: " + text, "JobFailed");
  Code c = static_cast<Code>(j.value("code", static_cast<int>(Code::kInternal)));
  ErrorContext ctx;
  ctx.file = j.value("file", std::string());
  return Status(c, j.value("message", std::string()), j.value("reason", std::string()), ctx);
}

// ---------------------------------------------------------------------------
// The job: store clients, heartbeat/monitor thread, topology, abort protocol.

class Job {
 public:
  explicit Job(const DistOptions& o) : opt_(o), env_(o.env) {}
  ~Job() { Shutdown(false); }

  const DistEnv& env() const { return env_; }
  bool leader() const { return env_.local_rank == 0; }
  int num_leaders() const { return static_cast<int>(leader_ranks_.size()); }
  int leader_index() const { return leader_index_; }
  const std::vector<int>& leader_ranks() const { return leader_ranks_; }
  int node() const { return env_.Node(); }
  const DistOptions& opt() const { return opt_; }

  Status Start() {
    HUBLOAD_RETURN_IF_ERROR(Validate(env_));
    if (opt_.chunk_bytes < 1024 || opt_.chunk_bytes > (1ull << 30))
      return Status(Code::kInvalidArgument,
                    "chunk_bytes must be 1 KiB .. 1 GiB, got " + std::to_string(opt_.chunk_bytes), "BadOption");
    if (!(opt_.timeout_s > 0) || !(opt_.heartbeat_timeout_s > 0))
      return Status(Code::kInvalidArgument, "timeout_s and heartbeat_timeout_s must be > 0", "BadOption");
    prefix_ = opt_.store_prefix + "/";
    // Gloo writes to peer sockets with plain write(): a dead peer would kill
    // this process with SIGPIPE instead of failing the collective.
    struct sigaction old {};
    if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL) ::signal(SIGPIPE, SIG_IGN);
    try {
      c10d::TCPStoreOptions so;
      so.port = env_.master_port;
      so.isServer = env_.rank == 0;
      so.waitWorkers = false;
      so.timeout = Ms(opt_.timeout_s);
      store_ = c10::make_intrusive<c10d::TCPStore>(env_.master_addr, so);
      so.isServer = false;
      mon_store_ = c10::make_intrusive<c10d::TCPStore>(env_.master_addr, so);
    } catch (const std::exception& e) {
      return Status(Code::kNetwork,
                    env_.Describe() + ": rendezvous with the store at " + env_.master_addr + ":" +
                        std::to_string(env_.master_port) + " failed within " + Fmt1(opt_.timeout_s) + " s: " + e.what(),
                    "Rendezvous");
    }
    monitor_ = std::thread([this] { MonitorLoop(); });
    // Topology: every rank says where it is; the leaders are the LOCAL_RANK 0s.
    HUBLOAD_RETURN_IF_ERROR(
        Set("topo/" + std::to_string(env_.rank),
            json{{"node", node()}, {"local_rank", env_.local_rank}, {"local_world_size", env_.local_world_size}}.dump()));
    std::vector<std::string> keys;
    for (int r = 0; r < env_.world_size; ++r) keys.push_back("topo/" + std::to_string(r));
    HUBLOAD_RETURN_IF_ERROR(WaitKeys(keys, "the rendezvous of all ranks", opt_.timeout_s));
    std::map<int, std::vector<int>> leaders_of_node;  // node -> ranks with local_rank 0
    std::set<int> nodes;
    for (int r = 0; r < env_.world_size; ++r) {
      HUBLOAD_ASSIGN_OR_RETURN(std::string t, Get("topo/" + std::to_string(r)));
      json j = json::parse(t, nullptr, false);
      if (j.is_discarded()) return Fail(Status(Code::kInternal, "bad topology record of rank " + std::to_string(r)));
      int n = j.value("node", -1);
      nodes.insert(n);
      if (j.value("local_rank", -1) == 0) leaders_of_node[n].push_back(r);
    }
    for (int n : nodes) {
      auto it = leaders_of_node.find(n);
      if (it == leaders_of_node.end())
        return Fail(Status(Code::kInvalidArgument,
                           "node " + std::to_string(n) + " has no rank with LOCAL_RANK 0 (its cache would have no writer)",
                           "BadTopology"));
      if (it->second.size() > 1)
        return Fail(Status(Code::kInvalidArgument,
                           "node " + std::to_string(n) + " has " + std::to_string(it->second.size()) +
                               " ranks with LOCAL_RANK 0 (ranks " + std::to_string(it->second[0]) + " and " +
                               std::to_string(it->second[1]) + "): check LOCAL_RANK / GROUP_RANK",
                           "BadTopology"));
      leader_ranks_.push_back(it->second[0]);
    }
    std::sort(leader_ranks_.begin(), leader_ranks_.end());
    for (size_t i = 0; i < leader_ranks_.size(); ++i)
      if (leader_ranks_[i] == env_.rank) leader_index_ = static_cast<int>(i);
    return Status::Ok();
  }

  // The Gloo group of the node leaders (leaders only; collective among them).
  Status StartGroup() {
    if (!leader()) return Status::Ok();
    try {
      auto gopts = c10d::ProcessGroupGloo::Options::create(Ms(opt_.timeout_s));
      const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
      if (ifname != nullptr && *ifname != '\0') {
        gopts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
      } else if (env_.master_addr == "127.0.0.1" || env_.master_addr == "localhost") {
        gopts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      } else {
        gopts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      }
      gopts->threads = 1;
      auto gstore_base = c10::make_intrusive<c10d::TCPStore>(env_.master_addr, ClientOptions());
      auto gstore = c10::make_intrusive<c10d::PrefixStore>(prefix_ + "gloo", gstore_base);
      pg_ = c10::make_intrusive<c10d::ProcessGroupGloo>(gstore, leader_index_, num_leaders(), gopts);
    } catch (const std::exception& e) {
      return Fail(Status(Code::kNetwork, "rank " + std::to_string(env_.rank) +
                                             ": creating the Gloo process group of the node leaders failed: " + e.what(),
                         "Rendezvous"));
    }
    return Status::Ok();
  }

  c10d::ProcessGroupGloo* pg() { return pg_.get(); }
  void MarkGroupBroken() { group_broken_ = true; }

  // ---- store helpers: every c10d exception becomes a Status ----
  Status Set(const std::string& key, const std::string& value) {
    try {
      std::lock_guard<std::mutex> l(store_mu_);
      store_->set(prefix_ + key, B(value));
    } catch (const std::exception& e) {
      return StoreLost(e.what());
    }
    return Status::Ok();
  }
  Result<std::string> Get(const std::string& key) {
    try {
      std::lock_guard<std::mutex> l(store_mu_);
      return S(store_->get(prefix_ + key));
    } catch (const std::exception& e) {
      return StoreLost(e.what());
    }
  }
  Result<bool> Check(const std::vector<std::string>& keys) {
    std::vector<std::string> full;
    for (const auto& k : keys) full.push_back(prefix_ + k);
    try {
      std::lock_guard<std::mutex> l(store_mu_);
      return store_->check(full);
    } catch (const std::exception& e) {
      return StoreLost(e.what());
    }
  }
  Result<int64_t> Add(const std::string& key, int64_t delta) {
    try {
      std::lock_guard<std::mutex> l(store_mu_);
      return store_->add(prefix_ + key, delta);
    } catch (const std::exception& e) {
      return StoreLost(e.what());
    }
  }

  // Waits until every key exists; stops on the job's abort or after
  // `timeout_s` (< 0 = no limit: rank deaths are caught by the heartbeats).
  Status WaitKeys(const std::vector<std::string>& keys, const std::string& what, double timeout_s) {
    auto t0 = Clock::now();
    int sleep_ms = 1;
    for (;;) {
      if (auto a = Aborted()) return *a;
      HUBLOAD_ASSIGN_OR_RETURN(bool ok, Check(keys));
      if (ok) return Status::Ok();
      if (timeout_s >= 0 && Since(t0) > timeout_s)
        return Fail(Status(Code::kNetwork,
                           "rank " + std::to_string(env_.rank) + " timed out after " + Fmt1(timeout_s) +
                               " s waiting for " + what,
                           "Timeout"));
      SleepMs(sleep_ms);
      sleep_ms = std::min(sleep_ms * 2, 20);
    }
  }

  // The job's error if some rank failed (seen by the monitor or posted here).
  std::optional<Status> Aborted() {
    std::lock_guard<std::mutex> l(abort_mu_);
    return abort_;
  }

  // Publishes `st` as the job's error (first error wins) and returns the
  // error this rank reports: `st` when it was first, else the first one.
  Status Fail(const Status& st) {
    {
      std::lock_guard<std::mutex> l(abort_mu_);
      if (abort_) return *abort_;
    }
    Status result = st;
    try {
      std::lock_guard<std::mutex> l(store_mu_);
      if (store_->add(prefix_ + "abort_n", 1) == 1) {
        store_->set(prefix_ + "abort", B(ErrorJson(env_.rank, st).dump()));
      } else {
        // Someone was first: wait (briefly) for their message.
        for (int i = 0; i < 200 && !store_->check({prefix_ + "abort"}); ++i) SleepMs(5);
        if (store_->check({prefix_ + "abort"})) result = ErrorFromJson(S(store_->get(prefix_ + "abort")));
      }
    } catch (const std::exception&) {
      // Store gone: report our own error.
    }
    std::lock_guard<std::mutex> l(abort_mu_);
    if (!abort_) abort_ = result;
    return *abort_;
  }

  // What this rank is doing, for the message of whoever finds it dead.
  void SetActivity(const std::string& a) {
    {
      std::lock_guard<std::mutex> l(abort_mu_);
      activity_ = a;
    }
    (void)Set("act/" + std::to_string(env_.rank), a);
  }
  std::string Activity() {
    std::lock_guard<std::mutex> l(abort_mu_);
    return activity_;
  }

  // Counts one broadcast chunk for the fault-injection hook.
  void CountChunk() {
    ++chunks_;
    if (opt_.fault_kill_after_chunks >= 0 && chunks_ >= opt_.fault_kill_after_chunks) {
      std::fprintf(stderr, "hubload: fault injection: rank %d sends itself signal %d after %lld broadcast chunks\n",
                   env_.rank, opt_.fault_signal, static_cast<long long>(chunks_));
      std::fflush(stderr);
      opt_.fault_kill_after_chunks = -1;  // once (a stopped rank may be continued)
      ::kill(::getpid(), opt_.fault_signal);
    }
  }

  // Success barrier: returns when every rank reached it, or the job's error.
  Status Barrier(const std::string& name) {
    HUBLOAD_ASSIGN_OR_RETURN(int64_t n, Add("barrier/" + name, 1));
    int sleep_ms = 1;
    while (n < env_.world_size) {
      if (auto a = Aborted()) return *a;
      SleepMs(sleep_ms);
      sleep_ms = std::min(sleep_ms * 2, 20);
      HUBLOAD_ASSIGN_OR_RETURN(n, Add("barrier/" + name, 0));
    }
    return Status::Ok();
  }

  // Stops the monitor, says goodbye; rank 0 keeps the store up until the
  // others have left (bounded), so that they can read the final keys.
  void Shutdown(bool ok) {
    if (shut_) return;
    shut_ = true;
    stop_ = true;
    if (monitor_.joinable()) monitor_.join();
    if (store_) {
      (void)Set("exit/" + std::to_string(env_.rank), ok ? "ok" : "error");
      if (env_.rank == 0) {
        double limit = ok ? opt_.timeout_s : opt_.heartbeat_timeout_s;
        auto t0 = Clock::now();
        for (int r = 1; r < env_.world_size && Since(t0) < limit;) {
          auto c = Check({"exit/" + std::to_string(r)});
          if (!c.ok()) break;
          if (*c) {
            ++r;
          } else {
            SleepMs(10);
          }
        }
      }
    }
    if (pg_ && (group_broken_ || !ok)) Bury(pg_);
    pg_.reset();
  }

 private:
  c10d::TCPStoreOptions ClientOptions() const {
    c10d::TCPStoreOptions so;
    so.port = env_.master_port;
    so.isServer = false;
    so.waitWorkers = false;
    so.timeout = Ms(opt_.timeout_s);
    return so;
  }

  Status StoreLost(const std::string& what) {
    Status st(Code::kNetwork,
              "rank " + std::to_string(env_.rank) + " lost the rendezvous store at " + env_.master_addr + ":" +
                  std::to_string(env_.master_port) + " (hosted by rank 0: rank 0 died or is unreachable) while " +
                  Activity() + ": " + what,
              "StoreLost");
    std::lock_guard<std::mutex> l(abort_mu_);
    if (!abort_) abort_ = st;
    return *abort_;
  }

  // Heartbeat + watch the next rank + poll the job's abort key.
  void MonitorLoop() {
    const double period = std::clamp(opt_.heartbeat_timeout_s / 6.0, 0.05, 5.0);
    const int watched = (env_.rank + 1) % env_.world_size;
    const std::string hb = prefix_ + "hb/" + std::to_string(env_.rank);
    const std::string whb = prefix_ + "hb/" + std::to_string(watched);
    const std::string wexit = prefix_ + "exit/" + std::to_string(watched);
    const std::string abort_key = prefix_ + "abort";
    std::string last_seen;
    auto last_change = Clock::now();
    bool watching = env_.world_size > 1;
    int64_t beat = 0;
    while (!stop_) {
      try {
        mon_store_->set(hb, B(std::to_string(++beat)));
        if (mon_store_->check({abort_key})) {
          Status st = ErrorFromJson(S(mon_store_->get(abort_key)));
          std::lock_guard<std::mutex> l(abort_mu_);
          if (!abort_) abort_ = st;
        }
        if (watching && mon_store_->check({wexit})) watching = false;
        if (watching && mon_store_->check({whb})) {
          std::string v = S(mon_store_->get(whb));
          if (v != last_seen) {
            last_seen = v;
            last_change = Clock::now();
          }
        } else {
          // Not started yet: a rank that never arrives is the rendezvous
          // timeout's business, not a death.
          last_change = Clock::now();
        }
        if (watching && Since(last_change) > opt_.heartbeat_timeout_s && !Aborted()) {
          std::string act = "starting";
          std::string akey = prefix_ + "act/" + std::to_string(watched);
          if (mon_store_->check({akey})) act = S(mon_store_->get(akey));
          watching = false;
          (void)Fail(Status(Code::kNetwork,
                            "rank " + std::to_string(watched) + " died or stopped responding (no heartbeat for " +
                                Fmt1(Since(last_change)) + " s) while " + act,
                            "RankDied"));
        }
      } catch (const std::exception& e) {
        (void)StoreLost(e.what());
        return;
      }
      auto until = Clock::now() + Ms(period);
      while (!stop_ && Clock::now() < until) SleepMs(10);
    }
  }

  DistOptions opt_;
  DistEnv env_;
  std::string prefix_;
  c10::intrusive_ptr<c10d::TCPStore> store_, mon_store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
  std::vector<int> leader_ranks_;
  int leader_index_ = -1;
  std::mutex store_mu_, abort_mu_;
  std::optional<Status> abort_;
  std::string activity_ = "starting";
  std::thread monitor_;
  std::atomic<bool> stop_{false};
  bool shut_ = false;
  bool group_broken_ = false;
  int64_t chunks_ = 0;
};

// ---------------------------------------------------------------------------
// The plan: what every rank agrees on before bytes move.

struct PlanFile {
  std::string path, etag;
  uint64_t size = 0;
  int owner = -1;  // leader index; -1 = every node holds it
};

struct Plan {
  std::string commit;
  std::vector<PlanFile> files;
  json extra;  // load: {"weights": [...shards...], "index": path}
};

json PlanFilesJson(const std::vector<PlanFile>& files) {
  json a = json::array();
  for (const auto& f : files) a.push_back(json{{"path", f.path}, {"etag", f.etag}, {"size", f.size}, {"owner", f.owner}});
  return a;
}
std::vector<PlanFile> PlanFilesFromJson(const json& a) {
  std::vector<PlanFile> out;
  for (const auto& f : a) {
    PlanFile p;
    p.path = f.value("path", std::string());
    p.etag = f.value("etag", std::string());
    p.size = f.value("size", uint64_t{0});
    p.owner = f.value("owner", -1);
    out.push_back(std::move(p));
  }
  return out;
}

// What rank 0 lists: the files and, for a load, the weights.
using Lister = std::function<Result<Plan>()>;

// Rendezvous on the plan: rank 0 lists (via `lister`), every leader reports
// what its node cache holds, rank 0 assigns owners, everyone reads the plan.
Result<Plan> AgreeOnPlan(Job& job, const RepoCache& cache, const Lister& lister) {
  if (job.env().rank == 0) {
    job.SetActivity("listing the repo");
    auto listed = lister();
    if (!listed.ok()) return job.Fail(listed.status().WithPrefix("rank 0"));
    json j{{"commit", listed->commit}, {"files", PlanFilesJson(listed->files)}, {"extra", listed->extra}};
    HUBLOAD_RETURN_IF_ERROR(job.Set("listing", j.dump()));
  }
  job.SetActivity("waiting for rank 0's listing of the repo");
  HUBLOAD_RETURN_IF_ERROR(job.WaitKeys({"listing"}, "rank 0's listing of the repo", -1));
  HUBLOAD_ASSIGN_OR_RETURN(std::string lt, job.Get("listing"));
  json lj = json::parse(lt, nullptr, false);
  if (lj.is_discarded()) return job.Fail(Status(Code::kInternal, "unreadable listing in the store"));
  Plan plan;
  plan.commit = lj.value("commit", std::string());
  plan.files = PlanFilesFromJson(lj["files"]);
  plan.extra = lj["extra"];
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
    json o = owners;
    HUBLOAD_RETURN_IF_ERROR(job.Set("plan", o.dump()));
  }
  HUBLOAD_RETURN_IF_ERROR(job.WaitKeys({"plan"}, "rank 0's plan", -1));
  HUBLOAD_ASSIGN_OR_RETURN(std::string pt, job.Get("plan"));
  json pj = json::parse(pt, nullptr, false);
  if (pj.is_discarded() || !pj.is_array() || pj.size() != plan.files.size())
    return job.Fail(Status(Code::kInternal, "unreadable plan in the store"));
  for (size_t i = 0; i < plan.files.size(); ++i) plan.files[i].owner = pj[i].get<int>();
  return plan;
}

// ---------------------------------------------------------------------------
// Leader side: download owned files, broadcast every file some node lacks.

class Transfer {
 public:
  Transfer(Job& job, const HubClient& client, const PrefetchRequest& req, const Plan& plan, PrefetchReport* report)
      : job_(job), client_(client), req_(req), plan_(plan), report_(report),
        cache_(client.options().config.cache_dir, req.repo_id, req.repo_type) {}

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
          auto l = cache_.LinkSnapshot(plan_.commit, f.path, f.etag, client_.options().use_symlinks);
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
    buffer_ = at::empty({static_cast<int64_t>(job_.opt().chunk_bytes)}, at::kByte);
    for (size_t i = 0; i < plan_.files.size(); ++i) {
      if (plan_.files[i].owner < 0) continue;
      HUBLOAD_RETURN_IF_ERROR(BroadcastFile(i));
    }
    if (!IsCommitHash(req_.revision)) {
      Status st = cache_.WriteRef(req_.revision, plan_.commit);
      if (!st.ok()) return job_.Fail(st.WithPrefix("rank " + std::to_string(job_.env().rank)));
    }
    return job_.Set("nodecomplete/" + std::to_string(job_.node()), "1");
  }

 private:
  std::string Rank(int leader_index) const { return "rank " + std::to_string(job_.leader_ranks()[leader_index]); }

  Status MarkNodeDone(size_t i) { return job_.Set("nodedone/" + std::to_string(job_.node()) + "/" + std::to_string(i), "1"); }

  void Download(std::vector<std::string> paths) {
    DownloadCallbacks cb;
    cb.cancel_flag = &cancel_;
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

  // Waits for one broadcast chunk. Failures name the file, chunk and root.
  Status WaitWork(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what) {
    auto t0 = Clock::now();
    const double limit = job_.opt().timeout_s;
    for (;;) {
      if (work->isCompleted()) break;
      if (auto a = job_.Aborted()) {
        job_.MarkGroupBroken();
        return *a;
      }
      if (Since(t0) > limit) {
        job_.MarkGroupBroken();
        return job_.Fail(Status(Code::kNetwork,
                                "rank " + std::to_string(job_.env().rank) + ": " + what + " timed out after " +
                                    Fmt1(limit) + " s",
                                "BroadcastTimeout"));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (work->isSuccess()) return Status::Ok();
    job_.MarkGroupBroken();
    std::string msg = "unknown error";
    try {
      std::rethrow_exception(work->exception());
    } catch (const std::exception& e) {
      msg = e.what();
    } catch (...) {
    }
    // A peer died: give the heartbeat monitors the chance to name it.
    auto t1 = Clock::now();
    while (Since(t1) < job_.opt().heartbeat_timeout_s * 1.5 + 1.0) {
      if (auto a = job_.Aborted()) return *a;
      SleepMs(20);
    }
    return job_.Fail(Status(Code::kNetwork, "rank " + std::to_string(job_.env().rank) + ": " + what + " failed: " + msg,
                            "BroadcastFailed"));
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
    const bool have = cache_.HasBlob(f.etag, static_cast<int64_t>(f.size));
    // Receiving side: the blob's lock, the partial, then verify and rename.
    std::optional<FileLock> lock;
    std::unique_ptr<BlobWriter> writer;
    std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> sha1(nullptr, EVP_MD_CTX_free);
    if (!root && !have) {
      auto lk = FileLock::Acquire(cache_.LockPath(f.etag), job_.opt().timeout_s);
      if (!lk.ok()) return job_.Fail(lk.status().WithPrefix(myrank + " receiving " + f.path));
      lock.emplace(std::move(lk).value());
      if (!cache_.HasBlob(f.etag, static_cast<int64_t>(f.size))) {  // another process may have written it meanwhile
        BlobWriter::Options wo;
        wo.expected_size = static_cast<int64_t>(f.size);
        if (IsSha256Hex(f.etag)) wo.expected_sha256 = f.etag;
        wo.resume = false;
        auto w = BlobWriter::Open(cache_, f.etag, wo);
        if (!w.ok()) return job_.Fail(w.status().WithPrefix(myrank + " receiving " + f.path));
        writer = std::move(w).value();
        if (!IsSha256Hex(f.etag)) {  // regular file: the etag is the git blob sha1
          sha1.reset(EVP_MD_CTX_new());
          EVP_DigestInit_ex(sha1.get(), EVP_sha1(), nullptr);
          std::string hdr = "blob " + std::to_string(f.size);
          EVP_DigestUpdate(sha1.get(), hdr.data(), hdr.size() + 1);  // with the NUL
        }
      }
    }
    int src_fd = -1;
    if (root) {
      src_fd = ::open(cache_.BlobPath(f.etag).c_str(), O_RDONLY | O_CLOEXEC);
      if (src_fd < 0)
        return job_.Fail(Status(Code::kIOError, myrank + " cannot open its blob of " + f.path + " for broadcast",
                                "", ErrorContext{req_.repo_id, plan_.commit, f.path, "", "", 0, "", ""}));
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
    uint8_t* buf = buffer_.data_ptr<uint8_t>();
    for (uint64_t c = 0; c < n_chunks; ++c) {
      const uint64_t off = c * chunk;
      const uint64_t n = std::min(chunk, f.size - off);
      if (root) {
        uint64_t got = 0;
        while (got < n) {
          ssize_t r = ::pread(src_fd, buf + got, n - got, static_cast<off_t>(off + got));
          if (r <= 0)
            return job_.Fail(Status(Code::kIOError, myrank + " could not read its blob of " + f.path + " for broadcast",
                                    "", ErrorContext{req_.repo_id, plan_.commit, f.path, "", "", 0, "", ""}));
          got += static_cast<uint64_t>(r);
        }
      }
      std::vector<at::Tensor> t{buffer_.narrow(0, 0, static_cast<int64_t>(n))};
      c10d::BroadcastOptions bo;
      bo.rootRank = f.owner;
      bo.timeout = Ms(job_.opt().timeout_s);
      const std::string what = "broadcast of " + f.path + " (chunk " + std::to_string(c + 1) + "/" +
                               std::to_string(n_chunks) + ", root " + Rank(f.owner) + ")";
      c10::intrusive_ptr<c10d::Work> work;
      try {
        work = job_.pg()->broadcast(t, bo);
      } catch (const std::exception& e) {
        job_.MarkGroupBroken();
        return job_.Fail(Status(Code::kNetwork, myrank + ": " + what + " failed: " + e.what(), "BroadcastFailed"));
      }
      Status ws = WaitWork(work, what);
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
        if (sha1) EVP_DigestUpdate(sha1.get(), buf, n);
      }
    }
    if (writer) {
      if (sha1) {
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int len = 0;
        EVP_DigestFinal_ex(sha1.get(), md, &len);
        static const char* hex = "0123456789abcdef";
        std::string got;
        for (unsigned int k = 0; k < len; ++k) {
          got += hex[md[k] >> 4];
          got += hex[md[k] & 15];
        }
        if (got != f.etag) {
          writer->Discard();
          return job_.Fail(Status(Code::kCorruptDownload,
                                  myrank + " received " + f.path + " from " + Rank(f.owner) + " but its git blob sha1 is " +
                                      got + ", expected " + f.etag,
                                  "ChecksumMismatch", ErrorContext{req_.repo_id, plan_.commit, f.path, "", "", 0, "", ""}));
        }
      }
      auto committed = writer->Commit();
      if (!committed.ok()) {
        Status st = committed.status().WithPrefix(myrank + " received " + f.path + " from " + Rank(f.owner));
        st.mutable_context().file = f.path;
        return job_.Fail(st);
      }
      report_->files[i].received_here = true;
      report_->bytes_received += f.size;
    }
    writer.reset();
    lock.reset();
    if (!root && !cache_.CachedPointer(plan_.commit, f.path)) {
      auto l = cache_.LinkSnapshot(plan_.commit, f.path, f.etag, client_.options().use_symlinks);
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
  at::Tensor buffer_;
  std::thread downloader_;
  std::atomic<bool> cancel_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, bool> pending_;  // path -> still downloading
  std::set<std::string> downloading_;    // paths this leader fetches
  bool download_finished_ = false;
  Status download_status_;
};

Result<Plan> ListForPrefetch(const HubClient& client, const PrefetchRequest& req) {
  HUBLOAD_ASSIGN_OR_RETURN(std::string commit, client.ResolveCommit(req.repo_id, req.revision, req.repo_type));
  HUBLOAD_ASSIGN_OR_RETURN(RepoListing listing, client.ListFiles(req.repo_id, commit, req.repo_type));
  Plan plan;
  plan.commit = listing.commit.empty() ? commit : listing.commit;
  for (const auto& f : listing.files) {
    if (!MatchesPatterns(f.path, req.allow_patterns, req.ignore_patterns)) continue;
    plan.files.push_back(PlanFile{f.path, f.etag(), f.size, -1});
  }
  plan.extra = json::object();
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
// `on_progress` (optional) is polled while waiting (loads run there).
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
                  "BadOption");
  return Status::Ok();
}

}  // namespace

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

namespace {

/// The node cache as the load driver's shard source: a shard is Done once
/// this node's copy is complete (its leader downloaded or received it).
class NodeCacheSource : public pipeline_internal::ShardSource {
 public:
  NodeCacheSource(Job& job, const Plan& plan, const RepoCache& cache) : job_(job), plan_(plan), cache_(cache) {}
  Status Run(pipeline_internal::ShardEvents& events) override {
    const auto& shards = plan_.extra["shards"];
    std::vector<size_t> idx;
    for (const auto& s : shards) {
      size_t i = 0;
      while (i < plan_.files.size() && plan_.files[i].path != s.get<std::string>()) ++i;
      if (i == plan_.files.size())
        return job_.Fail(Status(Code::kInternal, "shard " + s.get<std::string>() + " is not part of the plan"));
      idx.push_back(i);
    }
    std::vector<bool> done(idx.size(), false);
    size_t remaining = idx.size();
    int sleep_ms = 1;
    while (remaining > 0) {
      if (events.cancel_flag()->load()) return Status(Code::kCancelled, "load cancelled", "Cancelled");
      if (auto a = job_.Aborted()) return *a;
      bool progressed = false;
      // In load order: a shard is handed over once this node holds it.
      for (size_t k = 0; k < idx.size(); ++k) {
        if (done[k]) continue;
        HUBLOAD_ASSIGN_OR_RETURN(bool ready,
                                 job_.Check({"nodedone/" + std::to_string(job_.node()) + "/" + std::to_string(idx[k])}));
        if (!ready) continue;
        const std::string& path = plan_.files[idx[k]].path;
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
  return p;
}

}  // namespace

Result<LoadResult> Load(const HubClient& client, const LoadRequest& request, const DistOptions& options,
                        const TensorCallback& on_tensor) {
  const auto t0 = Clock::now();
  HUBLOAD_RETURN_IF_ERROR(CheckClient(client));
  HUBLOAD_RETURN_IF_ERROR(ValidateRepoId(request.repo_id));
  const PretrainedRequest preq_load = PretrainedOf(request);

  Job job(options);
  HUBLOAD_RETURN_IF_ERROR(job.Start());
  HUBLOAD_RETURN_IF_ERROR(job.StartGroup());
  RepoCache cache(client.options().config.cache_dir, request.repo_id, request.repo_type);
  PrefetchRequest preq;
  preq.repo_id = request.repo_id;
  preq.revision = request.revision;
  preq.repo_type = request.repo_type;

  // Rank 0 makes the one fetch plan (as a single-process load would) and
  // lists the files that carry it: the index (when sharded) and the shards.
  auto lister = [&]() -> Result<Plan> {
    HUBLOAD_ASSIGN_OR_RETURN(Plan all, ListForPrefetch(client, preq));
    PretrainedRequest at_commit = preq_load;
    at_commit.revision = all.commit;
    PretrainedInfo info;
    info.repo_id = request.repo_id;
    info.revision = request.revision;
    HUBLOAD_ASSIGN_OR_RETURN(pipeline_internal::FetchPlan fp,
                             pipeline_internal::MakeFetchPlan(&client, at_commit, /*allow_pickle=*/false, &info));
    std::vector<std::string> wanted, shards;
    if (!info.index_file.empty()) wanted.push_back(info.index_file);
    for (const auto& s : fp.shards) shards.push_back(s.file);
    wanted.insert(wanted.end(), shards.begin(), shards.end());
    Plan plan;
    plan.commit = all.commit;
    for (const auto& w : wanted)
      for (const auto& f : all.files)
        if (f.path == w) plan.files.push_back(f);
    plan.extra = json{{"shards", shards},
                      {"index_file", info.index_file},
                      {"weights_file", info.resolved.weights_file},
                      {"warnings", info.warnings}};
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
  info.index_file = plan.extra.value("index_file", std::string());
  info.resolved.weights_file = plan.extra.value("weights_file", std::string());
  info.resolved.kind = info.index_file.empty() ? ResolvedWeights::kSingleFile : ResolvedWeights::kSharded;
  for (const auto& w : plan.extra.value("warnings", std::vector<std::string>{})) info.warnings.push_back(w);
  pipeline_internal::FetchPlan fp;
  fp.sharded = !info.index_file.empty();
  for (const auto& s : plan.extra.value("shards", std::vector<std::string>{})) {
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
      HUBLOAD_RETURN_IF_ERROR(job.WaitKeys({"nodedone/" + std::to_string(job.node()) + "/" + std::to_string(idx)},
                                           "the index " + info.index_file, -1));
      auto pointer = cache.CachedPointer(plan.commit, info.index_file);
      if (!pointer) return Status(Code::kNotFound, info.index_file + " is missing from " + info.root, "NotFound");
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
