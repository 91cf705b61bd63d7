// Internal (loader/distributed): the store records ranks write for each other
// (topology, rank 0's listing, the owner plan, the job's error record), written
// and read here only. A record comes from another process, so it is read as
// untrusted JSON (util::ParseJson + util::JsonIn): a malformed one is a Status
// naming the store key and the field, never an exception. Torch-free.
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "hubload/status.h"
#include "loader/distributed/transfer.h"

namespace hubload::distributed::internal {

/// "topo/<rank>": where a rank runs.
struct TopologyRecord {
  int node = 0;        // >= 0
  int local_rank = 0;  // >= 0
};
std::string TopologyJson(const TopologyRecord& t);
/// Errors: kInvalidFormat (BadJson / BadJsonField) naming `key` and the field
/// ("store record 'topo/2': 'node' must be an integer, got a string").
Result<TopologyRecord> ParseTopology(std::string_view text, std::string_view key);

/// "listing": rank 0's plan before owners are assigned: commit, files
/// (path, etag, size, owner >= -1) and the load's extra (all members optional).
std::string ListingJson(const Plan& plan);
/// Errors as ParseTopology, for every field of the record ("files[3].size").
Result<Plan> ParseListing(std::string_view text, std::string_view key);

/// "plan": the owner leader index of each listed file (-1 = every node has it).
std::string OwnersJson(const std::vector<int>& owners);
/// Errors as ParseTopology; also when the array does not hold `num_files`
/// entries or an owner is outside -1 .. num_leaders-1.
Result<std::vector<int>> ParseOwners(std::string_view text, std::string_view key, size_t num_files,
                                     int num_leaders);

/// "nodebytes/<node>/<file index>": a file this node's leader is still writing
/// into its node cache (a download's or a broadcast's partial file): bytes
/// [0, bytes) of the file at `path`, whose inode is (dev, ino), are written and
/// never rewritten in that file (hubload/hub.h FileBytes). The other ranks of
/// the node open `path`, check the inode, and load tensors from it before the
/// file is verified (the load fails if it is not).
struct PartialFileRecord {
  std::string path;  // absolute path in the node cache
  uint64_t dev = 0, ino = 0;
  uint64_t bytes = 0;
};
std::string PartialFileJson(const PartialFileRecord& r);
/// Errors as ParseTopology; also when `path` is empty or not absolute.
Result<PartialFileRecord> ParsePartialFile(std::string_view text, std::string_view key);

/// "abort": the first failing rank's Status (code, reason, message, file).
std::string ErrorRecordJson(int rank, const Status& st);
/// The Status the record describes. A malformed record (not JSON, a wrong
/// type, a code outside Code's range) is kInternal reason kJobFailed whose
/// message names `key`, the field and quotes the record's text.
Status ErrorFromRecord(std::string_view text, std::string_view key);

}  // namespace hubload::distributed::internal
