// BlobWriter: partial file + streaming sha256 + verified promotion to blobs/.
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <vector>

#include "cache/util.h"
#include "util/file_io.h"
#include "util/digest.h"
#include "hubload/cache.h"
#include "hubload/reasons.h"

namespace hubload {
namespace {

constexpr size_t kWriteBuffer = 1 << 20;  // ≥ 1 MiB writes (performance.md §2)

}  // namespace

Status cache_internal::VerifyGitBlob(const std::string& partial, const std::string& expected, const std::string& label,
                                     const ErrorContext& ctx, const std::function<void()>& discard) {
  if (expected.empty()) return Status::Ok();
  HUBLOAD_ASSIGN_OR_RETURN(std::string got, util::GitBlobIdOfFile(partial));
  if (got == expected) return Status::Ok();
  discard();
  return Status(Code::kCorruptDownload,
                "git blob sha1 of downloaded " + label + " is " + got + ", expected " + expected + " (partial discarded)",
                reason::kHashMismatch, ctx);
}

struct BlobWriter::Impl {
  int fd = -1;
  util::Digest sha;  // sha256 of bytes [0, offset)
  Options opt;
  std::string etag;
  std::vector<char> buf;  // pending bytes not yet written
  uint64_t flushed = 0;   // bytes on disk

  ~Impl() {
    if (fd >= 0) ::close(fd);
  }
  void ResetHash() { sha.Reset(); }
  Status Flush(const std::string& path) {
    HUBLOAD_RETURN_IF_ERROR(util::PwriteAll(fd, buf.data(), buf.size(), flushed, path));
    flushed += buf.size();
    buf.clear();
    return Status::Ok();
  }
  // Replaces the partial by a NEW empty file (new inode): bytes a reader of the
  // old one saw are never changed under it (streaming loads, hubload/hub.h
  // FileBytes). The caller holds the blob's lock, so nobody else creates it.
  Status Recreate(const std::string& path) {
    if (fd >= 0) ::close(fd);
    fd = -1;
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return util::IoError("cannot remove", path, errno);
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return util::IoError("cannot create partial download", path, errno);
    return Status::Ok();
  }
};

Result<std::unique_ptr<BlobWriter>> BlobWriter::Open(const RepoCache& repo, std::string etag, Options options) {
  return OpenPaths(repo.IncompletePath(etag), repo.BlobPath(etag), "blob " + etag, std::move(options));
}

Result<std::unique_ptr<BlobWriter>> BlobWriter::OpenPaths(std::string partial_path, std::string final_path,
                                                          std::string label, Options options) {
  std::unique_ptr<BlobWriter> w(new BlobWriter());
  w->impl_ = std::make_unique<Impl>();
  Impl& im = *w->impl_;
  im.opt = std::move(options);
  im.etag = std::move(label);
  im.buf.reserve(kWriteBuffer);
  w->partial_path_ = std::move(partial_path);
  w->blob_path_ = std::move(final_path);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(w->partial_path_).parent_path(), ec);
  if (ec) return util::IoError("cannot create folder for", w->partial_path_, ec.value());
  std::filesystem::create_directories(std::filesystem::path(w->blob_path_).parent_path(), ec);
  if (ec) return util::IoError("cannot create folder for", w->blob_path_, ec.value());
  im.fd = ::open(w->partial_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (im.fd < 0) return util::IoError("cannot open partial download", w->partial_path_, errno);
  struct stat st;
  if (::fstat(im.fd, &st) != 0) return util::IoError("cannot stat", w->partial_path_, errno);
  uint64_t have = static_cast<uint64_t>(st.st_size);
  bool keep = im.opt.resume && have > 0 &&
              (im.opt.expected_size < 0 || have <= static_cast<uint64_t>(im.opt.expected_size));
  if (!keep) {
    if (have > 0) HUBLOAD_RETURN_IF_ERROR(im.Recreate(w->partial_path_));  // never truncated in place
    return w;
  }
  // Hash the bytes already there so the digest covers the whole blob.
  std::vector<char> rb(kWriteBuffer);
  uint64_t off = 0;
  while (off < have) {
    ssize_t r = ::pread(im.fd, rb.data(), rb.size(), static_cast<off_t>(off));
    if (r < 0) {
      if (errno == EINTR) continue;
      return util::IoError("cannot read partial download", w->partial_path_, errno);
    }
    if (r == 0) break;
    im.sha.Update(rb.data(), static_cast<size_t>(r));
    off += static_cast<uint64_t>(r);
  }
  im.flushed = off;
  w->offset_ = off;
  return w;
}

BlobWriter::~BlobWriter() {
  if (!impl_ || impl_->fd < 0) return;  // committed or discarded
  // A partial that holds no byte (opened, never written, nothing resumed) is
  // removed, so no empty stray partial is left behind (as RangedBlobWriter).
  if (offset_ == 0) {
    Discard();
    return;
  }
  // Keep what was received (it is a correct prefix) so a later run can resume.
  if (!impl_->buf.empty()) (void)impl_->Flush(partial_path_);
}

Status BlobWriter::Append(const char* data, size_t n) {
  Impl& im = *impl_;
  if (im.opt.expected_size >= 0 && offset_ + n > static_cast<uint64_t>(im.opt.expected_size)) {
    return Status(Code::kCorruptDownload,
                  "received more bytes than the expected " + std::to_string(im.opt.expected_size) + " for " +
                      im.etag,
                  reason::kSizeMismatch, cache_internal::FileCtx(partial_path_));
  }
  im.sha.Update(data, n);
  offset_ += n;
  while (n > 0) {
    size_t take = std::min(n, kWriteBuffer - im.buf.size());
    im.buf.insert(im.buf.end(), data, data + take);
    data += take;
    n -= take;
    if (im.buf.size() >= kWriteBuffer) HUBLOAD_RETURN_IF_ERROR(im.Flush(partial_path_));
  }
  return Status::Ok();
}

Status BlobWriter::Restart() {
  Impl& im = *impl_;
  im.buf.clear();
  im.flushed = 0;
  offset_ = 0;
  im.ResetHash();
  return im.Recreate(partial_path_);
}

Status BlobWriter::Flush() { return impl_->Flush(partial_path_); }
int BlobWriter::fd() const { return impl_->fd; }
uint64_t BlobWriter::flushed_bytes() const { return impl_->flushed; }

std::string BlobWriter::CurrentSha256() const { return impl_->sha.HexDigest(); }

Result<std::string> BlobWriter::Commit() {
  Impl& im = *impl_;
  HUBLOAD_RETURN_IF_ERROR(im.Flush(partial_path_));
  ErrorContext ctx = cache_internal::FileCtx(partial_path_);
  if (im.opt.expected_size >= 0 && offset_ != static_cast<uint64_t>(im.opt.expected_size)) {
    // Too short: keep the partial for a later resume.
    return Status(Code::kCorruptDownload,
                  "download of " + im.etag + " ended after " + std::to_string(offset_) + " of " +
                      std::to_string(im.opt.expected_size) + " bytes",
                  reason::kSizeMismatch, ctx);
  }
  if (!im.opt.expected_sha256.empty()) {
    std::string got = CurrentSha256();
    if (got != im.opt.expected_sha256) {
      Discard();
      return Status(Code::kCorruptDownload,
                    "sha256 of downloaded blob is " + got + ", expected " + im.opt.expected_sha256 +
                        " (partial discarded)",
                    reason::kHashMismatch, ctx);
    }
  }
  HUBLOAD_RETURN_IF_ERROR(cache_internal::VerifyGitBlob(partial_path_, im.opt.expected_git_sha1, im.etag, ctx, [this] { Discard(); }));
  // Same permissions a fresh file in the folder would get (umask applied at create).
  if (::rename(partial_path_.c_str(), blob_path_.c_str()) != 0)
    return util::IoError("cannot move verified blob to", blob_path_, errno);
  ::close(im.fd);
  im.fd = -1;
  return blob_path_;
}

void BlobWriter::Discard() {
  Impl& im = *impl_;
  im.buf.clear();
  ::unlink(partial_path_.c_str());
  if (im.fd >= 0) ::close(im.fd);
  im.fd = -1;
}

Result<std::string> Sha256File(const std::string& path) { return util::Sha256File(path); }

}  // namespace hubload
