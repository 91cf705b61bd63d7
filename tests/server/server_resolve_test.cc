// `hubload serve` downloads: resolve/raw headers, LFS redirect and CDN, ranges,
// conditional requests, revision and path encodings, error codes, access rules.
#include "server/server_fixture.h"
#include "testing/status_matchers.h"

namespace hubload::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

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
  // The CDN host is the host the client used (127.0.0.1), on the CDN port.
  EXPECT_EQ(loc.rfind("http://127.0.0.1:" + std::to_string(hub_->server->cdn_port()) + "/", 0), 0u) << loc;
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
  ASSERT_OK(server::SetRef(hub_->root.str(), "org/model", "refs/pr/1", commit_));
  ASSERT_OK(server::SetRef(hub_->root.str(), "org/model", "feature/x", commit_));
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
  ds.repo_type = RepoType::kDataset;
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

}  // namespace
}  // namespace hubload::testing
