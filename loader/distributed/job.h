// Internal (loader/distributed): the job every distributed call runs in —
// store clients, heartbeat/monitor thread, topology, abort protocol and the
// leaders' byte broadcast — behind a torch-free interface. Only job.cc
// includes c10d (TCPStore, ProcessGroupGloo).
// Thread safety: Aborted, Fail, SetActivity, Activity, CountChunk may be
// called from any thread; the rest from the job's calling thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hubload/distributed.h"

namespace hubload::distributed {

using Clock = std::chrono::steady_clock;
inline double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
inline void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
inline std::string Fmt1(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

class JobImpl;

/// One distributed job (include/hubload/distributed.h describes the protocol).
class Job {
 public:
  explicit Job(const DistOptions& o);
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  const DistEnv& env() const;
  /// LOCAL_RANK 0 of its node.
  bool leader() const;
  int num_leaders() const;
  /// This rank's index among the leaders (-1 for non-leaders).
  int leader_index() const;
  const std::vector<int>& leader_ranks() const;
  int node() const;
  const DistOptions& opt() const;

  /// Validates the options, rendezvous with the store, topology, heartbeats.
  Status Start();
  /// The leaders' process group (Gloo).
  Status StartGroup();
  /// Store calls; every failure is a Status (the store lost names the job).
  Status Set(const std::string& key, const std::string& value);
  Result<std::string> Get(const std::string& key);
  Result<bool> Check(const std::vector<std::string>& keys);
  Result<int64_t> Add(const std::string& key, int64_t delta);
  /// Waits for every key (timeout_s seconds), or for the job to abort.
  Status WaitKeys(const std::vector<std::string>& keys, const std::string& what, double timeout_s);
  /// The job's first error once any rank failed.
  std::optional<Status> Aborted();
  /// Publishes `st` as the job's error (the first one wins) and returns it.
  Status Fail(const Status& st);
  /// What this rank is doing, for the heartbeat and for peers' errors.
  void SetActivity(const std::string& a);
  std::string Activity();
  /// Counts one broadcast chunk (fault-injection hook).
  void CountChunk();
  Status Barrier(const std::string& name);
  /// Ends the job (ok: clean shutdown; else the process group is never joined).
  void Shutdown(bool ok);
  /// The buffer broadcasts go through: opt().chunk_bytes bytes, owned by the
  /// job and kept alive with a broken process group (an abandoned broadcast's
  /// Gloo threads may still use it). Not thread-safe; leaders only.
  uint8_t* ChunkBuffer();
  /// Leaders: broadcasts `n` bytes at `data` (within ChunkBuffer()) from leader
  /// `root` to every leader (in place), within opt().timeout_s; failures name `what`.
  Status Broadcast(uint8_t* data, uint64_t n, int root, const std::string& what);

 private:
  std::unique_ptr<JobImpl> impl_;
};

}  // namespace hubload::distributed
