// Issue 14: no input reaches std::terminate through the CLI. A cache another
// tool wrote (names that are not UTF-8, a refs/ folder where a ref is looked
// up) and user paths the kernel refuses (ENAMETOOLONG, ELOOP) give exit 0 or
// a clear exit 1, never an abort (134). Expected texts come from the test's
// own bytes, the kernel's strerror() and the JSON parser, not from hubload.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "testing/util.h"

namespace fs = std::filesystem;
using hubload::testing::TempDir;

namespace {

const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";
const std::string kBlob = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

int Hubload(const std::string& cache, const std::string& args, std::string* out, std::string* err) {
  std::string cmd = "env -u HF_TOKEN -u HF_HUB_OFFLINE -u HF_ENDPOINT HF_ENDPOINT=http://127.0.0.1:9 " +
                    Quote(hubload::testing::HubloadBin()) + " --cache-dir " + Quote(cache) + " " + args;
  return hubload::testing::RunCommand(cmd, out, err);
}

void Write(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  hubload::testing::WriteFileBytes(p, bytes);
}

// models--org--m with refs/main -> kCommit, snapshots/kCommit/{config.json, <extra>} -> blobs/kBlob.
fs::path MakeRepo(const fs::path& cache, const std::string& extra_name) {
  fs::path repo = cache / "models--org--m";
  Write(repo / "blobs" / kBlob, std::string("{\"a\": 1}"));
  Write(repo / "refs" / "main", kCommit);
  fs::create_directories(repo / "snapshots" / kCommit);
  fs::create_symlink("../../blobs/" + kBlob, repo / "snapshots" / kCommit / "config.json");
  if (!extra_name.empty()) fs::create_symlink("../../blobs/" + kBlob, repo / "snapshots" / kCommit / extra_name);
  return repo;
}

bool Contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

}  // namespace

TEST(CliUntrusted, CacheLsJsonWithNamesThatAreNotUtf8) {
  TempDir cache;
  MakeRepo(cache.path(), "f\xff.txt");
  fs::create_directories(cache.path() / "models--org--\xff" / "snapshots");
  std::string out, err;
  int rc = Hubload(cache.str(), "cache ls --json", &out, &err);
  ASSERT_EQ(rc, 0) << err;
  auto j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << out;
  // The file name's 0xff byte is written as U+FFFD; the repo is still listed with its other file.
  EXPECT_TRUE(Contains(out, "f" + kReplacement + ".txt")) << out;
  EXPECT_TRUE(Contains(out, "config.json")) << out;
  EXPECT_TRUE(Contains(out, "org/m")) << out;
  // Human output of the same cache.
  rc = Hubload(cache.str(), "cache ls", &out, &err);
  EXPECT_EQ(rc, 0) << err;
}

TEST(CliUntrusted, CachePruneJsonWithANameThatIsNotUtf8) {
  TempDir cache;
  fs::path repo = MakeRepo(cache.path(), "");
  Write(repo / "blobs" / "partial\xfe.incomplete", std::string(10, 'x'));
  std::string out, err;
  int rc = Hubload(cache.str(), "cache prune --min-age-s 0 --json", &out, &err);
  ASSERT_EQ(rc, 0) << err;
  auto j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_TRUE(Contains(out, "partial" + kReplacement + ".incomplete")) << out;
  EXPECT_FALSE(fs::exists(repo / "blobs" / "partial\xfe.incomplete"));
}

TEST(CliUntrusted, OfflineLocalDirTooLongOrASymlinkLoopIsAnError) {
  TempDir cache, tmp;
  MakeRepo(cache.path(), "");
  std::string too_long = tmp.str() + "/" + std::string(300, 'n');  // one segment over NAME_MAX
  fs::create_symlink("loop-b", tmp.path() / "loop-a");
  fs::create_symlink("loop-a", tmp.path() / "loop-b");
  const std::string loop = (tmp.path() / "loop-a" / "x").string();
  struct Case {
    std::string dir;
    int err;
  };
  for (const Case& c : {Case{too_long, ENAMETOOLONG}, Case{loop, ELOOP}}) {
    for (const std::string& files : {std::string(), std::string(" config.json")}) {
      std::string out, err;
      int rc = Hubload(cache.str(), "download org/m" + files + " --offline --local-dir " + Quote(c.dir), &out, &err);
      EXPECT_EQ(rc, 1) << files << " " << std::strerror(c.err) << ": " << err;
      EXPECT_FALSE(Contains(err, "terminate")) << err;
      if (files.empty()) {
        EXPECT_TRUE(Contains(err, std::strerror(c.err))) << err;
      }
    }
  }
}

TEST(CliUntrusted, OfflineRevisionWhoseRefIsAFolderIsAMissNotAnAbort) {
  // Branch "feature/x" is cached (refs/feature/x), so refs/feature is a folder.
  TempDir cache;
  fs::path repo = MakeRepo(cache.path(), "");
  Write(repo / "refs" / "feature" / "x", kCommit);
  for (const std::string& files : {std::string(), std::string(" config.json")}) {
    std::string out, err;
    int rc = Hubload(cache.str(), "download org/m" + files + " --revision feature --offline", &out, &err);
    EXPECT_EQ(rc, 1) << files << ": " << err;
    EXPECT_TRUE(Contains(err, "feature")) << err;
    EXPECT_FALSE(Contains(err, "terminate")) << err;
    EXPECT_FALSE(Contains(err, "corrupt")) << err;  // a folder of refs is not a corrupt ref
    // The branch itself still resolves.
    rc = Hubload(cache.str(), "download org/m" + files + " --revision feature/x --offline", &out, &err);
    EXPECT_EQ(rc, 0) << files << ": " << err;
  }
  // A ref that is a file of garbage: the miss says it is corrupt and names the file.
  Write(repo / "refs" / "main", std::string("garbage\n"));
  std::string out, err;
  int rc = Hubload(cache.str(), "download org/m config.json --offline", &out, &err);
  EXPECT_EQ(rc, 1) << err;
  EXPECT_TRUE(Contains(err, "corrupt")) << err;
  EXPECT_TRUE(Contains(err, (repo / "refs" / "main").string())) << err;
}
