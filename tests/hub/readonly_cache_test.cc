// Field failures B39 (a cache on a read-only mount) and B41 (an endpoint
// with a path prefix) against the in-process `hubload serve`. B39 mounts a
// read-only bind of a filled cache (needs CAP_SYS_ADMIN, else skipped) and
// compares a listing of every path with its size and mtime before and after;
// B41 checks every request line the server logged.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include "field_support.h"
#include "hubload/hub.h"
#include "testing/status_matchers.h"

namespace fs = std::filesystem;
using hubload::Code;
using hubload::testing::TempDir;
using namespace hubload::testing::field;  // NOLINT(build/namespaces)

namespace {

// A read-only bind mount of `src` on a fresh folder, unmounted on destruction.
class ReadOnlyView {
 public:
  explicit ReadOnlyView(const std::string& src) {
    dir_ = tmp_.path() / "ro";
    fs::create_directories(dir_);
    if (::mount(src.c_str(), dir_.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      error_ = std::strerror(errno);
      return;
    }
    mounted_ = true;
    if (::mount(nullptr, dir_.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0)
      error_ = std::strerror(errno);
  }
  ~ReadOnlyView() {
    if (mounted_ && ::umount2(dir_.c_str(), 0) != 0) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool ok() const { return mounted_ && error_.empty(); }
  const std::string& error() const { return error_; }
  std::string str() const { return dir_.string(); }

 private:
  TempDir tmp_;
  fs::path dir_;
  bool mounted_ = false;
  std::string error_;
};

// Every path below `root` with its type, size and mtime (ns).
std::map<std::string, std::string> Listing(const std::string& root) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    out[it->path().string().substr(root.size())] = std::to_string(st.st_mode) + " " + std::to_string(st.st_size) + " " +
                                                   std::to_string(st.st_mtim.tv_sec) + "." +
                                                   std::to_string(st.st_mtim.tv_nsec);
  }
  return out;
}

const std::map<std::string, std::string> kFilesA = {
    {"config.json", "{\"v\": 1}"}, {"s1.safetensors", PatternBytes(3000, 1)}, {"s2.safetensors", PatternBytes(3000,
                                                                                                              2)}};

}  // namespace

// ---------------------------------------------------------------------------
// B39: read-only cache.

class FieldB39 : public ::testing::Test {
 protected:
  void SetUp() override {
    hub_ = HubWithLog(logs_);
    ASSERT_TRUE(hub_);
    commit_a_ = hub_->AddRepo("org/m", kFilesA, SmallLfs());
    hubload::SnapshotRequest req;
    req.repo_id = "org/m";
    ASSERT_OK(hubload::HubClient(Opts(*hub_, cache_.str())).Snapshot(req));
    ro_ = std::make_unique<ReadOnlyView>(cache_.str());
    if (!ro_->ok()) GTEST_SKIP() << "cannot make a read-only bind mount here (needs CAP_SYS_ADMIN): " << ro_->error();
    before_ = Listing(ro_->str());
  }
  hubload::ClientOptions RoOpts() { return Opts(*hub_, ro_->str()); }
  void ExpectUnchanged() { EXPECT_EQ(Listing(ro_->str()), before_) << "the read-only cache was written to"; }

  TempDir logs_, cache_;
  std::unique_ptr<hubload::testing::TestHub> hub_;
  std::string commit_a_;
  std::unique_ptr<ReadOnlyView> ro_;
  std::map<std::string, std::string> before_;
};

TEST_F(FieldB39, A_OnlineHitReturnsTheCachedSnapshotWithoutWriting) {
  hubload::SnapshotRequest req;
  req.repo_id = "org/m";
  auto p = hubload::HubClient(RoOpts()).Snapshot(req);
  ASSERT_OK(p);
  EXPECT_EQ(*p, ro_->str() + "/models--org--m/snapshots/" + commit_a_);
  auto f = hubload::HubClient(RoOpts()).Download(Req("org/m", "s1.safetensors"));
  ASSERT_OK(f);
  EXPECT_EQ(FileSha256(*f), Sha256(kFilesA.at("s1.safetensors")));
  ExpectUnchanged();
}

TEST_F(FieldB39, C_OfflineHitWritesNothing) {
  auto o = RoOpts();
  o.config.offline = true;
  hubload::SnapshotRequest req;
  req.repo_id = "org/m";
  auto p = hubload::HubClient(o).Snapshot(req);
  ASSERT_OK(p);
  EXPECT_EQ(*p, ro_->str() + "/models--org--m/snapshots/" + commit_a_);
  ExpectUnchanged();
}

TEST_F(FieldB39, E_PinnedCommitSendsNoRequestAndWritesNothing) {
  const uint64_t before = hub_->server->stats().requests;
  hubload::SnapshotRequest req;
  req.repo_id = "org/m";
  req.revision = commit_a_;
  auto p = hubload::HubClient(RoOpts()).Snapshot(req);
  ASSERT_OK(p);
  auto r = Req("org/m", "config.json");
  r.revision = commit_a_;
  auto f = hubload::HubClient(RoOpts()).Download(r);
  ASSERT_OK(f);
  EXPECT_EQ(hub_->server->stats().requests, before);
  ExpectUnchanged();
}

TEST_F(FieldB39, D_AnAbsentOptionalFileIsNotFoundNotAReadOnlyError) {
  auto f = hubload::HubClient(RoOpts()).Download(Req("org/m", "generation_config.json"));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Code::kEntryNotFound) << f.status().ToString();
  EXPECT_EQ(f.status().message().find("ead-only"), std::string::npos) << f.status().message();
  ExpectUnchanged();
}

TEST_F(FieldB39, B_ANewerRevisionThatCannotBeStoredIsAnErrorNeverTheOldFile) {
  std::string commit_b = hub_->Replace("org/m", "config.json", "{\"v\": 2}");
  hubload::SnapshotRequest req;
  req.repo_id = "org/m";
  auto p = hubload::HubClient(RoOpts()).Snapshot(req);
  ASSERT_FALSE(p.ok()) << "returned " << *p << " although main moved to " << commit_b;
  EXPECT_EQ(p.status().code(), Code::kIOError) << p.status().ToString();
  EXPECT_NE(p.status().message().find(ro_->str()), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("ead-only"), std::string::npos) << p.status().message();
  auto f = hubload::HubClient(RoOpts()).Download(Req("org/m", "config.json"));
  ASSERT_FALSE(f.ok()) << "returned " << *f;
  EXPECT_NE(f.status().message().find("ead-only"), std::string::npos) << f.status().message();
  ExpectUnchanged();  // refs/main still names A
}
