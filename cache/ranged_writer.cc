// RangedBlobWriter: one blob filled by parallel byte ranges with pwrite(),
// a per-chunk journal behind the data for resume, and a sha256 that follows
// the contiguous written prefix as it grows (see hubload/cache.h): the bytes
// that extend the prefix are hashed from memory by the connection that wrote
// them; chunks written ahead of it are read back and hashed by the writer's
// hasher thread, off the connection threads.
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "cache/util.h"
#include "util/file_io.h"
#include "util/digest.h"
#include "hubload/cache.h"
#include "hubload/reasons.h"

namespace hubload {
namespace {

using util::PwriteAll;

constexpr uint64_t kMinChunk = 1ull << 20;
constexpr size_t kFlushBytes = 1 << 20;  // >= 1 MiB writes (performance.md §2)
constexpr char kMagic[16] = {'h', 'u', 'b', 'l', 'o', 'a', 'd', '-', 'r', 'a', 'n', 'g', 'e', 's', '1', '\n'};
constexpr uint64_t kTrailerHead = 32;  // magic + size + chunk_bytes

void PutLe64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint64_t GetLe64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

struct RangedBlobWriter::Impl {
  struct Chunk {
    std::atomic<uint64_t> flushed{0};   // bytes on disk (and in the journal)
    std::atomic<uint64_t> received{0};  // flushed + buffered
    std::vector<char> buf;              // touched only by the chunk's writer thread
  };
  int fd = -1;
  Options opt;
  std::string label;
  size_t n = 0;
  std::unique_ptr<Chunk[]> chunks;
  // Hash state: the contiguous prefix [0, cursor) is hashed.
  std::mutex hash_mu;
  util::Digest sha;  // sha256 of the contiguous prefix [0, cursor)
  uint64_t cursor = 0;
  // `cursor`, readable without hash_mu (stored under it), and the bytes the
  // hasher read back from disk instead of taking them from memory.
  std::atomic<uint64_t> cursor_hint{0};
  std::atomic<uint64_t> read_back{0};
  std::vector<char> scratch;
  Status hash_error;  // the hasher's first failure (guarded by hash_mu)
  // The hasher thread: woken after every write, it hashes what is contiguous
  // on disk past the cursor (reading it back from the page cache).
  std::thread hasher;
  std::mutex wake_mu;
  std::condition_variable wake_cv;
  bool wake = false, stop = false;  // guarded by wake_mu
  // Chunks [0, contiguous_hint) are known complete on disk (contiguous_bytes()).
  mutable std::atomic<size_t> contiguous_hint{0};

  ~Impl() {
    StopHasher();
    if (fd >= 0) ::close(fd);
  }
  void StartHasher(const std::string& path) {
    hasher = std::thread([this, path] {
      while (true) {
        {
          std::unique_lock<std::mutex> l(wake_mu);
          wake_cv.wait(l, [this] { return wake || stop; });
          if (stop) return;
          wake = false;
        }
        std::lock_guard<std::mutex> l(hash_mu);
        Status st = AdvanceLocked(path);
        if (!st.ok() && hash_error.ok()) hash_error = st;
      }
    });
  }
  void Wake() {
    {
      std::lock_guard<std::mutex> l(wake_mu);
      wake = true;
    }
    wake_cv.notify_one();
  }
  // Stops the hasher (what it has not hashed yet stays for AdvanceLocked).
  void StopHasher() {
    if (!hasher.joinable()) return;
    {
      std::lock_guard<std::mutex> l(wake_mu);
      stop = true;
    }
    wake_cv.notify_one();
    hasher.join();
  }
  uint64_t Begin(size_t k) const { return static_cast<uint64_t>(k) * opt.chunk_bytes; }
  uint64_t End(size_t k) const { return std::min(opt.size, Begin(k) + opt.chunk_bytes); }
  uint64_t TrailerLen() const { return kTrailerHead + 8 * static_cast<uint64_t>(n); }

  Status WriteTrailerHead(const std::string& path) {
    unsigned char head[kTrailerHead];
    std::memcpy(head, kMagic, 16);
    PutLe64(head + 16, opt.size);
    PutLe64(head + 24, opt.chunk_bytes);
    return PwriteAll(fd, head, sizeof head, opt.size, path);
  }
  // Empty partial of the right length (sparse) with a zeroed journal. A partial
  // that holds anything is replaced by a NEW file (new inode), never truncated
  // in place: a reader of the old one never sees its bytes change.
  Status Reset(const std::string& path) {
    std::lock_guard<std::mutex> hash_lock(hash_mu);  // the hasher reads through fd
    struct stat st;
    if (::fstat(fd, &st) != 0) return util::IoError("cannot stat", path, errno);
    if (st.st_size > 0) {
      ::close(fd);
      fd = -1;
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) return util::IoError("cannot remove", path, errno);
      fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) return util::IoError("cannot create partial download", path, errno);
    }
    contiguous_hint = 0;
    if (::ftruncate(fd, static_cast<off_t>(opt.size + TrailerLen())) != 0)
      return util::IoError("cannot size partial download", path, errno);
    for (size_t k = 0; k < n; ++k) {
      chunks[k].flushed = 0;
      chunks[k].received = 0;
      chunks[k].buf.clear();
    }
    sha.Reset();
    cursor = 0;
    cursor_hint = 0;
    hash_error = Status::Ok();
    return WriteTrailerHead(path);
  }
  // Reads back the journal of an earlier run; false when it does not fit.
  bool LoadJournal(uint64_t file_size) {
    if (file_size != opt.size + TrailerLen()) return false;
    std::vector<unsigned char> t(TrailerLen());
    size_t got = 0;
    while (got < t.size()) {
      ssize_t r = ::pread(fd, t.data() + got, t.size() - got, static_cast<off_t>(opt.size + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    if (std::memcmp(t.data(), kMagic, 16) != 0 || GetLe64(t.data() + 16) != opt.size ||
        GetLe64(t.data() + 24) != opt.chunk_bytes)
      return false;
    for (size_t k = 0; k < n; ++k) {
      uint64_t v = GetLe64(t.data() + kTrailerHead + 8 * k);
      if (v > End(k) - Begin(k)) return false;
      chunks[k].flushed = v;
      chunks[k].received = v;
    }
    return true;
  }
  // Hashes forward from `cursor` over whatever is contiguous on disk. Caller holds hash_mu.
  Status AdvanceLocked(const std::string& path) {
    while (cursor < opt.size) {
      size_t c = static_cast<size_t>(cursor / opt.chunk_bytes);
      uint64_t avail = Begin(c) + chunks[c].flushed.load(std::memory_order_acquire) - cursor;
      if (avail == 0) break;
      if (scratch.empty()) scratch.resize(kFlushBytes);
      size_t want = static_cast<size_t>(std::min<uint64_t>(avail, scratch.size()));
      ssize_t r = ::pread(fd, scratch.data(), want, static_cast<off_t>(cursor));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return util::IoError("cannot read back partial download", path, errno);
      if (r == 0) return Status(Code::kIOError, "partial download " + path + " is shorter than its journal says",
                                reason::kShortRead, cache_internal::FileCtx(path));
      sha.Update(scratch.data(), static_cast<size_t>(r));
      cursor += static_cast<uint64_t>(r);
      cursor_hint.store(cursor, std::memory_order_release);
      read_back.fetch_add(static_cast<uint64_t>(r), std::memory_order_relaxed);
    }
    return Status::Ok();
  }
  // Writes `len` bytes at the end of chunk k's written part, hashes them from
  // memory when they extend the hashed prefix, then records them (flushed, the
  // journal) and wakes the hasher for chunks written ahead. Hashing before the
  // bytes are published means the hasher never reads back bytes the writer
  // still holds: a connection that writes the prefix in order hashes all of it
  // inline, as one GET per file does. When the cursor is at `off` the hasher
  // has nothing past it to hash, so it holds hash_mu only briefly.
  Status Write(size_t k, const char* p, size_t len, const std::string& path) {
    Chunk& c = chunks[k];
    uint64_t off = Begin(k) + c.flushed.load(std::memory_order_relaxed);
    HUBLOAD_RETURN_IF_ERROR(PwriteAll(fd, p, len, off, path));
    const uint64_t now = c.flushed.load(std::memory_order_relaxed) + len;
    bool published = false;
    if (cursor_hint.load(std::memory_order_acquire) == off) {
      std::lock_guard<std::mutex> l(hash_mu);
      if (cursor == off) {
        // Cursor and `flushed` move together under hash_mu: the hasher never
        // sees a cursor past the published bytes of its chunk.
        sha.Update(p, len);
        cursor += len;
        cursor_hint.store(cursor, std::memory_order_release);
        c.flushed.store(now, std::memory_order_release);
        published = true;
      }
    }
    if (!published) c.flushed.store(now, std::memory_order_release);
    unsigned char le[8];
    PutLe64(le, now);
    // Journal after data: a run killed in between re-fetches this buffer only.
    HUBLOAD_RETURN_IF_ERROR(PwriteAll(fd, le, 8, opt.size + kTrailerHead + 8 * k, path));
    // The hasher has work only when published bytes lie past the cursor: these
    // (not hashed here), or the next chunk's once this one is complete. A
    // writer of the next chunk that published before our cursor reached it
    // woke the hasher itself; Commit hashes whatever is left in any case.
    const bool next_waits = now == End(k) - Begin(k) && k + 1 < n &&
                            chunks[k + 1].flushed.load(std::memory_order_acquire) > 0;
    if (!published || next_waits) Wake();
    return Status::Ok();
  }
  Status Flush(size_t k, const std::string& path) {
    Chunk& c = chunks[k];
    if (c.buf.empty()) return Status::Ok();
    HUBLOAD_RETURN_IF_ERROR(Write(k, c.buf.data(), c.buf.size(), path));
    c.buf.clear();
    return Status::Ok();
  }
};

std::string RepoCache::RangedIncompletePath(std::string_view etag) const {
  return BlobPath(etag) + ".ranges.incomplete";
}

Result<std::unique_ptr<RangedBlobWriter>> RangedBlobWriter::Open(const RepoCache& repo, std::string etag,
                                                                 Options options) {
  return OpenPaths(repo.RangedIncompletePath(etag), repo.BlobPath(etag), "blob " + etag, std::move(options));
}

Result<std::unique_ptr<RangedBlobWriter>> RangedBlobWriter::OpenPaths(std::string partial_path, std::string final_path,
                                                                      std::string label, Options options) {
  if (options.size == 0)
    return Status(Code::kInvalidArgument, "ranged download of " + label + " needs a known, non-zero size",
                  reason::kBadRangeOptions);
  if (options.chunk_bytes < kMinChunk)
    return Status(Code::kInvalidArgument,
                  "range chunk of " + std::to_string(options.chunk_bytes) + " bytes for " + label +
                      " is below the 1 MiB minimum",
                  reason::kBadRangeOptions);
  std::unique_ptr<RangedBlobWriter> w(new RangedBlobWriter());
  w->impl_ = std::make_unique<Impl>();
  Impl& im = *w->impl_;
  im.opt = std::move(options);
  im.label = std::move(label);
  im.n = static_cast<size_t>((im.opt.size + im.opt.chunk_bytes - 1) / im.opt.chunk_bytes);
  im.chunks = std::make_unique<Impl::Chunk[]>(im.n);
  w->partial_path_ = std::move(partial_path);
  w->blob_path_ = std::move(final_path);
  std::error_code ec;
  for (const std::string* p : {&w->partial_path_, &w->blob_path_}) {
    std::filesystem::create_directories(std::filesystem::path(*p).parent_path(), ec);
    if (ec) return util::IoError("cannot create folder for", *p, ec.value());
  }
  im.fd = ::open(w->partial_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (im.fd < 0) return util::IoError("cannot open partial download", w->partial_path_, errno);
  struct stat st;
  if (::fstat(im.fd, &st) != 0) return util::IoError("cannot stat", w->partial_path_, errno);
  if (!im.opt.resume || !im.LoadJournal(static_cast<uint64_t>(st.st_size)))
    HUBLOAD_RETURN_IF_ERROR(im.Reset(w->partial_path_));
  im.StartHasher(w->partial_path_);
  return w;
}

RangedBlobWriter::~RangedBlobWriter() {
  if (!impl_) return;
  impl_->StopHasher();
  if (impl_->fd < 0) return;  // committed or discarded
  // Keep what was received: the journal makes it resumable. A partial that
  // holds no byte (a file prepared but never started) is only a sparse file
  // with a journal of zeros: removed, so no stray partial is left behind.
  if (bytes_received() == 0) {
    Discard();
    return;
  }
  for (size_t k = 0; k < impl_->n; ++k) (void)impl_->Flush(k, partial_path_);
}

size_t RangedBlobWriter::num_chunks() const { return impl_->n; }
uint64_t RangedBlobWriter::chunk_begin(size_t k) const { return impl_->Begin(k); }
uint64_t RangedBlobWriter::chunk_end(size_t k) const { return impl_->End(k); }
uint64_t RangedBlobWriter::chunk_received(size_t k) const { return impl_->chunks[k].received.load(); }
uint64_t RangedBlobWriter::bytes_received() const {
  uint64_t s = 0;
  for (size_t k = 0; k < impl_->n; ++k) s += impl_->chunks[k].received.load(std::memory_order_relaxed);
  return s;
}

Status RangedBlobWriter::Append(size_t k, const char* data, size_t n) {
  Impl& im = *impl_;
  if (k >= im.n)
    return Status(Code::kInvalidArgument, "chunk " + std::to_string(k) + " out of range for " + im.label,
                  reason::kBadChunk, cache_internal::FileCtx(partial_path_));
  Impl::Chunk& c = im.chunks[k];
  const uint64_t got = c.received.load(std::memory_order_relaxed);
  if (got + n > im.End(k) - im.Begin(k))
    return Status(Code::kCorruptDownload,
                  "received more bytes than chunk " + std::to_string(k) + " of " + im.label + " holds (bytes " +
                      std::to_string(im.Begin(k)) + "-" + std::to_string(im.End(k) - 1) + ")",
                  reason::kSizeMismatch, cache_internal::FileCtx(partial_path_));
  if (c.buf.empty() && n >= kFlushBytes) {  // a large piece is written as it is, not copied into the buffer
    HUBLOAD_RETURN_IF_ERROR(im.Write(k, data, n, partial_path_));
    c.received.fetch_add(n, std::memory_order_relaxed);
    return Status::Ok();
  }
  while (n > 0) {
    if (c.buf.capacity() == 0) c.buf.reserve(kFlushBytes);
    size_t take = std::min(n, kFlushBytes - c.buf.size());
    c.buf.insert(c.buf.end(), data, data + take);
    c.received.fetch_add(take, std::memory_order_relaxed);
    data += take;
    n -= take;
    if (c.buf.size() >= kFlushBytes) HUBLOAD_RETURN_IF_ERROR(im.Flush(k, partial_path_));
  }
  return Status::Ok();
}

Status RangedBlobWriter::FlushChunk(size_t k) {
  if (k >= impl_->n) return Status::Ok();
  Status s = impl_->Flush(k, partial_path_);
  if (impl_->chunks[k].buf.empty()) std::vector<char>().swap(impl_->chunks[k].buf);  // release the buffer
  return s;
}

Status RangedBlobWriter::Restart() { return impl_->Reset(partial_path_); }

int RangedBlobWriter::fd() const { return impl_->fd; }

uint64_t RangedBlobWriter::bytes_read_back() const { return impl_->read_back.load(std::memory_order_relaxed); }

uint64_t RangedBlobWriter::contiguous_bytes() const {
  const Impl& im = *impl_;
  size_t k = im.contiguous_hint.load(std::memory_order_relaxed);
  while (k < im.n && im.chunks[k].flushed.load(std::memory_order_acquire) == im.End(k) - im.Begin(k)) ++k;
  im.contiguous_hint.store(k, std::memory_order_relaxed);
  if (k >= im.n) return im.opt.size;
  return im.Begin(k) + im.chunks[k].flushed.load(std::memory_order_acquire);
}

Result<std::string> RangedBlobWriter::Commit() {
  Impl& im = *impl_;
  ErrorContext ctx = cache_internal::FileCtx(partial_path_);
  for (size_t k = 0; k < im.n; ++k) HUBLOAD_RETURN_IF_ERROR(im.Flush(k, partial_path_));
  for (size_t k = 0; k < im.n; ++k) {
    if (im.chunks[k].flushed.load() != im.End(k) - im.Begin(k))
      return Status(Code::kCorruptDownload,
                    "download of " + im.label + " is missing bytes " +
                        std::to_string(im.Begin(k) + im.chunks[k].flushed.load()) + "-" +
                        std::to_string(im.End(k) - 1) + " (partial kept for resuming)",
                    reason::kSizeMismatch, ctx);
  }
  im.StopHasher();  // what it has not hashed yet is hashed here
  std::string got;
  {
    std::lock_guard<std::mutex> l(im.hash_mu);
    HUBLOAD_RETURN_IF_ERROR(im.hash_error);
    HUBLOAD_RETURN_IF_ERROR(im.AdvanceLocked(partial_path_));
    got = im.sha.HexDigest();
  }
  if (!im.opt.expected_sha256.empty() && got != im.opt.expected_sha256) {
    Discard();
    return Status(Code::kCorruptDownload,
                  "sha256 of downloaded " + im.label + " is " + got + ", expected " + im.opt.expected_sha256 +
                      " (partial discarded)",
                  reason::kHashMismatch, ctx);
  }
  if (::ftruncate(im.fd, static_cast<off_t>(im.opt.size)) != 0)
    return util::IoError("cannot cut the journal off", partial_path_, errno);
  HUBLOAD_RETURN_IF_ERROR(
      cache_internal::VerifyGitBlob(partial_path_, im.opt.expected_git_sha1, im.label, ctx, [this] { Discard(); }));
  if (::rename(partial_path_.c_str(), blob_path_.c_str()) != 0)
    return util::IoError("cannot move verified blob to", blob_path_, errno);
  ::close(im.fd);
  im.fd = -1;
  return blob_path_;
}

void RangedBlobWriter::Discard() {
  Impl& im = *impl_;
  im.StopHasher();
  for (size_t k = 0; k < im.n; ++k) im.chunks[k].buf.clear();
  ::unlink(partial_path_.c_str());
  if (im.fd >= 0) ::close(im.fd);
  im.fd = -1;
}

namespace cache_internal {

uint64_t RangedPartialBytes(const std::string& path, uint64_t size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  uint64_t total = 0;
  struct stat st;
  unsigned char head[kTrailerHead];
  if (size > 0 && ::fstat(fd, &st) == 0 && ::pread(fd, head, sizeof head, static_cast<off_t>(size)) ==
                                               static_cast<ssize_t>(sizeof head) &&
      std::memcmp(head, kMagic, 16) == 0 && GetLe64(head + 16) == size) {
    uint64_t chunk = GetLe64(head + 24);
    uint64_t n = chunk >= kMinChunk ? (size + chunk - 1) / chunk : 0;
    if (n > 0 && static_cast<uint64_t>(st.st_size) == size + kTrailerHead + 8 * n) {
      std::vector<unsigned char> t(8 * n);
      if (::pread(fd, t.data(), t.size(), static_cast<off_t>(size + kTrailerHead)) == static_cast<ssize_t>(t.size())) {
        for (uint64_t k = 0; k < n; ++k) {
          uint64_t len = std::min(size, (k + 1) * chunk) - k * chunk;
          total += std::min(GetLe64(t.data() + 8 * k), len);
        }
      }
    }
  }
  ::close(fd);
  return total;
}

}  // namespace cache_internal
}  // namespace hubload
