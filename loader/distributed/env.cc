// Job position from the environment (torchrun / Slurm / Kubernetes) and the
// owner assignment. No LibTorch here: this TU compiles in seconds.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <numeric>
#include <string>

#include "hubload/distributed.h"
#include "hubload/reasons.h"
#include "loader/distributed/plan.h"

namespace hubload::distributed {
namespace {

// The value of the first variable of `names` that is set (and its name).
bool FirstSet(std::initializer_list<const char*> names, std::string* value, std::string* which) {
  for (const char* n : names) {
    const char* v = std::getenv(n);
    if (v != nullptr) {
      *value = v;
      *which = n;
      return true;
    }
  }
  return false;
}

// Strict decimal integer in [lo, hi]. For SLURM_NTASKS_PER_NODE ("2(x3)" or
// "2,1") only the leading number is read when `leading_only`.
Status ParseInt(const std::string& var, const std::string& text, long lo, long hi, bool leading_only, long* out) {
  std::string t = text;
  if (leading_only) {
    size_t end = 0;
    while (end < t.size() && t[end] >= '0' && t[end] <= '9') ++end;
    t = t.substr(0, end);
  }
  if (t.empty() || t.size() > 18 || t.find_first_not_of("0123456789") != std::string::npos) {
    return Status(Code::kInvalidArgument, "environment variable " + var + "='" + text + "' is not a non-negative integer",
                  reason::kBadEnvironment);
  }
  long v = std::strtol(t.c_str(), nullptr, 10);
  if (v < lo || v > hi) {
    return Status(Code::kInvalidArgument,
                  "environment variable " + var + "=" + text + " is out of range [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "]",
                  reason::kBadEnvironment);
  }
  *out = v;
  return Status::Ok();
}

}  // namespace

std::string DistEnv::Describe() const {
  return "rank " + std::to_string(rank) + "/" + std::to_string(world_size) + " (node " + std::to_string(Node()) +
         ", local rank " + std::to_string(local_rank) + "/" + std::to_string(local_world_size) + ")";
}

Result<DistEnv> EnvFromEnvironment() {
  DistEnv env;
  std::string v, which;
  long n = 0;
  if (!FirstSet({"MASTER_ADDR"}, &v, &which) || v.empty()) {
    return Status(Code::kInvalidArgument,
                  "environment variable MASTER_ADDR is not set (host of rank 0, as torchrun's env:// rendezvous)",
                  reason::kBadEnvironment);
  }
  env.master_addr = v;
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME")) env.gloo_socket_ifname = ifname;
  if (!FirstSet({"MASTER_PORT"}, &v, &which)) {
    return Status(Code::kInvalidArgument, "environment variable MASTER_PORT is not set (TCP port of the rendezvous store)",
                  reason::kBadEnvironment);
  }
  HUBLOAD_RETURN_IF_ERROR(ParseInt(which, v, 1, 65535, false, &n));
  env.master_port = static_cast<uint16_t>(n);
  if (!FirstSet({"WORLD_SIZE", "SLURM_NTASKS"}, &v, &which)) {
    return Status(Code::kInvalidArgument, "neither WORLD_SIZE nor SLURM_NTASKS is set (number of ranks in the job)",
                  reason::kBadEnvironment);
  }
  HUBLOAD_RETURN_IF_ERROR(ParseInt(which, v, 1, 1 << 20, false, &n));
  env.world_size = static_cast<int>(n);
  if (!FirstSet({"RANK", "SLURM_PROCID", "JOB_COMPLETION_INDEX"}, &v, &which)) {
    return Status(Code::kInvalidArgument, "none of RANK, SLURM_PROCID, JOB_COMPLETION_INDEX is set (this process's rank)",
                  reason::kBadEnvironment);
  }
  HUBLOAD_RETURN_IF_ERROR(ParseInt(which, v, 0, env.world_size - 1, false, &n));
  env.rank = static_cast<int>(n);
  if (FirstSet({"LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"}, &v, &which)) {
    HUBLOAD_RETURN_IF_ERROR(ParseInt(which, v, 1, env.world_size, which == "SLURM_NTASKS_PER_NODE", &n));
    env.local_world_size = static_cast<int>(n);
  }
  if (FirstSet({"LOCAL_RANK", "SLURM_LOCALID"}, &v, &which)) {
    HUBLOAD_RETURN_IF_ERROR(ParseInt(which, v, 0, env.local_world_size - 1, false, &n));
    env.local_rank = static_cast<int>(n);
  }
  if (FirstSet({"GROUP_RANK", "SLURM_NODEID"}, &v, &which)) {
    HUBLOAD_RETURN_IF_ERROR(ParseInt(which, v, 0, env.world_size - 1, false, &n));
    env.node_rank = static_cast<int>(n);
  }
  HUBLOAD_RETURN_IF_ERROR(Validate(env));
  return env;
}

Status Validate(const DistEnv& e) {
  auto bad = [](const std::string& what) { return Status(Code::kInvalidArgument, "distributed job: " + what,
                                                         reason::kBadTopology); };
  if (e.master_addr.empty()) return bad("master_addr (MASTER_ADDR) is empty");
  if (e.master_port == 0) return bad("master_port (MASTER_PORT) must be 1..65535, got 0");
  if (e.world_size < 1) return bad("world_size must be >= 1, got " + std::to_string(e.world_size));
  if (e.rank < 0 || e.rank >= e.world_size)
    return bad("rank " + std::to_string(e.rank) + " is outside [0, world_size=" + std::to_string(e.world_size) + ")");
  if (e.local_world_size < 1 || e.local_world_size > e.world_size)
    return bad("local_world_size " + std::to_string(e.local_world_size) + " is outside [1, world_size=" +
               std::to_string(e.world_size) + "]");
  if (e.local_rank < 0 || e.local_rank >= e.local_world_size)
    return bad("local_rank " + std::to_string(e.local_rank) + " is outside [0, local_world_size=" +
               std::to_string(e.local_world_size) + ")");
  if (e.node_rank < -1 || e.node_rank >= e.world_size)
    return bad("node_rank " + std::to_string(e.node_rank) + " is outside [0, world_size)");
  return Status::Ok();
}

namespace internal {

std::vector<int> AssignOwners(const std::vector<PlanInput>& files, int num_leaders, DistOptions::Assignment assignment) {
  std::vector<int> owner(files.size(), -1);
  if (num_leaders <= 0) return owner;
  std::vector<uint64_t> load(static_cast<size_t>(num_leaders), 0);
  auto least_loaded = [&](const std::vector<int>& candidates) {
    int best = candidates.front();
    for (int c : candidates)
      if (load[c] < load[best]) best = c;
    return best;
  };
  std::vector<size_t> need;  // files no leader holds
  for (size_t i = 0; i < files.size(); ++i) {
    std::vector<int> holders;
    bool all = true;
    for (int l = 0; l < num_leaders; ++l) {
      bool h = l < static_cast<int>(files[i].have.size()) && files[i].have[l];
      if (h) holders.push_back(l);
      all = all && h;
    }
    if (all) continue;
    if (!holders.empty()) {
      owner[i] = least_loaded(holders);
      load[owner[i]] += files[i].size;
    } else {
      need.push_back(i);
    }
  }
  if (assignment == DistOptions::Assignment::kRoundRobin) {
    int next = 0;
    for (size_t i : need) {
      owner[i] = next;
      next = (next + 1) % num_leaders;
    }
    return owner;
  }
  std::stable_sort(need.begin(), need.end(), [&](size_t a, size_t b) { return files[a].size > files[b].size; });
  std::vector<int> all(static_cast<size_t>(num_leaders));
  std::iota(all.begin(), all.end(), 0);
  for (size_t i : need) {
    owner[i] = least_loaded(all);
    load[owner[i]] += files[i].size;
  }
  return owner;
}

}  // namespace internal
}  // namespace hubload::distributed
