// The CLI commands as the README documents them (download --dry-run, upload,
// push, cache ls/rm/prune/verify, env, hf:// URIs), against `hubload serve`
// (tests/testing/hub_server.h) and hand-made caches. Expected byte counts
// come from the source files on disk, hashes from OpenSSL in the test,
// allocated sizes from stat(2).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "testing/hub_server.h"
#include "tests/hub/access_log.h"  // hubload::testing::Bytes, the shared test byte generator
#include "tests/hub/endpoints.h"  // RefusedUrl
#include "testing/util.h"
#include "tests/cli/cli_helpers.h"
#include "testing/status_matchers.h"

namespace {
namespace fs = std::filesystem;
using hubload::testing::RunCommand;
using hubload::testing::TempDir;
using json = nlohmann::json;
using hubload::testing::cli::Hubload;
using hubload::testing::cli::Names;
using hubload::testing::cli::Quote;

std::string Sha256(const std::string& s) { return hubload::testing::Sha256Hex(s.data(), s.size()); }

// Paths of a `download --dry-run --json` answer, the store's .gitattributes left out.
std::set<std::string> PathsOf(const std::string& dry_run_json) {
  const json j = json::parse(dry_run_json);
  std::set<std::string> out;
  for (auto& f : j["files"])
    if (f["path"] != ".gitattributes") out.insert(f["path"].get<std::string>());
  return out;
}

// A source folder with one regular file and three LFS files (lfs threshold 1 KiB).
struct Repo {
  TempDir src;
  std::map<std::string, std::string> files = {{"config.json", "{\"hidden\": 8}"},
                                              {"a.bin", hubload::testing::PatternBytes(300000, 1)},
                                              {"b.bin", hubload::testing::PatternBytes(200000, 2)},
                                              {"sub/c.bin", hubload::testing::PatternBytes(50000, 3)}};
  std::string commit;
  explicit Repo(hubload::testing::TestHub& hub, const std::string& repo_id = "org/m") {
    for (auto& [p, b] : files) {
      fs::create_directories((src.path() / p).parent_path());
      hubload::testing::WriteFileBytes(src.path() / p, b);
    }
    hubload::server::CreateRepoOptions o;
    o.lfs_threshold_bytes = 1024;
    auto c = hubload::server::CreateRepoFromFolder(hub.root.str(), repo_id, src.str(), o);
    EXPECT_OK(c);
    if (c.ok()) commit = *c;
  }
  uint64_t SizeOnDisk(const std::string& p) const { return fs::file_size(src.path() / p); }
};

TEST(DownloadDryRun, CountsCachedPartialAndMissingBytesAndDownloadsNothing) {
  auto hub = hubload::testing::StartTestHub();
  ASSERT_TRUE(hub);
  Repo repo(*hub);
  TempDir tmp;
  const std::string cache = (tmp.path() / "hub").string();
  const std::string g = "--endpoint " + hub->url() + " --cache-dir " + Quote(cache) + " ";
  std::string out, err;
  // Half-filled cache: config.json and a.bin downloaded, the first 1000 bytes of b.bin in a partial.
  ASSERT_EQ(Hubload(g + "download org/m config.json a.bin --quiet", &out, &err), 0) << err;
  const fs::path blobs = fs::path(cache) / "models--org--m/blobs";
  const std::string b_sha = Sha256(repo.files["b.bin"]);
  hubload::testing::WriteFileBytes(blobs / (b_sha + ".incomplete"), repo.files["b.bin"].substr(0, 1000));
  const auto blobs_before = Names(blobs);

  ASSERT_EQ(Hubload(g + "download org/m --dry-run --json", &out, &err), 0) << err;
  json j = json::parse(out);
  const uint64_t total = repo.SizeOnDisk("config.json") + repo.SizeOnDisk("a.bin") + repo.SizeOnDisk("b.bin") +
                         repo.SizeOnDisk("sub/c.bin");
  const uint64_t to_fetch = (repo.SizeOnDisk("b.bin") - 1000) + repo.SizeOnDisk("sub/c.bin");
  EXPECT_EQ(j["commit"], repo.commit);
  EXPECT_EQ(j["total_bytes"].get<uint64_t>(), total);
  EXPECT_EQ(j["bytes_to_fetch"].get<uint64_t>(), to_fetch);
  EXPECT_EQ(j["files_to_fetch"].get<uint64_t>(), 2u);
  std::map<std::string, json> by;
  for (auto& f : j["files"]) by[f["path"].get<std::string>()] = f;
  ASSERT_EQ(by.size(), 4u) << out;
  EXPECT_TRUE(by["a.bin"]["cached"].get<bool>());
  EXPECT_EQ(by["a.bin"]["bytes_to_fetch"].get<uint64_t>(), 0u);
  EXPECT_FALSE(by["b.bin"]["cached"].get<bool>());
  EXPECT_EQ(by["b.bin"]["partial_bytes"].get<uint64_t>(), 1000u);
  EXPECT_EQ(by["sub/c.bin"]["bytes_to_fetch"].get<uint64_t>(), repo.SizeOnDisk("sub/c.bin"));
  EXPECT_EQ(Names(blobs), blobs_before);  // nothing downloaded
  EXPECT_FALSE(fs::exists(fs::path(cache) / "models--org--m/snapshots" / repo.commit / "sub/c.bin"));

  // Filters and the hf:// forms select the same way.
  ASSERT_EQ(Hubload(g + "download hf://org/m@main --include '*.bin' --exclude 'a*' --dry-run --json", &out, &err), 0)
      << err;
  j = json::parse(out);
  EXPECT_EQ(j["files"].size(), 2u);
  EXPECT_EQ(j["bytes_to_fetch"].get<uint64_t>(), to_fetch);
  ASSERT_EQ(Hubload(g + "download hf://models/org/m/sub/c.bin --dry-run --json", &out, &err), 0) << err;
  j = json::parse(out);
  ASSERT_EQ(j["files"].size(), 1u);
  EXPECT_EQ(j["files"][0]["path"], "sub/c.bin");
  // --force-download counts every byte.
  ASSERT_EQ(Hubload(g + "download org/m a.bin --force-download --dry-run --json", &out, &err), 0) << err;
  EXPECT_EQ(json::parse(out)["bytes_to_fetch"].get<uint64_t>(), repo.SizeOnDisk("a.bin"));
  // Text form: a totals line with the same numbers.
  ASSERT_EQ(Hubload(g + "download org/m --dry-run", &out, &err), 0) << err;
  EXPECT_NE(out.find(std::to_string(to_fetch) + " bytes"), std::string::npos) << out;
  EXPECT_NE(out.find("partial  b.bin"), std::string::npos) << out;
  // A name not in the repo, a contradicting --repo-type, a bad URI.
  EXPECT_EQ(Hubload(g + "download org/m nope.txt --dry-run", &out, &err), 1);
  EXPECT_NE(err.find("'nope.txt'"), std::string::npos) << err;
  EXPECT_EQ(Hubload(g + "download hf://datasets/org/m --repo-type model --dry-run", &out, &err), 2);
  EXPECT_EQ(Hubload(g + "download hf://org/m@ --dry-run", &out, &err), 2);
  EXPECT_NE(err.find("'@' without a revision"), std::string::npos) << err;
}

TEST(DownloadDryRun, ForceDownloadFetchesAgainAndTheCacheIsTagged) {
  auto hub = hubload::testing::StartTestHub();
  ASSERT_TRUE(hub);
  Repo repo(*hub);
  TempDir tmp;
  const std::string cache = (tmp.path() / "new-cache").string();
  const std::string g = "--endpoint " + hub->url() + " --cache-dir " + Quote(cache) + " ";
  std::string out, err;
  ASSERT_EQ(Hubload(g + "download org/m --quiet", &out, &err), 0) << err;
  std::ifstream tag(fs::path(cache) / "CACHEDIR.TAG");
  std::string first;
  std::getline(tag, first);
  EXPECT_EQ(first, "Signature: 8a477f597d28d172789f06886806bc55");
  // A damaged blob is replaced by --force-download.
  const fs::path a_blob = fs::path(cache) / "models--org--m/blobs" / Sha256(repo.files["a.bin"]);
  hubload::testing::WriteFileBytes(a_blob, std::string(repo.files["a.bin"].size(), 'z'));
  ASSERT_EQ(Hubload(g + "download org/m --include 'a*' --force-download --quiet", &out, &err), 0) << err;
  auto b = hubload::testing::ReadFileBytes(a_blob);
  EXPECT_EQ(std::string(b.begin(), b.end()), repo.files["a.bin"]);
}

TEST(CacheVerify, NamesTheFlippedFileAndTheMissingOne) {
  auto hub = hubload::testing::StartTestHub();
  ASSERT_TRUE(hub);
  Repo repo(*hub);
  TempDir cache;
  const std::string g = "--endpoint " + hub->url() + " --cache-dir " + Quote(cache.str()) + " ";
  std::string out, err;
  ASSERT_EQ(Hubload(g + "download org/m --quiet", &out, &err), 0) << err;
  ASSERT_EQ(Hubload(g + "cache verify org/m", &out, &err), 0) << out << err;
  EXPECT_NE(out.find("4 verified, 0 mismatched, 0 missing, 0 extra"), std::string::npos) << out;

  const fs::path snap = cache.path() / "models--org--m/snapshots" / repo.commit;
  // One flipped byte in an LFS file (sha256) and in the regular file (git blob sha1); one file removed.
  {
    std::fstream f(fs::canonical(snap / "b.bin"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(12345);
    f.put(static_cast<char>(repo.files["b.bin"][12345] ^ 0x01));
  }
  {
    std::string cfg = repo.files["config.json"];
    cfg[2] = static_cast<char>(cfg[2] ^ 0x20);
    hubload::testing::WriteFileBytes(fs::canonical(snap / "config.json"), cfg);
  }
  fs::remove(snap / "sub/c.bin");
  hubload::testing::WriteFileBytes(snap / "stray.txt", "x");
  ASSERT_EQ(Hubload(g + "cache verify org/m", &out, &err), 1) << out << err;
  EXPECT_NE(out.find("mismatch b.bin: sha256"), std::string::npos) << out;
  EXPECT_NE(out.find("expected " + Sha256(repo.files["b.bin"])), std::string::npos) << out;
  EXPECT_NE(out.find("mismatch config.json: git blob sha1"), std::string::npos) << out;
  EXPECT_NE(out.find("expected " + hubload::testing::GitBlobSha1Hex(repo.files["config.json"])), std::string::npos);
  EXPECT_NE(out.find("missing sub/c.bin"), std::string::npos) << out;
  EXPECT_NE(out.find("extra stray.txt"), std::string::npos) << out;

  // Offline: the listing comes from trees/<commit>.json, same verdicts (JSON form).
  ASSERT_EQ(Hubload(g + "cache verify hf://org/m@" + repo.commit + " --json", &out, &err, "HF_HUB_OFFLINE=1"), 1)
      << err;
  json j = json::parse(out);
  EXPECT_EQ(j["mismatched"].size(), 2u);
  EXPECT_EQ(j["missing"], json::array({"sub/c.bin"}));
  EXPECT_EQ(j["extra"], json::array({"stray.txt"}));
  EXPECT_EQ(j["verified"], json::array({"a.bin"}));

  // Missing and extra files alone fail only when asked to.
  ASSERT_EQ(Hubload(g + "download org/m b.bin config.json --force-download --quiet", &out, &err), 0) << err;
  EXPECT_EQ(Hubload(g + "cache verify org/m", &out, &err), 0) << out;
  EXPECT_EQ(Hubload(g + "cache verify org/m --fail-on-missing-files", &out, &err), 1) << out;
  fs::remove(snap / "stray.txt");
  ASSERT_EQ(Hubload(g + "download org/m sub/c.bin --quiet", &out, &err), 0) << err;
  EXPECT_EQ(Hubload(g + "cache verify org/m --fail-on-missing-files --fail-on-extra-files", &out, &err), 0) << out;
  hubload::testing::WriteFileBytes(snap / "stray.txt", "x");
  EXPECT_EQ(Hubload(g + "cache verify org/m --fail-on-extra-files", &out, &err), 1) << out;

  // --local-dir: the plain files of a local_dir download.
  TempDir local;
  ASSERT_EQ(Hubload(g + "download org/m --local-dir " + Quote(local.str()) + " --quiet", &out, &err), 0) << err;
  // (as hf cache verify: --local-dir or --cache-dir, not both)
  const std::string e = "--endpoint " + hub->url() + " ";
  EXPECT_EQ(Hubload(e + "cache verify org/m --local-dir " + Quote(local.str()) + " --fail-on-extra-files", &out, &err),
            0)
      << out << err;
  EXPECT_EQ(Hubload(g + "cache verify org/m --local-dir " + Quote(local.str()), &out, &err), 2);
  EXPECT_NE(err.find("--local-dir and --cache-dir"), std::string::npos) << err;
  hubload::testing::WriteFileBytes(local.path() / "a.bin", "short");
  EXPECT_EQ(Hubload(e + "cache verify org/m --local-dir " + Quote(local.str()), &out, &err), 1);
  EXPECT_NE(out.find("mismatch a.bin: size 5 bytes"), std::string::npos) << out;
}

// A cache written by hand: commit A with f.txt (blob of 3 bytes) and a
// dangling link, trees/A.json claiming f.txt has 5 bytes, refs/main -> B with
// no snapshot, and a stray partial.
struct CorruptCache {
  TempDir dir;
  const std::string a = std::string(40, 'a'), b = std::string(40, 'b');
  const std::string blob = hubload::testing::GitBlobSha1Hex("abc"), gone = std::string(40, 'c');
  fs::path repo() const { return dir.path() / "models--org--bad"; }
  CorruptCache() {
    fs::create_directories(repo() / "blobs");
    fs::create_directories(repo() / "snapshots" / a);
    fs::create_directories(repo() / "refs");
    fs::create_directories(repo() / "trees");
    hubload::testing::WriteFileBytes(repo() / "blobs" / blob, "abc");
    fs::create_symlink("../../blobs/" + blob, repo() / "snapshots" / a / "f.txt");
    fs::create_symlink("../../blobs/" + gone, repo() / "snapshots" / a / "gone.txt");
    hubload::testing::WriteFileBytes(repo() / "refs/main", b);
    hubload::testing::WriteFileBytes(
        repo() / "trees" / (a + ".json"),
        "{\"format_version\": 1, \"files\": {\"f.txt\": {\"size\": 5, \"blob_id\": \"" + blob + "\"}}}");
    hubload::testing::WriteFileBytes(repo() / "blobs" / (std::string(64, 'd') + ".incomplete"), "partial");
  }
};

TEST(CacheLs, ReportsCorruptedEntriesAsWarningsAndFailsUnderStrict) {
  CorruptCache c;
  // A ref that holds no commit at all (the download paths warn about it too).
  hubload::testing::WriteFileBytes(c.repo() / "refs/dev", std::string("garbage!!\n"));
  std::string out, err;
  ASSERT_EQ(Hubload("--cache-dir " + Quote(c.dir.str()) + " cache ls --json", &out, &err), 0) << err;
  json j = json::parse(out);
  std::string all;
  for (auto& w : j["warnings"]) all += w.get<std::string>() + "\n";
  EXPECT_EQ(j["warnings"].size(), 5u) << all;
  EXPECT_NE(all.find("the ref file " + (c.repo() / "refs/dev").string() + " is corrupt"), std::string::npos) << all;
  EXPECT_NE(all.find("dangling link " + (c.repo() / "snapshots" / c.a / "gone.txt").string()), std::string::npos)
      << all;
  EXPECT_NE(all.find("ref " + (c.repo() / "refs/main").string() + " names commit " + c.b), std::string::npos) << all;
  EXPECT_NE(all.find("is 3 bytes; " + (c.repo() / "trees" / (c.a + ".json")).string() + " says 5"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("stray partial download " + (c.repo() / "blobs" / (std::string(64, 'd') + ".incomplete")).string()),
            std::string::npos)
      << all;
  // When prune would take it: its default --min-age-s (3600 s, hubload cache prune --help).
  EXPECT_NE(all.find("(7 bytes, modified "), std::string::npos) << all;
  EXPECT_NE(all.find("removes partials not modified for --min-age-s, 3600 s by default"), std::string::npos) << all;
  // The same lines on stderr in text mode; --strict (and the scan alias) fail.
  ASSERT_EQ(Hubload("--cache-dir " + Quote(c.dir.str()) + " cache ls", &out, &err), 0);
  EXPECT_NE(err.find("warning: dangling link"), std::string::npos) << err;
  EXPECT_EQ(Hubload("--cache-dir " + Quote(c.dir.str()) + " cache scan --strict", &out, &err), 1) << err;
  // A healthy cache passes --strict.
  TempDir ok;
  fs::create_directories(ok.path() / "models--org--ok/blobs");
  EXPECT_EQ(Hubload("--cache-dir " + Quote(ok.str()) + " cache ls --strict", &out, &err), 0) << err;
}

TEST(CacheLs, PruneFreesTheBytesScanCountsForASparsePartial) {
  TempDir cache;
  const fs::path blobs = cache.path() / "models--org--sparse/blobs";
  fs::create_directories(blobs);
  const fs::path partial = blobs / (std::string(64, 'e') + ".ranges.incomplete");
  const std::string cmd = "truncate -s 100M " + Quote(partial.string()) + " && dd if=/dev/urandom of=" +
                          Quote(partial.string()) + " bs=1M count=2 conv=notrunc status=none && touch -d '2 hours ago' " +
                          Quote(partial.string());
  std::string out, err;
  ASSERT_EQ(RunCommand(cmd, &out, &err), 0) << err;
  struct stat st;
  ASSERT_EQ(::stat(partial.c_str(), &st), 0);
  const uint64_t allocated = std::min<uint64_t>(st.st_size, static_cast<uint64_t>(st.st_blocks) * 512);
  ASSERT_LT(allocated, 50u << 20) << "the file system did not keep the file sparse";
  ASSERT_GE(allocated, 2u << 20);
  const std::string g = "--cache-dir " + Quote(cache.str()) + " ";
  ASSERT_EQ(Hubload(g + "cache ls --json", &out, &err), 0) << err;
  json j = json::parse(out);
  ASSERT_EQ(j["repos"].size(), 1u);
  EXPECT_EQ(j["repos"][0]["incomplete_bytes"].get<uint64_t>(), allocated);
  EXPECT_EQ(j["size_on_disk"].get<uint64_t>(), allocated);
  ASSERT_EQ(Hubload(g + "cache prune --min-age-s 60 --json", &out, &err), 0) << err;
  j = json::parse(out);
  EXPECT_EQ(j["freed_bytes"].get<uint64_t>(), allocated);
  EXPECT_FALSE(fs::exists(partial));
}

void SetTimes(const fs::path& p, double age_s) {
  struct timeval tv[2];
  gettimeofday(&tv[0], nullptr);
  tv[0].tv_sec -= static_cast<time_t>(age_s);
  tv[1] = tv[0];
  ASSERT_EQ(::utimes(p.c_str(), tv), 0);
}

TEST(CacheLs, FiltersAndSortAsHfCacheLs) {
  TempDir cache;
  auto make = [&](const std::string& folder, size_t bytes, double age_s) {
    fs::create_directories(cache.path() / folder / "blobs");
    fs::path b = cache.path() / folder / "blobs" / std::string(40, 'f');
    hubload::testing::WriteFileBytes(b, std::string(bytes, 'x'));
    SetTimes(b, age_s);
  };
  make("models--org--big", 5000, 10 * 86400.0);  // 5 KB, used 10 days ago
  make("models--org--small", 100, 60);           // 100 B, a minute ago
  make("datasets--org--data", 2000, 40 * 86400.0);
  const std::string g = "--cache-dir " + Quote(cache.str()) + " cache ls --json ";
  auto ids = [&](const std::string& args) {
    std::string out, err;
    EXPECT_EQ(Hubload(g + args, &out, &err), 0) << args << ": " << err;
    std::vector<std::string> v;
    if (out.empty()) return v;
    const json j = json::parse(out);
    for (auto& r : j["repos"]) v.push_back(r["repo_id"].get<std::string>());
    return v;
  };
  using V = std::vector<std::string>;
  // name sorts by hf's cache id: "dataset/org/data" < "model/org/big".
  EXPECT_EQ(ids("--filter 'size>1KB' --sort name"), (V{"org/data", "org/big"}));
  EXPECT_EQ(ids("--filter 'size>=5000' --filter 'type=model'"), (V{"org/big"}));
  EXPECT_EQ(ids("--filter 'type=dataset'"), (V{"org/data"}));
  EXPECT_EQ(ids("--filter 'accessed>7d' --sort size"), (V{"org/big", "org/data"}));
  EXPECT_EQ(ids("--filter 'modified<30d' --sort size:asc"), (V{"org/small", "org/big"}));
  EXPECT_EQ(ids("--sort size"), (V{"org/big", "org/data", "org/small"}));
  EXPECT_EQ(ids("--sort accessed"), (V{"org/small", "org/big", "org/data"}));
  std::string out, err;
  EXPECT_EQ(Hubload(g + "--filter 'size>1Gb'", &out, &err), 2);
  EXPECT_NE(err.find("1Gb"), std::string::npos) << err;
  EXPECT_EQ(Hubload(g + "--filter 'colour=red'", &out, &err), 2);
  EXPECT_EQ(Hubload(g + "--sort weight", &out, &err), 2);
}

TEST(CacheRm, RevisionTakesItsTreeListingAndAliasesWork) {
  auto hub = hubload::testing::StartTestHub();
  ASSERT_TRUE(hub);
  std::string c1 = hub->AddRepo("org/m", {{"a.txt", "one"}, {"b.txt", "shared"}});
  TempDir cache;
  const std::string g = "--endpoint " + hub->url() + " --cache-dir " + Quote(cache.str()) + " ";
  std::string out, err;
  ASSERT_EQ(Hubload(g + "download org/m --quiet", &out, &err), 0) << err;
  std::string c2 = hub->Replace("org/m", "a.txt", "two");
  ASSERT_EQ(Hubload(g + "download org/m --quiet", &out, &err), 0) << err;
  const fs::path trees = cache.path() / "models--org--m/trees";
  ASSERT_TRUE(fs::exists(trees / (c1 + ".json")));
  ASSERT_EQ(Hubload(g + "cache rm hf://org/m --revision " + c1, &out, &err), 0) << err;
  EXPECT_FALSE(fs::exists(trees / (c1 + ".json")));
  EXPECT_TRUE(fs::exists(trees / (c2 + ".json")));
  EXPECT_FALSE(fs::exists(cache.path() / "models--org--m/snapshots" / c1));
  ASSERT_EQ(Hubload(g + "cache delete org/m", &out, &err), 0) << err;
  EXPECT_FALSE(fs::exists(cache.path() / "models--org--m"));
  EXPECT_EQ(Hubload(g + "cache rm hf://org/m/a.txt", &out, &err), 2);  // a path is not a repo
}

// A ref with no snapshot (written by a listing or a dry run) takes its tree listing and .no_exist
// markers with it; the other revision keeps its own. The cache is made by hand.
TEST(CacheRm, RefWithoutSnapshotTakesItsTreeListing) {
  TempDir cache;
  const fs::path repo = cache.path() / "models--org--m";
  const std::string a = std::string(40, 'a'), x = std::string(40, '9');
  const std::string blob = hubload::testing::GitBlobSha1Hex("abc");
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "snapshots" / a);
  fs::create_directories(repo / "refs");
  fs::create_directories(repo / "trees");
  fs::create_directories(repo / ".no_exist" / x);
  hubload::testing::WriteFileBytes(repo / "blobs" / blob, "abc");
  fs::create_symlink("../../blobs/" + blob, repo / "snapshots" / a / "f.txt");
  hubload::testing::WriteFileBytes(repo / "refs/main", a);
  hubload::testing::WriteFileBytes(repo / "refs/newbranch", x);
  const std::string tree = "{\"format_version\": 1, \"files\": {\"f.txt\": {\"size\": 3, \"blob_id\": \"" + blob + "\"}}}";
  hubload::testing::WriteFileBytes(repo / "trees" / (a + ".json"), tree);
  hubload::testing::WriteFileBytes(repo / "trees" / (x + ".json"), tree);
  hubload::testing::WriteFileBytes(repo / ".no_exist" / x / "missing.txt", "");
  std::string out, err;
  ASSERT_EQ(Hubload("--cache-dir " + Quote(cache.str()) + " cache rm org/m --revision newbranch", &out, &err), 0)
      << err;
  EXPECT_FALSE(fs::exists(repo / "refs/newbranch"));
  EXPECT_FALSE(fs::exists(repo / "trees" / (x + ".json")));
  EXPECT_FALSE(fs::exists(repo / ".no_exist" / x));
  EXPECT_EQ(Names(repo / "trees"), (std::set<std::string>{a + ".json"}));
  EXPECT_EQ(Names(repo / "refs"), (std::set<std::string>{"main"}));
  EXPECT_TRUE(fs::is_symlink(repo / "snapshots" / a / "f.txt"));
  EXPECT_EQ(Names(repo / "blobs"), (std::set<std::string>{blob}));
  // The scan stays clean: no ref left naming a missing snapshot.
  EXPECT_EQ(Hubload("--cache-dir " + Quote(cache.str()) + " cache ls --strict", &out, &err), 0) << err;
}

constexpr const char* kToken = "hf_clitest_token_42";

std::unique_ptr<hubload::testing::TestHub> WritableHub() {
  hubload::server::ServerOptions so;
  so.tokens = {kToken};
  return hubload::testing::StartTestHub(so);
}

// What an upload of `dir` skips: a dangling link dangling.bin, a FIFO pipe, and linked/, a symlink to a
// folder of `outside` holding inner.txt.
void MakeSkippedEntries(const TempDir& dir, const TempDir& outside) {
  fs::create_symlink(dir.path() / "nowhere", dir.path() / "dangling.bin");
  fs::create_directories(outside.path() / "d");
  hubload::testing::WriteFileBytes(outside.path() / "d/inner.txt", "x");
  fs::create_directory_symlink(outside.path() / "d", dir.path() / "linked");
  std::string out, err;
  ASSERT_EQ(RunCommand("mkfifo " + Quote((dir.path() / "pipe").string()), &out, &err), 0) << err;
}

TEST(Upload, WarnsAboutWhatItSkipsAndLfsPointerText) {
  auto hub = WritableHub();
  ASSERT_TRUE(hub);
  TempDir dir, outside;
  hubload::testing::WriteFileBytes(dir.path() / "a.txt", "hello");
  hubload::testing::WriteFileBytes(dir.path() / "model.safetensors",
                                   "version https://git-lfs.github.com/spec/v1\noid sha256:" + std::string(64, '1') +
                                       "\nsize 123456\n");
  MakeSkippedEntries(dir, outside);
  std::string out, err;
  const std::string g = "--endpoint " + hub->url() + " --token " + kToken + " ";
  ASSERT_EQ(Hubload(g + "upload org/up " + Quote(dir.str()) + " --commit-message first", &out, &err), 0) << err;
  EXPECT_NE(err.find("skipped dangling symlink '" + (dir.path() / "dangling.bin").string() + "'"), std::string::npos)
      << err;
  EXPECT_NE(err.find("skipped '" + (dir.path() / "pipe").string() + "': not a regular file"), std::string::npos)
      << err;
  EXPECT_NE(err.find("skipped symlinked folder '" + (dir.path() / "linked").string() + "'"), std::string::npos)
      << err;
  EXPECT_NE(err.find("'" + (dir.path() / "model.safetensors").string() + "' (uploaded as 'model.safetensors') looks "
                     "like a Git LFS pointer"),
            std::string::npos)
      << err;
  // What the Hub got: the two regular files.
  TempDir cache;
  ASSERT_EQ(Hubload(g + "--cache-dir " + Quote(cache.str()) + " download org/up --dry-run --json", &out, &err), 0)
      << err;
  EXPECT_EQ(PathsOf(out), (std::set<std::string>{"a.txt", "model.safetensors"}));
}

// Skip warnings only for what the allow/ignore patterns would have uploaded; an upload left with nothing
// but skipped entries fails naming them.
TEST(Upload, SkipWarningsFollowThePatternsAndAnEmptyUploadNamesWhatItSkipped) {
  auto hub = WritableHub();
  ASSERT_TRUE(hub);
  TempDir dir, outside, lonely;
  hubload::testing::WriteFileBytes(dir.path() / "a.txt", "hello");
  MakeSkippedEntries(dir, outside);
  std::string out, err;
  const std::string g = "--endpoint " + hub->url() + " --token " + kToken + " ";
  const std::string up = g + "upload org/pat " + Quote(dir.str()) + " --quiet ";
  // --include a.txt: none of the three would have been uploaded, so no word about them.
  ASSERT_EQ(Hubload(up + "--include a.txt", &out, &err), 0) << err;
  EXPECT_EQ(err.find("skipped"), std::string::npos) << err;
  // --include '*.txt' would have taken linked/inner.txt: the folder is named, the link and the FIFO are not.
  ASSERT_EQ(Hubload(up + "--include '*.txt'", &out, &err), 0) << err;
  EXPECT_NE(err.find("skipped symlinked folder '" + (dir.path() / "linked").string() + "'"), std::string::npos) << err;
  EXPECT_EQ(err.find("dangling"), std::string::npos) << err;
  EXPECT_EQ(err.find("pipe"), std::string::npos) << err;
  // --exclude: an excluded entry is never named either.
  ASSERT_EQ(Hubload(up + "--exclude 'dangling.bin' --exclude pipe --exclude 'linked*'", &out, &err), 0) << err;
  EXPECT_EQ(err.find("skipped"), std::string::npos) << err;
  // A folder holding only a dangling link: the error says what was skipped.
  fs::create_symlink(lonely.path() / "gone", lonely.path() / "weights.bin");
  EXPECT_EQ(Hubload(g + "upload org/pat " + Quote(lonely.str()) + " --quiet", &out, &err), 1);
  EXPECT_NE(err.find("EmptyCommit"), std::string::npos) << err;
  EXPECT_NE(err.find("skipped dangling symlink '" + (lonely.path() / "weights.bin").string() + "'"), std::string::npos)
      << err;
}

// `repo branch create --exist-ok` says whether it created the branch or found it.
TEST(RepoBranch, ExistOkSaysTheBranchExists) {
  auto hub = WritableHub();
  ASSERT_TRUE(hub);
  hub->AddRepo("org/r", {{"a.txt", "a"}});
  const std::string g = "--endpoint " + hub->url() + " --token " + kToken + " repo ";
  std::string out, err;
  ASSERT_EQ(Hubload(g + "branch create org/r dev --exist-ok", &out, &err), 0) << err;
  EXPECT_EQ(out, "created branch dev of org/r\n");
  ASSERT_EQ(Hubload(g + "branch create org/r dev --exist-ok", &out, &err), 0) << err;
  EXPECT_EQ(out, "branch dev of org/r exists already (--exist-ok: nothing changed)\n");
  EXPECT_EQ(Hubload(g + "branch create org/r dev", &out, &err), 1);
  ASSERT_EQ(Hubload(g + "tag create org/r v1", &out, &err), 0) << err;
  ASSERT_EQ(Hubload(g + "tag create org/r v1 --exist-ok", &out, &err), 0) << err;
  EXPECT_EQ(out, "tag v1 of org/r exists already (--exist-ok: nothing changed)\n");
  // A name git refuses is refused by the server (400), named.
  EXPECT_EQ(Hubload(g + "branch create org/r x.lock", &out, &err), 1);
  EXPECT_NE(err.find("'.lock'"), std::string::npos) << err;
}

TEST(Upload, FileFolderPathInRepoNewBranchAndPushAlias) {
  auto hub = WritableHub();
  ASSERT_TRUE(hub);
  TempDir dir, cache;
  hubload::testing::WriteFileBytes(dir.path() / "w.txt", "weights");
  fs::create_directories(dir.path() / "sub");
  hubload::testing::WriteFileBytes(dir.path() / "sub/x.txt", "x");
  const std::string g = "--endpoint " + hub->url() + " --token " + kToken + " --cache-dir " + Quote(cache.str()) + " ";
  std::string out, err;
  // A file goes to its own name at the root, or to PATH_IN_REPO.
  ASSERT_EQ(Hubload(g + "upload org/up " + Quote((dir.path() / "w.txt").string()), &out, &err), 0) << err;
  ASSERT_EQ(Hubload(g + "upload hf://org/up " + Quote((dir.path() / "w.txt").string()) + " deep/w2.txt --quiet", &out,
                    &err),
            0)
      << err;
  // A folder into a prefix, on a branch that does not exist yet (created from main).
  ASSERT_EQ(Hubload(g + "upload org/up " + Quote(dir.str()) + " nested --revision dev", &out, &err), 0) << err;
  EXPECT_NE(err.find("created branch dev"), std::string::npos) << err;
  ASSERT_EQ(Hubload(g + "download org/up --revision dev --dry-run --json", &out, &err), 0) << err;
  EXPECT_EQ(PathsOf(out), (std::set<std::string>{"w.txt", "deep/w2.txt", "nested/w.txt", "nested/sub/x.txt"}));
  ASSERT_EQ(Hubload(g + "download org/up --dry-run --json", &out, &err), 0) << err;
  EXPECT_EQ(PathsOf(out), (std::set<std::string>{"w.txt", "deep/w2.txt"}));  // main has not moved
  ASSERT_EQ(Hubload(g + "download org/up nested/sub/x.txt --revision dev --quiet", &out, &err), 0) << err;
  auto b = hubload::testing::ReadFileBytes(out.substr(0, out.size() - 1));
  EXPECT_EQ(std::string(b.begin(), b.end()), "x");
  // push LOCAL_DIR REPO_ID still works, with a note.
  ASSERT_EQ(Hubload(g + "push " + Quote(dir.str()) + " org/up --path-in-repo viapush", &out, &err), 0) << err;
  EXPECT_NE(err.find("hubload push: deprecated; use `hubload upload org/up"), std::string::npos) << err;
  ASSERT_EQ(Hubload(g + "download org/up viapush/w.txt --dry-run --json", &out, &err), 0) << err;
  // `upload REPO` with no LOCAL_PATH and no local file named like the repo is a usage error.
  EXPECT_EQ(Hubload(g + "upload org/nothing-here-xyz", &out, &err), 2);
  EXPECT_NE(err.find("give LOCAL_PATH"), std::string::npos) << err;
}

TEST(Env, ShowsCacheFileSystemFlockAndVariablesWithoutSecrets) {
  TempDir cache;
  std::string out, err;
  ASSERT_EQ(Hubload("--cache-dir " + Quote(cache.str()) + " env --json", &out, &err,
                    "HF_TOKEN=hf_secret_value_123 HF_HUB_ETAG_TIMEOUT=7 HTTPS_PROXY=http://user:pw123@proxy:3128 "
                    "SSL_CERT_FILE=/etc/ssl/x.pem"),
            0)
      << err;
  EXPECT_EQ(out.find("hf_secret_value_123"), std::string::npos) << out;
  EXPECT_EQ(out.find("pw123"), std::string::npos) << out;
  json j = json::parse(out);
  EXPECT_EQ(j["token"], "set");
  EXPECT_EQ(j["variables"]["HF_TOKEN"], "set");
  EXPECT_EQ(j["variables"]["HF_HUB_ETAG_TIMEOUT"], "7");
  EXPECT_EQ(j["proxy_and_ca"]["HTTPS_PROXY"], "http://***@proxy:3128");
  EXPECT_EQ(j["proxy_and_ca"]["SSL_CERT_FILE"], "/etc/ssl/x.pem");
  EXPECT_EQ(j["proxy_and_ca"]["NO_PROXY"], "not set");
  EXPECT_EQ(j["cache_dir"], cache.str());
  EXPECT_EQ(j["cache_flock_works"], "yes");  // the test's temp folder is on a local file system
  EXPECT_FALSE(j["cache_fs_type"].get<std::string>().empty());
  EXPECT_FALSE(j["libcurl_version"].get<std::string>().empty());
  EXPECT_EQ(Names(cache.path()).size(), 0u);  // the flock probe leaves nothing behind
  ASSERT_EQ(Hubload("env", &out, &err), 0) << err;
  EXPECT_NE(out.find("HF_TOKEN: not set"), std::string::npos) << out;
}

}  // namespace

// `download --dry-run --local-dir D` with no Hub to ask: the download would
// answer from D as it is (HubClient::Snapshot), so the dry run lists D's
// files, all cached, less its .cache/ (it looked in the cache and failed).
TEST(DownloadDryRun, LocalDirWithoutAHubListsTheFolderAsItIs) {
  TempDir ld, empty, cache;
  fs::create_directories(ld.path() / "sub");
  fs::create_directories(ld.path() / ".cache/huggingface/download");
  hubload::testing::WriteFileBytes(ld.path() / "config.json", std::string("{}"));
  hubload::testing::WriteFileBytes(ld.path() / "sub/w.bin", std::string(1000, 'w'));
  hubload::testing::WriteFileBytes(ld.path() / ".cache/huggingface/download/config.json.metadata", std::string("x"));
  const std::string g = "--cache-dir " + Quote(cache.str()) + " ";
  std::string out, err;
  for (const std::string& env : std::vector<std::string>{"HF_HUB_OFFLINE=1", "HF_ENDPOINT=" + hubload::testing::RefusedUrl()}) {
    ASSERT_EQ(Hubload(g + "download org/m --dry-run --json --local-dir " + Quote(ld.str()), &out, &err, env), 0)
        << env << ": " << err;
    json j = json::parse(out);
    ASSERT_EQ(j["files"].size(), 2u) << out;
    EXPECT_EQ(j["files"][0]["path"], "config.json");
    EXPECT_EQ(j["files"][1]["path"], "sub/w.bin");
    EXPECT_EQ(j["files"][1]["size"], 1000);
    EXPECT_EQ(j["files_to_fetch"], 0);
    EXPECT_EQ(j["total_bytes"], 1002);
    ASSERT_EQ(j["warnings"].size(), 1u);
    EXPECT_NE(j["warnings"][0].get<std::string>().find("the local folder " + ld.str() + " as it is"),
              std::string::npos) << out;
  }
  // An empty local folder is no snapshot: the failure, whose context names no file.
  EXPECT_EQ(Hubload(g + "download org/m --dry-run --json --local-dir " + Quote(empty.str()), &out, &err,
                    "HF_HUB_OFFLINE=1"),
            1);
  json e = json::parse(out);
  EXPECT_EQ(e["error"]["reason"], "OfflineMiss") << out;
  EXPECT_FALSE(e["error"].contains("file")) << out;
}

// Hostile or mistaken command lines of the new-user trial.
TEST(CliInput, EmptyFolderOptionsAreUsageErrorsAndAnUnwritableResultFails) {
  TempDir cache;
  std::string out, err;
  // --local-dir '' must not mean "the default cache"; --cache-dir '' must not reach the library.
  EXPECT_EQ(Hubload("--cache-dir " + Quote(cache.str()) + " download org/m config.json --local-dir ''", &out, &err), 2);
  EXPECT_NE(err.find("--local-dir"), std::string::npos) << err;
  EXPECT_NE(err.find("(empty) is not allowed"), std::string::npos) << err;
  EXPECT_EQ(Hubload("download org/m --cache-dir ''", &out, &err), 2);
  EXPECT_NE(err.find("--cache-dir"), std::string::npos) << err;
  EXPECT_TRUE(Names(cache.path()).empty());
  // A terminal escape in a value the user typed is shown, never acted on.
  for (const std::string& args : {std::string("download org/m --revision \"$(printf 'x\\033[31mRED')\""),
                                  std::string("download org/m \"$(printf 'f\\033[31mRED')\"")}) {
    EXPECT_NE(Hubload("--cache-dir " + Quote(cache.str()) + " " + args, &out, &err, "HF_HUB_OFFLINE=1"), 0) << args;
    EXPECT_EQ(err.find('\x1b'), std::string::npos) << args << ": " << err;
    EXPECT_NE(err.find("\\x1b[31mRED"), std::string::npos) << args << ": " << err;
  }
  // A cache folder that is a file is said to be one, not to be missing.
  hubload::testing::WriteFileBytes(cache.path() / "afile", std::string("x"));
  EXPECT_EQ(Hubload("--cache-dir " + Quote((cache.path() / "afile").string()) + " cache ls", &out, &err), 1);
  EXPECT_NE(err.find((cache.path() / "afile").string() + " is not a folder"), std::string::npos) << err;
  // The result on stdout cannot be written (a full disk): exit 1 naming why.
  EXPECT_EQ(RunCommand(Quote(hubload::testing::HubloadBin()) + " env > /dev/full", &out, &err), 1);
  EXPECT_NE(err.find("cannot write the result to standard output"), std::string::npos) << err;
}

// --quiet prints the path alone, as hf download --quiet: not even the warning
// of a Hub that cannot be reached (which the same command prints without it).
TEST(DownloadQuiet, PrintsThePathAloneEvenWhenAnsweredFromTheCache) {
  auto hub = hubload::testing::StartTestHub();
  ASSERT_TRUE(hub);
  Repo repo(*hub);
  TempDir cache;
  std::string out, err;
  ASSERT_EQ(Hubload("--endpoint " + hub->url() + " --cache-dir " + Quote(cache.str()) + " download org/m --quiet", &out,
                    &err),
            0)
      << err;
  const std::string down = "--endpoint " + hubload::testing::RefusedUrl() + " --cache-dir " + Quote(cache.str()) +
                           " download org/m";
  ASSERT_EQ(Hubload(down, &out, &err), 0) << err;
  EXPECT_NE(err.find("the Hub could not be reached"), std::string::npos) << err;
  ASSERT_EQ(Hubload(down + " --quiet", &out, &err), 0) << err;
  EXPECT_EQ(err, "");
  EXPECT_EQ(out, (cache.path() / "models--org--m" / "snapshots" / repo.commit).string() + "\n");
  // Files named beside patterns: the patterns' warning goes too.
  ASSERT_EQ(Hubload(down + " config.json --include '*.bin' --quiet", &out, &err), 0) << err;
  EXPECT_EQ(err, "");
}
