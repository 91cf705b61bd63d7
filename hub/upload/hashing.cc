// One read per file: size check, sha256 and the preupload sample
// (hub/upload/upload_internal.h); progress and first-error helpers.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "hub/upload/upload_internal.h"
#include "hubload/reasons.h"
#include "util/digest.h"
#include "util/file_io.h"

namespace hubload::hub_internal::upload {

constexpr size_t kReadBlock = 1 << 20;

void Progress::Start(UploadPhase phase, uint64_t total) {
  std::lock_guard<std::mutex> l(mu_);
  p_.phase = phase;
  p_.bytes_done = 0;
  p_.bytes_total = total;
  p_.path_in_repo.clear();
  p_.file_bytes_done = p_.file_bytes_total = 0;
  file_done_.clear();
  if (rate_.Due(true)) Emit();
}

void Progress::Add(uint64_t n, const std::string& path, uint64_t file_total) {
  std::lock_guard<std::mutex> l(mu_);
  p_.bytes_done += n;
  const uint64_t file_done = file_done_[path] += n;
  if (!rate_.Due(p_.bytes_done >= p_.bytes_total || file_done >= file_total)) return;
  p_.path_in_repo = path;
  p_.file_bytes_done = file_done;
  p_.file_bytes_total = file_total;
  Emit();
}

void Progress::Finish() {
  std::lock_guard<std::mutex> l(mu_);
  p_.path_in_repo.clear();
  p_.file_bytes_done = p_.file_bytes_total = 0;
  if (rate_.Due(true)) Emit();
}

void Progress::Emit() {
  if (cb_ && cb_->on_progress) cb_->on_progress(p_);
}

void FirstError::Set(Status s) {
  std::lock_guard<std::mutex> l(mu_);
  if (st_.ok()) st_ = std::move(s);
  stop_ = true;
}

bool FirstError::Stop() {
  if (stop_.load()) return true;
  if (cb_ && cb_->cancelled && cb_->cancelled()) {
    Set(Status(Code::kCancelled, "upload cancelled by the caller; no commit was made", reason::kCancelled));
    return true;
  }
  return false;
}

Status FirstError::Get() {
  std::lock_guard<std::mutex> l(mu_);
  return st_;
}

Status HashFile(Item& it, Progress& progress, FirstError& err) {
  int fd = ::open(it.local.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return util::IoError("cannot open", it.local, errno);
  ErrorContext ctx;
  ctx.file = it.local;
  util::Digest sha;
  std::vector<char> buf(kReadBlock);
  uint64_t total = 0;
  Status st;
  for (;;) {
    if (err.Stop()) {
      st = Status(Code::kCancelled, "hashing of '" + it.local + "' stopped", reason::kCancelled, ctx);
      break;
    }
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      st = util::IoError("cannot read", it.local, errno);
      break;
    }
    if (n == 0) break;
    if (it.sample.size() < kSampleBytes)
      it.sample.append(buf.data(), std::min<size_t>(static_cast<size_t>(n), kSampleBytes - it.sample.size()));
    sha.Update(buf.data(), static_cast<size_t>(n));
    total += static_cast<uint64_t>(n);
    progress.Add(static_cast<uint64_t>(n), it.path, it.size);
  }
  ::close(fd);
  if (!st.ok()) return st;
  if (total != it.size)
    return Status(Code::kIOError,
                  "'" + it.local + "' changed while it was read: " + std::to_string(it.size) + " bytes at listing, " +
                      std::to_string(total) + " read",
                  reason::kFileChanged, ctx);
  it.sha256 = sha.HexDigest();
  return Status::Ok();
}

Result<std::string> ReadWhole(const std::string& path, uint64_t size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return util::IoError("cannot open", path, errno);
  ErrorContext ctx;
  ctx.file = path;
  std::string s(size, '\0');
  uint64_t got = 0;
  while (got < size) {
    ssize_t n = ::read(fd, s.data() + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<uint64_t>(n);
  }
  char extra;
  ssize_t more = ::read(fd, &extra, 1);
  ::close(fd);
  if (got != size || more > 0)
    return Status(Code::kIOError, "'" + path + "' changed while it was read (expected " + std::to_string(size) +
                                      " bytes)", reason::kFileChanged, ctx);
  return s;
}

}  // namespace hubload::hub_internal::upload
