// Private to hub/: repo listings — the recursive tree API with Link
// pagination, and conversions to/from the cache's tree files.
#pragma once

#include <string>
#include <vector>

#include "cache/tree_cache.h"
#include "hub/session.h"

namespace hubload::hub_internal {

/// Every file at `commit` from GET /api/{type}s/{repo}/tree/{commit}?recursive=true,
/// following rel="next" links on the endpoint's origin. Every answer is read
/// through util::JsonIn: a wrong type is kInvalidFormat "BadJsonField" naming
/// the page URL and the field; unsafe paths are kInvalidArgument "UnsafePath".
/// `max_retries` as HttpRequest::max_retries.
Result<RepoListing> ListTree(const Session& s, RepoType t, const std::string& repo, const std::string& commit,
                             int max_retries = -1);

std::vector<RepoFile> FromTreeEntries(const std::vector<cache_internal::TreeEntry>& v);
std::vector<cache_internal::TreeEntry> ToTreeEntries(const std::vector<RepoFile>& v);

}  // namespace hubload::hub_internal
