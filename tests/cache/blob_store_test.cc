// cache/blob_store (the one cache write protocol), cache/tree_cache and
// cache/local_dir: verification by the blob's name (sha256 for LFS, git blob
// sha1 for regular files), links and refs, untrusted cache files. Expected
// digests come from OpenSSL over the test's own bytes ("blob <n>\0" + content
// for git, as `git hash-object`).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cache/blob_store.h"
#include "cache/local_dir.h"
#include "cache/tree_cache.h"
#include "hubload/cache.h"
#include "hubload/reasons.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace fs = std::filesystem;
using hubload::Code;
using hubload::RepoCache;
using hubload::RepoType;
using hubload::cache_internal::BlobId;
using hubload::cache_internal::BlobStore;
using hubload::testing::TempDir;

namespace {

std::string GitSha1(const std::string& content) { return hubload::testing::GitBlobSha1Hex(content); }
std::string Sha(const std::string& s) { return hubload::testing::Sha256Hex(s.data(), s.size()); }
std::string ReadAll(const fs::path& p) {
  auto b = hubload::testing::ReadFileBytes(p);
  return std::string(b.begin(), b.end());
}
const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";

}  // namespace

TEST(BlobStore, TheNameSaysHowABlobIsVerified) {
  EXPECT_EQ((BlobId{std::string(64, 'a'), 1}).sha256(), std::string(64, 'a'));
  EXPECT_EQ((BlobId{std::string(64, 'a'), 1}).git_sha1(), "");
  EXPECT_EQ((BlobId{std::string(40, 'b'), 1}).git_sha1(), std::string(40, 'b'));
  EXPECT_EQ((BlobId{std::string(40, 'b'), 1}).sha256(), "");
  EXPECT_EQ((BlobId{"d41d8cd98f00b204e9800998ecf8427e", 1}).sha256(), "");  // a mirror's md5: size only
  EXPECT_EQ((BlobId{"d41d8cd98f00b204e9800998ecf8427e", 1}).git_sha1(), "");
  EXPECT_EQ((BlobId{std::string(40, 'B'), 1}).git_sha1(), "") << "upper case is not the Hub's spelling";
}

TEST(BlobStore, RegularFileIsVerifiedByItsGitBlobSha1) {
  TempDir cache;
  RepoCache rc(cache.str(), "org/m", RepoType::kModel);
  BlobStore store(rc);
  const std::string good = "{\"hidden_size\": 4096}\n";
  const BlobId id{GitSha1(good), static_cast<int64_t>(good.size())};
  {
    auto lock = store.Lock(id.etag, 5);
    ASSERT_OK(lock);
    auto w = store.OpenStream(id, false);
    ASSERT_OK(w);
    ASSERT_OK((*w)->Append(good.data(), good.size()));
    auto c = (*w)->Commit();
    ASSERT_OK(c);
    EXPECT_EQ(ReadAll(*c), good);
  }
  EXPECT_TRUE(store.Has(id));
  // Same size, other bytes under that name: refused, nothing under a final name.
  TempDir cache2;
  BlobStore store2(RepoCache(cache2.str(), "org/m", RepoType::kModel));
  std::string bad = good;
  bad[3] ^= 1;
  auto w = store2.OpenStream(id, false);
  ASSERT_OK(w);
  ASSERT_OK((*w)->Append(bad.data(), bad.size()));
  auto c = (*w)->Commit();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kCorruptDownload);
  EXPECT_TRUE(c.status().Is(hubload::reason::kHashMismatch)) << c.status().ToString();
  EXPECT_NE(c.status().message().find(id.etag), std::string::npos);
  EXPECT_FALSE(store2.Has(id));
  EXPECT_FALSE(fs::exists(store2.repo().IncompletePath(id.etag)));
}

TEST(BlobStore, RangedRegularFileIsVerifiedToo) {
  TempDir cache;
  BlobStore store(RepoCache(cache.str(), "org/m", RepoType::kModel));
  std::string data(3 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + 1);
  for (bool corrupt : {false, true}) {
    std::string bytes = data;
    if (corrupt) bytes[(2 << 20) + 5] ^= 0x40;
    BlobId id{GitSha1(data), static_cast<int64_t>(data.size())};
    auto w = store.OpenRanged(id, 1 << 20, false);
    ASSERT_OK(w);
    for (size_t k = (*w)->num_chunks(); k-- > 0;) {
      uint64_t b = (*w)->chunk_begin(k), e = (*w)->chunk_end(k);
      ASSERT_OK((*w)->Append(k, bytes.data() + b, e - b));
      ASSERT_OK((*w)->FlushChunk(k));
    }
    auto c = (*w)->Commit();
    EXPECT_EQ(c.ok(), !corrupt) << c.status().ToString();
    if (corrupt) {
      EXPECT_TRUE(c.status().Is(hubload::reason::kHashMismatch));
      EXPECT_FALSE(fs::exists(store.repo().RangedIncompletePath(id.etag)));
    } else {
      EXPECT_EQ(Sha(ReadAll(*c)), Sha(data));
      fs::remove(*c);
    }
  }
}

TEST(BlobStore, CachedLinksAnExistingBlobAndWritesRefsOnlyForBranches) {
  TempDir cache;
  RepoCache rc(cache.str(), "org/m", RepoType::kModel);
  BlobStore store(rc);
  const std::string data = "weights";
  const BlobId id{Sha(data), static_cast<int64_t>(data.size())};
  auto none = store.Cached(kCommit, "w.bin", id);
  ASSERT_OK(none);
  EXPECT_FALSE(none->has_value());
  fs::create_directories(cache.path() / "models--org--m/blobs");
  hubload::testing::WriteFileBytes(rc.BlobPath(id.etag), data);
  auto linked = store.Cached(kCommit, "w.bin", id);
  ASSERT_TRUE(linked.ok() && linked->has_value());
  EXPECT_EQ(**linked, rc.PointerPath(kCommit, "w.bin"));
  EXPECT_TRUE(fs::is_symlink(**linked));
  EXPECT_EQ(ReadAll(**linked), data);
  ASSERT_OK(store.WriteRef(kCommit, kCommit));
  EXPECT_FALSE(fs::exists(cache.path() / "models--org--m/refs" / kCommit));
  ASSERT_OK(store.WriteRef("main", kCommit));
  EXPECT_EQ(ReadAll(cache.path() / "models--org--m/refs/main"), kCommit);
}

TEST(TreeCache, EveryFieldOfEveryTypeIsAnErrorOrAValueNeverAnAbort) {
  nlohmann::json doc = {{"format_version", 1},
                        {"files",
                         {{"config.json", {{"size", 12}, {"blob_id", std::string(40, 'a')}}},
                          {"w.safetensors",
                           {{"size", 9}, {"blob_id", std::string(40, 'b')}, {"lfs_sha256", std::string(64, 'c')},
                            {"lfs_size", 9}}}}}};
  auto ok = hubload::cache_internal::ParseTreeCacheText(doc.dump(), "/c/trees/x.json");
  ASSERT_OK(ok);
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[1].lfs_sha256, std::string(64, 'c'));
  const std::vector<nlohmann::json> types = {nullptr, true, 0, -1, 2.5, "s", nlohmann::json::array(),
                                             nlohmann::json::object()};
  const std::vector<std::string> ptrs = {"/files", "/files/config.json", "/files/config.json/size",
                                         "/files/config.json/blob_id", "/files/w.safetensors/lfs_sha256",
                                         "/format_version"};
  for (auto& p : ptrs) {
    for (auto& t : types) {
      nlohmann::json m = doc;
      m[nlohmann::json::json_pointer(p)] = t;
      hubload::Result<std::vector<hubload::cache_internal::TreeEntry>> r = hubload::Status();
      EXPECT_NO_THROW(r = hubload::cache_internal::ParseTreeCacheText(m.dump(), "/c/trees/x.json"));
      if (!r.ok()) {
        EXPECT_EQ(r.status().code(), Code::kInvalidFormat) << p << " " << t.dump();
        EXPECT_NE(r.status().message().find("/c/trees/x.json"), std::string::npos);
      }
    }
  }
  // A wrong type of a size is refused, naming the field.
  nlohmann::json m = doc;
  m["files"]["config.json"]["size"] = "12";
  auto r = hubload::cache_internal::ParseTreeCacheText(m.dump(), "/c/trees/x.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("size"), std::string::npos) << r.status().message();
  // An unsafe path in a tree file written by someone else.
  m = doc;
  m["files"]["../../evil"] = {{"size", 1}};
  EXPECT_EQ(hubload::cache_internal::ParseTreeCacheText(m.dump(), "x").status().code(), Code::kInvalidArgument);
  // Read from disk: a corrupt file is ignored (nullopt), a good one read back.
  TempDir cache;
  RepoCache rc(cache.str(), "org/m", RepoType::kModel);
  std::vector<hubload::cache_internal::TreeEntry> files = {{"a.bin", 3, std::string(40, 'd'), ""}};
  ASSERT_OK(hubload::cache_internal::WriteTreeCache(rc, kCommit, files));
  auto back = hubload::cache_internal::ReadTreeCache(rc, kCommit);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ((*back)[0].blob_id, std::string(40, 'd'));
  hubload::testing::WriteFileBytes(hubload::cache_internal::TreeCachePath(rc, kCommit), std::string("{\"files\": 7"));
  EXPECT_FALSE(hubload::cache_internal::ReadTreeCache(rc, kCommit).has_value());
}

TEST(LocalDirMeta, CorruptMetadataIsIgnoredAndAGoodOneReadBack) {
  TempDir dir;
  hubload::testing::WriteFileBytes(dir.path() / "a.bin", std::string("x"));
  ASSERT_OK(hubload::cache_internal::WriteLocalDirMeta(dir.str(), "a.bin", kCommit, "etag1"));
  auto m = hubload::cache_internal::ReadLocalDirMeta(dir.str(), "a.bin");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->commit, kCommit);
  EXPECT_EQ(m->etag, "etag1");
  EXPECT_EQ(ReadAll(dir.path() / ".cache/huggingface/.gitignore"), "*");
  for (const char* bad : {"", "not-a-commit\netag\n1.0\n", "0123456789abcdef0123456789abcdef01234567\n\n1\n",
                          "0123456789abcdef0123456789abcdef01234567\netag\nsoon\n", "\n\n\n\n"}) {
    hubload::testing::WriteFileBytes(hubload::cache_internal::LocalDirMetaPath(dir.str(), "a.bin"), std::string(bad));
    EXPECT_FALSE(hubload::cache_internal::ReadLocalDirMeta(dir.str(), "a.bin").has_value()) << bad;
  }
}
