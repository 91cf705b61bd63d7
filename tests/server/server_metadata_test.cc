// `hubload serve` metadata APIs (repo info, tree, paths-info) and the access log.
#include <fstream>

#include "server/server_fixture.h"

namespace hubload::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// ---- metadata APIs ----

TEST_F(ServerTest, RepoInfoWithBlobs) {
  Reply r = Get(U("/api/models/org/model?blobs=true"));
  ASSERT_EQ(r.status, 200);
  json j = json::parse(r.body);
  EXPECT_EQ(j["id"], "org/model");
  EXPECT_EQ(j["sha"], commit_);
  EXPECT_EQ(j["private"], false);
  std::set<std::string> names;
  for (auto& s : j["siblings"]) {
    std::string n = s["rfilename"];
    names.insert(n);
    EXPECT_EQ(s["size"], files_[n].size()) << n;
    if (n == "weights/model.safetensors") {
      EXPECT_EQ(s["lfs"]["sha256"], Sha256(files_[n]));
      EXPECT_EQ(s["lfs"]["size"], 5000);
    } else {
      EXPECT_EQ(s["blobId"], GitSha1(files_[n])) << n;
      EXPECT_FALSE(s.contains("lfs"));
    }
  }
  std::set<std::string> want;
  for (auto& [p, c] : files_) want.insert(p);
  EXPECT_EQ(names, want);
}

TEST_F(ServerTest, TreeRecursivePaginated) {
  std::vector<json> all;
  std::string url = U("/api/models/org/model/tree/main?recursive=true&expand=false");
  int pages = 0;
  while (!url.empty() && pages < 20) {
    Reply r = Get(url);
    ASSERT_EQ(r.status, 200);
    for (auto& e : json::parse(r.body)) all.push_back(e);
    ++pages;
    std::string link = r.h("link");
    url.clear();
    if (!link.empty()) {
      ASSERT_EQ(link.front(), '<');
      ASSERT_NE(link.find(">; rel=\"next\""), std::string::npos) << link;
      url = link.substr(1, link.find('>') - 1);
      ASSERT_EQ(url.rfind("http://", 0), 0u);
    }
  }
  EXPECT_GT(pages, 1);  // page size 2
  std::set<std::string> got;
  for (auto& e : all) {
    got.insert(e["type"].get<std::string>() + ":" + e["path"].get<std::string>());
    EXPECT_TRUE(e.contains("oid"));
    if (e["path"] == "weights/model.safetensors") {
      EXPECT_EQ(e["lfs"]["oid"], Sha256(files_["weights/model.safetensors"]));
    }
    if (e["path"] == "config.json") {
      EXPECT_EQ(e["oid"], GitSha1(files_["config.json"]));
    }
  }
  std::set<std::string> want = {"directory:sub", "directory:sub/dir", "directory:weights"};
  for (auto& [p, c] : files_) want.insert("file:" + p);
  EXPECT_EQ(got, want);
  // Non-recursive: immediate children only.
  Reply top = Get(U("/api/models/org/model/tree/main?limit=100"));
  std::set<std::string> top_names;
  for (auto& e : json::parse(top.body)) top_names.insert(e["path"]);
  EXPECT_EQ(top_names, (std::set<std::string>{"a b#c?.txt", "config.json", "empty.txt", "sub", "weights"}));
}

TEST_F(ServerTest, PathsInfoFormAndJson) {
  std::string form = "paths=config.json&paths=weights%2Fmodel.safetensors&paths=missing&expand=true";
  Reply f = Http("POST", U("/api/models/org/model/paths-info/main"),
                 {"Content-Type: application/x-www-form-urlencoded"}, &form);
  ASSERT_EQ(f.status, 200);
  json jf = json::parse(f.body);
  ASSERT_EQ(jf.size(), 2u);
  EXPECT_EQ(jf[0]["path"], "config.json");
  EXPECT_EQ(jf[0]["oid"], GitSha1(files_["config.json"]));
  EXPECT_EQ(jf[0]["lastCommit"]["id"], commit_);
  EXPECT_EQ(jf[1]["lfs"]["oid"], Sha256(files_["weights/model.safetensors"]));
  std::string js = R"({"paths":["sub","empty.txt"],"expand":false})";
  Reply j = Http("POST", U("/api/models/org/model/paths-info/main"), {"Content-Type: application/json"}, &js);
  ASSERT_EQ(j.status, 200);
  json jj = json::parse(j.body);
  ASSERT_EQ(jj.size(), 2u);
  EXPECT_EQ(jj[0]["type"], "directory");
  EXPECT_EQ(jj[1]["size"], 0);
  EXPECT_FALSE(jj[1].contains("lastCommit"));
}


// ---- access log and stats ----

TEST_F(ServerTest, AccessLogAndStats) {
  hub_->server->ResetStats();
  Get(U("/org/model/resolve/main/config.json"), {Auth(kGood), "Range: bytes=0-3"});
  Get(U("/org/model/resolve/main/config.json"), {Auth(kGood)});
  EXPECT_EQ(hub_->server->RequestCount("/org/model/resolve/main/config.json"), 2u);
  EXPECT_EQ(hub_->server->stats().body_bytes_sent, 4 + files_["config.json"].size());
  hub_->server->Stop();  // flushes and closes the log
  std::ifstream in(log_dir_.path() / "access.log");
  std::string line, all;
  int n = 0;
  json last;
  while (std::getline(in, line)) {
    all += line;
    last = json::parse(line);
    ++n;
  }
  ASSERT_GE(n, 2);
  // The un-ranged request's line (lines of concurrent connections may interleave).
  in.clear();
  in.seekg(0);
  while (std::getline(in, line)) {
    json j = json::parse(line);
    if (j["path"] == "/org/model/resolve/main/config.json" && j["range"].is_null()) last = j;
  }
  EXPECT_EQ(last["method"], "GET");
  EXPECT_EQ(last["path"], "/org/model/resolve/main/config.json");
  EXPECT_EQ(last["status"], 200);
  EXPECT_EQ(last["bytes"], files_["config.json"].size());
  EXPECT_TRUE(last.contains("time"));
  EXPECT_TRUE(last.contains("range"));
  EXPECT_EQ(all.find(kGood), std::string::npos);
}

}  // namespace
}  // namespace hubload::testing
