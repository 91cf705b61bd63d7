// Cache scan and delete (huggingface_hub utils/_cache_manager.py semantics).
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>

#include "cache/tree_cache.h"
#include "cache/util.h"
#include "util/file_io.h"
#include "hubload/cache.h"
#include "hubload/reasons.h"

namespace hubload {
namespace fs = std::filesystem;
namespace {

bool ParseFolderName(const std::string& name, RepoType* type, std::string* repo_id) {
  size_t p = name.find("--");
  if (p == std::string::npos) return false;
  auto t = ParseRepoType(name.substr(0, p));
  if (!t.ok()) return false;
  std::string rest = name.substr(p + 2);
  if (rest.empty()) return false;
  std::string id;
  size_t start = 0;
  while (true) {
    size_t q = rest.find("--", start);
    id += rest.substr(start, q == std::string::npos ? std::string::npos : q - start);
    if (q == std::string::npos) break;
    id += "/";
    start = q + 2;
  }
  *type = *t;
  *repo_id = id;
  return true;
}

// Bytes a file holds on disk: its length, or fewer allocated bytes for a
// sparse file (a ranged partial is sized up front). ScanCache and
// PruneIncompleteDownloads count partials this one way.
uint64_t AllocatedBytes(const struct stat& st) {
  return std::min<uint64_t>(static_cast<uint64_t>(st.st_size), static_cast<uint64_t>(st.st_blocks) * 512);
}

double Seconds(const struct timespec& t) {
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// The default of `hubload cache prune --min-age-s` (tools/hubload/cmd_cache.cc), named in the warning below.
constexpr double kPruneDefaultMinAgeS = 3600;

// The scan's warning for a partial no download holds: its size, its age and when prune takes it.
std::string StrayPartialWarning(const std::string& path, uint64_t bytes, double mtime_s) {
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const double age = std::max(0.0, now - mtime_s);
  char buf[160];
  std::snprintf(buf, sizeof buf,
                " (%llu bytes, modified %.0f s ago; `hubload cache prune` removes partials not modified for "
                "--min-age-s, %.0f s by default)",
                static_cast<unsigned long long>(bytes), age, kPruneDefaultMinAgeS);
  return "stray partial download " + path + buf;
}

// True when a live download holds the partial's lock (.locks/<folder>/<etag>.lock
// flocked); the lock file is never created here.
bool PartialInUse(const std::string& lock_path) {
  int fd = ::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  std::error_code ec;
  return held || fs::exists(lock_path + ".lease", ec);
}

struct SnapshotFiles {
  std::vector<std::string> files;
  std::set<std::string> blobs;      // etags linked
  std::map<std::string, std::string> blob_of;  // path -> etag linked
  std::vector<std::string> dangling;  // "<link> -> <target>" whose target is missing
  uint64_t copied_bytes = 0;        // regular files in no-symlink mode
};

SnapshotFiles ReadSnapshot(const fs::path& dir) {
  SnapshotFiles out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code e2;
    if (it->is_directory(e2) && !it->is_symlink(e2)) continue;
    out.files.push_back(it->path().lexically_relative(dir).generic_string());
    if (it->is_symlink(e2)) {
      fs::path target = fs::read_symlink(it->path(), e2);
      if (!e2) {
        out.blobs.insert(target.filename().string());
        out.blob_of[out.files.back()] = target.filename().string();
        std::error_code e3;
        if (!fs::exists(it->path(), e3)) out.dangling.push_back(it->path().string() + " -> " + target.string());
      }
    } else {
      out.copied_bytes += it->file_size(e2);
    }
  }
  std::sort(out.files.begin(), out.files.end());
  return out;
}

// The refs/ files holding a commit; a corrupt one (not a 40-hex commit,
// unreadable) is a warning naming it, as the download paths warn.
std::map<std::string, std::string> ReadRefs(const RepoCache& rc, std::vector<std::string>* warnings) {
  std::map<std::string, std::string> refs;
  fs::path dir = fs::path(rc.repo_dir()) / "refs";
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code e2;
    if (!it->is_regular_file(e2)) continue;
    std::string name = it->path().lexically_relative(dir).generic_string();
    auto c = rc.ReadRefChecked(name);
    if (!c.ok()) warnings->push_back(c.status().message());
    else if (*c) refs[name] = **c;
  }
  return refs;
}

Result<CachedRepo> ScanRepo(const std::string& cache_dir, const std::string& folder, RepoType type,
                            const std::string& repo_id, std::vector<std::string>* warnings) {
  RepoCache rc(cache_dir, repo_id, type);
  CachedRepo repo;
  repo.repo_id = repo_id;
  repo.repo_type = type;
  repo.repo_path = cache_dir + "/" + folder;
  repo.refs = ReadRefs(rc, warnings);
  std::map<std::string, uint64_t> blob_sizes;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(fs::path(repo.repo_path) / "blobs", ec)) {
    std::error_code e2;
    if (!e.is_regular_file(e2)) continue;
    std::string name = e.path().filename().string();
    uint64_t sz = e.file_size(e2);
    struct stat pst;
    if (::stat(e.path().c_str(), &pst) == 0) {
      repo.last_accessed = std::max(repo.last_accessed, Seconds(pst.st_atim));
      repo.last_modified = std::max(repo.last_modified, Seconds(pst.st_mtim));
      // *.incomplete, *.tmpXXXX, other partials: the bytes really on disk.
      if (name.find('.') != std::string::npos) sz = AllocatedBytes(pst);
    }
    repo.size_on_disk += sz;
    if (name.find('.') != std::string::npos) {
      repo.incomplete_files.push_back(e.path().string());
      repo.incomplete_bytes += sz;
      std::string etag = name.substr(0, name.find('.'));
      if (name.size() > 11 && name.compare(name.size() - 11, 11, ".incomplete") == 0 && !etag.empty() &&
          !PartialInUse(rc.LockPath(etag)))
        warnings->push_back(StrayPartialWarning(e.path().string(), sz, Seconds(pst.st_mtim)));
    } else {
      blob_sizes[name] = sz;
    }
  }
  repo.nb_blobs = blob_sizes.size();
  std::set<std::string> used;
  for (auto& e : fs::directory_iterator(fs::path(repo.repo_path) / "snapshots", ec)) {
    std::string commit = e.path().filename().string();
    if (!IsCommitHash(commit)) {
      warnings->push_back("unexpected snapshot folder " + e.path().string());
      continue;
    }
    SnapshotFiles sf = ReadSnapshot(e.path());
    CachedRevision rev;
    rev.commit = commit;
    rev.snapshot_path = e.path().string();
    rev.files = sf.files;
    rev.nb_files = sf.files.size();
    rev.size_on_disk = sf.copied_bytes;
    for (auto& b : sf.blobs) {
      used.insert(b);
      auto it = blob_sizes.find(b);
      if (it != blob_sizes.end()) rev.size_on_disk += it->second;
    }
    repo.size_on_disk += sf.copied_bytes;
    for (auto& d : sf.dangling) warnings->push_back("dangling link " + d + " (blob missing)");
    if (auto tree = cache_internal::ReadTreeCache(rc, commit)) {
      for (const auto& t : *tree) {
        auto lb = sf.blob_of.find(t.path);
        if (lb == sf.blob_of.end()) continue;
        auto bs = blob_sizes.find(lb->second);
        if (bs != blob_sizes.end() && bs->second != t.size)
          warnings->push_back("blob " + rc.BlobPath(lb->second) + " of " + t.path + " is " +
                              std::to_string(bs->second) + " bytes; " + cache_internal::TreeCachePath(rc, commit) +
                              " says " + std::to_string(t.size));
      }
    }
    for (auto& [name, c] : repo.refs)
      if (c == commit) rev.refs.push_back(name);
    repo.revisions.push_back(std::move(rev));
  }
  std::sort(repo.revisions.begin(), repo.revisions.end(),
            [](const CachedRevision& a, const CachedRevision& b) { return a.commit < b.commit; });
  for (auto& [name, c] : repo.refs) {
    std::error_code e3;
    if (!fs::is_directory(rc.SnapshotDir(c), e3))
      warnings->push_back("ref " + rc.RefPath(name) + " names commit " + c + ", which has no snapshot");
  }
  for (auto& [name, sz] : blob_sizes) {
    if (!used.count(name)) {
      repo.unreferenced_blobs.push_back(name);
      repo.unreferenced_bytes += sz;
    }
  }
  std::sort(repo.incomplete_files.begin(), repo.incomplete_files.end());
  return repo;
}

}  // namespace

namespace {
// kNotFound "NoCache" when `cache_dir` is no folder: absent, or another kind of file (said so).
Status NoCacheFolder(const std::string& cache_dir) {
  std::error_code ec;
  if (fs::is_directory(cache_dir, ec)) return Status::Ok();
  const bool other = fs::exists(fs::symlink_status(cache_dir, ec));
  return Status(Code::kNotFound,
                "cache folder " + cache_dir + (other ? " is not a folder" : " does not exist"), reason::kNoCache,
                cache_internal::FileCtx(cache_dir));
}
}  // namespace

Result<CacheInfo> ScanCache(const std::string& cache_dir) {
  std::error_code ec;
  if (Status no = NoCacheFolder(cache_dir); !no.ok()) return no;
  CacheInfo info;
  info.cache_dir = cache_dir;
  fs::directory_iterator it(cache_dir, ec);
  if (ec) return util::IoError("cannot read cache folder", cache_dir, ec.value());
  for (auto& e : it) {
    std::string name = e.path().filename().string();
    if (name == ".locks" || name == "CACHEDIR.TAG" || name == "version.txt" || name == "token") continue;
    std::error_code e2;
    RepoType type;
    std::string repo_id;
    if (!e.is_directory(e2) || !ParseFolderName(name, &type, &repo_id)) {
      info.warnings.push_back("not a repo folder: " + e.path().string());
      continue;
    }
    auto r = ScanRepo(cache_dir, name, type, repo_id, &info.warnings);
    if (!r.ok()) return r.status();
    info.size_on_disk += r->size_on_disk;
    info.repos.push_back(std::move(*r));
  }
  std::sort(info.repos.begin(), info.repos.end(), [](const CachedRepo& a, const CachedRepo& b) {
    return std::make_pair(static_cast<int>(a.repo_type), a.repo_id) <
           std::make_pair(static_cast<int>(b.repo_type), b.repo_id);
  });
  return info;
}

Result<DeleteReport> DeleteFromCache(const std::string& cache_dir, std::string_view repo_id, RepoType type,
                                     std::string_view revision, const FileLockOptions& lock_options) {
  RepoCache rc(cache_dir, std::string(repo_id), type);
  ErrorContext ctx = cache_internal::RepoRevCtx(std::string(repo_id), std::string(revision));
  std::error_code ec;
  if (!fs::is_directory(rc.repo_dir(), ec))
    return Status(Code::kNotFound, std::string(RepoTypeName(type)) + " " + std::string(repo_id) +
                                       " is not in the cache " + cache_dir, reason::kNotCached, ctx);
  std::vector<std::string> warnings;
  auto repo_r = ScanRepo(cache_dir, RepoFolderName(repo_id, type), type, std::string(repo_id), &warnings);
  if (!repo_r.ok()) return repo_r.status();
  CachedRepo& repo = *repo_r;
  DeleteReport rep;
  if (revision.empty()) {
    // Never pull a partial from under a running download: take every partial's
    // lock without waiting (held until the folder is gone), else refuse.
    std::vector<FileLock> held;
    for (auto& f : repo.incomplete_files) {
      std::string name = fs::path(f).filename().string();
      std::string etag = name.substr(0, name.find('.'));
      if (etag.empty()) continue;
      auto l = FileLock::Acquire(rc.LockPath(etag), 0, lock_options);
      if (!l.ok()) {
        if (!l.status().Is(reason::kLockTimeout)) return l.status();
        return Status(Code::kConflict,
                      "cannot delete " + std::string(repo_id) + ": a download is writing " + f +
                          " (its lock " + rc.LockPath(etag) + " is held); retry when it has finished",
                      reason::kDownloadInProgress, ctx);
      }
      held.push_back(std::move(*l));
    }
    rep.freed_bytes = repo.size_on_disk;
    for (auto& r : repo.revisions) rep.deleted_snapshots.push_back(r.commit);
    for (auto& [n, c] : repo.refs) rep.deleted_refs.push_back(n);
    fs::remove_all(rc.repo_dir(), ec);
    if (ec) return util::IoError("cannot remove", rc.repo_dir(), ec.value());
    fs::remove_all(cache_dir + "/.locks/" + RepoFolderName(repo_id, type), ec);
    rep.deleted_repo = true;
    return rep;
  }
  std::string commit;
  if (IsCommitHash(revision)) commit = std::string(revision);
  else if (auto c = rc.ReadRef(revision)) commit = *c;
  auto target = std::find_if(repo.revisions.begin(), repo.revisions.end(),
                             [&](const CachedRevision& r) { return r.commit == commit; });
  bool ref_only = target == repo.revisions.end() && !commit.empty() && !IsCommitHash(revision);
  if (commit.empty() || (target == repo.revisions.end() && !ref_only))
    return Status(Code::kNotFound, "revision '" + std::string(revision) + "' of " + std::string(repo_id) +
                                       " is not in the cache " + cache_dir, reason::kNotCached, ctx);
  // Refs pointing at the commit go with it.
  for (auto& [n, c] : repo.refs) {
    if (c != commit) continue;
    fs::remove(rc.RefPath(n), ec);
    rep.deleted_refs.push_back(n);
  }
  if (target != repo.revisions.end()) {
    std::set<std::string> still_used;
    std::set<std::string> mine;
    for (auto& r : repo.revisions) {
      SnapshotFiles sf = ReadSnapshot(r.snapshot_path);
      (r.commit == commit ? mine : still_used).insert(sf.blobs.begin(), sf.blobs.end());
    }
    fs::remove_all(target->snapshot_path, ec);
    if (ec) return util::IoError("cannot remove", target->snapshot_path, ec.value());
    rep.deleted_snapshots.push_back(commit);
    for (auto& b : mine) {
      if (still_used.count(b)) continue;
      std::string p = rc.BlobPath(b);
      std::error_code e2;
      uint64_t sz = fs::file_size(p, e2);
      if (fs::remove(p, e2)) {
        rep.freed_bytes += e2 ? 0 : sz;
        rep.deleted_blobs.push_back(b);
      }
    }
  }
  // The commit's tree listing and .no_exist markers go with it, also for a ref
  // that had no snapshot (a listing or a dry run wrote them).
  fs::remove_all(rc.repo_dir() + "/.no_exist/" + commit, ec);
  fs::remove(cache_internal::TreeCachePath(rc, commit), ec);
  // Nothing left: drop the folder.
  auto after = ScanRepo(cache_dir, RepoFolderName(repo_id, type), type, std::string(repo_id), &warnings);
  if (after.ok() && after->revisions.empty() && after->refs.empty()) {
    rep.freed_bytes += after->size_on_disk;
    fs::remove_all(rc.repo_dir(), ec);
    fs::remove_all(cache_dir + "/.locks/" + RepoFolderName(repo_id, type), ec);
    rep.deleted_repo = true;
  }
  return rep;
}

namespace {

}  // namespace

Result<PruneReport> PruneIncompleteDownloads(const std::string& cache_dir, double min_age_s,
                                             const FileLockOptions& lock_options) {
  if (!(min_age_s >= 0))
    return Status(Code::kInvalidArgument, "prune: min_age_s must be >= 0 seconds", reason::kBadArgument,
                  cache_internal::FileCtx(cache_dir));
  std::error_code ec;
  if (Status no = NoCacheFolder(cache_dir); !no.ok()) return no;
  fs::directory_iterator top(cache_dir, ec);
  if (ec) return util::IoError("cannot read cache folder", cache_dir, ec.value());
  PruneReport rep;
  const double now_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (auto& e : top) {
    std::string folder = e.path().filename().string();
    RepoType type;
    std::string repo_id;
    std::error_code e2;
    if (!e.is_directory(e2) || !ParseFolderName(folder, &type, &repo_id)) continue;
    fs::path blobs = e.path() / "blobs";
    if (!fs::is_directory(blobs, e2)) continue;
    fs::directory_iterator it(blobs, e2);
    if (e2) return util::IoError("cannot read", blobs.string(), e2.value());
    for (auto& b : it) {
      std::string name = b.path().filename().string();
      if (!name.ends_with(".incomplete")) continue;  // <etag>.incomplete and <etag>.ranges.incomplete
      std::string etag = name.substr(0, name.find('.'));
      std::string partial = b.path().string();
      struct stat st;
      if (etag.empty() || ::lstat(partial.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      double mtime = static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) * 1e-9;
      if (now_s - mtime < min_age_s) {
        rep.kept_recent.push_back(partial);
        continue;
      }
      // Held while deleting: a download that starts now waits, then finds no partial.
      std::string lock_path = cache_dir + "/.locks/" + folder + "/" + etag + ".lock";
      auto lock = FileLock::Acquire(lock_path, 0, lock_options);
      if (!lock.ok()) {
        if (lock.status().Is(reason::kLockTimeout)) {
          rep.kept_locked.push_back(partial);
          continue;
        }
        return lock.status();
      }
      if (::lstat(partial.c_str(), &st) != 0) continue;  // finished or removed meanwhile
      if (::unlink(partial.c_str()) != 0) {
        if (errno == ENOENT) continue;
        return util::IoError("cannot remove partial download", partial, errno);
      }
      rep.deleted_files.push_back(partial);
      rep.freed_bytes += AllocatedBytes(st);
    }
  }
  std::sort(rep.deleted_files.begin(), rep.deleted_files.end());
  std::sort(rep.kept_locked.begin(), rep.kept_locked.end());
  std::sort(rep.kept_recent.begin(), rep.kept_recent.end());
  return rep;
}

}  // namespace hubload
