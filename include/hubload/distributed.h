// hubload/distributed.h: one download per job — cluster prefetch and
// multi-rank loading on LibTorch's torch.distributed engine (c10d).
//
// A job of WORLD_SIZE ranks spread over nodes (LOCAL_WORLD_SIZE ranks per
// node, one cache folder per node) rendezvouses on a c10d::TCPStore hosted by
// rank 0 at MASTER_ADDR:MASTER_PORT (the torchrun / torch.distributed
// `env://` convention). The first rank of each node (LOCAL_RANK 0) is that
// node's *leader*; the leaders form a c10d::ProcessGroupGloo (CPU, TCP).
//
//  1. rank 0 resolves the revision to a commit and lists the repo once;
//  2. every leader reports which blobs its node cache already holds;
//  3. rank 0 assigns each file that some node lacks to one *owner* leader: a
//     leader that already holds it, else by size (largest first to the least
//     loaded leader) or round-robin — so several nodes share the uplink work;
//  4. owners download their files from the Hub (HubClient, concurrently)
//     while the leaders broadcast finished files, in plan order, over the
//     process group in chunks of `chunk_bytes`; a receiving leader writes
//     them into its node cache through the normal cache path: the blob's
//     FileLock, BlobWriter (blobs/<etag>.incomplete, size and — for LFS
//     blobs — sha256 verified before the rename to blobs/<etag>; for regular
//     files the git blob sha1 is verified too), then the snapshot symlink and
//     refs/<revision>;
//  5. the other ranks of a node never download or receive anything: they wait
//     for their leader's per-file completion keys in the store.
// So the Hub sends each file's bytes once per job (nothing at all for files
// every node already holds: a rerun resumes from what each cache holds).
//
// Failure: each rank publishes a heartbeat and its current activity in the
// store and watches the next rank's heartbeat. A rank that dies or hangs (no
// heartbeat for `heartbeat_timeout_s`), a failed or timed-out broadcast, a
// lost store, or an error on any rank (download, integrity, disk) ends the job
// on every rank with one error: the first error raised anywhere in the job
// (same Code and reason on every rank; the message names the rank and the
// file), e.g. Code::kNetwork with reason "RankDied" (no heartbeat),
// "StoreLost" (rank 0's store unreachable), "BroadcastTimeout" or
// "BroadcastFailed" (a chunk did not arrive in time / the collective broke). A
// receiving cache never holds a partial blob under its final name: partials
// stay as blobs/<etag>.incomplete and are restarted by the rerun.
//
// Thread safety: every function here is a collective: call it from one thread
// per rank, with the same request on every rank of the job, one job at a time
// per (MASTER_ADDR, MASTER_PORT). The callbacks run on the calling thread.
// GPU (NCCL) process groups are not used: Debian's LibTorch is CPU-only, and
// Gloo over TCP is what moves file bytes between nodes here.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hubload/cache.h"
#include "hubload/hub.h"
#include "hubload/load.h"
#include "hubload/resolve.h"
#include "hubload/status.h"

namespace at {
class Tensor;
}  // namespace at

namespace hubload::distributed {

/// Where this process sits in the job. Same meaning as torchrun's variables.
struct DistEnv {
  std::string master_addr;    // host of the rendezvous store (rank 0's node)
  uint16_t master_port = 0;   // TCP port of the store (1..65535)
  int rank = 0;               // 0 .. world_size-1
  int world_size = 1;         // ranks in the job
  int local_rank = 0;         // 0 .. local_world_size-1 (rank on its node)
  int local_world_size = 1;   // ranks on this node
  /// Node index (torchrun GROUP_RANK, Slurm SLURM_NODEID); -1 = derived as
  /// rank / local_world_size (torchrun and srun --distribution=block place
  /// ranks of a node contiguously).
  int node_rank = -1;
  /// Network interface of the leaders' Gloo group (GLOO_SOCKET_IFNAME, as
  /// torch.distributed); "" = loopback when master_addr is local, else Gloo's
  /// default device.
  std::string gloo_socket_ifname;

  /// node_rank when set, else rank / local_world_size.
  int Node() const { return node_rank >= 0 ? node_rank : rank / local_world_size; }
  /// "rank 2/4 (node 1, local rank 0/2)".
  std::string Describe() const;
};

/// Reads the job position from environment variables, first match wins:
///  - MASTER_ADDR, MASTER_PORT (required; no Slurm/K8s fallback for these);
///  - RANK, else SLURM_PROCID, else JOB_COMPLETION_INDEX (Kubernetes indexed Job);
///  - WORLD_SIZE, else SLURM_NTASKS;
///  - LOCAL_RANK, else SLURM_LOCALID, else 0;
///  - LOCAL_WORLD_SIZE, else SLURM_NTASKS_PER_NODE (first number of "2(x3)"), else 1;
///  - GROUP_RANK, else SLURM_NODEID, else -1 (derived).
///  - GLOO_SOCKET_IFNAME into gloo_socket_ifname (empty when unset).
/// Errors: kInvalidArgument naming the variable and the rule (missing, not a
/// number, out of range, rank >= world size ...). See Validate().
Result<DistEnv> EnvFromEnvironment();

/// Checks ranges: world_size >= 1, 0 <= rank < world_size, 1 <= local_world_size
/// <= world_size, 0 <= local_rank < local_world_size, port 1..65535, master_addr
/// non-empty. kInvalidArgument naming the field and value.
Status Validate(const DistEnv& env);

/// Where this node's prefetch is, for progress displays (DistOptions::on_progress).
struct DistProgress {
  std::string path;              // path in repo of the file that advanced
  uint64_t file_bytes_done = 0;  // its bytes in this node's cache (downloaded or received) so far
  uint64_t file_bytes_total = 0; // its size
  /// Bytes of the job's transferred files (those some node lacked) that this
  /// node's cache holds so far, and their total size (the same on every rank).
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
  size_t files_done = 0;  // of those files, complete in this node's cache
  size_t files_total = 0;
};

struct DistOptions {
  DistEnv env;
  /// Longest wait for the rendezvous, a store key, one broadcast chunk or the
  /// final barrier, seconds (the c10d store and process group timeout).
  double timeout_s = 600;
  /// A rank whose heartbeat has not advanced for this long is declared dead
  /// (seconds; heartbeats are written every heartbeat_timeout_s / 6).
  double heartbeat_timeout_s = 30;
  /// Bytes per broadcast chunk (memory: one buffer of this size per leader).
  /// 1 KiB .. 1 GiB.
  uint64_t chunk_bytes = 16ull << 20;
  /// How files some node lacks are given to owner leaders.
  enum class Assignment { kBySize, kRoundRobin } assignment = Assignment::kBySize;
  /// Namespace of this job's keys in the store (several jobs may share one
  /// store only with different prefixes).
  std::string store_prefix = "hubload";
  /// Fault injection for tests: after this many broadcast chunks sent or
  /// received, this rank sends itself `fault_signal` (SIGKILL: a crashed
  /// node; SIGSTOP: a hung one). -1 = off. The CLI reads them from
  /// $HUBLOAD_DIST_FAULT_KILL_AFTER_CHUNKS and $HUBLOAD_DIST_FAULT_SIGNAL
  /// ("KILL" or "STOP").
  int64_t fault_kill_after_chunks = -1;
  int fault_signal = 9;  // SIGKILL
  /// Progress of this node's cache (optional). Called on node leaders only
  /// (LOCAL_RANK 0: the ranks that move bytes), from the download workers
  /// (as DownloadCallbacks::on_file_progress, about 10 times a second) and the
  /// broadcast loop (once per chunk received), and once per file complete;
  /// calls are serialised by a mutex. Keep it short: it runs inside the transfer.
  std::function<void(const DistProgress&)> on_progress;
};

/// What to prefetch: huggingface_hub snapshot_download's selection.
struct PrefetchRequest {
  std::string repo_id;
  std::string revision = "main";
  RepoType repo_type = RepoType::kModel;
  /// fnmatch patterns as SnapshotRequest (empty allow = every file).
  std::vector<std::string> allow_patterns;
  std::vector<std::string> ignore_patterns;
};

/// One file of the job plan, as seen from this rank.
struct PlannedFile {
  std::string path;       // path in repo
  uint64_t size = 0;      // bytes
  std::string etag;       // blob name (sha256 for LFS files, git sha1 otherwise)
  int owner_rank = -1;    // global rank of the leader that fetched/sent it; -1 = every node had it
  bool downloaded_here = false;  // this rank fetched it from the Hub
  bool received_here = false;    // this rank wrote it from broadcast bytes
};

struct PrefetchReport {
  std::string commit;        // 40-hex commit every rank used
  std::string snapshot_dir;  // this node's snapshots/<commit>
  std::vector<PlannedFile> files;  // plan order
  uint64_t bytes_downloaded = 0;   // by this rank, from the Hub (file sizes)
  uint64_t bytes_sent = 0;         // broadcast by this rank (as root)
  uint64_t bytes_received = 0;     // written into this node's cache from broadcasts
  bool leader = false;             // this rank is its node's leader
};

/// Collective prefetch (see top of file). Every rank returns after every rank
/// of the job has its files in its node cache, or with the job's error.
/// `client` supplies endpoint, token, cache folder (this node's) and the
/// download settings; its cache_dir must be the node's shared cache.
/// Errors: those of HubClient::ResolveCommit/ListFiles/DownloadFiles and the
/// cache (raised on the rank that hit them and reported to all), plus
/// kInvalidArgument (bad env/options, inconsistent topology: two leaders for a
/// node, a node without LOCAL_RANK 0), kNetwork (RankDied, StoreLost,
/// BroadcastTimeout, BroadcastFailed, Rendezvous, Timeout), kCorruptDownload
/// (received bytes fail the size/hash check). Every rank returns the job's
/// first error, whichever rank raised it.
Result<PrefetchReport> Prefetch(const HubClient& client, const PrefetchRequest& request, const DistOptions& options);

struct LoadRequest {
  std::string repo_id;
  std::string revision = "main";
  RepoType repo_type = RepoType::kModel;
  /// Which weights (subfolder, variant, convention): loading-semantics.md A.
  ResolveOptions resolve;
  /// dtype, keep_in_fp32, force_copy (load.h), as for a single-process load.
  LoadOptions load;
  /// Tensors this rank needs (e.g. its pipeline stage); null = all.
  std::function<bool(const std::string& tensor_name)> filter;
  /// Fill each TensorRecord's sha256 and sum (load.h).
  bool digests = false;
  /// The index as the authority over its shards: PretrainedRequest::lenient_index.
  bool lenient_index = false;
};

struct LoadResult {
  PrefetchReport prefetch;  // the weights files (index + shards, or the single file)
  /// What every load path reports (load.h), for this rank: files, load order,
  /// one record per tensor this rank took (the filter's others are left out),
  /// warnings, timings; extra.rank / world_size / bytes_downloaded /
  /// bytes_received for LoadReportJson.
  PretrainedInfo info;
};

/// Called once per delivered tensor, on the calling thread, in load order, as
/// soon as the tensor's bytes are in this node's cache: the node's leader
/// publishes in the job's store how far the partial file it is writing (its
/// download, or the broadcast it receives) holds the shard, and every rank of
/// the node reads the tensor from that file, as the single-process pipeline
/// does (pipeline.h). Tensors delivered before their shard is verified are
/// provisional: Load returns OK only once every shard is verified, and a shard
/// whose sha256 does not match fails the job naming the file. The tensor is a
/// CPU tensor; zero-copy views of the mapped shard are read-only (see
/// torch_loader.h LoadTensor). Return a non-OK Status to stop the job (it is
/// reported to every rank).
using TensorCallback =
    std::function<Status(const std::string& name, const at::Tensor& tensor, const std::string& shard_path)>;

/// Collective load: rank 0 makes the fetch plan (the same plan as a
/// single-process load: resolution, index, shard checks, unnamed-shard
/// warnings, pickle refusal), the job prefetches the weights files as
/// Prefetch does, and every rank runs the same load driver over its node
/// cache (index check, aliases, report), handing this rank the tensors
/// passing `filter` as their bytes land in the node cache, then each alias
/// (the removed name with the kept tensor, `shard_path` the kept tensor's)
/// whose both names pass `filter`.
/// Memory: one shard mapped at a time by this rank plus what the callback
/// keeps, and one broadcast chunk per leader. `on_tensor` may be null (only
/// digests/counts are produced). Errors: those of Prefetch, ResolveWeights,
/// ShardPaths, the safetensors and torch loaders, and the callback's.
Result<LoadResult> Load(const HubClient& client, const LoadRequest& request, const DistOptions& options,
                        const TensorCallback& on_tensor);

}  // namespace hubload::distributed
