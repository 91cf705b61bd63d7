// Per-file preparation for the scheduler (hub/prepare.h).
#include "hub/prepare.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "cache/local_dir.h"
#include "hub/http_parse.h"
#include "hubload/reasons.h"

namespace hubload::hub_internal {
namespace fs = std::filesystem;

namespace {

// A file found in the cache (or local folder); `size` < 0 = not known from
// metadata: the file's own size, so its bytes count as done in the progress.
PreparedFile Cached(std::string local, int64_t size) {
  PreparedFile p;
  if (size < 0) {
    std::error_code ec;
    const auto n = fs::file_size(local, ec);
    if (!ec) size = static_cast<int64_t>(n);
  }
  p.local_path = std::move(local);
  if (size > 0) {
    p.cached_bytes = static_cast<uint64_t>(size);
    p.size = static_cast<uint64_t>(size);
  }
  return p;
}

}  // namespace

Result<PreparedFile> PrepareBlob(const Session& s, const RepoCache& rc, const FileMeta& m, const std::string& path,
                                 const std::string& rev_for_url, bool force) {
  const cache_internal::BlobStore store(rc, s.opt.lock, s.opt.use_symlinks);
  const cache_internal::BlobId id{m.etag, m.size};
  if (!force) {
    HUBLOAD_ASSIGN_OR_RETURN(auto local, store.Cached(m.commit, path, id));
    if (local) return Cached(*local, m.size);
  }
  HUBLOAD_ASSIGN_OR_RETURN(FileLock lock, store.Lock(m.etag, s.opt.lock_timeout_s));
  if (!force && store.Has(id)) {  // another process finished it meanwhile
    HUBLOAD_ASSIGN_OR_RETURN(std::string local, store.Link(m.commit, path, m.etag, /*new_blob=*/false));
    return Cached(local, m.size);
  }
  PreparedFile p;
  if (m.size >= 0) p.size = static_cast<uint64_t>(m.size);
  FetchTarget t;
  t.path_in_repo = path;
  t.single_partial = rc.IncompletePath(m.etag);
  t.ranged_partial = rc.RangedIncompletePath(m.etag);
  t.final_path = rc.BlobPath(m.etag);
  t.label = "blob " + m.etag;
  t.dir = rc.repo_dir() + "/blobs";
  t.url = m.location.empty() ? s.ResolveUrlFor(rc.repo_type(), rc.repo_id(), rev_for_url, path) : m.location;
  t.signed_url = MakeSignedUrl(s, rc.repo_type(), rc.repo_id(), path, m);
  t.meta = m;
  t.id = id;
  p.target = std::move(t);
  p.lock.emplace(std::move(lock));
  // A blob this call downloaded may be moved into the snapshot when symlinks fail (B14).
  p.finish = [store, commit = m.commit, path, etag = m.etag]() {
    return store.Link(commit, path, etag, /*new_blob=*/true);
  };
  return p;
}

Result<PreparedFile> PrepareAtCommit(const Session& s, const RepoCache& rc, const std::string& commit,
                                     const std::string& path, int64_t size) {
  if (auto p = rc.CachedPointer(commit, path)) {
    std::error_code ec;
    const uintmax_t n = fs::file_size(*p, ec);
    if (size < 0 || (!ec && n == static_cast<uintmax_t>(size))) return Cached(*p, -1);
  }
  HUBLOAD_ASSIGN_OR_RETURN(FileMeta m, Head(s, rc.repo_type(), rc.repo_id(), commit, path, nullptr));
  return PrepareBlob(s, rc, m, path, commit, false);
}

Result<PreparedFile> PrepareLocalDir(const Session& s, RepoType t, const std::string& repo, const std::string& rev,
                                     const std::string& path, const std::string& dir, bool force,
                                     int64_t size) {
  using cache_internal::LocalDirPartialPath;
  ErrorContext ctx = s.Ctx(repo, rev, path);
  // The one path rule again, right where a repo path meets the local folder:
  // never <dir>/.git/..., never <dir>/.cache/huggingface/... from repo content.
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRepoPath(path), ctx));
  std::string target = dir + "/" + path;
  auto meta = cache_internal::ReadLocalDirMeta(dir, path);
  std::error_code ec;
  if (!force && meta && IsCommitHash(rev) && meta->commit == rev &&
      (size < 0 || fs::file_size(target, ec) == static_cast<uintmax_t>(size)))
    return Cached(target, -1);
  if (s.opt.config.offline) {
    if (fs::exists(target, ec)) return Cached(target, -1);
    return Status(Code::kOfflineMiss, "'" + path + "' is not in the local folder " + dir + " (offline mode)",
                  reason::kOfflineMiss, ctx);
  }
  // With the file there to fall back on, the metadata request is not retried.
  auto head = Head(s, t, repo, rev, path, nullptr, fs::exists(target, ec) && !force ? 0 : -1);
  if (!head.ok()) {
    if (FallbackAllowed(head.status().code()) && fs::exists(target, ec)) {
      spdlog::warn("using {} from the local folder: {}", path, head.status().message());
      return Cached(target, -1);
    }
    return head.status();
  }
  const FileMeta& m = *head;
  std::error_code absent;
  const uintmax_t have = fs::file_size(target, absent);  // a file of another size is fetched again
  if (!force && meta && meta->etag == m.etag && !absent && (m.size < 0 || have == static_cast<uintmax_t>(m.size))) {
    if (meta->commit != m.commit)
      HUBLOAD_RETURN_IF_ERROR(cache_internal::WriteLocalDirMeta(dir, path, m.commit, m.etag));
    return Cached(target, m.size);
  }
  HUBLOAD_ASSIGN_OR_RETURN(
      FileLock lock,
      FileLock::Acquire(cache_internal::LocalDirMetaPath(dir, path) + ".lock", s.opt.lock_timeout_s, s.opt.lock));
  PreparedFile p;
  if (m.size >= 0) p.size = static_cast<uint64_t>(m.size);
  FetchTarget ft;
  ft.path_in_repo = path;
  ft.single_partial = LocalDirPartialPath(dir, path, m.etag, false);
  ft.ranged_partial = LocalDirPartialPath(dir, path, m.etag, true);
  ft.final_path = target;
  ft.label = "'" + path + "'";
  ft.dir = fs::path(ft.single_partial).parent_path().string();
  ft.url = m.location.empty() ? s.ResolveUrlFor(t, repo, rev, path) : m.location;
  ft.signed_url = MakeSignedUrl(s, t, repo, path, m);
  ft.meta = m;
  ft.id = cache_internal::BlobId{m.etag, m.size};
  p.target = std::move(ft);
  p.lock.emplace(std::move(lock));
  p.finish = [dir, path, target, commit = m.commit, etag = m.etag]() -> Result<std::string> {
    HUBLOAD_RETURN_IF_ERROR(cache_internal::WriteLocalDirMeta(dir, path, commit, etag));
    return target;
  };
  return p;
}

}  // namespace hubload::hub_internal
