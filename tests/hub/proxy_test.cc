// Field failure B42: proxy settings apply to every transfer. A small HTTP
// forward proxy (absolute-form requests, as libcurl sends them for http://
// URLs) runs in the test and is the only way to reach the invented names
// hub.test and cdn.test (they resolve nowhere else, so a direct connection can
// only fail). The Hub is the in-process `hubload serve` redirecting LFS files
// to cdn.test. The proxy's log of request targets is the expected value.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "field_support.h"
#include "hubload/hub.h"
#include "testing/status_matchers.h"

using hubload::testing::StartTestHub;
using hubload::testing::TempDir;
using namespace hubload::testing::field;  // NOLINT(build/namespaces)

namespace {

int ConnectLoopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t w = ::write(fd, s.data() + off, s.size() - off);
    if (w <= 0) return false;
    off += static_cast<size_t>(w);
  }
  return true;
}

// HTTP/1.1 forward proxy for absolute-form http requests: one request per
// client connection (answers carry Connection: close), names resolved from
// `hosts` only, every target logged. With `credentials` set, requests
// without `Proxy-Authorization: Basic <credentials>` get 407.
class ForwardProxy {
 public:
  ForwardProxy(std::map<std::string, int> hosts, std::string credentials = "")
      : hosts_(std::move(hosts)), credentials_(std::move(credentials)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 64);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Loop(); });
  }
  ~ForwardProxy() {
    stop_ = true;
    thread_.join();
    for (auto& t : workers_) t.join();
    ::close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> targets() {
    std::lock_guard<std::mutex> l(mu_);
    return targets_;
  }
  // Requests whose headers, as forwarded to an origin (the proxy's own
  // Proxy-* fields removed), still carried the proxy credentials.
  int leaked_credentials() const { return leaked_.load(); }

 private:
  void Loop() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      int c = ::accept(fd_, nullptr, nullptr);
      if (c >= 0) workers_.emplace_back([this, c] { Serve(c); });
    }
  }
  void Serve(int c) {
    std::string req;
    char buf[65536];
    size_t head_end;
    while ((head_end = req.find("\r\n\r\n")) == std::string::npos) {
      pollfd q{c, POLLIN, 0};
      ssize_t n = ::poll(&q, 1, 5000) > 0 ? ::read(c, buf, sizeof buf) : -1;
      if (n <= 0) return (void)::close(c);
      req.append(buf, static_cast<size_t>(n));
    }
    std::string head = req.substr(0, head_end + 2), body = req.substr(head_end + 4);
    // "GET http://host:port/path HTTP/1.1"
    size_t sp1 = head.find(' '), sp2 = head.find(' ', sp1 + 1);
    std::string method = head.substr(0, sp1), target = head.substr(sp1 + 1, sp2 - sp1 - 1);
    {
      std::lock_guard<std::mutex> l(mu_);
      targets_.push_back(method + " " + target);
    }
    std::string lower = head;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
    if (!credentials_.empty() &&
        lower.find("proxy-authorization: basic " + Lowered(credentials_)) == std::string::npos) {
      WriteAll(c,
               "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"t\"\r\n"
               "Content-Length: 0\r\nConnection: close\r\n\r\n");
      return (void)::close(c);
    }
    size_t hs = target.find("://"), ps = target.find('/', hs + 3);
    std::string hostport = target.substr(hs + 3, ps - hs - 3), path = target.substr(ps);
    std::string host = hostport.substr(0, hostport.find(':'));
    auto it = hosts_.find(host);
    int up = it == hosts_.end() ? -1 : ConnectLoopback(it->second);
    if (up < 0) {
      WriteAll(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      return (void)::close(c);
    }
    // Origin-form request line; hop-by-hop and proxy headers dropped; the body follows.
    std::string out = method + " " + path + head.substr(sp2, head.find("\r\n") - sp2) + "\r\n";
    size_t content_length = 0;
    for (size_t pos = head.find("\r\n") + 2; pos < head.size();) {
      size_t e = head.find("\r\n", pos);
      std::string line = head.substr(pos, e - pos), l = Lowered(line);
      pos = e + 2;
      if (l.rfind("proxy-", 0) == 0 || l.rfind("connection:", 0) == 0 || l.rfind("keep-alive", 0) == 0) continue;
      if (l.rfind("content-length:", 0) == 0) content_length = std::stoul(line.substr(15));
      out += line + "\r\n";
    }
    out += "Connection: close\r\n\r\n";
    while (body.size() < content_length) {
      ssize_t n = ::read(c, buf, sizeof buf);
      if (n <= 0) break;
      body.append(buf, static_cast<size_t>(n));
    }
    if (!credentials_.empty() && Lowered(out).find(Lowered(credentials_)) != std::string::npos) ++leaked_;
    if (WriteAll(up, out + body)) {
      bool first = true;  // "Connection: close" goes right after the status line: one request per connection
      for (ssize_t n; (n = ::read(up, buf, sizeof buf)) > 0;) {
        std::string piece(buf, static_cast<size_t>(n));
        if (first && piece.find("\r\n") != std::string::npos) {
          piece.insert(piece.find("\r\n") + 2, "Connection: close\r\n");
          first = false;
        }
        if (!WriteAll(c, piece)) break;
      }
    }
    ::close(up);
    ::close(c);
  }
  static std::string Lowered(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
    return s;
  }

  std::map<std::string, int> hosts_;
  std::string credentials_;
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> leaked_{0};
  std::thread thread_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::vector<std::string> targets_;
};

struct ProxiedHub {
  TempDir logs;
  std::unique_ptr<hubload::testing::TestHub> hub;
  std::string endpoint;  // http://hub.test:P1
};

std::unique_ptr<ProxiedHub> StartProxiedHub() {
  auto h = std::make_unique<ProxiedHub>();
  hubload::server::ServerOptions so;
  so.access_log = h->logs.str() + "/access.log";
  so.cdn_host = "cdn.test";  // LFS redirects go to http://cdn.test:P2/...
  h->hub = StartTestHub(so);
  if (!h->hub) return nullptr;
  h->endpoint = "http://hub.test:" + std::to_string(h->hub->server->port());
  return h;
}

const std::map<std::string, std::string> kFiles = {
    {"config.json", "{\"p\": 1}"}, {"a.safetensors", PatternBytes(3 * kMiB, 11)}, {"b.safetensors", PatternBytes(5000,
                                                                                                                 12)}};

// Snapshot through the proxy (ranged download of the 3 MiB file, 1 MiB chunks).
void SnapshotThrough(const ProxiedHub& h, const std::string& cache) {
  auto o = Opts(*h.hub, cache);
  o.config.endpoint = h.endpoint;
  o.range_threshold_bytes = 1 * kMiB;
  o.range_chunk_bytes = 1 * kMiB;
  hubload::SnapshotRequest s;
  s.repo_id = "org/m";
  auto p = hubload::HubClient(o).Snapshot(s);
  ASSERT_OK(p);
  for (auto& [path, bytes] : kFiles) {
    EXPECT_EQ(FileSha256(*p + "/" + path), Sha256(bytes)) << path;
  }
}

}  // namespace

TEST(FieldB42, EveryHubAndCdnRequestGoesThroughTheProxy) {
  auto h = StartProxiedHub();
  ASSERT_TRUE(h);
  h->hub->AddRepo("org/m", kFiles, SmallLfs());
  ForwardProxy proxy({{"hub.test", h->hub->server->port()}, {"cdn.test", h->hub->server->cdn_port()}});
  ScopedEnv env;
  env.Set("http_proxy", proxy.url());  // libcurl reads the lower-case name for http (httpoxy)
  env.Set("HTTPS_PROXY", proxy.url());
  env.Set("NO_PROXY", "localhost,127.0.0.0/8,.internal");
  // A dropped connection mid-file: the resumed GET must go through the proxy too.
  h->hub->faults().SetDropAfterBytes("models--org--m/", 200 * 1024, 1);
  TempDir cache;
  SnapshotThrough(*h, cache.str());
  auto targets = proxy.targets();
  // Everything the server saw came through the proxy: as many targets as requests.
  EXPECT_EQ(targets.size(), AccessLog(*h->hub, h->logs).size());
  size_t hub_n = 0, cdn_n = 0;
  for (auto& t : targets) {
    hub_n += t.find("http://hub.test:") != std::string::npos;
    cdn_n += t.find("http://cdn.test:") != std::string::npos;
  }
  EXPECT_EQ(hub_n + cdn_n, targets.size());
  // a.safetensors' bytes (one request for its 3 chunks in throughput order,
  // or more) and the resume of the dropped body; b.safetensors is a regular
  // file, served by the Hub listener.
  EXPECT_GE(cdn_n, 2u);
  EXPECT_GE(hub_n, 1u + 1u + 3u);  // revision, tree, a HEAD per file
}

TEST(FieldB42, NoProxyCidrBypassesTheProxyForTheLoopbackEndpoint) {
  auto h = StartProxiedHub();
  ASSERT_TRUE(h);
  h->hub->AddRepo("org/m", {{"config.json", "{}"}});
  ForwardProxy proxy({});
  ScopedEnv env;
  env.Set("http_proxy", proxy.url());
  env.Set("NO_PROXY", "localhost,127.0.0.0/8,.internal");
  TempDir cache;
  auto o = Opts(*h->hub, cache.str());  // endpoint http://127.0.0.1:P1
  auto f = hubload::HubClient(o).Download(Req("org/m", "config.json"));
  ASSERT_OK(f);
  EXPECT_TRUE(proxy.targets().empty());
}

TEST(FieldB42, ProxyCredentialsGoOnlyToTheProxy) {
  auto h = StartProxiedHub();
  ASSERT_TRUE(h);
  h->hub->AddRepo("org/m", kFiles, SmallLfs());
  // "user:pw" in Basic form is dXNlcjpwdw== (RFC 7617 example style, by hand).
  ForwardProxy proxy({{"hub.test", h->hub->server->port()}, {"cdn.test", h->hub->server->cdn_port()}}, "dXNlcjpwdw==");
  ScopedEnv env;
  env.Set("http_proxy", "http://user:pw@127.0.0.1:" + proxy.url().substr(proxy.url().rfind(':') + 1));
  env.Set("NO_PROXY", "");
  TempDir cache;
  SnapshotThrough(*h, cache.str());
  EXPECT_FALSE(proxy.targets().empty());
  EXPECT_EQ(proxy.leaked_credentials(), 0);
}
