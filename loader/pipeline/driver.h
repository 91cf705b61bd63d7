// Internal (loader/pipeline): the one fetch-and-load driver.
//
//   FetchPlan ─► ShardSource (Hub downloads in load order, or local files; a
//                producer thread) ─► per-shard byte watermark + verification
//             ─► driver (the calling thread): header as soon as its bytes land
//                (index check), each tensor as soon as its bytes land, shard end
//                once the file is verified ─► ShardSink (state dict, module,
//                device staging, rank filter, caller's callbacks)
//
// Tensors handed to a sink before their shard is verified are provisional:
// the blocking call returns OK only after every shard's size and sha256 were
// checked; a mismatch fails the whole load naming the file. A partial file is
// never rewritten in place by the downloader (a restart makes a new file), so
// a view of it never changes under a sink; if a download restarted after
// tensors were delivered from it, the delivered bytes are compared with the
// verified file before the shard ends.
//
// The first error anywhere (source, header, sink) cancels the source, stops
// the driver and is returned, annotated with repo_id / revision / file.
// Torch-free.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "hubload/hub.h"
#include "hubload/load.h"
#include "hubload/pickle.h"
#include "hubload/safetensors.h"
#include "loader/pipeline/plan.h"

namespace hubload::pipeline_internal {

class ShardState;

/// What a sink reads of one shard. Used from the driver thread only.
class ShardData {
 public:
  ShardData(ShardState* state, const PlannedShard* planned, size_t index) : state_(state), planned_(planned), index_(index) {}

  const PlannedShard& planned() const { return *planned_; }
  /// Repo-relative (Hub) or local path.
  const std::string& file() const { return planned_->file; }
  /// Position in load order.
  size_t index() const { return index_; }
  uint64_t size() const { return planned_->size; }
  /// The parsed header (safetensors shards, once OnShardStart is called).
  const safetensors::Header& header() const { return header_; }
  /// The description (pickle shards, once OnShardStart is called).
  const pickle::Checkpoint& checkpoint() const { return checkpoint_; }

  /// True when the checkpoint's metadata names `tensor` as the kept tensor of
  /// an alias ("removed": "kept", huggingface_hub save_torch_state_dict): a
  /// sink that restores aliases in OnAlias keeps what it made of it.
  bool IsAliasTarget(const std::string& tensor) const {
    return alias_targets_ && alias_targets_->count(tensor) > 0;
  }

  /// Blocks until bytes [0, end) are readable (kCancelled when the load stops).
  Status WaitFor(uint64_t end);
  /// Blocks until the file is verified.
  Status WaitVerified();
  /// pread of [offset, offset + n) (waits for the bytes first).
  Status Read(uint64_t offset, void* dst, uint64_t n);
  /// A read-only mapping of the file at its final size (the current partial
  /// file while downloading; its written bytes are valid, see driver.h).
  /// During OnTensor: a mapping of the descriptor the driver found the
  /// tensor's bytes in (as Descriptor()).
  Result<std::shared_ptr<safetensors::MappedFile>> Mapping();
  /// The descriptor the driver found the current tensor's bytes in (during
  /// OnTensor: the partial file while downloading, then the verified file),
  /// owned by the load and open until it ends: what LoadTensorFromFd takes.
  /// Outside OnTensor: the file's current descriptor (waits for a first byte).
  Result<int> Descriptor();
  /// header() over Mapping(): what LoadTensor takes.
  Result<safetensors::SafetensorsFile> File();

  // ---- driver side ----
  safetensors::Header header_;
  pickle::Checkpoint checkpoint_;
  std::shared_ptr<safetensors::MappedFile> mapping_;
  uint64_t mapping_generation_ = 0;
  int mapping_fd_ = -1;  // owned, the descriptor the mapping was made from
  int tensor_fd_ = -1;   // during OnTensor: the descriptor the driver checked (not owned)
  uint64_t tensor_generation_ = 0;  // and its generation (ShardState::WaitFor)
  const std::set<std::string>* alias_targets_ = nullptr;

 private:
  ShardState* state_;
  const PlannedShard* planned_;
  size_t index_;
};

/// Where the tensors go. The driver calls a sink from one thread, never
/// concurrently: OnShardStart, then OnTensor for each tensor in file order (or
/// OnWholeShard for WholeShard() sinks and pickle shards), then OnShardEnd
/// once the file is verified; shards one after the other, earliest readable
/// first; then OnAlias for each alias of the checkpoint; Finish at the end.
class ShardSink {
 public:
  virtual ~ShardSink() = default;
  /// true: the sink reads each shard itself in OnWholeShard (blocking reads
  /// through ShardData, so it still overlaps the download) instead of OnTensor.
  virtual bool WholeShard() const { return false; }
  virtual Status OnShardStart(ShardData& shard) { return Status::Ok(); }
  /// `record` is pre-filled (name, file, source dtype, shape, bytes as stored,
  /// device "cpu"); the sink updates what it changed (dtype, bytes, device,
  /// digests).
  virtual Status OnTensor(ShardData& shard, const safetensors::TensorInfo& tensor, TensorRecord* record) {
    return Status::Ok();
  }
  /// Whole-shard sinks, and every sink for pickle shards: `records` is
  /// pre-filled (header order; for pickle shards the description's order,
  /// after the driver checked it against the index). The default refuses
  /// pickle shards (PickleUnsupported).
  virtual Status OnWholeShard(ShardData& shard, std::vector<TensorRecord>* records);
  virtual Status OnShardEnd(ShardData& shard) { return Status::Ok(); }
  /// After every shard, once per entry of info->aliases: the checkpoint
  /// dropped `removed` as a duplicate of `kept` (huggingface_hub
  /// save_torch_state_dict metadata); the sink delivers `removed` with the
  /// value it made of `kept` (kept while ShardData::IsAliasTarget said so),
  /// as transformers restores tied weights. Every path restores aliases here.
  virtual Status OnAlias(const std::string& removed, const std::string& kept) { return Status::Ok(); }
  /// After every shard: `info` has the aliases and every record.
  virtual Status Finish(PretrainedInfo* info) { return Status::Ok(); }
};

/// What a source reports; implemented by the driver. Thread-safe.
class ShardEvents {
 public:
  virtual ~ShardEvents() = default;
  /// Bytes [0, contiguous) of `file` are readable through `fd` (dup'ed by the callee).
  virtual void Bytes(const std::string& file, int fd, uint64_t generation, uint64_t contiguous) = 0;
  /// `file` is complete and verified at `local_path`. May block (backpressure).
  virtual void Done(const std::string& file, const std::string& local_path) = 0;
  virtual void Progress(uint64_t done, uint64_t total) = 0;
  /// Per-file download progress (bytes done, size; 0 when unknown).
  virtual void FileProgress(const std::string& file, uint64_t done, uint64_t total) {}
  /// Set when the load stops; sources poll it.
  virtual const std::atomic<bool>* cancel_flag() const = 0;
};

/// Produces the shards' bytes; Run is called on the producer thread.
class ShardSource {
 public:
  virtual ~ShardSource() = default;
  virtual Status Run(ShardEvents& events) = 0;
};

/// Local files, in load order (no network).
std::unique_ptr<ShardSource> MakeLocalSource(const FetchPlan& plan);
/// HubClient::DownloadFiles of the plan's shards at info.commit, in load order.
std::unique_ptr<ShardSource> MakeHubSource(const HubClient& client, const PretrainedRequest& req,
                                           const PretrainedInfo& info, const FetchPlan& plan);

struct DriverCallbacks {
  /// A shard was verified (or found cached), from the producer thread.
  std::function<void(const std::string& file)> on_file_downloaded;
  /// Aggregate download progress in bytes, from producer threads.
  std::function<void(uint64_t done, uint64_t total)> on_progress;
  /// Per-file download progress, from producer threads.
  std::function<void(const std::string& file, uint64_t done, uint64_t total)> on_file_progress;
  /// Every tensor of `file` reached the sink, from the loader thread.
  std::function<void(const std::string& file)> on_shard_loaded;
};

/// Runs `source` into `sink` for `plan`; fills info->tensors, load_order,
/// num_tensors, aliases, timings (all but plan_s; t0 = the call's start).
Status RunDriver(ShardSource& source, const FetchPlan& plan, const PretrainedRequest& req, ShardSink& sink,
                 const DriverCallbacks& cb, std::chrono::steady_clock::time_point t0, PretrainedInfo* info);

/// Plans and runs a whole load (the common entry of every path): CheckRequest,
/// MakeFetchPlan, optional ReadShardHeaders, `before_run` (device placement
/// hooks in here, and may stop early by returning false in *proceed), the
/// source, RunDriver. Errors are annotated with repo_id / revision / file.
struct LoadHooks {
  bool read_headers = false;
  bool allow_pickle = false;
  /// Called after planning; may fill `info` and set *proceed = false (plan only).
  std::function<Status(FetchPlan& plan, PretrainedInfo* info, bool* proceed)> before_run;
  /// Replaces the Hub / local source (distributed loads).
  std::function<std::unique_ptr<ShardSource>(const FetchPlan& plan, const PretrainedInfo& info)> make_source;
  DriverCallbacks callbacks;
};
Result<PretrainedInfo> RunLoad(const HubClient* client, const PretrainedRequest& req, ShardSink& sink,
                               const LoadHooks& hooks);

}  // namespace hubload::pipeline_internal
