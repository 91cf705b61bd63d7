// The distributed job over c10d (loader/distributed/job.h): TCPStore clients,
// heartbeats, topology, the abort protocol and the leaders' Gloo broadcast.
// The only TUs of hubload_distributed that include LibTorch are this one and
// load.cc (the torch sink).
#include "loader/distributed/job.h"

#include <signal.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

#include "loader/distributed/records.h"
#include "hubload/reasons.h"

namespace hubload::distributed {
namespace {

std::chrono::milliseconds Ms(double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000.0)); }
std::vector<uint8_t> B(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }
std::string S(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }


// Objects that must never be destroyed: a process group whose collective
// failed may have worker threads blocked until the Gloo timeout; destroying it
// would join them. Reachable from a global, so not a leak for LeakSanitizer.
// A broken group is never joined: its Gloo threads may still be sending from,
// or receiving into, the chunk buffer of an abandoned broadcast, so the buffer
// is kept with the group (a use-after-free otherwise, found by ASan).
void Bury(c10::intrusive_ptr<c10d::ProcessGroupGloo> pg, std::unique_ptr<uint8_t[]> chunk_buffer) {
  struct Grave {
    c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
    std::unique_ptr<uint8_t[]> buffer;
  };
  static auto* graveyard = new std::vector<Grave>();
  static std::mutex mu;
  std::lock_guard<std::mutex> l(mu);
  graveyard->push_back(Grave{std::move(pg), std::move(chunk_buffer)});
}

}  // namespace

class JobImpl {
 public:
  explicit JobImpl(const DistOptions& o) : opt_(o), env_(o.env) {}
  ~JobImpl() { Shutdown(false); }

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
                    "chunk_bytes must be 1 KiB .. 1 GiB, got " + std::to_string(opt_.chunk_bytes), reason::kBadOption);
    if (!(opt_.timeout_s > 0) || !(opt_.heartbeat_timeout_s > 0))
      return Status(Code::kInvalidArgument, "timeout_s and heartbeat_timeout_s must be > 0", reason::kBadOption);
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
                    reason::kRendezvous);
    }
    monitor_ = std::thread([this] { MonitorLoop(); });
    // Topology: every rank says where it is; the leaders are the LOCAL_RANK 0s.
    HUBLOAD_RETURN_IF_ERROR(
        Set("topo/" + std::to_string(env_.rank),
            internal::TopologyJson({node(), env_.local_rank})));
    std::vector<std::string> keys;
    for (int r = 0; r < env_.world_size; ++r) keys.push_back("topo/" + std::to_string(r));
    HUBLOAD_RETURN_IF_ERROR(WaitKeys(keys, "the rendezvous of all ranks", opt_.timeout_s));
    std::map<int, std::vector<int>> leaders_of_node;  // node -> ranks with local_rank 0
    std::set<int> nodes;
    for (int r = 0; r < env_.world_size; ++r) {
      HUBLOAD_ASSIGN_OR_RETURN(std::string t, Get("topo/" + std::to_string(r)));
      auto topo = internal::ParseTopology(t, "topo/" + std::to_string(r));
      if (!topo.ok()) return Fail(topo.status().WithPrefix("the topology record of rank " + std::to_string(r)));
      nodes.insert(topo->node);
      if (topo->local_rank == 0) leaders_of_node[topo->node].push_back(r);
    }
    for (int n : nodes) {
      auto it = leaders_of_node.find(n);
      if (it == leaders_of_node.end())
        return Fail(Status(Code::kInvalidArgument,
                           "node " + std::to_string(n) + " has no rank with LOCAL_RANK 0 (its cache would have no writer)",
                           reason::kBadTopology));
      if (it->second.size() > 1)
        return Fail(Status(Code::kInvalidArgument,
                           "node " + std::to_string(n) + " has " + std::to_string(it->second.size()) +
                               " ranks with LOCAL_RANK 0 (ranks " + std::to_string(it->second[0]) + " and " +
                               std::to_string(it->second[1]) + "): check LOCAL_RANK / GROUP_RANK",
                           reason::kBadTopology));
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
      if (!env_.gloo_socket_ifname.empty()) {
        gopts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(env_.gloo_socket_ifname));
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
                         reason::kRendezvous));
    }
    return Status::Ok();
  }

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
                           reason::kTimeout));
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
        store_->set(prefix_ + "abort", B(internal::ErrorRecordJson(env_.rank, st)));
      } else {
        // Someone was first: wait (briefly) for their message.
        for (int i = 0; i < 200 && !store_->check({prefix_ + "abort"}); ++i) SleepMs(5);
        if (store_->check({prefix_ + "abort"})) result = internal::ErrorFromRecord(S(store_->get(prefix_ + "abort")), "abort");
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
        // Rank 0 hosts the store: it waits for the others to read the job's
        // outcome. After a failure a rank whose heartbeat has stopped (a dead
        // one, the usual failure) never writes its exit key: it is waited for
        // at most two heartbeat periods, not the whole heartbeat timeout again.
        const double limit = ok ? opt_.timeout_s : opt_.heartbeat_timeout_s;
        const double stale_s = 2 * std::clamp(opt_.heartbeat_timeout_s / 6.0, 0.05, 5.0);
        auto t0 = Clock::now();
        std::string beat;
        auto beat_changed = Clock::now();
        for (int r = 1; r < env_.world_size && Since(t0) < limit;) {
          const std::string hb = "hb/" + std::to_string(r);
          auto c = Check({"exit/" + std::to_string(r)});
          if (!c.ok()) break;
          bool gone = *c;
          if (!gone && !ok) {
            auto has = Check({hb});
            if (!has.ok()) break;
            if (*has) {
              auto v = Get(hb);
              if (!v.ok()) break;
              if (*v != beat) {
                beat = *v;
                beat_changed = Clock::now();
              }
            }
            gone = Since(beat_changed) > stale_s;
          }
          if (gone) {
            ++r;
            beat.clear();
            beat_changed = Clock::now();
          } else {
            SleepMs(10);
          }
        }
      }
    }
    if (pg_ && (group_broken_ || !ok)) Bury(pg_, std::move(chunk_buffer_));
    pg_.reset();
  }

  // The broadcast buffer (opt().chunk_bytes bytes), owned with the group.
  uint8_t* ChunkBuffer() {
    if (!chunk_buffer_) chunk_buffer_ = std::make_unique<uint8_t[]>(opt_.chunk_bytes);
    return chunk_buffer_.get();
  }

  // Waits for one broadcast chunk. Failures name the file, chunk and root.
  Status WaitWork(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what) {
    auto t0 = Clock::now();
    const double limit = opt().timeout_s;
    for (;;) {
      if (work->isCompleted()) break;
      if (auto a = Aborted()) {
        MarkGroupBroken();
        return *a;
      }
      if (Since(t0) > limit) {
        MarkGroupBroken();
        return Fail(Status(Code::kNetwork,
                                "rank " + std::to_string(env().rank) + ": " + what + " timed out after " +
                                    Fmt1(limit) + " s",
                                reason::kBroadcastTimeout));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (work->isSuccess()) return Status::Ok();
    MarkGroupBroken();
    std::string msg = "unknown error";
    try {
      std::rethrow_exception(work->exception());
    } catch (const std::exception& e) {
      msg = e.what();
    } catch (...) {
    }
    // A peer died: give the heartbeat monitors the chance to name it.
    auto t1 = Clock::now();
    while (Since(t1) < opt().heartbeat_timeout_s * 1.5 + 1.0) {
      if (auto a = Aborted()) return *a;
      SleepMs(20);
    }
    return Fail(Status(Code::kNetwork, "rank " + std::to_string(env().rank) + ": " + what + " failed: " + msg,
                            reason::kBroadcastFailed));
  }

  // Broadcasts n bytes in place from leader `root` (Job::Broadcast).
  Status Broadcast(uint8_t* data, uint64_t n, int root, const std::string& what) {
    std::vector<at::Tensor> t{at::from_blob(data, {static_cast<int64_t>(n)}, at::TensorOptions().dtype(at::kByte))};
    c10d::BroadcastOptions bo;
    bo.rootRank = root;
    bo.timeout = Ms(opt_.timeout_s);
    c10::intrusive_ptr<c10d::Work> work;
    try {
      work = pg_->broadcast(t, bo);
    } catch (const std::exception& e) {
      MarkGroupBroken();
      return Fail(Status(Code::kNetwork, "rank " + std::to_string(env_.rank) + ": " + what + " failed: " + e.what(),
                         reason::kBroadcastFailed));
    }
    return WaitWork(work, what);
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
              reason::kStoreLost);
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
          Status st = internal::ErrorFromRecord(S(mon_store_->get(abort_key)), "abort");
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
                            reason::kRankDied));
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
  std::unique_ptr<uint8_t[]> chunk_buffer_;  // declared first: outlives pg_ (or buried with it)
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

Job::Job(const DistOptions& o) : impl_(std::make_unique<JobImpl>(o)) {}
Job::~Job() = default;
const DistEnv& Job::env() const { return impl_->env(); }
bool Job::leader() const { return impl_->leader(); }
int Job::num_leaders() const { return impl_->num_leaders(); }
int Job::leader_index() const { return impl_->leader_index(); }
const std::vector<int>& Job::leader_ranks() const { return impl_->leader_ranks(); }
int Job::node() const { return impl_->node(); }
const DistOptions& Job::opt() const { return impl_->opt(); }
Status Job::Start() { return impl_->Start(); }
Status Job::StartGroup() { return impl_->StartGroup(); }
Status Job::Set(const std::string& key, const std::string& value) { return impl_->Set(key, value); }
Result<std::string> Job::Get(const std::string& key) { return impl_->Get(key); }
Result<bool> Job::Check(const std::vector<std::string>& keys) { return impl_->Check(keys); }
Result<int64_t> Job::Add(const std::string& key, int64_t delta) { return impl_->Add(key, delta); }
Status Job::WaitKeys(const std::vector<std::string>& keys, const std::string& what, double timeout_s) {
  return impl_->WaitKeys(keys, what, timeout_s);
}
std::optional<Status> Job::Aborted() { return impl_->Aborted(); }
Status Job::Fail(const Status& st) { return impl_->Fail(st); }
void Job::SetActivity(const std::string& a) { impl_->SetActivity(a); }
std::string Job::Activity() { return impl_->Activity(); }
void Job::CountChunk() { impl_->CountChunk(); }
Status Job::Barrier(const std::string& name) { return impl_->Barrier(name); }
void Job::Shutdown(bool ok) { impl_->Shutdown(ok); }
uint8_t* Job::ChunkBuffer() { return impl_->ChunkBuffer(); }
Status Job::Broadcast(uint8_t* data, uint64_t n, int root, const std::string& what) {
  return impl_->Broadcast(data, n, root, what);
}

}  // namespace hubload::distributed
