// Internal (loader/pipeline): the one fetch plan of every load path.
//
// A plan answers, before any weights byte is fetched: which files hold the
// weights of `PretrainedRequest` (listing or local folder -> subfolder /
// variant / index resolution), in which order they are loaded (index order),
// that every shard the index names exists and that variant and non-variant
// shards are not mixed (B23, B25), which files the index does not name
// (warning), and — when placement needs them — every shard's header.
// Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hubload/hub.h"
#include "hubload/load.h"
#include "hubload/pickle.h"
#include "hubload/resolve.h"
#include "hubload/safetensors.h"

namespace hubload::pipeline_internal {

/// How a weights file is read.
enum class ShardFormat { kSafetensors, kPickle };

struct PlannedShard {
  std::string file;        // repo-relative (Hub) or local path
  std::string local_path;  // snapshot pointer (Hub) or local path
  uint64_t size = 0;       // bytes (listing size, or the local file's)
  ShardFormat format = ShardFormat::kSafetensors;
  /// Filled by ReadShardHeaders (device placement plans from it).
  std::optional<safetensors::Header> header;
  /// Pickle shards of a local checkpoint: their description, filled by
  /// ReadShardHeaders (a Hub pickle shard is only described once downloaded).
  std::optional<pickle::Checkpoint> description;
};

struct FetchPlan {
  bool local = false;
  bool sharded = false;
  safetensors::Index index;  // when sharded
  std::vector<PlannedShard> shards;  // load order (index order) or the single file
};

/// True when `req` names a local path (PretrainedRequest::Source rules).
bool IsLocalRequest(const PretrainedRequest& req);

/// The ResolveOptions of a request.
ResolveOptions ToResolveOptions(const PretrainedRequest& req);

/// Validates the request fields every path shares (non-empty repo_id, a valid
/// repo id when not local, max_shards_in_flight >= 1) and fills
/// info->repo_id / revision.
Status CheckRequest(const PretrainedRequest& req, bool local, PretrainedInfo* info);
/// The same checks without filling an info (for callers that only validate,
/// such as the distributed Load before its job starts).
Status CheckRequest(const PretrainedRequest& req, bool local);

/// Lists the repo (or folder), resolves the weights, reads the index and
/// checks its shards against the listing. Fills `info` (source, commit, root,
/// resolved, index_file, files, local_files, weights_bytes, warnings).
/// Pickle weights are refused here (reason PickleUnsupported) unless
/// `allow_pickle` (the pickle loader handles them). `listing` (Hub requests,
/// may be null): the caller's HubClient::ListFiles of req.revision, used
/// instead of listing again (a caller that needs the listing itself lists
/// once: with the Hub down that is one warning and one metadata timeout).
Result<FetchPlan> MakeFetchPlan(const HubClient* client, const PretrainedRequest& req, bool allow_pickle,
                                PretrainedInfo* info, const RepoListing* listing = nullptr);

/// Reads every safetensors shard's header without downloading the shard (two
/// ranged reads per Hub file, two preads per local file) and checks it
/// against the index.
Status ReadShardHeaders(const HubClient* client, const PretrainedRequest& req, const PretrainedInfo& info,
                        FetchPlan* plan);

/// The refusal of pickle weights, the same on every path.
Status PickleUnsupported(const std::string& file, const std::string& repo_id, const std::string& revision);

/// Names of files of the weights' shard family (`<name>[.V]-NNNNN-of-NNNNN.safetensors`
/// in the same folder) that the index does not name.
std::vector<std::string> UnnamedShards(const ResolvedWeights& resolved, const std::vector<std::string>& listing,
                                       const std::vector<std::string>& named);

/// "org/m@main model.safetensors" (Hub) or the local path: how messages name a file.
std::string Where(const PretrainedInfo& info, const std::string& file);

}  // namespace hubload::pipeline_internal
