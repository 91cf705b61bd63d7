// The client against a hostile server (issue 19): redirects to file://,
// ftp://, gopher://, dict://; listings naming .git/ and .cache/ paths; an
// endpoint that is not http(s); a token carrying CR/LF; a file host that
// refuses connections. Every case: a clear error, nothing written outside
// the cache, no byte of the redirect target read, a bounded number of
// attempts (counted, never timed).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>

#include "hub/url.h"
#include "hubload/hub.h"
#include "hubload/reasons.h"
#include "hubload/upload.h"
#include "tests/hub/raw_server.h"
#include "testing/status_matchers.h"

namespace fs = std::filesystem;
using hubload::testing::RawServer;

namespace {

constexpr const char* kCommit = "0123456789abcdef0123456789abcdef01234567";
constexpr const char* kBlob = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391";  // git blob id of ""

struct TempDir {
  fs::path path;
  TempDir() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("hubload-hostile-" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// True when some regular file under `dir` contains `needle`.
bool AnyFileContains(const fs::path& dir, const std::string& needle) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec) && ReadAll(it->path()).find(needle) != std::string::npos) return true;
  }
  return false;
}

std::string Response(int status, const std::string& reason, const std::vector<std::string>& headers,
                     const std::string& body = "") {
  std::string r = "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n";
  for (auto& h : headers) r += h + "\r\n";
  r += "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  return r;
}

std::string RequestLine(const std::string& req) { return req.substr(0, req.find("\r\n")); }

// Counts the requests that reach the inner transport, per origin.
class CountingTransport : public hubload::HttpTransport {
 public:
  explicit CountingTransport(std::shared_ptr<hubload::HttpTransport> inner) : inner_(std::move(inner)) {}
  hubload::Result<hubload::HttpResponse> Send(const hubload::HttpRequest& req, hubload::BodySink* sink) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      ++by_origin_[hubload::UrlOrigin(req.url)];
      ++total_;
    }
    return inner_->Send(req, sink);
  }
  int count(const std::string& origin) {
    std::lock_guard<std::mutex> l(mu_);
    return by_origin_[origin];
  }
  int total() {
    std::lock_guard<std::mutex> l(mu_);
    return total_;
  }

 private:
  std::shared_ptr<hubload::HttpTransport> inner_;
  std::mutex mu_;
  std::map<std::string, int> by_origin_;
  int total_ = 0;
};

struct Stack {
  std::shared_ptr<CountingTransport> counter;
  std::vector<double> sleeps;
  std::shared_ptr<hubload::HttpTransport> top;
  Stack() {
    counter = std::make_shared<CountingTransport>(hubload::MakeCurlTransport());
    hubload::RetryPolicy p;  // the defaults, with the sleeps recorded instead of slept
    p.sleep = [this](double s) { sleeps.push_back(s); };
    top = hubload::MakeRetryingTransport(counter, p);
  }
};

hubload::ClientOptions Options(const std::string& endpoint, const fs::path& cache,
                               std::shared_ptr<hubload::HttpTransport> t = nullptr) {
  hubload::ClientOptions o;
  o.config.endpoint = endpoint;
  o.config.cache_dir = cache.string();
  o.transport = std::move(t);
  o.max_workers = 2;
  return o;
}

std::string Endpoint(const RawServer& s) { return "http://127.0.0.1:" + std::to_string(s.port()); }

// A port nothing listens on (bound then closed: connect() is refused).
int ClosedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// The Hub's HEAD answer for an LFS file whose bytes live at `location`.
std::string LfsHead(const std::string& location, size_t size) {
  return Response(302, "Found",
                  {"Location: " + location, std::string("X-Repo-Commit: ") + kCommit,
                   "X-Linked-Etag: \"" + std::string(64, 'a') + "\"", "X-Linked-Size: " + std::to_string(size)});
}

}  // namespace

// /resolve/ redirected (the Hub's LFS 302) to file://, ftp://, gopher://,
// dict://: refused before any byte is read; the local file's bytes never
// reach the cache.
TEST(HostileServer, RedirectToAnotherSchemeIsRefusedAndNeverRead) {
  TempDir tmp;
  const std::string secret = "SECRET-LOCAL-BYTES-" + std::to_string(std::random_device{}());
  const fs::path secret_file = tmp.path / "secret.txt";
  std::ofstream(secret_file) << secret;
  for (std::string target : {"file://" + secret_file.string(), std::string("ftp://127.0.0.1/secret.txt"),
                             std::string("gopher://127.0.0.1:70/1"), std::string("dict://127.0.0.1:2628/d:x"),
                             std::string("FILE://") + secret_file.string()}) {
    SCOPED_TRACE(target);
    RawServer srv([&](const std::string&) { return LfsHead(target, secret.size()); });
    Stack st;
    fs::path cache = tmp.path / "cache";
    hubload::HubClient client(Options(Endpoint(srv), cache, st.top));
    hubload::FileRequest req;
    req.repo_id = "org/m";
    req.filename = "model.safetensors";
    auto r = client.Download(req);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().Is(hubload::reason::kUnsupportedScheme)) << r.status().ToString();
    EXPECT_NE(r.status().message().find("only http and https"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("model.safetensors"), std::string::npos) << r.status().message();
    // Only the HEAD reached the wire (no retry: the refusal is not a network error).
    EXPECT_EQ(st.counter->total(), 1);
    EXPECT_TRUE(st.sleeps.empty());
    EXPECT_FALSE(AnyFileContains(cache, secret));
    fs::remove_all(cache);
  }
}

// A GET followed through redirects by the transport: the same refusal for a
// 302 to each scheme, and the response body of the target is never read.
TEST(HostileServer, TransportRefusesEveryNonHttpRedirect) {
  TempDir tmp;
  const std::string secret = "SECRET-" + std::to_string(std::random_device{}());
  std::ofstream(tmp.path / "s") << secret;
  for (std::string target : {"file://" + (tmp.path / "s").string(), std::string("ftp://127.0.0.1:21/s"),
                             std::string("gopher://127.0.0.1/s"), std::string("dict://127.0.0.1/s")}) {
    SCOPED_TRACE(target);
    RawServer srv([&](const std::string&) { return Response(302, "Found", {"Location: " + target}); });
    auto t = hubload::MakeCurlTransport();
    hubload::HttpRequest req;
    req.url = Endpoint(srv) + "/x";
    auto r = t->Send(req, nullptr);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), hubload::Code::kUnsupported);
    EXPECT_TRUE(r.status().Is(hubload::reason::kUnsupportedScheme)) << r.status().ToString();
    EXPECT_EQ(r.status().message().find(secret), std::string::npos);
    EXPECT_EQ(srv.requests().size(), 1u);
  }
}

// The endpoint itself: refused before any request, naming it.
TEST(HostileServer, EndpointWithAnotherSchemeIsRefusedAtOnce) {
  TempDir tmp;
  for (std::string endpoint : {"ftp://127.0.0.1:1", "file:///etc", "gopher://x", "127.0.0.1:8080"}) {
    SCOPED_TRACE(endpoint);
    Stack st;
    hubload::HubClient client(Options(endpoint, tmp.path / "cache", st.top));
    hubload::FileRequest req;
    req.repo_id = "org/m";
    req.filename = "config.json";
    auto r = client.Download(req);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), hubload::Code::kInvalidArgument) << r.status().ToString();
    EXPECT_TRUE(r.status().Is(hubload::reason::kUnsupportedScheme)) << r.status().ToString();
    EXPECT_NE(r.status().message().find("endpoint"), std::string::npos) << r.status().message();
    EXPECT_EQ(st.counter->total(), 0);  // not one request
    EXPECT_TRUE(st.sleeps.empty());
  }
}

// HF_TOKEN=$'abc\r\nX-Injected: yes': refused, unsent, the value not printed.
TEST(HostileServer, TokenWithLineBreakIsRefusedWithoutPrintingIt) {
  TempDir tmp;
  RawServer srv([](const std::string&) { return Response(404, "Not Found", {}); });
  for (std::string token : {std::string("hf_abc\r\nX-Injected: yes"), std::string("hf_abc\nX-Injected: yes"),
                            std::string("hf_abc\0X-Injected", 17)}) {
    hubload::ClientOptions o = Options(Endpoint(srv), tmp.path / "cache");
    o.config.token = token;
    hubload::HubClient client(o);
    hubload::FileRequest req;
    req.repo_id = "org/m";
    req.filename = "config.json";
    auto r = client.Download(req);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().Is(hubload::reason::kBadHeaderValue)) << r.status().ToString();
    EXPECT_EQ(r.status().ToString().find("hf_abc"), std::string::npos) << r.status().ToString();
    EXPECT_EQ(r.status().ToString().find("X-Injected"), std::string::npos) << r.status().ToString();
  }
  EXPECT_TRUE(srv.requests().empty());
}

// Custom headers and the user agent go through the same check in the transport.
TEST(HostileServer, HeaderValuesWithCrLfNulAreRefusedUnsent) {
  RawServer srv([](const std::string&) { return Response(200, "OK", {}, "ok"); });
  auto t = hubload::MakeCurlTransport();
  for (std::string v : {std::string("a\r\nX-Injected: 1"), std::string("a\rb"), std::string("a\0b", 3)}) {
    hubload::HttpRequest req;
    req.url = Endpoint(srv) + "/x";
    req.headers.emplace_back("X-Custom", v);
    auto r = t->Send(req, nullptr);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().Is(hubload::reason::kBadHeaderValue));
    EXPECT_NE(r.status().message().find("X-Custom"), std::string::npos);
    EXPECT_EQ(r.status().message().find("X-Injected"), std::string::npos);
  }
  hubload::TransportOptions to;
  to.user_agent = "hubload/1\r\nX-Injected: 1";
  hubload::HttpRequest req;
  req.url = Endpoint(srv) + "/x";
  auto r = hubload::MakeCurlTransport(to)->Send(req, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().Is(hubload::reason::kBadHeaderValue));
  EXPECT_TRUE(srv.requests().empty());
  // A clean header still goes out (the check refuses only what it must).
  hubload::HttpRequest ok;
  ok.url = Endpoint(srv) + "/x";
  ok.headers.emplace_back("X-Custom", "plain value");
  auto r2 = t->Send(ok, nullptr);
  ASSERT_OK(r2);
  EXPECT_EQ(r2->body, "ok");
}

// A listing naming .git/ and .cache/ paths: snapshot download into a
// local_dir that is a git checkout fails naming the path, and the checkout's
// .git/ and the local_dir metadata are untouched.
TEST(HostileServer, ListingWithGitOrCacheFoldersIsRefused) {
  for (std::string bad : {".git/config", ".git/hooks/post-checkout", ".cache/huggingface/download/x.metadata",
                          "a/.git/b", ".cache/x"}) {
    SCOPED_TRACE(bad);
    TempDir tmp;
    std::atomic<int> resolves{0};
    RawServer srv([&](const std::string& req) {
      std::string line = RequestLine(req);
      if (line.find("/api/models/org/m/revision/") != std::string::npos)
        return Response(200, "OK", {"Content-Type: application/json"}, std::string("{\"sha\":\"") + kCommit + "\"}");
      if (line.find("/api/models/org/m/tree/") != std::string::npos) {
        std::string body = std::string("[{\"type\":\"file\",\"path\":\"config.json\",\"size\":0,\"oid\":\"") + kBlob +
                           "\"},{\"type\":\"file\",\"path\":\"" + bad + "\",\"size\":0,\"oid\":\"" + kBlob + "\"}]";
        return Response(200, "OK", {"Content-Type: application/json"}, body);
      }
      ++resolves;
      return Response(200, "OK",
                      {std::string("X-Repo-Commit: ") + kCommit, std::string("ETag: \"") + kBlob + "\""});
    });
    fs::path checkout = tmp.path / "checkout";
    fs::create_directories(checkout / ".git" / "hooks");
    std::ofstream(checkout / ".git" / "config") << "[core]\n";
    fs::create_directories(checkout / ".cache" / "huggingface" / "download");
    hubload::HubClient client(Options(Endpoint(srv), tmp.path / "cache"));
    hubload::SnapshotRequest req;
    req.repo_id = "org/m";
    req.local_dir = checkout.string();
    auto r = client.Snapshot(req);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().Is(hubload::reason::kForbiddenFolder)) << r.status().ToString();
    EXPECT_NE(r.status().message().find(bad), std::string::npos) << r.status().message();
    EXPECT_EQ(resolves.load(), 0);  // no file of the listing was fetched
    EXPECT_EQ(ReadAll(checkout / ".git" / "config"), "[core]\n");
    EXPECT_FALSE(fs::exists(checkout / ".git" / "hooks" / "post-checkout"));
    EXPECT_TRUE(fs::is_empty(checkout / ".cache" / "huggingface" / "download"));
    EXPECT_FALSE(fs::exists(checkout / "a"));
    EXPECT_FALSE(fs::exists(checkout / "config.json"));
    // Into the cache: the same refusal, no snapshot folder written.
    hubload::SnapshotRequest to_cache;
    to_cache.repo_id = "org/m";
    auto c = client.Snapshot(to_cache);
    ASSERT_FALSE(c.ok());
    EXPECT_TRUE(c.status().Is(hubload::reason::kForbiddenFolder)) << c.status().ToString();
    EXPECT_FALSE(fs::exists(tmp.path / "cache" / "models--org--m" / "snapshots" / kCommit / ".git"));
    EXPECT_FALSE(fs::exists(tmp.path / "cache" / "models--org--m" / "snapshots" / kCommit / "config.json"));
  }
}

// Asking for such a file by name: refused before any request.
TEST(HostileServer, ForbiddenFileNamesAreRefusedBeforeAnyRequest) {
  TempDir tmp;
  Stack st;
  hubload::HubClient client(Options("http://127.0.0.1:1", tmp.path / "cache", st.top));
  for (std::string name : {".git/config", "x/.cache/y", ".cache"}) {
    hubload::FileRequest req;
    req.repo_id = "org/m";
    req.filename = name;
    req.local_dir = (tmp.path / "ld").string();
    auto r = client.Download(req);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().Is(hubload::reason::kForbiddenFolder)) << r.status().ToString();
  }
  EXPECT_EQ(st.counter->total(), 0);
}

// The uploader refuses .git/.cache segments, naming the path, before any request.
TEST(HostileServer, UploadRefusesGitAndCacheFolders) {
  TempDir tmp;
  fs::create_directories(tmp.path / "dir" / "hooks");
  std::ofstream(tmp.path / "dir" / "config") << "x";
  std::ofstream(tmp.path / "dir" / "hooks" / "pre-commit") << "#!/bin/sh\n";
  Stack st;
  hubload::HubClient client(Options("http://127.0.0.1:1", tmp.path / "cache", st.top));
  for (std::string prefix : {".git", "sub/.git", ".cache/huggingface"}) {
    SCOPED_TRACE(prefix);
    hubload::UploadFolderRequest up;
    up.repo_id = "org/m";
    up.folder = (tmp.path / "dir").string();
    up.path_in_repo = prefix;
    auto r = client.UploadFolder(up);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().Is(hubload::reason::kForbiddenFolder)) << r.status().ToString();
    EXPECT_NE(r.status().message().find(prefix), std::string::npos) << r.status().message();
  }
  hubload::UploadFolderRequest up;
  up.repo_id = "org/m";
  auto r = client.CreateCommit(up, {{".git/hooks/pre-commit", (tmp.path / "dir" / "config").string()}}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().Is(hubload::reason::kForbiddenFolder)) << r.status().ToString();
  EXPECT_NE(r.status().message().find(".git/hooks/pre-commit"), std::string::npos) << r.status().message();
  auto d = client.CreateCommit(up, {}, {".cache/huggingface/download/x.metadata"});
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(d.status().Is(hubload::reason::kForbiddenFolder)) << d.status().ToString();
  EXPECT_EQ(st.counter->total(), 0);
}

// The file host (the LFS redirect target) refuses connections: a few quick
// retries of that request, not rounds of the full budget per resume.
TEST(HostileServer, RefusedFileHostGivesUpAfterAFewAttempts) {
  TempDir tmp;
  const int closed = ClosedPort();
  const std::string cdn = "http://127.0.0.1:" + std::to_string(closed);
  RawServer srv([&](const std::string&) { return LfsHead(cdn + "/blob", 100); });
  Stack st;
  hubload::ClientOptions o = Options(Endpoint(srv), tmp.path / "cache", st.top);
  hubload::HubClient client(o);
  hubload::FileRequest req;
  req.repo_id = "org/m";
  req.filename = "model.safetensors";
  auto r = client.Download(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), hubload::Code::kNetwork) << r.status().ToString();
  EXPECT_TRUE(r.status().Is(hubload::reason::kConnectFailed)) << r.status().ToString();
  const hubload::RetryPolicy defaults;
  // 1 attempt + max_unreachable_retries (3), once: the resume loop does not start another round.
  EXPECT_EQ(st.counter->count(hubload::UrlOrigin(cdn)), 1 + defaults.max_unreachable_retries);
  double slept = 0;
  for (double s : st.sleeps) slept += s;
  EXPECT_LE(slept, defaults.max_unreachable_total_s);
  EXPECT_EQ(static_cast<int>(st.sleeps.size()), defaults.max_unreachable_retries);
}
