// Internal, torch-free parts of the distributed prefetch: the assignment of
// files to owner leaders (unit-tested without a job).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hubload/distributed.h"

namespace hubload::distributed::internal {

struct PlanInput {
  uint64_t size = 0;
  /// have[l]: leader l's node cache already holds the blob.
  std::vector<bool> have;
};

/// Owner leader index for each file; -1 when every leader already has it.
/// Files some leader holds go to the least-loaded leader among those holding
/// it (no download). The others: kBySize = largest file first to the leader
/// with the fewest bytes assigned so far (ties: lowest index); kRoundRobin =
/// in input order, leader 0, 1, 2, ... Deterministic.
std::vector<int> AssignOwners(const std::vector<PlanInput>& files, int num_leaders,
                              DistOptions::Assignment assignment);

}  // namespace hubload::distributed::internal
