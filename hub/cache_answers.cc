// What the cache can answer when the Hub cannot (hub/cache_answers.h).
#include "hub/cache_answers.h"

#include <spdlog/spdlog.h>

#include <filesystem>

namespace hubload::hub_internal {

std::string RefProblem(const RepoCache& rc, const std::string& rev) {
  if (IsCommitHash(rev)) return {};
  auto r = rc.ReadRefChecked(rev);
  return r.ok() ? std::string() : " (" + r.status().message() + ")";
}

std::optional<std::string> LocalCommitOnline(const RepoCache& rc, const std::string& rev) {
  if (IsCommitHash(rev)) return rev;
  auto r = rc.ReadRefChecked(rev);
  if (r.ok()) return *r;
  spdlog::warn("{}; ignoring it (it is written again from the Hub's answer)", r.status().message());
  return std::nullopt;
}

std::optional<std::string> CachedSnapshot(const RepoCache& rc, const std::string& rev, bool online) {
  if (rc.cache_dir().empty()) return std::nullopt;
  auto c = online ? LocalCommitOnline(rc, rev) : rc.LocalCommit(rev);
  std::error_code ec;
  if (!c || !std::filesystem::is_directory(rc.SnapshotDir(*c), ec)) return std::nullopt;
  return c;
}

std::string UnreachableWarning(const RepoCache& rc, const std::string& rev, const std::string& commit,
                               const Status& why) {
  return rc.repo_id() + ": the Hub could not be reached (" + why.message() + "); using the cached snapshot " +
         commit + " of revision '" + rev + "'";
}

Status NotCachedEither(const RepoCache& rc, const std::string& rev, const std::string& what, Status s) {
  if (s.code() != Code::kNetwork || rc.cache_dir().empty()) return s;
  return Status(s.code(),
                s.message() + "; and " + what + " of " + rc.repo_id() + " at revision '" + rev +
                    "' is not in the local cache " + rc.cache_dir(),
                s.reason(), s.context());
}

}  // namespace hubload::hub_internal
