// Internal (loader/distributed): the plan every rank agrees on before bytes
// move, and the prefetch transfer (owners download, leaders broadcast what
// their nodes lack). Torch-free: the broadcast goes through Job.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "hubload/cache.h"
#include "hubload/distributed.h"
#include "hubload/hub.h"
#include "loader/distributed/job.h"

namespace hubload::distributed {

struct PlanFile {
  std::string path, etag;
  uint64_t size = 0;
  int owner = -1;  // leader index; -1 = every node holds it
};

/// What a multi-rank load adds to the plan (empty for a prefetch).
struct LoadExtra {
  std::vector<std::string> shards;  // in load order
  std::string index_file, weights_file;
  std::vector<std::string> warnings;
};

struct Plan {
  std::string commit;
  std::vector<PlanFile> files;
  LoadExtra extra;
};

/// What rank 0 lists: the files and, for a load, the weights.
using Lister = std::function<Result<Plan>()>;

/// Rendezvous on the plan: rank 0 lists (via `lister`), every leader reports
/// what its node cache holds, rank 0 assigns owners, everyone reads the plan.
Result<Plan> AgreeOnPlan(Job& job, const RepoCache& cache, const Lister& lister);
/// Rank 0's listing for a prefetch (include/exclude patterns applied).
Result<Plan> ListForPrefetch(const HubClient& client, const PrefetchRequest& req);
/// The report's per-file part of `plan` as this rank sees it.
void FillReport(const Plan& plan, const Job& job, const RepoCache& cache, PrefetchReport* report);
/// Owners download, leaders broadcast; every node cache ends complete.
Status RunTransfer(Job& job, const HubClient& client, const PrefetchRequest& req, const Plan& plan,
                   PrefetchReport* report);
/// The store key of node `node`'s partial-file record of plan file `file`
/// (records.h PartialFileRecord).
inline std::string NodeBytesKey(int node, size_t file) {
  return "nodebytes/" + std::to_string(node) + "/" + std::to_string(file);
}
/// The key a leader sets once its node cache holds plan file `file` complete.
inline std::string NodeDoneKey(int node, size_t file) {
  return "nodedone/" + std::to_string(node) + "/" + std::to_string(file);
}
/// kInvalidArgument when the client has no cache folder.
Status CheckClient(const HubClient& client);

}  // namespace hubload::distributed
