// Tests of `hubload serve` over HTTP with libcurl as the independent client.
// Expected etags/hashes are computed here with OpenSSL from the raw bytes.
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "hubload/server.h"
#include "testing/hub_server.h"
#include "testing/util.h"

namespace hubload::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string Hex(const unsigned char* md, unsigned n) {
  static const char* h = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < n; ++i) {
    s.push_back(h[md[i] >> 4]);
    s.push_back(h[md[i] & 15]);
  }
  return s;
}
std::string Sha256(const std::string& s) { return Sha256Hex(s.data(), s.size()); }
// git blob sha1, computed independently of hubload.
std::string GitSha1(const std::string& content) {
  std::string obj = "blob " + std::to_string(content.size());
  obj.push_back('\0');
  obj += content;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_Digest(obj.data(), obj.size(), md, &n, EVP_sha1(), nullptr);
  return Hex(md, n);
}
std::string Base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}
std::string RandomBytes(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(g() & 0xff);
  return s;
}

struct Reply {
  long status = 0;
  CURLcode code = CURLE_OK;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  bool has(const std::string& h) const { return headers.count(h) > 0; }
  std::string h(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

size_t WriteCb(char* p, size_t s, size_t n, void* ud) {
  static_cast<Reply*>(ud)->body.append(p, s * n);
  return s * n;
}
size_t HeaderCb(char* p, size_t s, size_t n, void* ud) {
  auto* r = static_cast<Reply*>(ud);
  std::string line(p, s * n);
  if (line.rfind("HTTP/", 0) == 0) {
    r->headers.clear();
    return s * n;
  }
  auto colon = line.find(':');
  if (colon != std::string::npos) {
    std::string k = line.substr(0, colon), v = line.substr(colon + 1);
    for (auto& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    while (!v.empty() && (v.front() == ' ')) v.erase(0, 1);
    while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) v.pop_back();
    r->headers[k] = v;
  }
  return s * n;
}

Reply Http(const std::string& method, const std::string& url, const std::vector<std::string>& headers = {},
           const std::string* body = nullptr, bool follow = false) {
  Reply r;
  CURL* c = curl_easy_init();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, WriteCb);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, HeaderCb);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, follow ? 1L : 0L);
  if (method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (method != "GET") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
  if (body) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body->data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size()));
  }
  curl_slist* hl = nullptr;
  for (auto& h : headers) hl = curl_slist_append(hl, h.c_str());
  hl = curl_slist_append(hl, "Expect:");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
  r.code = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  curl_slist_free_all(hl);
  curl_easy_cleanup(c);
  return r;
}
Reply Get(const std::string& url, const std::vector<std::string>& headers = {}) { return Http("GET", url, headers); }

const char* kGood = "hf_good_token";
const char* kGatedOk = "hf_gated_ok";
const char* kOther = "hf_other";

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::ServerOptions o;
    o.tokens = {kGood, kGatedOk, kOther};
    o.tree_page_size = 2;
    o.multipart_chunk_size = 1000;
    o.access_log = log_dir_.str() + "/access.log";
    hub_ = StartTestHub(o);
    ASSERT_TRUE(hub_);
    files_ = {{"config.json", "{\"hidden_size\": 8}\n"},
              {"weights/model.safetensors", RandomBytes(5000, 1)},
              {"empty.txt", ""},
              {"a b#c?.txt", "odd name\n"},
              {"sub/dir/deep.txt", "deep\n"}};
    commit_ = hub_->AddRepo("org/model", files_);
    ASSERT_EQ(commit_.size(), 40u);
  }
  std::string U(const std::string& path) const { return hub_->url() + path; }
  static std::string Auth(const std::string& t) { return "Authorization: Bearer " + t; }

  TempDir log_dir_;
  std::unique_ptr<TestHub> hub_;
  std::map<std::string, std::string> files_;
  std::string commit_;
};

// ---- resolve: headers, HEAD, LFS redirect and CDN ----

TEST_F(ServerTest, ResolveRegularFileHeadersAndBody) {
  const std::string& content = files_["config.json"];
  Reply r = Get(U("/org/model/resolve/main/config.json"));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body, content);
  EXPECT_EQ(r.h("etag"), "\"" + GitSha1(content) + "\"");
  EXPECT_EQ(r.h("x-linked-etag"), "\"" + GitSha1(content) + "\"");
  EXPECT_EQ(r.h("x-repo-commit"), commit_);
  EXPECT_EQ(r.h("content-length"), std::to_string(content.size()));
  EXPECT_EQ(r.h("x-linked-size"), std::to_string(content.size()));
  EXPECT_EQ(r.h("accept-ranges"), "bytes");
  Reply h = Http("HEAD", U("/org/model/resolve/main/config.json"));
  EXPECT_EQ(h.status, 200);
  EXPECT_TRUE(h.body.empty());
  EXPECT_EQ(h.h("content-length"), std::to_string(content.size()));
  EXPECT_EQ(h.h("etag"), r.h("etag"));
  EXPECT_EQ(h.h("x-repo-commit"), commit_);
}

TEST_F(ServerTest, LfsFileRedirectsToCdnWithMetadata) {
  const std::string& content = files_["weights/model.safetensors"];
  Reply r = Http("HEAD", U("/org/model/resolve/main/weights/model.safetensors"));
  ASSERT_EQ(r.status, 302);
  EXPECT_EQ(r.h("x-repo-commit"), commit_);
  EXPECT_EQ(r.h("x-linked-etag"), "\"" + Sha256(content) + "\"");
  EXPECT_EQ(r.h("x-linked-size"), std::to_string(content.size()));
  std::string loc = r.h("location");
  EXPECT_EQ(loc.rfind(hub_->server->cdn_url() + "/", 0), 0u) << loc;
  EXPECT_NE(loc.find("localhost"), std::string::npos);
  // The CDN answers without Authorization, full and ranged, with the etag.
  Reply full = Get(loc);
  ASSERT_EQ(full.status, 200);
  EXPECT_EQ(full.body, content);
  EXPECT_EQ(full.h("etag"), "\"" + Sha256(content) + "\"");
  Reply part = Get(loc, {"Range: bytes=100-199"});
  ASSERT_EQ(part.status, 206);
  EXPECT_EQ(part.body, content.substr(100, 100));
  EXPECT_EQ(part.h("content-range"), "bytes 100-199/5000");
  // A tampered signature is refused.
  std::string bad = loc;
  bad[bad.find("sig=") + 4] = bad[bad.find("sig=") + 4] == 'a' ? 'b' : 'a';
  EXPECT_EQ(Get(bad).status, 403);
  // /raw/ of an LFS file is the pointer.
  Reply raw = Get(U("/org/model/raw/main/weights/model.safetensors"));
  ASSERT_EQ(raw.status, 200);
  EXPECT_EQ(raw.body, "version https://git-lfs.github.com/spec/v1\noid sha256:" + Sha256(content) + "\nsize 5000\n");
}

// ---- ranges ----

TEST_F(ServerTest, RangeEdges) {
  const std::string& c = files_["sub/dir/deep.txt"];  // 5 bytes "deep\n"
  std::string url = U("/org/model/resolve/main/sub/dir/deep.txt");
  Reply r00 = Get(url, {"Range: bytes=0-0"});
  EXPECT_EQ(r00.status, 206);
  EXPECT_EQ(r00.body, c.substr(0, 1));
  EXPECT_EQ(r00.h("content-range"), "bytes 0-0/5");
  Reply open = Get(url, {"Range: bytes=2-"});
  EXPECT_EQ(open.status, 206);
  EXPECT_EQ(open.body, c.substr(2));
  EXPECT_EQ(open.h("content-range"), "bytes 2-4/5");
  Reply clamp = Get(url, {"Range: bytes=1-100"});
  EXPECT_EQ(clamp.status, 206);
  EXPECT_EQ(clamp.body, c.substr(1));
  EXPECT_EQ(clamp.h("content-range"), "bytes 1-4/5");
  Reply suffix = Get(url, {"Range: bytes=-2"});
  EXPECT_EQ(suffix.status, 206);
  EXPECT_EQ(suffix.body, c.substr(3));
  Reply beyond = Get(url, {"Range: bytes=5-"});
  EXPECT_EQ(beyond.status, 416);
  EXPECT_EQ(beyond.h("content-range"), "bytes */5");
  // Zero-length file: bytes=0-0 -> 200, empty body, Content-Range bytes */0.
  Reply empty = Get(U("/org/model/resolve/main/empty.txt"), {"Range: bytes=0-0"});
  EXPECT_EQ(empty.status, 200);
  EXPECT_EQ(empty.body, "");
  EXPECT_EQ(empty.h("content-length"), "0");
  EXPECT_EQ(empty.h("content-range"), "bytes */0");
  EXPECT_EQ(empty.h("etag"), "\"" + GitSha1("") + "\"");
}

TEST_F(ServerTest, ConditionalRequests) {
  std::string url = U("/org/model/resolve/main/config.json");
  std::string etag = "\"" + GitSha1(files_["config.json"]) + "\"";
  Reply nm = Get(url, {"If-None-Match: " + etag});
  EXPECT_EQ(nm.status, 304);
  EXPECT_TRUE(nm.body.empty());
  EXPECT_EQ(nm.h("x-repo-commit"), commit_);
  EXPECT_EQ(Get(url, {"If-None-Match: \"other\""}).status, 200);
  Reply ir_ok = Get(url, {"Range: bytes=0-1", "If-Range: " + etag});
  EXPECT_EQ(ir_ok.status, 206);
  Reply ir_changed = Get(url, {"Range: bytes=0-1", "If-Range: \"stale\""});
  EXPECT_EQ(ir_changed.status, 200);
  EXPECT_EQ(ir_changed.body, files_["config.json"]);
  // LFS: If-None-Match on the linked etag -> 304 without a redirect.
  std::string lfs_etag = "\"" + Sha256(files_["weights/model.safetensors"]) + "\"";
  EXPECT_EQ(Get(U("/org/model/resolve/main/weights/model.safetensors"), {"If-None-Match: " + lfs_etag}).status, 304);
}

// ---- revisions and encodings ----

TEST_F(ServerTest, RevisionForms) {
  std::string path = "/config.json";
  EXPECT_EQ(Get(U("/org/model/resolve/" + commit_ + path)).status, 200);
  EXPECT_EQ(Get(U("/org/model/resolve/" + commit_.substr(0, 7) + path)).status, 200);
  ASSERT_TRUE(server::SetRef(hub_->root.str(), "org/model", "refs/pr/1", commit_).ok());
  ASSERT_TRUE(server::SetRef(hub_->root.str(), "org/model", "feature/x", commit_).ok());
  Reply pr = Get(U("/org/model/resolve/refs%2Fpr%2F1" + path));
  EXPECT_EQ(pr.status, 200);
  EXPECT_EQ(pr.h("x-repo-commit"), commit_);
  EXPECT_EQ(Get(U("/org/model/resolve/feature%2Fx" + path)).status, 200);
  Reply info = Get(U("/api/models/org/model/revision/HEAD"));
  ASSERT_EQ(info.status, 200);
  EXPECT_EQ(json::parse(info.body)["sha"], commit_);
  EXPECT_EQ(json::parse(Get(U("/api/models/org/model/revision/refs%2Fpr%2F1")).body)["sha"], commit_);
}

TEST_F(ServerTest, PathEncodings) {
  const std::string& c = files_["a b#c?.txt"];
  EXPECT_EQ(Get(U("/org/model/resolve/main/a%20b%23c%3F.txt")).body, c);
  Reply enc_slash = Get(U("/org/model/resolve/main/sub%2Fdir%2Fdeep.txt"));
  EXPECT_EQ(enc_slash.status, 200);
  EXPECT_EQ(enc_slash.body, "deep\n");
  // Tree path as one %2F-encoded segment and with literal slashes.
  Reply t1 = Get(U("/api/models/org/model/tree/main/sub%2Fdir"));
  Reply t2 = Get(U("/api/models/org/model/tree/main/sub/dir"));
  ASSERT_EQ(t1.status, 200);
  EXPECT_EQ(t1.body, t2.body);
  EXPECT_EQ(json::parse(t1.body)[0]["path"], "sub/dir/deep.txt");
  EXPECT_EQ(Get(U("/org/model/resolve/main/bad%zzescape")).status, 400);
}

TEST_F(ServerTest, OneSegmentRepoAndOtherRepoTypes) {
  server::CreateRepoOptions ds;
  ds.repo_type = "dataset";
  hub_->AddRepo("gpt2", {{"vocab.txt", "a\nb\n"}});
  hub_->AddRepo("org/data", {{"train.csv", "x,y\n1,2\n"}}, ds);
  EXPECT_EQ(Get(U("/gpt2/resolve/main/vocab.txt")).body, "a\nb\n");
  EXPECT_EQ(json::parse(Get(U("/api/models/gpt2")).body)["id"], "gpt2");
  EXPECT_EQ(Get(U("/datasets/org/data/resolve/main/train.csv")).body, "x,y\n1,2\n");
  EXPECT_EQ(Get(U("/org/data/resolve/main/train.csv")).h("x-error-code"), "RepoNotFound");
  EXPECT_EQ(json::parse(Get(U("/api/datasets/org/data")).body)["siblings"][0]["rfilename"], "train.csv");
}

// ---- errors ----

TEST_F(ServerTest, ErrorCodes) {
  Reply anon_missing = Get(U("/org/nope/resolve/main/config.json"));
  EXPECT_EQ(anon_missing.status, 401);
  EXPECT_EQ(anon_missing.h("x-error-code"), "RepoNotFound");
  Reply auth_missing = Get(U("/org/nope/resolve/main/config.json"), {Auth(kGood)});
  EXPECT_EQ(auth_missing.status, 404);
  EXPECT_EQ(auth_missing.h("x-error-code"), "RepoNotFound");
  EXPECT_TRUE(json::parse(auth_missing.body).contains("error"));
  Reply rev = Get(U("/org/model/resolve/nobranch/config.json"));
  EXPECT_EQ(rev.status, 404);
  EXPECT_EQ(rev.h("x-error-code"), "RevisionNotFound");
  Reply entry = Get(U("/org/model/resolve/main/missing.bin"));
  EXPECT_EQ(entry.status, 404);
  EXPECT_EQ(entry.h("x-error-code"), "EntryNotFound");
  EXPECT_EQ(entry.h("x-repo-commit"), commit_);
  EXPECT_EQ(Get(U("/org/model/resolve/main/sub")).h("x-error-code"), "EntryNotFound");  // a folder
  Reply bad = Get(U("/org/model/resolve/main/config.json"), {Auth("hf_not_accepted")});
  EXPECT_EQ(bad.status, 401);
  EXPECT_EQ(bad.h("x-error-message"), "Invalid credentials in Authorization header");
  EXPECT_EQ(Get(U("/api/models/org/model/revision/nobranch")).h("x-error-code"), "RevisionNotFound");
  EXPECT_EQ(Get(U("/api/models/org/model/tree/main/nodir")).h("x-error-code"), "EntryNotFound");
}

TEST_F(ServerTest, AccessRules) {
  server::CreateRepoOptions priv;
  priv.private_repo = true;
  priv.read_tokens = {kGood};
  hub_->AddRepo("org/secret", {{"f.txt", "secret"}}, priv);
  server::CreateRepoOptions gated;
  gated.gated = "auto";
  gated.gated_tokens = {kGatedOk};
  hub_->AddRepo("org/gated", {{"f.txt", "gated"}}, gated);

  Reply p_anon = Get(U("/org/secret/resolve/main/f.txt"));
  EXPECT_EQ(p_anon.status, 401);
  EXPECT_EQ(p_anon.h("x-error-code"), "RepoNotFound");
  Reply p_other = Get(U("/org/secret/resolve/main/f.txt"), {Auth(kOther)});
  EXPECT_EQ(p_other.status, 404);
  EXPECT_EQ(p_other.h("x-error-code"), "RepoNotFound");
  EXPECT_EQ(Get(U("/org/secret/resolve/main/f.txt"), {Auth(kGood)}).body, "secret");
  EXPECT_EQ(Get(U("/api/models/org/secret"), {Auth(kGood)}).status, 200);
  EXPECT_EQ(Get(U("/api/models/org/secret")).status, 401);

  Reply g_anon = Get(U("/org/gated/resolve/main/f.txt"));
  EXPECT_EQ(g_anon.status, 401);
  EXPECT_EQ(g_anon.h("x-error-code"), "GatedRepo");
  Reply g_other = Get(U("/org/gated/resolve/main/f.txt"), {Auth(kOther)});
  EXPECT_EQ(g_other.status, 403);
  EXPECT_EQ(g_other.h("x-error-code"), "GatedRepo");
  EXPECT_EQ(Get(U("/org/gated/resolve/main/f.txt"), {Auth(kGatedOk)}).body, "gated");
  // Gated repo metadata stays visible (as on the Hub).
  EXPECT_EQ(json::parse(Get(U("/api/models/org/gated")).body)["gated"], "auto");

  // Writes need a token.
  std::string body = "{\"files\":[]}";
  EXPECT_EQ(Http("POST", U("/api/models/org/model/preupload/main"), {"Content-Type: application/json"}, &body).status,
            401);
}

TEST_F(ServerTest, PathTraversalIsRefused) {
  // A file outside the store that must never be served.
  TempDir outside;
  WriteFileBytes(outside.path() / "secret.txt", std::string("TOP SECRET"));
  for (const char* p : {"/org/model/resolve/main/..%2F..%2F..%2F..%2Fsecret.txt",
                        "/org/model/resolve/main/../../../../etc/passwd",
                        "/org/model/resolve/main/%2Fetc%2Fpasswd",
                        "/org/model/resolve/..%2F..%2Frefs%2Fmain/config.json",
                        "/org/model/resolve/main/sub/..%2F..%2F..%2F.hubload-repo.json",
                        "/api/models/org/model/tree/main/..%2F..",
                        "/api/models/..%2F..%2Fetc/tree/main"}) {
    Reply r = Get(U(p));
    EXPECT_GE(r.status, 400) << p;
    EXPECT_EQ(r.body.find("TOP SECRET"), std::string::npos) << p;
    EXPECT_EQ(r.body.find("root:"), std::string::npos) << p;
  }
  // A snapshot symlink pointing outside the store is not followed.
  fs::path snap = hub_->root.path() / "models--org--model" / "snapshots" / commit_;
  fs::create_symlink(outside.path() / "secret.txt", snap / "escape.txt");
  fs::create_symlink(outside.path(), snap / "escdir");
  Reply r = Get(U("/org/model/resolve/main/escape.txt"));
  EXPECT_GE(r.status, 400);
  EXPECT_EQ(r.body.find("TOP SECRET"), std::string::npos);
  Reply d = Get(U("/org/model/resolve/main/escdir/secret.txt"));
  EXPECT_GE(d.status, 400);
  EXPECT_EQ(d.body.find("TOP SECRET"), std::string::npos);
  Reply t = Get(U("/api/models/org/model/tree/main?recursive=true&limit=1000"));
  EXPECT_EQ(t.body.find("escape.txt"), std::string::npos);
  // The CDN refuses names that are not blobs of the store even with a valid-looking query.
  std::string cdn = hub_->server->cdn_url();
  EXPECT_GE(Get(cdn + "/..%2F..%2Fetc/passwd?exp=99999999999&sig=00").status, 400);
}

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

// ---- uploads ----

TEST_F(ServerTest, UploadFlowBasicMultipartCommitAndPr) {
  std::vector<std::string> auth = {Auth(kGood), "Content-Type: application/json"};
  std::string create = R"({"name":"up","organization":"org","type":"model"})";
  Reply c = Http("POST", U("/api/repos/create"), auth, &create);
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(json::parse(c.body)["url"], hub_->url() + "/org/up");
  EXPECT_EQ(Http("POST", U("/api/repos/create"), auth, &create).status, 409);
  std::string head = json::parse(Get(U("/api/models/org/up")).body)["sha"];

  std::string small = RandomBytes(700, 2), big = RandomBytes(2500, 3);  // chunk size 1000 -> 3 parts
  std::string pre = json{{"files", {{{"path", "x.bin"}, {"size", 700}, {"sample", Base64(small.substr(0, 512))}},
                                    {{"path", "readme.md"}, {"size", 5}, {"sample", Base64("hello")}}}}}
                        .dump();
  Reply p = Http("POST", U("/api/models/org/up/preupload/main"), auth, &pre);
  ASSERT_EQ(p.status, 200) << p.body;
  json pj = json::parse(p.body);
  EXPECT_EQ(pj["files"][0]["uploadMode"], "lfs");
  EXPECT_EQ(pj["files"][1]["uploadMode"], "regular");
  EXPECT_EQ(pj["files"][0]["shouldIgnore"], false);

  std::string batch = json{{"operation", "upload"},
                           {"transfers", {"basic", "multipart"}},
                           {"hash_algo", "sha_256"},
                           {"objects", {{{"oid", Sha256(small)}, {"size", 700}}, {{"oid", Sha256(big)}, {"size", 2500}}}}}
                          .dump();
  Reply b = Http("POST", U("/org/up.git/info/lfs/objects/batch"), auth, &batch);
  ASSERT_EQ(b.status, 200) << b.body;
  json bj = json::parse(b.body);
  json basic = bj["objects"][0]["actions"]["upload"];
  EXPECT_FALSE(basic.contains("header"));
  // Wrong content for the oid is refused, the right content accepted (no Authorization).
  std::string wrong = RandomBytes(700, 9);
  EXPECT_EQ(Http("PUT", basic["href"], {}, &wrong).status, 400);
  EXPECT_EQ(Http("PUT", basic["href"], {}, &small).status, 200);
  json mp = bj["objects"][1]["actions"]["upload"];
  ASSERT_EQ(mp["header"]["chunk_size"], "1000");
  json parts = json::array();
  for (int i = 1; i <= 3; ++i) {
    char key[8];
    std::snprintf(key, sizeof key, "%05d", i);
    ASSERT_TRUE(mp["header"].contains(key));
    std::string slice = big.substr(static_cast<size_t>(i - 1) * 1000, 1000);
    Reply pr = Http("PUT", mp["header"][key], {}, &slice);
    ASSERT_EQ(pr.status, 200);
    ASSERT_FALSE(pr.h("etag").empty());
    parts.push_back({{"partNumber", i}, {"etag", pr.h("etag")}});
  }
  std::string done = json{{"oid", Sha256(big)}, {"parts", parts}}.dump();
  ASSERT_EQ(Http("POST", mp["href"], {"Content-Type: application/vnd.git-lfs+json"}, &done).status, 200);
  // Already stored objects come back without actions.
  Reply b2 = Http("POST", U("/org/up.git/info/lfs/objects/batch"), auth, &batch);
  EXPECT_FALSE(json::parse(b2.body)["objects"][0].contains("actions"));

  auto line = [](const json& j) { return j.dump() + "\n"; };
  std::string commit_body =
      line({{"key", "header"}, {"value", {{"summary", "add files"}, {"description", ""}, {"parentCommit", head}}}}) +
      line({{"key", "file"}, {"value", {{"path", "readme.md"}, {"content", Base64("hello")}, {"encoding", "base64"}}}}) +
      line({{"key", "lfsFile"}, {"value", {{"path", "x.bin"}, {"algo", "sha256"}, {"oid", Sha256(small)}, {"size", 700}}}}) +
      json{{"key", "lfsFile"}, {"value", {{"path", "d/big.bin"}, {"algo", "sha256"}, {"oid", Sha256(big)}, {"size", 2500}}}}
          .dump();  // no trailing newline (as js sends)
  std::vector<std::string> nd = {Auth(kGood), "Content-Type: application/x-ndjson"};
  Reply cm = Http("POST", U("/api/models/org/up/commit/main"), nd, &commit_body);
  ASSERT_EQ(cm.status, 200) << cm.body;
  json cj = json::parse(cm.body);
  std::string new_commit = cj["commitOid"];
  EXPECT_EQ(cj["commitUrl"], hub_->url() + "/org/up/commit/" + new_commit);
  // The new head is visible at once.
  Reply rb = Get(U("/org/up/resolve/main/d/big.bin"), {Auth(kGood)});
  EXPECT_EQ(rb.status, 302);
  EXPECT_EQ(rb.h("x-repo-commit"), new_commit);
  EXPECT_EQ(Http("GET", rb.h("location")).body, big);
  EXPECT_EQ(Get(U("/org/up/resolve/main/readme.md")).body, "hello");
  EXPECT_EQ(Get(U("/org/up/resolve/main/x.bin"), {}).status, 302);

  // Stale parent_commit is refused and changes nothing.
  Reply stale = Http("POST", U("/api/models/org/up/commit/main"), nd, &commit_body);
  EXPECT_EQ(stale.status, 412);
  EXPECT_TRUE(json::parse(stale.body).contains("error"));
  EXPECT_EQ(json::parse(Get(U("/api/models/org/up")).body)["sha"], new_commit);
  // An lfsFile whose object was never uploaded is refused.
  std::string ghost = line({{"key", "header"}, {"value", {{"summary", "ghost"}}}}) +
                      line({{"key", "lfsFile"}, {"value", {{"path", "g.bin"}, {"oid", Sha256("never")}, {"size", 5}}}});
  EXPECT_GE(Http("POST", U("/api/models/org/up/commit/main"), nd, &ghost).status, 400);
  // Deleting a missing file: 404 EntryNotFound.
  std::string del = line({{"key", "header"}, {"value", {{"summary", "del"}}}}) +
                    line({{"key", "deletedFile"}, {"value", {{"path", "nope.txt"}}}});
  Reply dr = Http("POST", U("/api/models/org/up/commit/main"), nd, &del);
  EXPECT_EQ(dr.status, 404);
  EXPECT_EQ(dr.h("x-error-code"), "EntryNotFound");

  // create_pr=1: refs/pr/1, main unchanged.
  std::string pr_body = line({{"key", "header"}, {"value", {{"summary", "pr"}}}}) +
                        line({{"key", "file"}, {"value", {{"path", "readme.md"}, {"content", Base64("changed")}}}});
  Reply prr = Http("POST", U("/api/models/org/up/commit/main?create_pr=1"), nd, &pr_body);
  ASSERT_EQ(prr.status, 200) << prr.body;
  std::string pr_url = json::parse(prr.body)["pullRequestUrl"];
  EXPECT_EQ(pr_url, hub_->url() + "/org/up/discussions/1");
  EXPECT_EQ(Get(U("/org/up/resolve/refs%2Fpr%2F1/readme.md")).body, "changed");
  EXPECT_EQ(Get(U("/org/up/resolve/main/readme.md")).body, "hello");
  // Anonymous and read-only writes are refused.
  EXPECT_EQ(Http("POST", U("/api/models/org/up/commit/main"), {"Content-Type: application/x-ndjson"}, &pr_body).status,
            401);
}

TEST(ServerReadOnly, MirrorRefusesWrites) {
  server::ServerOptions o;
  o.read_only = true;
  auto hub = StartTestHub(o);
  ASSERT_TRUE(hub);
  hub->AddRepo("org/m", {{"a.txt", "a"}});
  std::string body = R"({"name":"x","organization":"org"})";
  EXPECT_EQ(Http("POST", hub->url() + "/api/repos/create", {"Authorization: Bearer t"}, &body).status, 403);
  std::string nd = R"({"key":"header","value":{"summary":"s"}})";
  EXPECT_EQ(Http("POST", hub->url() + "/api/models/org/m/commit/main", {"Authorization: Bearer t"}, &nd).status, 403);
  EXPECT_EQ(Get(hub->url() + "/org/m/resolve/main/a.txt").body, "a");
}

// A cache written by a client (no .hubload-repo.json, refs + symlinks) is served as is.
TEST(ServerMirror, ServesAPlainCacheFolder) {
  TempDir cache;
  std::string content = "cached bytes\n";
  std::string commit(40, 'a');
  fs::path repo = cache.path() / "models--org--cached";
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "refs");
  fs::create_directories(repo / "snapshots" / commit);
  WriteFileBytes(repo / "blobs" / GitSha1(content), content);
  fs::create_symlink("../../blobs/" + GitSha1(content), repo / "snapshots" / commit / "f.txt");
  WriteFileBytes(repo / "refs" / "main", commit);
  server::ServerOptions o;
  o.root = cache.str();
  o.read_only = true;
  auto s = server::Server::Start(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Reply r = Get((*s)->url() + "/org/cached/resolve/main/f.txt");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, content);
  EXPECT_EQ(r.h("x-repo-commit"), commit);
  EXPECT_EQ(r.h("etag"), "\"" + GitSha1(content) + "\"");
}

// ---- faults ----

TEST_F(ServerTest, FaultStatusForNextRequests) {
  hub_->faults().SetStatusForNext("config.json", 503, 2, 7);
  std::string url = U("/org/model/resolve/main/config.json");
  Reply a = Get(url);
  EXPECT_EQ(a.status, 503);
  EXPECT_EQ(a.h("retry-after"), "7");
  EXPECT_EQ(Get(url).status, 503);
  EXPECT_EQ(Get(url).status, 200);
  hub_->faults().SetStatusForNext("", 429, 1, 3);
  Reply b = Get(U("/api/models/org/model"));
  EXPECT_EQ(b.status, 429);
  EXPECT_EQ(b.h("retry-after"), "3");
}

TEST_F(ServerTest, FaultDropAfterBytes) {
  const std::string& content = files_["weights/model.safetensors"];
  hub_->faults().SetDropAfterBytes("models--org--model", 1234, 1);  // the CDN path holds the folder name
  Reply r = Http("GET", U("/org/model/resolve/main/weights/model.safetensors"), {}, nullptr, true);
  EXPECT_NE(r.code, CURLE_OK);  // partial body: connection closed early
  EXPECT_EQ(r.body, content.substr(0, 1234));
  Reply again = Http("GET", U("/org/model/resolve/main/weights/model.safetensors"), {}, nullptr, true);
  EXPECT_EQ(again.code, CURLE_OK);
  EXPECT_EQ(again.body, content);
}

TEST_F(ServerTest, FaultIgnoreRangeAndStripLength) {
  std::string url = U("/org/model/resolve/main/config.json");
  hub_->faults().SetIgnoreRange(true);
  Reply r = Get(url, {"Range: bytes=0-0"});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, files_["config.json"]);
  hub_->faults().SetIgnoreRange(false);
  hub_->faults().SetStripContentLength(true);
  Reply s = Get(url, {"Range: bytes=1-3"});
  EXPECT_EQ(s.status, 206);
  EXPECT_FALSE(s.has("content-length"));
  EXPECT_FALSE(s.has("content-range"));
  EXPECT_EQ(s.body, files_["config.json"].substr(1, 3));
  hub_->faults().SetStripContentLength(false);
  // Bandwidth cap and latency change timing only: the bytes stay right.
  hub_->faults().SetBandwidthBytesPerSec(200000);
  hub_->faults().SetLatencyMs(5);
  EXPECT_EQ(Http("GET", U("/org/model/resolve/main/weights/model.safetensors"), {}, nullptr, true).body,
            files_["weights/model.safetensors"]);
}

TEST_F(ServerTest, FaultReplaceFileBetweenRequests) {
  std::string url = U("/org/model/resolve/main/config.json");
  hub_->faults().ReplaceFileAfter("config.json", 1, "org/model", "config.json", "{\"hidden_size\": 16}\n");
  Reply first = Http("HEAD", url);
  Reply second = Get(url);
  EXPECT_EQ(first.h("etag"), "\"" + GitSha1(files_["config.json"]) + "\"");
  EXPECT_EQ(second.body, "{\"hidden_size\": 16}\n");
  EXPECT_EQ(second.h("etag"), "\"" + GitSha1("{\"hidden_size\": 16}\n") + "\"");
  EXPECT_NE(second.h("x-repo-commit"), commit_);
  // The old snapshot stays reachable by its commit.
  EXPECT_EQ(Get(U("/org/model/resolve/" + commit_ + "/config.json")).body, files_["config.json"]);
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

// ---- store layout ----

TEST(ServerStore, CreateRepoFromFolderLayout) {
  TempDir root, src;
  std::string reg = "regular text\n", big = RandomBytes(300, 4);
  fs::create_directories(src.path() / "d");
  WriteFileBytes(src.path() / "r.txt", reg);
  WriteFileBytes(src.path() / "d" / "w.dat", big);
  server::CreateRepoOptions o;
  o.lfs_threshold_bytes = 100;  // force the 300-byte file through LFS
  o.lfs_by_extension = false;
  auto c = server::CreateRepoFromFolder(root.str(), "org/layout", src.str(), o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  fs::path repo = root.path() / "models--org--layout";
  std::string ref;
  {
    std::ifstream in(repo / "refs" / "main");
    std::getline(in, ref);
  }
  EXPECT_EQ(ref, *c);
  EXPECT_TRUE(fs::exists(repo / "blobs" / GitSha1(reg)));
  EXPECT_TRUE(fs::exists(repo / "blobs" / Sha256(big)));
  fs::path snap = repo / "snapshots" / *c;
  EXPECT_EQ(fs::read_symlink(snap / "r.txt").string(), "../../blobs/" + GitSha1(reg));
  EXPECT_EQ(fs::read_symlink(snap / "d" / "w.dat").string(), "../../../blobs/" + Sha256(big));
  // ReplaceFile: new commit on main, old snapshot intact.
  auto c2 = server::ReplaceFile(root.str(), "org/layout", "r.txt", "v2");
  ASSERT_TRUE(c2.ok());
  EXPECT_NE(*c2, *c);
  EXPECT_EQ(fs::read_symlink(snap / "r.txt").string(), "../../blobs/" + GitSha1(reg));
  EXPECT_EQ(fs::read_symlink(repo / "snapshots" / *c2 / "r.txt").string(), "../../blobs/" + GitSha1("v2"));
  // Bad inputs are refused with clear errors.
  EXPECT_EQ(server::ReplaceFile(root.str(), "org/layout", "../x", "v").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(server::ReplaceFile(root.str(), "org/none", "x", "v").status().code(), Code::kRepoNotFound);
  server::CommitOptions stale;
  stale.parent_commit = *c;
  EXPECT_EQ(server::ReplaceFile(root.str(), "org/layout", "r.txt", "v3", stale).status().code(), Code::kConflict);
  EXPECT_EQ(server::CreateRepoFromFiles(root.str(), "bad--name", {{"a", "b"}}).status().code(),
            Code::kInvalidArgument);
}

}  // namespace
}  // namespace hubload::testing
