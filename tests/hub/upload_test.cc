// UploadFolder / CreateCommit against an in-process `hubload serve`.
// Expected values come from the local files' raw bytes (sha256 via OpenSSL in
// testing::Sha256Hex), the server's store folder, and the requests recorded
// below the retry layer — never from the upload code itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "hubload/hub.h"
#include "testing/push_server.h"
#include "testing/status_matchers.h"

namespace hubload {
namespace {
namespace fs = std::filesystem;
using pushtest::PushServer;
using pushtest::PatternBytes;
using pushtest::ReadText;
using testing::Sha256Hex;
using testing::TempDir;
using testing::WriteFileBytes;

constexpr uint64_t kChunk = 64 * 1024;  // server multipart chunk (scaled-down S3 part limit)

std::string Sha(const std::string& s) { return Sha256Hex(s.data(), s.size()); }

// A checkpoint-like folder: config (regular), two LFS shards (one multipart,
// one basic), an index, plus files that must never be uploaded.
std::map<std::string, std::string> MakeFolder(const fs::path& dir, uint32_t seed = 1) {
  std::map<std::string, std::string> files{
      {"config.json", "{\"hidden_size\": 8}\n"},
      {"model-00001-of-00002.safetensors", PatternBytes(3 * kChunk + 123, seed)},  // 4 parts
      {"model-00002-of-00002.safetensors", PatternBytes(kChunk / 2, seed + 1)},    // basic
      {"model.safetensors.index.json", "{\"metadata\": {}, \"weight_map\": {}}\n"},
      {"sub/notes.txt", "hello\n"},
  };
  for (auto& [p, b] : files) {
    fs::create_directories((dir / p).parent_path());
    WriteFileBytes(dir / p, b);
  }
  fs::create_directories(dir / ".git");
  WriteFileBytes(dir / ".git" / "HEAD", std::string("ref: refs/heads/main\n"));
  fs::create_directories(dir / ".cache" / "huggingface");
  WriteFileBytes(dir / ".cache" / "huggingface" / "x.metadata", std::string("meta"));
  return files;
}

UploadFolderRequest Req(const std::string& repo, const fs::path& dir) {
  UploadFolderRequest r;
  r.repo_id = repo;
  r.folder = dir.string();
  r.create_repo = true;
  r.commit_message = "push test";
  return r;
}

TEST(PushUpload, FolderRoundTripsByteForByte) {
  PushServer hub(kChunk);
  ASSERT_OK(hub);
  TempDir local;
  auto files = MakeFolder(local.path());
  auto info = hub.client().UploadFolder(Req("org/ckpt", local.path()));
  ASSERT_OK(info);
  EXPECT_TRUE(info->committed);
  EXPECT_EQ(info->commit_oid.size(), 40u);
  EXPECT_EQ(hub.Ref("org/ckpt"), info->commit_oid);
  EXPECT_EQ(info->commit_url, hub.server().url() + "/org/ckpt/commit/" + info->commit_oid);
  EXPECT_EQ(info->repo_url, hub.server().url() + "/org/ckpt");

  // The committed tree is exactly the folder minus .git/ and .cache/huggingface/
  // (plus the .gitattributes the server writes at creation).
  auto tree = hub.Tree("org/ckpt", info->commit_oid);
  tree.erase(".gitattributes");
  EXPECT_EQ(tree, files);

  // LFS blobs are stored under the sha256 of the raw bytes.
  for (const char* p : {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}) {
    fs::path blob = hub.RepoDir("org/ckpt") / "blobs" / Sha(files[p]);
    EXPECT_TRUE(fs::is_regular_file(blob)) << p;
  }
  EXPECT_EQ(info->lfs, (std::vector<std::string>{"model-00001-of-00002.safetensors",
                                                  "model-00002-of-00002.safetensors"}));
  EXPECT_EQ(info->lfs_objects_uploaded, 2u);
  EXPECT_EQ(info->lfs_bytes_uploaded, files["model-00001-of-00002.safetensors"].size() +
                                          files["model-00002-of-00002.safetensors"].size());

  // Read back with hubload's downloader into a fresh cache: same bytes.
  TempDir cache;
  HubClient client(hub.ReaderOptions(cache.str()));
  for (auto& [p, bytes] : files) {
    FileRequest fr;
    fr.repo_id = "org/ckpt";
    fr.filename = p;
    auto got = client.Download(fr);
    ASSERT_OK(got) << p << ": " << got.status().ToString();
    EXPECT_EQ(ReadText(*got), bytes) << p;
  }
  // Tree API: lfs oid == sha256 of the bytes, size == byte count.
  auto listing = client.ListFiles("org/ckpt", "main");
  ASSERT_OK(listing);
  for (auto& f : listing->files) {
    if (f.path == ".gitattributes") continue;
    ASSERT_TRUE(files.count(f.path)) << f.path;
    EXPECT_EQ(f.size, files[f.path].size()) << f.path;
    if (f.path.find(".safetensors") != std::string::npos && f.path.find(".json") == std::string::npos) {
      EXPECT_EQ(f.lfs_sha256, Sha(files[f.path])) << f.path;
    }
  }
}

TEST(PushUpload, MultipartWhenServerAsksAndNoPutLargerThanChunk) {
  // B21 scaled down: T = 64 KiB; a T+1 file and a 4T file must go multipart,
  // every single PUT carries at most T bytes and never an empty body.
  PushServer hub(kChunk);
  ASSERT_OK(hub);
  TempDir local;
  std::string a = PatternBytes(kChunk + 1, 7), b = PatternBytes(4 * kChunk, 8);
  WriteFileBytes(local.path() / "a.safetensors", a);
  WriteFileBytes(local.path() / "b.safetensors", b);
  auto info = hub.client().UploadFolder(Req("org/big", local.path()));
  ASSERT_OK(info);
  size_t puts = 0, a_parts = 0, b_parts = 0, completes = 0;
  for (auto& r : hub.recorder().log()) {
    if (r.method == "PUT") {
      ++puts;
      EXPECT_GT(r.body_bytes, 0u) << r.url;
      EXPECT_LE(r.body_bytes, kChunk) << r.url;
      EXPECT_TRUE(r.body_from_file) << "LFS bytes are streamed from the file";
      if (r.url.find(Sha(a)) != std::string::npos) ++a_parts;
      if (r.url.find(Sha(b)) != std::string::npos) ++b_parts;
      EXPECT_NE(r.url.find("/part/"), std::string::npos) << "multipart expected: " << r.url;
    }
    if (r.method == "POST" && r.url.find("/complete") != std::string::npos) ++completes;
  }
  EXPECT_EQ(a_parts, 2u);  // ceil((T+1)/T)
  EXPECT_EQ(b_parts, 4u);
  EXPECT_EQ(puts, 6u);
  EXPECT_EQ(completes, 2u);
  auto tree = hub.Tree("org/big", info->commit_oid);
  EXPECT_EQ(tree["a.safetensors"], a);
  EXPECT_EQ(tree["b.safetensors"], b);
}

TEST(PushUpload, FileTheServerHoldsTransfersNoBytes) {
  PushServer hub(kChunk);
  ASSERT_OK(hub);
  TempDir local;
  auto files = MakeFolder(local.path());
  auto first = hub.client().UploadFolder(Req("org/same", local.path()));
  ASSERT_OK(first);

  // Same folder again: preupload reports the same oids, nothing is sent and
  // no commit is made.
  hub.recorder().Clear();
  hub.server().ResetStats();
  auto again = hub.client().UploadFolder(Req("org/same", local.path()));
  ASSERT_OK(again);
  EXPECT_FALSE(again->committed);
  EXPECT_EQ(again->commit_oid, first->commit_oid);
  EXPECT_EQ(hub.Ref("org/same"), first->commit_oid);
  EXPECT_EQ(hub.Puts(), 0u);
  EXPECT_EQ(hub.server().RequestCount("/_lfs/"), 0u);
  EXPECT_EQ(again->lfs_bytes_uploaded, 0u);
  EXPECT_EQ(again->unchanged.size(), files.size());

  // The same shard bytes under a new name: the LFS batch says the object is
  // stored, so no PUT, but the commit adds the new path pointing at it.
  TempDir local2;
  std::string shard = files["model-00001-of-00002.safetensors"];
  WriteFileBytes(local2.path() / "copy.safetensors", shard);
  hub.recorder().Clear();
  auto req = Req("org/same", local2.path());
  auto copy = hub.client().UploadFolder(req);
  ASSERT_OK(copy);
  EXPECT_TRUE(copy->committed);
  EXPECT_EQ(hub.Puts(), 0u);
  EXPECT_EQ(copy->lfs_bytes_uploaded, 0u);
  auto tree = hub.Tree("org/same", copy->commit_oid);
  EXPECT_EQ(tree["copy.safetensors"], shard);
  EXPECT_EQ(tree["config.json"], files["config.json"]);  // upload_folder keeps other files
}

TEST(PushUpload, PartFailingOnceIsResentWithItsBytes) {
  PushServer hub(kChunk);
  ASSERT_OK(hub);
  TempDir local;
  std::string bytes = PatternBytes(3 * kChunk + 5, 21);
  WriteFileBytes(local.path() / "w.safetensors", bytes);
  hub.server().faults().SetStatusForNext("/part/2", 500, 1);
  auto info = hub.client().UploadFolder(Req("org/retry", local.path()));
  ASSERT_OK(info);
  // Part 2 went out twice, both times with the full part length.
  std::vector<uint64_t> part2;
  for (auto& r : hub.recorder().log())
    if (r.method == "PUT" && r.url.find("/part/2?") != std::string::npos) part2.push_back(r.body_bytes);
  EXPECT_EQ(part2, (std::vector<uint64_t>{kChunk, kChunk}));
  EXPECT_EQ(hub.server().RequestCount("/part/2"), 2u);
  // The object the server assembled is the file, byte for byte.
  EXPECT_EQ(ReadText(hub.RepoDir("org/retry") / "blobs" / Sha(bytes)), bytes);
  EXPECT_EQ(hub.Tree("org/retry", info->commit_oid)["w.safetensors"], bytes);
}

TEST(PushUpload, ServerErrorInTheMiddleLeavesNoCommit) {
  PushServer hub(kChunk);
  ASSERT_OK(hub);
  TempDir local;
  auto files = MakeFolder(local.path());
  auto first = hub.client().UploadFolder(Req("org/atomic", local.path()));
  ASSERT_OK(first);
  size_t snaps = hub.Snapshots("org/atomic");
  hub.recorder().Clear();

  // New shard contents; part 3 of the big shard always fails.
  TempDir local2;
  auto files2 = MakeFolder(local2.path(), 99);
  hub.server().faults().SetStatusForNext("/part/3", 503, -1);
  auto r = hub.client().UploadFolder(Req("org/atomic", local2.path()));
  hub.server().faults().Clear();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kServerError) << r.status().ToString();
  EXPECT_NE(r.status().message().find("model-00001-of-00002.safetensors"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("part 3 of 4"), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().context().file, "model-00001-of-00002.safetensors");
  EXPECT_EQ(r.status().context().http_status, 503);
  // No commit request was sent and the branch did not move.
  for (auto& rec : hub.recorder().log()) EXPECT_EQ(rec.url.find("/commit/"), std::string::npos) << rec.url;
  EXPECT_EQ(hub.Ref("org/atomic"), first->commit_oid);
  EXPECT_EQ(hub.Snapshots("org/atomic"), snaps);
}

TEST(PushUpload, CreatePrMakesRefsPrN) {
  PushServer hub(kChunk);
  ASSERT_OK(hub);
  TempDir local;
  auto files = MakeFolder(local.path());
  auto first = hub.client().UploadFolder(Req("org/pr", local.path()));
  ASSERT_OK(first);

  TempDir local2;
  WriteFileBytes(local2.path() / "config.json", std::string("{\"hidden_size\": 16}\n"));
  for (int n = 1; n <= 2; ++n) {
    auto req = Req("org/pr", local2.path());
    req.create_pr = true;
    req.commit_message = "PR " + std::to_string(n);
    auto pr = hub.client().UploadFolder(req);
    ASSERT_OK(pr);
    EXPECT_EQ(pr->pr_num, n);
    EXPECT_EQ(pr->pr_url, hub.server().url() + "/org/pr/discussions/" + std::to_string(n));
    EXPECT_EQ(hub.Ref("org/pr", "refs/pr/" + std::to_string(n)), pr->commit_oid);
    auto tree = hub.Tree("org/pr", pr->commit_oid);
    EXPECT_EQ(tree["config.json"], "{\"hidden_size\": 16}\n");
    EXPECT_EQ(tree["model-00002-of-00002.safetensors"], files["model-00002-of-00002.safetensors"]);
  }
  EXPECT_EQ(hub.Ref("org/pr"), first->commit_oid);  // main untouched
}

TEST(PushUpload, StaleParentCommitIsRefused) {
  PushServer hub(kChunk);
  ASSERT_OK(hub);
  TempDir a, b, c;
  WriteFileBytes(a.path() / "x.txt", std::string("one"));
  WriteFileBytes(b.path() / "x.txt", std::string("two"));
  WriteFileBytes(c.path() / "x.txt", std::string("three"));
  auto c1 = hub.client().UploadFolder(Req("org/parent", a.path()));
  ASSERT_OK(c1);
  auto rb = Req("org/parent", b.path());
  rb.parent_commit = c1->commit_oid;  // current head: accepted
  auto c2 = hub.client().UploadFolder(rb);
  ASSERT_OK(c2);
  auto rc = Req("org/parent", c.path());
  rc.parent_commit = c1->commit_oid;  // no longer the head
  auto c3 = hub.client().UploadFolder(rc);
  ASSERT_FALSE(c3.ok());
  EXPECT_EQ(c3.status().code(), Code::kConflict) << c3.status().ToString();
  EXPECT_NE(c3.status().message().find(c1->commit_oid), std::string::npos);
  EXPECT_EQ(hub.Ref("org/parent"), c2->commit_oid);
  EXPECT_EQ(hub.Tree("org/parent", c2->commit_oid)["x.txt"], "two");
}

TEST(PushUpload, PatternsAndDeletes) {
  PushServer hub(kChunk);
  ASSERT_OK(hub);
  TempDir local;
  auto files = MakeFolder(local.path());
  auto req = Req("org/pat", local.path());
  req.path_in_repo = "/unet/";
  req.allow_patterns = {"*.safetensors", "*.json"};
  req.ignore_patterns = {"*.index.json"};
  auto first = hub.client().UploadFolder(req);
  ASSERT_OK(first);
  auto tree = hub.Tree("org/pat", first->commit_oid);
  tree.erase(".gitattributes");
  std::set<std::string> got;
  for (auto& [p, b] : tree) got.insert(p);
  EXPECT_EQ(got, (std::set<std::string>{"unet/config.json", "unet/model-00001-of-00002.safetensors",
                                        "unet/model-00002-of-00002.safetensors"}));

  // Second push: only shard 1 (new bytes); delete every other safetensors
  // under unet/ — but not what this commit writes, and nothing outside unet/.
  TempDir local2;
  std::string shard = PatternBytes(1000, 5);
  WriteFileBytes(local2.path() / "model-00001-of-00002.safetensors", shard);
  auto req2 = Req("org/pat", local2.path());
  req2.path_in_repo = "unet";
  req2.delete_patterns = {"*.safetensors"};
  auto second = hub.client().UploadFolder(req2);
  ASSERT_OK(second);
  EXPECT_EQ(second->deleted, (std::vector<std::string>{"unet/model-00002-of-00002.safetensors"}));
  auto tree2 = hub.Tree("org/pat", second->commit_oid);
  EXPECT_EQ(tree2.count("unet/model-00002-of-00002.safetensors"), 0u);
  EXPECT_EQ(tree2["unet/model-00001-of-00002.safetensors"], shard);
  EXPECT_EQ(tree2["unet/config.json"], files["config.json"]);
  EXPECT_EQ(tree2.count(".gitattributes"), 1u);
}

TEST(PushUpload, BadInputIsRefusedBeforeAnyRequest) {
  PushServer hub(kChunk);
  ASSERT_OK(hub);
  TempDir local;
  auto r1 = hub.client().UploadFolder(Req("org/x", local.path() / "missing"));
  EXPECT_EQ(r1.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r1.status().message().find("missing"), std::string::npos);
  auto r2 = hub.client().UploadFolder(Req("bad//id", local.path()));
  EXPECT_EQ(r2.status().code(), Code::kInvalidArgument);
  auto req = Req("org/x", local.path());
  req.parent_commit = "xyz";
  auto r3 = hub.client().UploadFolder(req);
  EXPECT_EQ(r3.status().code(), Code::kInvalidArgument);
  auto r4 = hub.client().UploadFolder(Req("org/x", local.path()));  // empty folder
  EXPECT_EQ(r4.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(r4.status().reason(), "EmptyCommit");
  EXPECT_EQ(hub.recorder().log().size(), 0u);  // refused before any request
}

TEST(PushUpload, WrongTokenNamesNoToken) {
  PushServer hub(kChunk);
  ASSERT_OK(hub);
  TempDir local;
  MakeFolder(local.path());
  auto first = hub.client().UploadFolder(Req("org/auth", local.path()));
  ASSERT_OK(first);
  ClientOptions bad = hub.options();
  bad.config.token = "hf_WRONGSECRET987654";
  auto req = Req("org/auth", local.path());
  req.create_repo = false;
  auto r = HubClient(bad).UploadFolder(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnauthorized) << r.status().ToString();
  EXPECT_EQ(r.status().ToString().find("WRONGSECRET"), std::string::npos);
}

TEST(PushUpload, ProgressReportsHashAndUploadBytes) {
  PushServer hub(kChunk);
  ASSERT_OK(hub);
  TempDir local;
  auto files = MakeFolder(local.path());
  uint64_t all = 0, lfs = 0;
  for (auto& [p, b] : files) {
    all += b.size();
    if (p.find(".safetensors") != std::string::npos && p.find("index") == std::string::npos) lfs += b.size();
  }
  std::mutex mu;
  std::map<UploadPhase, UploadProgress> last;
  // Per phase and file: the last (file_bytes_done, file_bytes_total) seen.
  std::map<std::pair<UploadPhase, std::string>, std::pair<uint64_t, uint64_t>> per_file;
  auto req = Req("org/progress", local.path());
  req.callbacks.on_progress = [&](const UploadProgress& p) {
    std::lock_guard<std::mutex> l(mu);
    auto it = last.find(p.phase);
    if (it != last.end()) {
      EXPECT_GE(p.bytes_done, it->second.bytes_done);
    }
    EXPECT_LE(p.bytes_done, p.bytes_total);
    last[p.phase] = p;
    if (p.path_in_repo.empty()) {
      EXPECT_EQ(p.file_bytes_done, 0u);
      EXPECT_EQ(p.file_bytes_total, 0u);
    } else {
      auto& f = per_file[{p.phase, p.path_in_repo}];
      EXPECT_GE(p.file_bytes_done, f.first) << p.path_in_repo;
      f = {p.file_bytes_done, p.file_bytes_total};
    }
  };
  auto info = hub.client().UploadFolder(req);
  ASSERT_OK(info);
  EXPECT_EQ(last[UploadPhase::kHashing].bytes_done, all);
  EXPECT_EQ(last[UploadPhase::kHashing].bytes_total, all);
  EXPECT_EQ(last[UploadPhase::kUploading].bytes_done, lfs);
  EXPECT_EQ(last[UploadPhase::kUploading].bytes_total, lfs);
  EXPECT_TRUE(last.count(UploadPhase::kCommitting));
  // Every file's completion is reported (never skipped by the rate limit) with its size from the folder.
  for (auto& [p, b] : files) {
    SCOPED_TRACE(p);
    if (b.empty()) continue;  // nothing to read: no progress call names it
    const std::pair<uint64_t, uint64_t> whole{b.size(), b.size()};
    EXPECT_EQ((per_file[{UploadPhase::kHashing, p}]), whole);
    if (p.find(".safetensors") != std::string::npos && p.find("index") == std::string::npos) {
      EXPECT_EQ((per_file[{UploadPhase::kUploading, p}]), whole);
    }
  }
}

TEST(PushUpload, GitBlobOidMatchesGit) {
  // `printf 'hello\n' | git hash-object --stdin` and the empty blob.
  EXPECT_EQ(GitBlobOid("hello\n"), "ce013625030ba8dba906f756967f9e9ca394464a");
  EXPECT_EQ(GitBlobOid(""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
}

}  // namespace
}  // namespace hubload

namespace hubload {
namespace {

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string CliBin() {
  const char* env = std::getenv("HUBLOAD_BIN");
  if (env && *env) return env;
#ifdef HUBLOAD_PUSH_CLI
  return HUBLOAD_PUSH_CLI;
#else
  return testing::HubloadBin();
#endif
}

TEST(PushCli, PrintsCommitAndUrlAndHonoursFilters) {
  pushtest::PushServer hub(64 * 1024);
  ASSERT_OK(hub);
  testing::TempDir local;
  auto files = MakeFolder(local.path());
  std::string base = CliBin() + " --endpoint " + hub.server().url() + " --token " + pushtest::kToken +
                     " push " + local.str() + " org/cli";
  std::string out, err;
  int rc = testing::RunCommand(base + " --include '*.safetensors' --include '*.json' --exclude '*.index.json'" +
                                   " --commit-message 'from the cli'",
                               &out, &err);
  ASSERT_EQ(rc, 0) << err;
  // Only the deprecation note of the `push` alias: no progress output when stderr is not a terminal.
  EXPECT_EQ(err, "hubload push: deprecated; use `hubload upload org/cli " + local.str() + "` (same options)\n");
  auto lines = Lines(out);
  ASSERT_EQ(lines.size(), 2u) << out;
  EXPECT_EQ(lines[0], hub.Ref("org/cli"));
  EXPECT_EQ(lines[1], hub.server().url() + "/org/cli/commit/" + lines[0]);
  auto tree = hub.Tree("org/cli", lines[0]);
  tree.erase(".gitattributes");
  std::map<std::string, std::string> want;
  for (const char* p : {"config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"})
    want[p] = files[p];
  EXPECT_EQ(tree, want);
  EXPECT_EQ(err.find(pushtest::kToken), std::string::npos);

  // --create-pr: a third line with the PR URL; refs/pr/1 holds the commit.
  testing::WriteFileBytes(local.path() / "config.json", std::string("{\"hidden_size\": 32}\n"));
  rc = testing::RunCommand(base + " --create-pr --include config.json", &out, &err);
  ASSERT_EQ(rc, 0) << err;
  lines = Lines(out);
  ASSERT_EQ(lines.size(), 3u) << out;
  EXPECT_EQ(lines[0], hub.Ref("org/cli", "refs/pr/1"));
  EXPECT_EQ(lines[2], hub.server().url() + "/org/cli/discussions/1");
  EXPECT_EQ(hub.Tree("org/cli", lines[0])["config.json"], "{\"hidden_size\": 32}\n");

  // --delete with --path-in-repo, then a missing folder: exit 1 naming it.
  rc = testing::RunCommand(base + " --include config.json --delete 'model-*.safetensors'", &out, &err);
  ASSERT_EQ(rc, 0) << err;
  lines = Lines(out);
  ASSERT_GE(lines.size(), 1u);
  tree = hub.Tree("org/cli", lines[0]);
  EXPECT_EQ(tree.count("model-00001-of-00002.safetensors"), 0u);
  EXPECT_EQ(tree["config.json"], "{\"hidden_size\": 32}\n");
  rc = testing::RunCommand(CliBin() + " --endpoint " + hub.server().url() + " --token x push " +
                               local.str() + "/nope org/cli",
                           &out, &err);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find(local.str() + "/nope"), std::string::npos) << err;
}

}  // namespace
}  // namespace hubload
