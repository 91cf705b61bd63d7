// The CLI as `hf` users type it (issue 15): hf:// URIs for every command
// that takes a repo, `cache ls` / `cache rm` with hf 1.x's options, FILES
// winning over --include, read-only commands that write nothing, usage
// errors naming the command with the arguments in the order given, and the
// global options (--endpoint, --token, --cache-dir) before or after EVERY
// documented command meaning the same. Expected values come from the files
// the test writes (sizes, bytes), the repos it creates (commits returned by
// the test server) and the documented output formats.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "testing/hub_server.h"
#include "testing/util.h"
#include "tests/cli/cli_helpers.h"

namespace {
namespace fs = std::filesystem;
using hubload::testing::TempDir;
using hubload::testing::cli::Hubload;
using hubload::testing::cli::Quote;
using json = nlohmann::json;

constexpr const char* kToken = "hf_compat_token_7";

std::unique_ptr<hubload::testing::TestHub> WritableHub() {
  hubload::server::ServerOptions so;
  so.tokens = {kToken};
  return hubload::testing::StartTestHub(so);
}

std::string Read(const fs::path& p) {
  auto b = hubload::testing::ReadFileBytes(p);
  return std::string(b.begin(), b.end());
}

std::string Chomp(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

// Every entry below `dir` (type, size, mtime in ns): any write shows.
std::map<std::string, std::string> TreeState(const fs::path& dir) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(dir, ec); it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    out[it->path().string()] = std::to_string(st.st_mode) + " " + std::to_string(st.st_size) + " " +
                               std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
  }
  return out;
}

// A safetensors file written by hand: one U8 tensor "t" of 16 bytes 0..15.
struct Tiny {
  std::string header = "{\"t\":{\"dtype\":\"U8\",\"shape\":[16],\"data_offsets\":[0,16]}}";
  std::string bytes;
  Tiny() {
    while (header.size() % 8) header += ' ';  // 55 -> 56 bytes
    bytes = std::string(8, '\0');
    bytes[0] = static_cast<char>(header.size());
    bytes += header;
    for (int i = 0; i < 16; ++i) bytes += static_cast<char>(i);
  }
  std::string TensorSha256() const { return hubload::testing::Sha256Hex(bytes.data() + 8 + header.size(), 16); }
};

TEST(HfCompat, NamedFilesWinOverIncludeAndExcludeWithAWarning) {
  auto hub = hubload::testing::StartTestHub();
  ASSERT_TRUE(hub);
  hub->AddRepo("org/m", {{"config.json", "{\"a\": 1}"}, {"sub/c.bin", "cccc"}, {"w.safetensors", "ssss"}});
  TempDir cache;
  const std::string g = "--endpoint " + hub->url() + " --cache-dir " + Quote(cache.str()) + " ";
  std::string out, err;
  ASSERT_EQ(Hubload(g + "download org/m config.json sub/c.bin --include '*.safetensors' --exclude 'sub/*'", &out, &err),
            0)
      << err;
  EXPECT_NE(err.find("warning: ignoring --include and --exclude since filenames have been explicitly set"),
            std::string::npos)
      << err;
  const fs::path snap = Chomp(out);
  EXPECT_EQ(Read(snap / "config.json"), "{\"a\": 1}");
  EXPECT_EQ(Read(snap / "sub/c.bin"), "cccc");
  EXPECT_FALSE(fs::exists(snap / "w.safetensors"));
  // The dry run selects the same way.
  ASSERT_EQ(Hubload(g + "download org/m w.safetensors --exclude '*.safetensors' --dry-run --json", &out, &err), 0)
      << err;
  const json j = json::parse(out);
  ASSERT_EQ(j["files"].size(), 1u) << out;
  EXPECT_EQ(j["files"][0]["path"], "w.safetensors");
  EXPECT_EQ(j["bytes_to_fetch"].get<uint64_t>(), 4u);
}

TEST(HfCompat, ReadOnlyCommandsWriteNothingIntoTheCache) {
  auto hub = hubload::testing::StartTestHub();
  ASSERT_TRUE(hub);
  const std::string commit =
      hub->AddRepo("org/m", {{"config.json", "{}"}, {"a.bin", std::string(3000, 'a')}, {"b.bin", "bb"}});
  TempDir tmp;
  const fs::path cache = tmp.path() / "hub";
  const std::string g = "--endpoint " + hub->url() + " --cache-dir " + Quote(cache.string()) + " ";
  std::string out, err;
  // No cache folder: nothing is created (no CACHEDIR.TAG, trees/ or refs/).
  ASSERT_EQ(Hubload(g + "download org/m --dry-run --json", &out, &err), 0) << err;
  EXPECT_EQ(json::parse(out)["commit"], commit);
  EXPECT_EQ(Hubload(g + "cache verify org/m", &out, &err), 1) << out << err;  // the snapshot folder does not exist
  EXPECT_EQ(Hubload(g + "cache ls", &out, &err), 1) << out << err;
  EXPECT_FALSE(fs::exists(cache));
  // A half-filled cache: each read-only command leaves every entry as it was.
  ASSERT_EQ(Hubload(g + "download org/m config.json a.bin --quiet", &out, &err), 0) << err;
  const auto before = TreeState(cache);
  ASSERT_FALSE(before.empty());
  for (const std::string& cmd : std::vector<std::string>{
           "download org/m --dry-run", "download org/m b.bin --dry-run --json", "download hf://org/m@main --dry-run",
        "download org/m --revision " + commit + " --dry-run", "cache verify org/m", "cache verify org/m --json",
        "cache ls", "cache ls --revisions --format csv", "cache ls --json", "cache rm org/m --dry-run"}) {
    SCOPED_TRACE(cmd);
    EXPECT_EQ(Hubload(g + cmd, &out, &err), 0) << out << err;
    EXPECT_EQ(TreeState(cache), before);
  }
  // So the scan finds nothing to warn about.
  EXPECT_EQ(Hubload(g + "cache ls --strict", &out, &err), 0) << err;
}

TEST(HfCompat, UsageErrorsNameTheCommandAndListArgumentsInOrder) {
  std::string out, err;
  EXPECT_EQ(Hubload("cache ls one two three", &out, &err), 2);
  EXPECT_NE(err.find("hubload cache ls: the following arguments were not expected: one two three"), std::string::npos)
      << err;
  EXPECT_EQ(Hubload("env --json extra", &out, &err), 2);
  EXPECT_NE(err.find("hubload env: this argument was not expected: extra"), std::string::npos) << err;
  EXPECT_EQ(Hubload("cache prune --bogus", &out, &err), 2);
  EXPECT_NE(err.find("hubload cache prune: "), std::string::npos) << err;
  EXPECT_NE(err.find("--bogus"), std::string::npos) << err;
  EXPECT_TRUE(out.empty()) << out;
}

// Every command of the README's CLI table, as `hubload ARGS --help` takes it.
const std::vector<std::string>& DocumentedCommands() {
  static const std::vector<std::string> c = {
      "load",         "download",      "cache ls",          "cache rm",          "cache prune",
      "cache verify", "env",           "inspect",           "repo branch create", "repo branch delete",
      "repo tag create", "repo tag delete", "repo tag list", "repo refs",         "repo commits",
      "reshard",      "upload",        "push",              "serve",             "store add",
      "download-distributed", "load-distributed", "demo-model"};
  return c;
}

TEST(HfCompat, EveryCommandsHelpListsTheGlobalOptions) {
  for (const auto& c : DocumentedCommands()) {
    SCOPED_TRACE(c);
    std::string out, err;
    ASSERT_EQ(Hubload(c + " --help", &out, &err), 0) << err;
    const size_t globals = out.find("Global options (before or after the command name):");
    ASSERT_NE(globals, std::string::npos) << out;
    EXPECT_NE(out.find("--endpoint", globals), std::string::npos) << out;
    EXPECT_NE(out.find("--cache-dir", globals), std::string::npos) << out;
    // serve has a --token of its own (the tokens it accepts); the others list the global one.
    if (c != "serve") {
      EXPECT_NE(out.find("--token", globals), std::string::npos) << out;
    }
  }
}

TEST(HfCompat, HfUrisForLoadDistributedRepoAndStoreAdd) {
  auto hub = WritableHub();
  ASSERT_TRUE(hub);
  const Tiny tiny;
  ASSERT_EQ(tiny.header.size() % 8, 0u);
  const std::string st = tiny.bytes;
  const std::string commit = hub->AddRepo("org/sub", {{"unet/model.safetensors", st}, {"unet/config.json", "{}"}});
  TempDir cache, store, folder;
  const std::string g = "--endpoint " + hub->url() + " --token " + kToken + " --cache-dir " + Quote(cache.str()) + " ";
  std::string out, err;
  // load: the URI's path is the subfolder; its revision applies.
  ASSERT_EQ(Hubload(g + "load hf://org/sub@" + commit + "/unet --json --quiet", &out, &err), 0) << err;
  json j = json::parse(out);
  EXPECT_EQ(j["commit"], commit);
  ASSERT_EQ(j["tensors"].size(), 1u) << out;
  EXPECT_EQ(j["tensors"][0]["sha256"], tiny.TensorSha256());
  EXPECT_EQ(Hubload(g + "load hf://org/sub/unet --subfolder vae", &out, &err), 2);
  EXPECT_NE(err.find("--subfolder vae contradicts 'hf://org/sub/unet'"), std::string::npos) << err;
  EXPECT_EQ(Hubload(g + "load hf://org/sub/unet --local", &out, &err), 2);
  // load-distributed (one rank) and download-distributed.
  const std::string job = " --master-addr 127.0.0.1 --rank 0 --world-size 1 --local-rank 0 --local-world-size 1 "
                          "--timeout 60 --master-port ";
  ASSERT_EQ(Hubload(g + "load-distributed hf://org/sub@main/unet --json - --quiet" + job +
                        std::to_string(hubload::testing::FreeLoopbackPort()),
                    &out, &err),
            0)
      << err;
  EXPECT_EQ(json::parse(out)["tensors"][0]["sha256"], j["tensors"][0]["sha256"]);
  TempDir cache2;
  ASSERT_EQ(Hubload("--endpoint " + hub->url() + " download-distributed hf://models/org/sub@main --quiet --cache-dir " +
                        Quote(cache2.str()) + job + std::to_string(hubload::testing::FreeLoopbackPort()),
                    &out, &err),
            0)
      << err;
  EXPECT_EQ(Chomp(out), (cache2.path() / "models--org--sub/snapshots" / commit).string());
  EXPECT_EQ(Hubload(g + "download-distributed hf://org/sub/unet" + job + "1", &out, &err), 2);  // a path: no
  // repo: refs and commits of the URI's repo; branch create starts at the URI's revision.
  ASSERT_EQ(Hubload(g + "repo branch create hf://org/sub@" + commit + " dev", &out, &err), 0) << err;
  ASSERT_EQ(Hubload(g + "repo refs hf://org/sub --json", &out, &err), 0) << err;
  j = json::parse(out);
  bool dev = false;
  for (auto& b : j["branches"]) dev |= b["name"] == "dev" && b["target_commit"] == commit;
  EXPECT_TRUE(dev) << out;
  ASSERT_EQ(Hubload(g + "repo commits hf://org/sub@dev --json", &out, &err), 0) << err;
  EXPECT_NE(out.find(commit), std::string::npos) << out;
  EXPECT_EQ(Hubload(g + "repo refs hf://org/sub@dev", &out, &err), 2);  // refs takes no revision
  // store add: the URI's type and branch.
  hubload::testing::WriteFileBytes(folder.path() / "d.txt", "data");
  ASSERT_EQ(Hubload("store add " + Quote(store.str()) + " hf://datasets/org/d@v2 " + Quote(folder.str()), &out, &err),
            0)
      << err;
  EXPECT_EQ(Read(store.path() / "datasets--org--d/refs/v2"), Chomp(out));  // the commit it printed
}

TEST(HfCompat, CacheLsFormatsRevisionsQuietLimitAndRefs) {
  auto hub = hubload::testing::StartTestHub();
  ASSERT_TRUE(hub);
  const std::string c1 = hub->AddRepo("org/m", {{"a.txt", "one"}});
  TempDir cache;
  const std::string g = "--endpoint " + hub->url() + " --cache-dir " + Quote(cache.str()) + " ";
  std::string out, err;
  ASSERT_EQ(Hubload(g + "download org/m --quiet", &out, &err), 0) << err;
  const std::string c2 = hub->Replace("org/m", "a.txt", "twotwo");
  ASSERT_EQ(Hubload(g + "download org/m --quiet", &out, &err), 0) << err;
  hub->AddRepo("org/d", {{"x.txt", "x"}}, [] {
    hubload::server::CreateRepoOptions o;
    o.repo_type = hubload::RepoType::kDataset;
    return o;
  }());
  ASSERT_EQ(Hubload(g + "download org/d --repo-type dataset --quiet", &out, &err), 0) << err;
  // -q: cache ids in hf's order (dataset/... before model/...), or commits with --revisions.
  ASSERT_EQ(Hubload(g + "cache ls -q", &out, &err), 0) << err;
  EXPECT_EQ(out, "dataset/org/d\nmodel/org/m\n");
  ASSERT_EQ(Hubload(g + "cache ls --revisions -q -f type=model", &out, &err), 0) << err;
  EXPECT_EQ(out, std::min(c1, c2) + "\n" + std::max(c1, c2) + "\n");
  // refs=: only the revision main points at.
  ASSERT_EQ(Hubload(g + "cache ls --revisions -q --filter refs=main -f type=model", &out, &err), 0) << err;
  EXPECT_EQ(out, c2 + "\n");
  ASSERT_EQ(Hubload(g + "cache ls -q --sort size --limit 1", &out, &err), 0) << err;
  EXPECT_EQ(out, "model/org/m\n");  // 3 + 6 bytes > 1 byte
  // --format json: hf's records; sizes are the blobs' bytes.
  ASSERT_EQ(Hubload(g + "cache ls --format json --filter type=model", &out, &err), 0) << err;
  json j = json::parse(out);
  ASSERT_EQ(j.size(), 1u) << out;
  EXPECT_EQ(j[0]["repo_id"], "org/m");
  EXPECT_EQ(j[0]["repo_type"], "model");
  EXPECT_EQ(j[0]["size_on_disk"].get<uint64_t>(), 3u + 6u);
  EXPECT_EQ(j[0]["refs"], json::array({"main"}));
  ASSERT_EQ(Hubload(g + "cache ls --revisions --format json -f type=model --sort size:asc", &out, &err), 0) << err;
  j = json::parse(out);
  ASSERT_EQ(j.size(), 2u) << out;
  EXPECT_EQ(j[0]["revision"], c1);
  EXPECT_EQ(j[0]["size_on_disk"].get<uint64_t>(), 3u);
  EXPECT_EQ(j[0]["refs"], json::array());
  EXPECT_EQ(j[1]["revision"], c2);
  EXPECT_EQ(j[1]["snapshot_path"], (cache.path() / "models--org--m/snapshots" / c2).string());
  // --format csv: header and one row per repo.
  ASSERT_EQ(Hubload(g + "cache ls --format csv --filter type=dataset", &out, &err), 0) << err;
  std::regex csv("repo_id,repo_type,size_on_disk,last_accessed,last_modified,refs\norg/d,dataset,1,[0-9.e+]+,[0-9.e+]+,main\n");
  EXPECT_TRUE(std::regex_match(out, csv)) << out;
  // The table: hf's columns and summary.
  ASSERT_EQ(Hubload(g + "cache ls", &out, &err), 0) << err;
  EXPECT_EQ(out.rfind("ID ", 0), 0u) << out;
  EXPECT_NE(out.find("Found 2 repo(s) for a total of 3 revision(s)"), std::string::npos) << out;
  EXPECT_EQ(Hubload(g + "cache ls --format yaml", &out, &err), 2);
  EXPECT_EQ(Hubload(g + "cache ls --filter 'refs>main'", &out, &err), 2);
}

TEST(HfCompat, CacheRmTakesSeveralTargetsWithDryRunAndYes) {
  auto hub = hubload::testing::StartTestHub();
  ASSERT_TRUE(hub);
  const std::string c1 = hub->AddRepo("org/m", {{"a.txt", "one"}, {"s.txt", "shared"}});
  hub->AddRepo("org/x", {{"x.txt", "x"}});
  hub->AddRepo("org/y", {{"y.txt", "y"}});
  TempDir cache;
  const std::string g = "--endpoint " + hub->url() + " --cache-dir " + Quote(cache.str()) + " ";
  std::string out, err;
  for (const char* r : {"org/m", "org/x", "org/y"}) ASSERT_EQ(Hubload(g + "download " + r + " --quiet", &out, &err), 0);
  const std::string c2 = hub->Replace("org/m", "a.txt", "two");
  ASSERT_EQ(Hubload(g + "download org/m --quiet", &out, &err), 0) << err;
  const fs::path m = cache.path() / "models--org--m";
  // --dry-run: the plan, nothing deleted.
  ASSERT_EQ(Hubload(g + "cache rm model/org/x " + c1 + " --dry-run", &out, &err), 0) << err;
  EXPECT_NE(out.find("About to delete 1 repo(s) and 1 revision(s)"), std::string::npos) << out;
  EXPECT_NE(out.find("  - model/org/x (entire repo)"), std::string::npos) << out;
  EXPECT_NE(out.find("      " + c1 + " [(detached)] "), std::string::npos) << out;
  EXPECT_NE(out.find("Dry run: no files were deleted."), std::string::npos) << out;
  EXPECT_TRUE(fs::exists(cache.path() / "models--org--x"));
  EXPECT_TRUE(fs::exists(m / "snapshots" / c1));
  // A cache id, a repo id and a commit at once (-y: no question; none is asked without a terminal anyway).
  ASSERT_EQ(Hubload(g + "cache rm model/org/x org/y " + c1 + " -y", &out, &err), 0) << err;
  EXPECT_FALSE(fs::exists(cache.path() / "models--org--x"));
  EXPECT_FALSE(fs::exists(cache.path() / "models--org--y"));
  EXPECT_FALSE(fs::exists(m / "snapshots" / c1));
  EXPECT_EQ(Read(m / "snapshots" / c2 / "s.txt"), "shared");  // its blob is still used by c2
  EXPECT_NE(out.find("Deleted 2 repo(s) and 1 revision(s); freed "), std::string::npos) << out;
  // Unknown targets are named; the others still go; exit 1.
  EXPECT_EQ(Hubload(g + "cache rm org/none " + std::string(40, 'e') + " " + c2, &out, &err), 1);
  EXPECT_NE(err.find("model org/none is not in the cache"), std::string::npos) << err;
  EXPECT_NE(err.find("no cached revision " + std::string(40, 'e')), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(m));  // its last revision went: the repo went
  // --revision with several targets is a usage error.
  EXPECT_EQ(Hubload(g + "cache rm org/a org/b --revision main", &out, &err), 2);
}

// The global options before the command and after it give the same stdout
// and exit code for every documented command (serve aside: a server that
// stays up; its --token is its own option).
TEST(HfCompat, GlobalOptionsBeforeOrAfterEveryCommandMeanTheSame) {
  auto hub = WritableHub();
  ASSERT_TRUE(hub);
  const Tiny tiny;
  const std::string commit =
      hub->AddRepo("org/m", {{"config.json", "{}"}, {"w.txt", "weights"}, {"model.safetensors", tiny.bytes}});
  TempDir cache, src, work;
  hubload::testing::WriteFileBytes(src.path() / "model.safetensors", tiny.bytes);
  const std::string globals = "--endpoint " + hub->url() + " --token " + kToken + " --cache-dir " +
                              Quote(cache.str());
  const std::string job = " --master-addr 127.0.0.1 --rank 0 --world-size 1 --local-rank 0 --local-world-size 1 "
                          "--timeout 60 --master-port ";
  // {args, compare stdout}: false where stdout differs from run to run (timings, names with the run number).
  // {N} is replaced by the run (1: globals before the command, 2: after), {PORT} by a free port.
  struct Case {
    std::string args;
    bool compare_out;
  };
  const std::vector<Case> cases = {
      {"download org/m --quiet", true},
      {"download org/m w.txt --quiet", true},
      {"download org/m --dry-run --json", true},
      {"cache ls --json", true},
      {"cache verify org/m --json", true},
      {"cache prune --json", true},
      {"cache rm org/m --dry-run", true},
      {"env --json", true},
      {"upload org/up " + Quote(src.str()), true},  // the second run commits nothing: the same commit
      {"push " + Quote(src.str()) + " org/up", true},
      {"repo branch create org/m b{N}", false},
      {"repo tag create org/m t{N}", false},
      {"repo tag list org/m --json", false},  // the tags differ per run
      {"repo refs org/m --json", false},
      {"repo commits org/m --json", true},
      {"repo branch delete org/m b{N}", false},
      {"repo tag delete org/m t{N}", false},
      {"inspect " + Quote((cache.path() / "models--org--m/snapshots" / commit / "model.safetensors").string()), true},
      {"load org/m --json --quiet", false},  // timings differ
      {"download-distributed org/m --quiet" + job + "{PORT}", true},
      {"load-distributed org/m --quiet" + job + "{PORT}", false},
      {"reshard " + Quote(src.str()) + " " + Quote(work.str() + "/r{N}"), false},
      {"store add " + Quote(work.str() + "/store") + " org/s{N} " + Quote(src.str()), false},
      {"demo-model " + Quote(work.str() + "/demo{N}") + " --size-mb 1", false},
  };
  auto expand = [&](std::string s, int n) {
    for (size_t p; (p = s.find("{N}")) != std::string::npos;) s.replace(p, 3, std::to_string(n));
    if (size_t p = s.find("{PORT}"); p != std::string::npos)
      s.replace(p, 6, std::to_string(hubload::testing::FreeLoopbackPort()));
    return s;
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    std::string out1, out2, err1, err2;
    const int rc1 = Hubload(globals + " " + expand(c.args, 1), &out1, &err1);
    const int rc2 = Hubload(expand(c.args, 2) + " " + globals, &out2, &err2);
    EXPECT_EQ(rc1, 0) << err1;
    EXPECT_EQ(rc2, 0) << err2;
    if (c.compare_out) {
      EXPECT_EQ(out1, out2) << err1 << "\n---\n" << err2;
    }
  }
  // The effects: the branches and tags both runs created are gone again.
  std::string out, err;
  ASSERT_EQ(Hubload(globals + " repo refs org/m --json", &out, &err), 0) << err;
  const json refs = json::parse(out);
  EXPECT_EQ(refs["branches"].size(), 1u) << out;  // main
  EXPECT_EQ(refs["tags"].size(), 0u) << out;
}

}  // namespace
