// Private to hub/: branches, tags, refs and commits over the one Hub session
// (huggingface_hub HfApi create_branch / delete_branch / create_tag /
// delete_tag / list_repo_refs / list_repo_commits). The public contract is in
// include/hubload/hub.h (HubClient); these are its bodies.
// Thread safety: pure functions of an immutable Session.
#pragma once

#include <string>
#include <vector>

#include "hub/session.h"

namespace hubload::hub_internal {

Status CreateBranch(const Session& s, const std::string& repo_id, const std::string& branch,
                    const CreateBranchOptions& o);
Status DeleteBranch(const Session& s, const std::string& repo_id, const std::string& branch, RepoType t);
Status CreateTag(const Session& s, const std::string& repo_id, const std::string& tag, const CreateTagOptions& o);
Status DeleteTag(const Session& s, const std::string& repo_id, const std::string& tag, RepoType t);
Result<RepoRefs> ListRepoRefs(const Session& s, const std::string& repo_id, RepoType t, bool include_pull_requests);
Result<std::vector<GitCommitInfo>> ListRepoCommits(const Session& s, const std::string& repo_id,
                                                   const std::string& revision, RepoType t);

}  // namespace hubload::hub_internal
