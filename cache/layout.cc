// Cache layout: names and small atomic operations (see hubload/cache.h).
#include <errno.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <sstream>

#include "cache/util.h"
#include "util/file_io.h"
#include "hubload/cache.h"
#include "hubload/reasons.h"

namespace hubload {
namespace fs = std::filesystem;

std::string RepoFolderName(std::string_view repo_id, RepoType type) {
  std::string out = std::string(RepoTypeName(type)) + "s";
  size_t start = 0;
  while (start <= repo_id.size()) {
    size_t slash = repo_id.find('/', start);
    if (slash == std::string_view::npos) slash = repo_id.size();
    out += "--";
    out.append(repo_id.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

std::string NormalizeEtag(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  if (v.size() >= 2 && v.substr(0, 2) == "W/") v.remove_prefix(2);
  while (!v.empty() && v.front() == '"') v.remove_prefix(1);
  while (!v.empty() && v.back() == '"') v.remove_suffix(1);
  return std::string(v);
}

Status ValidateRevision(std::string_view rev) {
  auto bad = [&](const std::string& rule) {
    return Status(Code::kInvalidArgument, "invalid revision '" + std::string(rev) + "': " + rule, reason::kBadRevision,
                  cache_internal::RevCtx(std::string(rev)));
  };
  if (rev.empty()) return bad("empty");
  for (char c : rev) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return bad("control character");
    if (c == '\\') return bad("backslash");
  }
  if (rev.front() == '/' || rev.back() == '/') return bad("leading or trailing '/'");
  size_t start = 0;
  while (start <= rev.size()) {
    size_t end = rev.find('/', start);
    if (end == std::string_view::npos) end = rev.size();
    std::string_view seg = rev.substr(start, end - start);
    if (seg.empty() || seg == "." || seg == "..") return bad("empty, '.' or '..' segment");
    start = end + 1;
  }
  return Status::Ok();
}

RepoCache::RepoCache(std::string cache_dir, std::string repo_id, RepoType type)
    : cache_dir_(std::move(cache_dir)), repo_id_(std::move(repo_id)), type_(type) {
  while (cache_dir_.size() > 1 && cache_dir_.back() == '/') cache_dir_.pop_back();
  repo_dir_ = cache_dir_ + "/" + RepoFolderName(repo_id_, type_);
}

std::string RepoCache::BlobPath(std::string_view etag) const { return repo_dir_ + "/blobs/" + std::string(etag); }
std::string RepoCache::IncompletePath(std::string_view etag) const { return BlobPath(etag) + ".incomplete"; }
std::string RepoCache::SnapshotDir(std::string_view commit) const {
  return repo_dir_ + "/snapshots/" + std::string(commit);
}
std::string RepoCache::PointerPath(std::string_view commit, std::string_view p) const {
  return SnapshotDir(commit) + "/" + std::string(p);
}
std::string RepoCache::RefPath(std::string_view revision) const { return repo_dir_ + "/refs/" + std::string(revision); }
std::string RepoCache::NoExistPath(std::string_view commit, std::string_view p) const {
  return repo_dir_ + "/.no_exist/" + std::string(commit) + "/" + std::string(p);
}
std::string RepoCache::LockPath(std::string_view etag) const {
  return cache_dir_ + "/.locks/" + RepoFolderName(repo_id_, type_) + "/" + std::string(etag) + ".lock";
}

Result<std::optional<std::string>> RepoCache::ReadRefChecked(std::string_view revision) const {
  if (!ValidateRevision(revision).ok()) return std::optional<std::string>();
  const std::string path = RefPath(revision);
  auto corrupt = [&](const std::string& why) {
    ErrorContext ctx;
    ctx.file = path;
    ctx.revision = std::string(revision);
    return Status(Code::kInvalidFormat, "the ref file " + path + " is corrupt: " + why, reason::kCorruptRef, ctx);
  };
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::optional<std::string>();
    return corrupt(std::strerror(errno));  // ELOOP, EACCES on the way, ...
  }
  if (S_ISDIR(st.st_mode)) return std::optional<std::string>();
  // A ref is 40 hex characters (huggingface_hub writes no newline; whitespace is tolerated).
  auto text = util::ReadSmallFile(path, 4096);
  if (!text.ok()) return corrupt(text.status().message());
  std::string s = std::move(*text);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.erase(s.begin());
  if (!IsCommitHash(s)) return corrupt("it does not hold a 40-hex commit");
  return std::optional<std::string>(std::move(s));
}

std::optional<std::string> RepoCache::ReadRef(std::string_view revision) const {
  auto r = ReadRefChecked(revision);
  return r.ok() ? std::move(*r) : std::nullopt;
}

Status RepoCache::WriteRef(std::string_view revision, std::string_view commit) const {
  HUBLOAD_RETURN_IF_ERROR(ValidateRevision(revision));
  if (!IsCommitHash(commit))
    return Status(Code::kInvalidArgument, "refusing to write ref '" + std::string(revision) + "' = '" +
                                              std::string(commit) + "': not a 40-hex commit", reason::kBadCommit);
  if (auto cur = ReadRef(revision); cur && *cur == commit) return Status::Ok();
  return cache_internal::WriteCreatingCache(
      cache_dir_, [&] { return util::AtomicWriteFile(RefPath(revision), std::string(commit)); });
}

std::optional<std::string> RepoCache::LocalCommit(std::string_view revision) const {
  if (IsCommitHash(revision)) return std::string(revision);
  return ReadRef(revision);
}

std::optional<std::string> RepoCache::CachedPointer(std::string_view commit, std::string_view p) const {
  if (!IsCommitHash(commit) || !ValidateRepoPath(p).ok()) return std::nullopt;
  std::string path = PointerPath(commit, p);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;  // follows symlinks: dangling → absent
  if (!S_ISREG(st.st_mode)) return std::nullopt;
  if (::access(path.c_str(), R_OK) != 0) return std::nullopt;
  return path;
}

bool RepoCache::HasBlob(std::string_view etag, int64_t expected_size) const {
  struct stat st;
  if (::stat(BlobPath(etag).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  return expected_size < 0 || st.st_size == expected_size;
}

Result<std::string> RepoCache::LinkSnapshot(std::string_view commit, std::string_view p, std::string_view etag,
                                            bool use_symlinks, bool new_blob) const {
  HUBLOAD_RETURN_IF_ERROR(ValidateRepoPath(p));
  if (!IsCommitHash(commit))
    return Status(Code::kInvalidArgument, "snapshot commit '" + std::string(commit) + "' is not a 40-hex commit",
                  reason::kBadCommit);
  std::string pointer = PointerPath(commit, p);
  std::string blob = BlobPath(etag);
  std::error_code ec;
  fs::create_directories(fs::path(pointer).parent_path(), ec);
  if (ec) return util::IoError("cannot create snapshot folder for", pointer, ec.value());
  std::string tmp = pointer + ".tmp" + util::RandomSuffix();
  bool linked = false, moved = false;
  if (use_symlinks) {
    // Relative target: one "../" per folder level below the repo folder.
    std::string rel = fs::path(blob).lexically_relative(fs::path(pointer).parent_path()).string();
    if (::symlink(rel.c_str(), tmp.c_str()) == 0) {
      linked = true;
    } else if (errno == EPERM || errno == EOPNOTSUPP || errno == ENOSYS) {
      int e = errno;
      static std::once_flag warned;
      std::call_once(warned, [&] {
        spdlog::warn("symlinks are not supported in the cache {} ({}): snapshot files are stored as regular "
                     "files instead (a freshly downloaded blob is moved, a cached one copied), which can take "
                     "more disk space",
                     cache_dir_, std::strerror(e));
      });
    } else {
      return util::IoError("cannot create symlink", tmp, errno);
    }
  }
  if (!linked) {
    // huggingface_hub _create_symlink: a new blob moves into the snapshot (no
    // second full-size copy); a blob other snapshots may use is copied.
    moved = new_blob && ::rename(blob.c_str(), tmp.c_str()) == 0;
    if (!moved) {
      fs::copy_file(blob, tmp, fs::copy_options::overwrite_existing, ec);
      if (ec) {
        std::error_code ignored;
        fs::remove(tmp, ignored);
        return util::IoError("cannot copy blob into snapshot", pointer, ec.value());
      }
    }
  }
  if (::rename(tmp.c_str(), pointer.c_str()) != 0) {
    int e = errno;
    if (!moved || ::rename(tmp.c_str(), blob.c_str()) != 0) ::unlink(tmp.c_str());  // a moved blob goes back
    return util::IoError("cannot place snapshot pointer", pointer, e);
  }
  return pointer;
}

namespace {
// What huggingface_hub writes at .no_exist/<commit>/<path>: an empty regular file.
enum class NoExistEntry { kAbsent, kMarker, kFolder, kOther };
NoExistEntry InspectNoExist(const std::string& path, struct stat* st) {
  if (::lstat(path.c_str(), st) != 0) return NoExistEntry::kAbsent;
  if (S_ISDIR(st->st_mode)) return NoExistEntry::kFolder;
  if (S_ISREG(st->st_mode) && st->st_size == 0) return NoExistEntry::kMarker;
  return NoExistEntry::kOther;
}
}  // namespace

Status RepoCache::MarkNoExist(std::string_view commit, std::string_view p) const {
  HUBLOAD_RETURN_IF_ERROR(ValidateRepoPath(p));
  if (!IsCommitHash(commit)) return Status::Ok();
  std::string path = NoExistPath(commit, p);
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return util::IoError("cannot create .no_exist folder for", path, ec.value());
  struct stat st;
  // A wrong entry (a symlink, a non-empty file) is replaced, never written through.
  if (InspectNoExist(path, &st) == NoExistEntry::kOther) ::unlink(path.c_str());
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return util::IoError("cannot create", path, errno);
  ::close(fd);
  return Status::Ok();
}

bool RepoCache::IsMarkedNoExist(std::string_view commit, std::string_view p) const {
  if (!IsCommitHash(commit) || !ValidateRepoPath(p).ok()) return false;
  const std::string path = NoExistPath(commit, p);
  struct stat st;
  switch (InspectNoExist(path, &st)) {
    case NoExistEntry::kMarker: return true;
    case NoExistEntry::kAbsent:
    case NoExistEntry::kFolder: return false;  // a folder: markers of paths below it, not of this one
    case NoExistEntry::kOther: break;
  }
  spdlog::warn("ignoring the .no_exist entry {}: not the empty file huggingface_hub writes ({})", path,
               S_ISLNK(st.st_mode) ? "a symlink"
               : S_ISREG(st.st_mode) ? std::to_string(st.st_size) + " bytes"
                                      : "not a regular file");
  return false;
}

}  // namespace hubload
