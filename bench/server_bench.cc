// server_bench: `hubload serve` vs nginx on loopback, same file, same client.
//
//  1. Download of one LFS file (default 2 GiB, $HUBLOAD_BENCH_BYTES to change):
//     hubload resolve -> 302 -> CDN listener, vs nginx serving the blob file.
//     Prints throughput of both and the ratio hubload/nginx.
//  2. 100 HEAD requests on one keep-alive connection (resolve of a regular file
//     vs nginx HEAD of a static file): mean latency of both and the ratio.
// nginx (`nginx-light`) is started by the benchmark on 127.0.0.1 with a temp
// config; when it is missing the nginx figures are skipped. Not a test.
#include <utility>  // before Asio

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "hubload/server.h"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace fs = std::filesystem;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Url {
  std::string host, port, target;
};
Url Parse(const std::string& url) {
  // http://host:port/target
  std::string rest = url.substr(7);
  size_t slash = rest.find('/');
  std::string hp = rest.substr(0, slash);
  size_t colon = hp.rfind(':');
  return {hp.substr(0, colon), hp.substr(colon + 1), slash == std::string::npos ? "/" : rest.substr(slash)};
}

struct Conn {
  asio::io_context ioc;
  tcp::socket sock{ioc};
  beast::flat_buffer buf;
  explicit Conn(const Url& u) {
    tcp::resolver r(ioc);
    asio::connect(sock, r.resolve(u.host == "localhost" ? "127.0.0.1" : u.host, u.port));
    sock.set_option(tcp::no_delay(true));
  }
  // Sends one request; returns status and headers; reads and discards the body.
  http::response_header<> Do(const std::string& method, const Url& u, uint64_t* body_bytes) {
    http::request<http::empty_body> req{http::string_to_verb(method), u.target, 11};
    req.set(http::field::host, u.host + ":" + u.port);
    http::write(sock, req);
    http::response_parser<http::empty_body> p;
    p.skip(method == "HEAD");
    p.body_limit(boost::none);
    http::read_header(sock, buf, p);
    http::response_header<> h = p.get().base();
    uint64_t n = 0;
    if (method != "HEAD" && p.content_length()) {
      uint64_t want = *p.content_length();
      uint64_t from_buf = std::min<uint64_t>(want, buf.size());
      buf.consume(from_buf);
      n = from_buf;
      std::vector<char> chunk(1 << 20);
      while (n < want) {
        size_t got = sock.read_some(asio::buffer(chunk.data(), std::min<uint64_t>(chunk.size(), want - n)));
        n += got;
      }
    }
    if (body_bytes) *body_bytes = n;
    return h;
  }
};

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

uint16_t FreePort() {
  asio::io_context ioc;
  tcp::acceptor a(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();
}

}  // namespace

int main() {
  uint64_t size = 2ull << 30;
  if (const char* e = std::getenv("HUBLOAD_BENCH_BYTES")) size = std::strtoull(e, nullptr, 10);
  fs::path dir = fs::temp_directory_path() / ("hubload-server-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir / "src");
  fs::create_directories(dir / "store");
  fs::create_directories(dir / "nginx");
  std::printf("server_bench: writing a %llu-byte file...\n", static_cast<unsigned long long>(size));
  {
    std::ofstream out(dir / "src" / "big.safetensors", std::ios::binary);
    std::vector<char> block(1 << 20);
    std::mt19937_64 g(1);
    for (auto& c : block) c = static_cast<char>(g());
    for (uint64_t w = 0; w < size; w += block.size())
      out.write(block.data(), static_cast<std::streamsize>(std::min<uint64_t>(block.size(), size - w)));
    std::ofstream(dir / "src" / "config.json") << "{\"model_type\": \"bench\"}\n";
  }
  auto commit = hubload::server::CreateRepoFromFolder((dir / "store").string(), "bench/big", (dir / "src").string());
  if (!commit.ok()) {
    std::fprintf(stderr, "server_bench: %s\n", commit.status().ToString().c_str());
    return 1;
  }
  fs::remove(dir / "src" / "big.safetensors");
  hubload::server::ServerOptions opt;
  opt.root = (dir / "store").string();
  auto server = hubload::server::Server::Start(opt);
  if (!server.ok()) {
    std::fprintf(stderr, "server_bench: %s\n", server.status().ToString().c_str());
    return 1;
  }
  std::string hub = (*server)->url();

  // hubload: resolve (302) then CDN GET.
  Url resolve = Parse(hub + "/bench/big/resolve/main/big.safetensors");
  std::string location;
  {
    Conn c(resolve);
    auto h = c.Do("GET", resolve, nullptr);
    location = std::string(h[http::field::location]);
  }
  Url cdn = Parse(location);
  uint64_t got = 0;
  double hub_s;
  {
    Conn c(cdn);
    auto t0 = Clock::now();
    c.Do("GET", cdn, &got);
    hub_s = Seconds(t0, Clock::now());
  }
  if (got != size) std::fprintf(stderr, "server_bench: hubload sent %llu bytes\n", static_cast<unsigned long long>(got));
  double hub_head;
  {
    Url head = Parse(hub + "/bench/big/resolve/main/config.json");
    Conn c(head);
    c.Do("HEAD", head, nullptr);  // warm
    auto t0 = Clock::now();
    for (int i = 0; i < 100; ++i) c.Do("HEAD", head, nullptr);
    hub_head = Seconds(t0, Clock::now()) / 100;
  }
  std::printf("hubload serve: download %.1f MiB/s, HEAD %.1f us\n", size / hub_s / 1048576.0, hub_head * 1e6);

  // nginx over the same blob folder.
  const char* nginx = "/usr/sbin/nginx";
  if (access(nginx, X_OK) != 0) {
    std::printf("nginx not installed: no baseline, no ratio\n");
  } else {
    uint16_t port = FreePort();
    fs::path blobs = dir / "store" / "models--bench--big" / "blobs";
    fs::path conf = dir / "nginx" / "nginx.conf";
    std::ofstream(conf) << "daemon off;\nworker_processes 1;\npid " << (dir / "nginx" / "nginx.pid").string()
                        << ";\nerror_log " << (dir / "nginx" / "error.log").string()
                        << ";\nevents {}\nhttp {\n access_log off;\n sendfile on;\n keepalive_requests 1000;\n"
                        << " client_body_temp_path " << (dir / "nginx").string() << ";\n"
                        << " server { listen 127.0.0.1:" << port << "; root " << blobs.string() << "; }\n}\n";
    pid_t pid = fork();
    if (pid == 0) {
      execl(nginx, nginx, "-c", conf.c_str(), "-p", (dir / "nginx").c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    bool up = false;
    for (int i = 0; i < 100 && !up; ++i) {
      try {
        Conn probe(Parse("http://127.0.0.1:" + std::to_string(port) + "/"));
        up = true;
      } catch (...) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    if (!up) {
      std::printf("nginx did not start: no baseline\n");
    } else {
      std::string base = "http://127.0.0.1:" + std::to_string(port) + "/";
      std::string big_blob = cdn.target.substr(cdn.target.rfind('/') + 1);
      big_blob = big_blob.substr(0, big_blob.find('?'));
      std::string small_blob;
      for (auto& e : fs::directory_iterator(blobs))
        if (e.path().filename().string().size() == 40) small_blob = e.path().filename().string();
      Url nb = Parse(base + big_blob);
      double ng_s;
      {
        Conn c(nb);
        auto t0 = Clock::now();
        c.Do("GET", nb, &got);
        ng_s = Seconds(t0, Clock::now());
      }
      double ng_head;
      {
        Url nh = Parse(base + small_blob);
        Conn c(nh);
        c.Do("HEAD", nh, nullptr);
        auto t0 = Clock::now();
        for (int i = 0; i < 100; ++i) c.Do("HEAD", nh, nullptr);
        ng_head = Seconds(t0, Clock::now()) / 100;
      }
      std::printf("nginx:         download %.1f MiB/s, HEAD %.1f us\n", size / ng_s / 1048576.0, ng_head * 1e6);
      std::printf("ratio hubload/nginx: download throughput %.2f, HEAD latency %.2f\n", ng_s / hub_s,
                  hub_head / ng_head);
    }
    kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
  }
  (*server)->Stop();
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
}
