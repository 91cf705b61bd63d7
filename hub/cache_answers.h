// What the cache can answer when the Hub cannot (huggingface_hub's fallback
// to the cache in hf_hub_download and snapshot_download): the commit a ref
// holds, the cached snapshot of a revision, and the one warning or error
// text each path gives. Reads the cache only; never makes a request.
#pragma once

#include <optional>
#include <string>

#include "hubload/cache.h"
#include "hubload/status.h"

namespace hubload::hub_internal {

/// " (the ref file refs/<rev> is corrupt: ...)" when a corrupt ref file is
/// why `rev` is unknown to the cache, else "". Never fails.
std::string RefProblem(const RepoCache& rc, const std::string& rev);

/// Online: the commit refs/<rev> holds (`rev` itself when it is a commit).
/// A corrupt ref is ignored with one warning naming the file; it is
/// rewritten when the Hub answers. nullopt: no usable ref.
std::optional<std::string> LocalCommitOnline(const RepoCache& rc, const std::string& rev);

/// The commit whose snapshot folder the cache holds for `rev`; `online`: a
/// corrupt ref is warned about (LocalCommitOnline). nullopt without a cache
/// folder, a ref or a snapshot folder.
std::optional<std::string> CachedSnapshot(const RepoCache& rc, const std::string& rev, bool online = false);

/// The one warning of a call answered from the cached snapshot `commit` of
/// `rev` because of `why`, naming the commit.
std::string UnreachableWarning(const RepoCache& rc, const std::string& rev, const std::string& commit,
                               const Status& why);

/// `s` as it is, unless the Hub was unreachable (kNetwork) and the cache had
/// nothing to answer instead: then its message also says that `what` ("'f'",
/// "a complete snapshot") of the repo at `rev` is not in the local cache, as
/// huggingface_hub's LocalEntryNotFoundError does. Code, reason and context kept.
Status NotCachedEither(const RepoCache& rc, const std::string& rev, const std::string& what, Status s);

}  // namespace hubload::hub_internal
