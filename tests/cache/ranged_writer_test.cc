// RangedBlobWriter: chunks written out of order and from several threads,
// resume from the journal after a killed process, verification failures.
// Expected hashes come from OpenSSL over the test's own bytes.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "hubload/cache.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace fs = std::filesystem;
using hubload::Code;
using hubload::RangedBlobWriter;
using hubload::RepoCache;
using hubload::testing::PatternBytes;
using hubload::testing::TempDir;

namespace {

constexpr uint64_t kMiB = 1 << 20;

std::string Sha(const std::string& s) { return hubload::testing::Sha256Hex(s.data(), s.size()); }

std::string ReadAll(const std::string& p) {
  auto b = hubload::testing::ReadFileBytes(p);
  return std::string(b.begin(), b.end());
}

RangedBlobWriter::Options Opt(const std::string& data, uint64_t chunk) {
  RangedBlobWriter::Options o;
  o.size = data.size();
  o.chunk_bytes = chunk;
  o.expected_sha256 = Sha(data);
  return o;
}

// Appends chunk k's bytes [from, to) (relative to the chunk) in pieces of `piece`.
void Feed(RangedBlobWriter& w, const std::string& data, size_t k, uint64_t from, uint64_t to, size_t piece = 70000) {
  uint64_t b = w.chunk_begin(k);
  for (uint64_t o = from; o < to; o += piece) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(piece, to - o));
    ASSERT_OK(w.Append(k, data.data() + b + o, n));
  }
}

}  // namespace

TEST(RangedBlobWriter, ChunksInReverseOrderGiveTheExactBlob) {
  TempDir tmp;
  RepoCache rc(tmp.str(), "org/m", hubload::RepoType::kModel);
  std::string data = PatternBytes(10 * kMiB + 12345, 1);  // 3 chunks of 4 MiB, the last one short
  std::string etag = Sha(data);
  auto w = RangedBlobWriter::Open(rc, etag, Opt(data, 4 * kMiB));
  ASSERT_OK(w);
  ASSERT_EQ((*w)->num_chunks(), 3u);
  EXPECT_EQ((*w)->chunk_begin(2), 8 * kMiB);
  EXPECT_EQ((*w)->chunk_end(2), data.size());
  EXPECT_EQ((*w)->partial_path(), rc.BlobPath(etag) + ".ranges.incomplete");
  for (size_t k = 3; k-- > 0;) {
    Feed(**w, data, k, 0, (*w)->chunk_end(k) - (*w)->chunk_begin(k));
    ASSERT_OK((*w)->FlushChunk(k));
  }
  EXPECT_EQ((*w)->bytes_received(), data.size());
  auto p = (*w)->Commit();
  ASSERT_OK(p);
  EXPECT_EQ(*p, rc.BlobPath(etag));
  EXPECT_EQ(ReadAll(*p), data);  // journal cut off, no trailing bytes
  EXPECT_FALSE(fs::exists(rc.BlobPath(etag) + ".ranges.incomplete"));
}

TEST(RangedBlobWriter, ConcurrentChunksFromManyThreads) {
  TempDir tmp;
  std::string data = PatternBytes(24 * kMiB + 7, 2);
  auto w = RangedBlobWriter::OpenPaths(tmp.str() + "/p.ranges.incomplete", tmp.str() + "/final", "f",
                                       Opt(data, 1 * kMiB));
  ASSERT_OK(w);
  size_t n = (*w)->num_chunks();
  ASSERT_EQ(n, 25u);
  std::atomic<size_t> next{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 6; ++t)
    ts.emplace_back([&] {
      for (size_t k; (k = next.fetch_add(1)) < n;) {
        Feed(**w, data, k, 0, (*w)->chunk_end(k) - (*w)->chunk_begin(k), 4096 + 13 * k);
        EXPECT_OK((*w)->FlushChunk(k));
      }
    });
  for (auto& t : ts) t.join();
  auto p = (*w)->Commit();
  ASSERT_OK(p);
  EXPECT_EQ(Sha(ReadAll(*p)), Sha(data));
}

// The sha256 takes bytes that extend the hashed prefix from the Append that
// wrote them; only chunks written ahead of it are read back from the partial.
TEST(RangedBlobWriter, BytesAppendedInOrderAreHashedFromMemoryAndNeverReadBack) {
  TempDir tmp;
  std::string data = PatternBytes(6 * kMiB + 4321, 5);  // 4 chunks of 2 MiB, the last one short
  auto w = RangedBlobWriter::OpenPaths(tmp.str() + "/a.ranges.incomplete", tmp.str() + "/a", "a", Opt(data, 2 * kMiB));
  ASSERT_OK(w);
  ASSERT_EQ((*w)->num_chunks(), 4u);
  // Pieces of 70000 bytes (buffered) and of 1.5 MiB (written as they are).
  for (size_t k = 0; k < 4; ++k) {
    Feed(**w, data, k, 0, (*w)->chunk_end(k) - (*w)->chunk_begin(k), k % 2 == 0 ? 70000 : 1536 * 1024);
    ASSERT_OK((*w)->FlushChunk(k));
  }
  EXPECT_EQ((*w)->bytes_read_back(), 0u);
  ASSERT_OK((*w)->Commit());
  EXPECT_EQ(Sha(ReadAll(tmp.str() + "/a")), Sha(data));

  // Chunks 3, 2, 1 written ahead of chunk 0: exactly their bytes are read back.
  auto r = RangedBlobWriter::OpenPaths(tmp.str() + "/b.ranges.incomplete", tmp.str() + "/b", "b", Opt(data, 2 * kMiB));
  ASSERT_OK(r);
  for (size_t k = 4; k-- > 0;) {
    Feed(**r, data, k, 0, (*r)->chunk_end(k) - (*r)->chunk_begin(k));
    ASSERT_OK((*r)->FlushChunk(k));
  }
  ASSERT_OK((*r)->Commit());
  EXPECT_EQ((*r)->bytes_read_back(), data.size() - 2 * kMiB);
  EXPECT_EQ(Sha(ReadAll(tmp.str() + "/b")), Sha(data));
}

TEST(RangedBlobWriter, KilledProcessResumesEachChunkWhereItsJournalStops) {
  TempDir tmp;
  std::string data = PatternBytes(12 * kMiB, 3);  // chunks of 4 MiB
  std::string partial = tmp.str() + "/x.ranges.incomplete", fin = tmp.str() + "/x";
  pid_t pid = fork();
  if (pid == 0) {
    auto w = RangedBlobWriter::OpenPaths(partial, fin, "x", Opt(data, 4 * kMiB));
    if (!w.ok()) _exit(2);
    // chunk 2 whole, chunk 0: 2.5 MiB appended (2 MiB written out in 1 MiB flushes), chunk 1 nothing.
    for (uint64_t o = 0; o < 4 * kMiB; o += 65536)
      if (!(*w)->Append(2, data.data() + 8 * kMiB + o, 65536).ok()) _exit(3);
    if (!(*w)->FlushChunk(2).ok()) _exit(4);
    for (uint64_t o = 0; o < 2 * kMiB + kMiB / 2; o += 65536)
      if (!(*w)->Append(0, data.data() + o, 65536).ok()) _exit(5);
    _exit(0);  // no destructor: like SIGKILL, the buffered half MiB is lost
  }
  int st = 0;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  auto w = RangedBlobWriter::OpenPaths(partial, fin, "x", Opt(data, 4 * kMiB));
  ASSERT_OK(w);
  EXPECT_EQ((*w)->chunk_received(0), 2 * kMiB);
  EXPECT_EQ((*w)->chunk_received(1), 0u);
  EXPECT_EQ((*w)->chunk_received(2), 4 * kMiB);
  Feed(**w, data, 0, 2 * kMiB, 4 * kMiB);
  Feed(**w, data, 1, 0, 4 * kMiB);
  auto p = (*w)->Commit();
  ASSERT_OK(p);
  EXPECT_EQ(Sha(ReadAll(fin)), Sha(data));
}

TEST(RangedBlobWriter, JournalOfAnotherChunkSizeOrNoResumeStartsFromZero) {
  TempDir tmp;
  std::string data = PatternBytes(6 * kMiB, 4);
  std::string partial = tmp.str() + "/y.ranges.incomplete", fin = tmp.str() + "/y";
  {
    auto w = RangedBlobWriter::OpenPaths(partial, fin, "y", Opt(data, 2 * kMiB));
    ASSERT_OK(w);
    Feed(**w, data, 0, 0, 2 * kMiB);
  }  // destructor flushes: chunk 0 complete in the journal
  {
    auto w = RangedBlobWriter::OpenPaths(partial, fin, "y", Opt(data, 2 * kMiB));
    ASSERT_OK(w);
    EXPECT_EQ((*w)->chunk_received(0), 2 * kMiB);
  }
  {
    auto w = RangedBlobWriter::OpenPaths(partial, fin, "y", Opt(data, 3 * kMiB));
    ASSERT_OK(w);
    EXPECT_EQ((*w)->bytes_received(), 0u);
  }
  auto o = Opt(data, 3 * kMiB);
  o.resume = false;
  auto w = RangedBlobWriter::OpenPaths(partial, fin, "y", o);
  ASSERT_OK(w);
  EXPECT_EQ((*w)->bytes_received(), 0u);
}

// Closed without Commit: a partial holding bytes stays (resumable, its size
// = blob + journal), one that never got a byte is removed.
TEST(RangedBlobWriter, ClosingKeepsAPartialWithBytesAndRemovesAnEmptyOne) {
  TempDir tmp;
  const std::string data = PatternBytes(4 * kMiB, 6);
  const std::string partial = tmp.str() + "/e.ranges.incomplete", fin = tmp.str() + "/e";
  auto open = [&] { return RangedBlobWriter::OpenPaths(partial, fin, "e", Opt(data, 2 * kMiB)); };
  auto empty = open();
  ASSERT_OK(empty);
  EXPECT_TRUE(fs::exists(partial));
  empty->reset();  // closed without a byte
  EXPECT_FALSE(fs::exists(partial));
  auto some = open();
  ASSERT_OK(some);
  Feed(**some, data, 1, 0, 5);  // 5 bytes of the second chunk
  some->reset();
  ASSERT_TRUE(fs::exists(partial));
  EXPECT_GT(fs::file_size(partial), data.size());  // the blob's length plus the journal
  auto again = open();
  ASSERT_OK(again);
  EXPECT_EQ((*again)->chunk_received(1), 5u);
  EXPECT_FALSE(fs::exists(fin));
}

TEST(RangedBlobWriter, WrongBytesAreRejectedAndTheBlobNeverAppears) {
  TempDir tmp;
  std::string data = PatternBytes(3 * kMiB, 5);
  std::string partial = tmp.str() + "/z.ranges.incomplete", fin = tmp.str() + "/z";
  auto w = RangedBlobWriter::OpenPaths(partial, fin, "z", Opt(data, kMiB));
  ASSERT_OK(w);
  std::string bad = data;
  bad[kMiB + 5] ^= 1;
  for (size_t k = 0; k < 3; ++k) Feed(**w, bad, k, 0, kMiB);
  auto p = (*w)->Commit();
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::kCorruptDownload);
  EXPECT_EQ(p.status().reason(), "HashMismatch");
  EXPECT_FALSE(fs::exists(fin));
  EXPECT_FALSE(fs::exists(partial));
}

TEST(RangedBlobWriter, MissingBytesKeepThePartialAndOverflowIsAnError) {
  TempDir tmp;
  std::string data = PatternBytes(3 * kMiB, 6);
  std::string partial = tmp.str() + "/q.ranges.incomplete", fin = tmp.str() + "/q";
  auto w = RangedBlobWriter::OpenPaths(partial, fin, "q", Opt(data, kMiB));
  ASSERT_OK(w);
  Feed(**w, data, 0, 0, kMiB);
  Feed(**w, data, 2, 0, kMiB);
  auto over = (*w)->Append(2, data.data(), 1);
  EXPECT_EQ(over.code(), Code::kCorruptDownload);
  auto p = (*w)->Commit();
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().reason(), "SizeMismatch");
  EXPECT_NE(p.status().message().find("1048576-2097151"), std::string::npos) << p.status().message();
  EXPECT_TRUE(fs::exists(partial));
  EXPECT_FALSE(fs::exists(fin));
}

TEST(RangedBlobWriter, BadOptionsAreRefused) {
  TempDir tmp;
  RangedBlobWriter::Options o;
  o.size = 0;
  EXPECT_EQ(RangedBlobWriter::OpenPaths(tmp.str() + "/a", tmp.str() + "/b", "a", o).status().code(),
            Code::kInvalidArgument);
  o.size = 10;
  o.chunk_bytes = 1000;
  EXPECT_EQ(RangedBlobWriter::OpenPaths(tmp.str() + "/a", tmp.str() + "/b", "a", o).status().code(),
            Code::kInvalidArgument);
}
