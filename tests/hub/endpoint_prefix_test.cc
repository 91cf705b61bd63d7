// Field failures B41 (an endpoint with a path prefix, e.g. an Artifactory
// remote) and B46 (relative and path-only redirects on HEAD and GET, and a
// redirect loop) against the in-process `hubload serve` with
// Faults::SetPathPrefix / SetRedirect. What the client sent comes from the
// server's access log; bytes and hashes from the test's data.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "field_support.h"
#include "hubload/hub.h"
#include "testing/status_matchers.h"

namespace fs = std::filesystem;
using hubload::Code;
using hubload::server::Faults;
using hubload::testing::StartTestHub;
using hubload::testing::TempDir;
using namespace hubload::testing::field;  // NOLINT(build/namespaces)

namespace {

const char kPrefix[] = "/artifactory/api/huggingfaceml/hf-remote";

const std::map<std::string, std::string> kFiles = {{"config.json", "{\"a\": 1}"},
                                                   {"tokenizer.json", "{\"t\": []}"},
                                                   {"sub/one.txt", "one"},
                                                   {"sub/two.txt", "two"},
                                                   {"model.safetensors", PatternBytes(5000, 7)}};

std::unique_ptr<hubload::testing::TestHub> PrefixedHub(const TempDir& logs) {
  hubload::server::ServerOptions so;
  so.access_log = logs.str() + "/access.log";
  so.tree_page_size = 2;  // the listing takes 3 pages: Link rel="next" under the prefix
  so.faults.SetPathPrefix(kPrefix);
  return StartTestHub(so);
}

// "METHOD path" of every hub-listener request (the CDN has no prefix).
std::vector<std::string> HubRequests(const std::vector<nlohmann::json>& log) {
  std::vector<std::string> out;
  for (auto& j : log)
    if (!j.contains("listener")) out.push_back(j.value("method", "") + " " + j.value("path", ""));
  return out;
}

// Downloads (one file, a snapshot, a listing) with `endpoint`; returns the hub requests.
std::vector<std::string> DownloadThrough(const std::string& endpoint_suffix) {
  TempDir logs, cache;
  auto hub = PrefixedHub(logs);
  if (!hub) return {};
  std::string commit = hub->AddRepo("org/m", kFiles, SmallLfs());
  auto o = Opts(*hub, cache.str());
  EXPECT_NE(hub->url().find(kPrefix), std::string::npos) << hub->url();
  o.config.endpoint = hub->url() + endpoint_suffix;
  hubload::HubClient client(o);
  auto f = client.Download(Req("org/m", "model.safetensors"));
  EXPECT_OK(f);
  if (f.ok()) {
    EXPECT_EQ(FileSha256(*f), Sha256(kFiles.at("model.safetensors")));
  }
  hubload::SnapshotRequest s;
  s.repo_id = "org/m";
  auto snap = client.Snapshot(s);
  EXPECT_OK(snap);
  if (snap.ok()) {
    EXPECT_EQ(*snap, cache.str() + "/models--org--m/snapshots/" + commit);  // the usual folder name
    for (auto& [path, bytes] : kFiles) {
      EXPECT_EQ(FileSha256(*snap + "/" + path), Sha256(bytes)) << path;
    }
  }
  auto l = client.ListFiles("org/m", "main");
  EXPECT_OK(l);
  if (l.ok()) {
    EXPECT_EQ(l->files.size(), kFiles.size());
  }
  return HubRequests(AccessLog(*hub, logs));
}

void ExpectAllUnderThePrefix(const std::vector<std::string>& reqs) {
  ASSERT_FALSE(reqs.empty());
  for (auto& r : reqs) {
    std::string path = r.substr(r.find(' ') + 1);
    EXPECT_EQ(path.rfind(std::string(kPrefix) + "/", 0), 0u) << r;
    EXPECT_EQ(path.find("//"), std::string::npos) << r;
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// B41

TEST(FieldB41, EveryRequestKeepsThePrefixWithOrWithoutATrailingSlash) {
  auto plain = DownloadThrough("");
  auto slash = DownloadThrough("/");
  ExpectAllUnderThePrefix(plain);
  ExpectAllUnderThePrefix(slash);
  // Both spellings of the endpoint send byte-identical request lines (each
  // run has its own repo, so its own commit id).
  for (auto* v : {&plain, &slash}) {
    for (auto& r : *v) r = std::regex_replace(r, std::regex("[0-9a-f]{40}"), "<commit>");
  }
  std::sort(plain.begin(), plain.end());
  std::sort(slash.begin(), slash.end());
  EXPECT_EQ(plain, slash);
  // The listing was paginated (3 pages of 2) and every page stayed under the prefix.
  EXPECT_GE(std::count_if(plain.begin(), plain.end(),
                          [](const std::string& r) { return r.find("/tree/") != std::string::npos; }),
            3 * 2);  // two listings (snapshot + ListFiles), 3 pages each
}

TEST(FieldB41, UploadsKeepThePrefix) {
  TempDir logs, folder;
  auto hub = PrefixedHub(logs);
  ASSERT_TRUE(hub);
  hub->AddRepo("org/up", {{"README.md", "x"}});
  hubload::testing::WriteFileBytes(folder.path() / "weights.bin", PatternBytes(4096, 9));
  hubload::testing::WriteFileBytes(folder.path() / "notes.txt", std::string("small"));
  auto o = Opts(*hub, "");
  o.config.token = "hf_writer";
  hubload::UploadFolderRequest up;
  up.repo_id = "org/up";
  up.folder = folder.str();
  auto c = hubload::HubClient(o).UploadFolder(up);
  ASSERT_OK(c);
  auto reqs = HubRequests(AccessLog(*hub, logs));
  ExpectAllUnderThePrefix(reqs);
  for (const char* step : {"/preupload/", "/commit/"}) {
    auto has = [&](const std::string& r) { return r.find(step) != std::string::npos; };
    EXPECT_TRUE(std::any_of(reqs.begin(), reqs.end(), has)) << step;
  }
}

// ---------------------------------------------------------------------------
// B46

class FieldB46 : public ::testing::TestWithParam<Faults::RedirectForm> {};

TEST_P(FieldB46, MetadataComesFromTheFinalSameHostAnswerOfAMovedRepo) {
  // A renamed repo: every /Old/Name/ request is redirected to /org/m/ (no Hub
  // headers on the redirect). The repo is private: the files come only when
  // Authorization survives the same-host hop.
  TempDir logs, cache;
  hubload::server::ServerOptions so;
  so.access_log = logs.str() + "/access.log";
  so.tokens = {"hf_reader"};
  so.faults.SetRedirect("/Old/Name/", "/org/m/", 307, GetParam());
  auto hub = StartTestHub(so);
  ASSERT_TRUE(hub);
  auto ro = SmallLfs();
  ro.private_repo = true;
  std::string commit = hub->AddRepo("org/m", kFiles, ro);
  auto o = Opts(*hub, cache.str());
  o.config.token = "hf_reader";
  for (const char* name : {"config.json", "model.safetensors"}) {  // a regular file, then an LFS one via the CDN
    auto f = hubload::HubClient(o).Download(Req("Old/Name", name));
    ASSERT_OK(f) << name << ": " << f.status().ToString();
    EXPECT_EQ(*f, cache.str() + "/models--Old--Name/snapshots/" + commit + "/" + name);  // the requested id
    EXPECT_EQ(FileSha256(*f), Sha256(kFiles.at(name)));
  }
  auto log = AccessLog(*hub, logs);
  EXPECT_FALSE(Lines(log, "HEAD", "/Old/Name/resolve/main/config.json").empty());
  EXPECT_FALSE(Lines(log, "HEAD", "/org/m/resolve/main/config.json").empty());
}

INSTANTIATE_TEST_SUITE_P(Forms, FieldB46,
                         ::testing::Values(Faults::RedirectForm::kPathOnly, Faults::RedirectForm::kRelative,
                                           Faults::RedirectForm::kAbsolute, Faults::RedirectForm::kProtocolRelative));

TEST(FieldB46Loop, ARedirectLoopFailsAfterTenHopsNamingTheFirstUrl) {
  TempDir logs, cache;
  hubload::server::ServerOptions so;
  so.access_log = logs.str() + "/access.log";
  so.faults.SetRedirect("/org/a/", "/org/b/", 307);
  so.faults.SetRedirect("/org/b/", "/org/a/", 307);
  auto hub = StartTestHub(so);
  ASSERT_TRUE(hub);
  auto f = hubload::HubClient(Opts(*hub, cache.str())).Download(Req("org/a", "config.json"));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Code::kNetwork) << f.status().ToString();
  EXPECT_NE(f.status().message().find("too many"), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find("/org/a/resolve/main/config.json"), std::string::npos) << f.status().message();
  auto log = AccessLog(*hub, logs);
  EXPECT_LE(log.size(), 11u);  // the first request and at most 10 hops, no retry
}
