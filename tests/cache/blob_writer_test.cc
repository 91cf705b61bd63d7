// BlobWriter: verified promotion, resume, restart, size/hash checks (B01, B03).
#include <gtest/gtest.h>

#include <filesystem>

#include "hubload/cache.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace fs = std::filesystem;
using hubload::testing::PatternBytes;
using hubload::BlobWriter;
using hubload::RepoCache;

namespace {
}  // namespace

TEST(BlobWriter, CommitsOnlyWhenSizeAndSha256Match) {
  hubload::testing::TempDir tmp;
  RepoCache rc(tmp.str(), "o/m", hubload::RepoType::kModel);
  std::string data = PatternBytes(3 << 20, 1);
  std::string sha = hubload::testing::Sha256Hex(data.data(), data.size());
  auto w = BlobWriter::Open(rc, sha, {static_cast<int64_t>(data.size()), sha, true, ""});
  ASSERT_OK(w);
  ASSERT_OK((*w)->Append(data.data(), 1000));
  ASSERT_OK((*w)->Append(data.data() + 1000, data.size() - 1000));
  EXPECT_FALSE(fs::exists(rc.BlobPath(sha)));  // not before Commit
  auto p = (*w)->Commit();
  ASSERT_OK(p);
  auto got = hubload::testing::ReadFileBytes(*p);
  EXPECT_EQ(hubload::testing::Sha256Hex(got.data(), got.size()), sha);
  EXPECT_FALSE(fs::exists(rc.IncompletePath(sha)));
}

TEST(BlobWriter, ShortDownloadKeepsPartialAndNoBlob) {
  hubload::testing::TempDir tmp;
  RepoCache rc(tmp.str(), "o/m", hubload::RepoType::kModel);
  std::string data = PatternBytes(1048576, 2);
  std::string sha = hubload::testing::Sha256Hex(data.data(), data.size());
  {
    auto w = BlobWriter::Open(rc, sha, {1048576, sha, true, ""});
    ASSERT_OK(w);
    ASSERT_OK((*w)->Append(data.data(), 400000));
    auto c = (*w)->Commit();
    EXPECT_EQ(c.status().code(), hubload::Code::kCorruptDownload);
  }
  EXPECT_FALSE(fs::exists(rc.BlobPath(sha)));
  EXPECT_EQ(fs::file_size(rc.IncompletePath(sha)), 400000u);
  // Resume: the new writer continues at 400000 and its hash covers the prefix.
  auto w = BlobWriter::Open(rc, sha, {1048576, sha, true, ""});
  ASSERT_OK(w);
  EXPECT_EQ((*w)->offset(), 400000u);
  ASSERT_OK((*w)->Append(data.data() + 400000, data.size() - 400000));
  ASSERT_OK((*w)->Commit());
  auto got = hubload::testing::ReadFileBytes(rc.BlobPath(sha));
  EXPECT_EQ(std::string(got.begin(), got.end()), data);
}

TEST(BlobWriter, HashMismatchDiscardsPartial) {
  hubload::testing::TempDir tmp;
  RepoCache rc(tmp.str(), "o/m", hubload::RepoType::kModel);
  std::string data = PatternBytes(5000, 3);
  std::string wrong = PatternBytes(5000, 4);
  std::string sha = hubload::testing::Sha256Hex(data.data(), data.size());
  auto w = BlobWriter::Open(rc, sha, {5000, sha, true, ""});
  ASSERT_OK((*w)->Append(wrong.data(), wrong.size()));
  auto c = (*w)->Commit();
  EXPECT_EQ(c.status().code(), hubload::Code::kCorruptDownload);
  EXPECT_EQ(c.status().reason(), "HashMismatch");
  EXPECT_FALSE(fs::exists(rc.BlobPath(sha)));
  EXPECT_FALSE(fs::exists(rc.IncompletePath(sha)));
}

TEST(BlobWriter, OversizedPartialIsDiscarded) {
  // B03 variant: a 6000-byte partial for a 5000-byte file.
  hubload::testing::TempDir tmp;
  RepoCache rc(tmp.str(), "o/m", hubload::RepoType::kModel);
  fs::create_directories(tmp.path() / "models--o--m/blobs");
  hubload::testing::WriteFileBytes(rc.IncompletePath("e"), PatternBytes(6000, 5));
  auto w = BlobWriter::Open(rc, "e", {5000, "", true, ""});
  ASSERT_OK(w);
  EXPECT_EQ((*w)->offset(), 0u);
  EXPECT_EQ(fs::file_size(rc.IncompletePath("e")), 0u);
}

TEST(BlobWriter, TooManyBytesIsAnError) {
  hubload::testing::TempDir tmp;
  RepoCache rc(tmp.str(), "o/m", hubload::RepoType::kModel);
  auto w = BlobWriter::Open(rc, "e", {10, "", true, ""});
  std::string d(11, 'x');
  EXPECT_EQ((*w)->Append(d.data(), d.size()).code(), hubload::Code::kCorruptDownload);
}

TEST(BlobWriter, RestartDropsEveryByte) {
  hubload::testing::TempDir tmp;
  RepoCache rc(tmp.str(), "o/m", hubload::RepoType::kModel);
  std::string v1(2048, '\xAA'), v2(2048, '\xBB');
  std::string sha = hubload::testing::Sha256Hex(v2.data(), v2.size());
  auto w = BlobWriter::Open(rc, sha, {2048, sha, true, ""});
  ASSERT_OK((*w)->Append(v1.data(), 1024));
  ASSERT_OK((*w)->Restart());
  EXPECT_EQ((*w)->offset(), 0u);
  ASSERT_OK((*w)->Append(v2.data(), v2.size()));
  auto p = (*w)->Commit();
  ASSERT_OK(p);
  auto got = hubload::testing::ReadFileBytes(*p);
  EXPECT_EQ(std::string(got.begin(), got.end()), v2);
}

// Closed without Commit: an empty partial is removed, one holding bytes stays
// (a huggingface_hub-style <etag>.incomplete of exactly those bytes).
TEST(BlobWriter, ClosingRemovesAnEmptyPartialAndKeepsOneWithBytes) {
  hubload::testing::TempDir tmp;
  RepoCache rc(tmp.str(), "o/m", hubload::RepoType::kModel);
  const std::string v(4096, '\x5A');
  const std::string sha = hubload::testing::Sha256Hex(v.data(), v.size());
  const std::string partial = rc.IncompletePath(sha);
  auto empty = BlobWriter::Open(rc, sha, {4096, sha, true, ""});
  ASSERT_OK(empty);
  EXPECT_TRUE(std::filesystem::exists(partial));
  empty->reset();  // closed without a byte
  EXPECT_FALSE(std::filesystem::exists(partial));
  {
    auto w = BlobWriter::Open(rc, sha, {4096, sha, true, ""});
    ASSERT_OK(w);
    ASSERT_OK((*w)->Append(v.data(), 100));
  }
  auto kept = hubload::testing::ReadFileBytes(partial);
  EXPECT_EQ(std::string(kept.begin(), kept.end()), v.substr(0, 100));
  auto again = BlobWriter::Open(rc, sha, {4096, sha, true, ""});
  ASSERT_OK(again);
  EXPECT_EQ((*again)->offset(), 100u);
}

TEST(BlobWriter, Sha256FileMatchesOpenSsl) {
  hubload::testing::TempDir tmp;
  std::string data = PatternBytes(3 << 20, 9);
  hubload::testing::WriteFileBytes(tmp.path() / "f", data);
  auto h = hubload::Sha256File((tmp.path() / "f").string());
  ASSERT_OK(h);
  EXPECT_EQ(*h, hubload::testing::Sha256Hex(data.data(), data.size()));
}
