// A raw loopback HTTP listener for client tests that need answers no real
// server gives (hostile redirects, odd headers): one request per connection,
// the handler returns the raw response bytes. Bounded (~20 s of polling).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace hubload::testing {

// One-request-per-connection HTTP listener on 127.0.0.1; handler returns the raw response.
class RawServer {
 public:
  explicit RawServer(std::function<std::string(const std::string& request)> h) : handler_(std::move(h)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(fd_, 16);
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Loop(); });
  }
  ~RawServer() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  int port() const { return port_; }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> l(mu_);
    return requests_;
  }

 private:
  void Loop() {
    for (int i = 0; i < 2000 && !stop_; ++i) {  // bounded: ~20 s
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 10) <= 0) continue;
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::string req;
      char buf[4096];
      while (req.find("\r\n\r\n") == std::string::npos) {
        pollfd q{c, POLLIN, 0};
        if (poll(&q, 1, 2000) <= 0) break;
        ssize_t n = read(c, buf, sizeof buf);
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
      }
      {
        std::lock_guard<std::mutex> l(mu_);
        requests_.push_back(req);
      }
      std::string resp = handler_(req);
      size_t off = 0;
      while (off < resp.size()) {
        ssize_t w = write(c, resp.data() + off, resp.size() - off);
        if (w <= 0) break;
        off += static_cast<size_t>(w);
      }
      close(c);
    }
  }
  std::function<std::string(const std::string&)> handler_;
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> requests_;
};

}  // namespace hubload::testing
