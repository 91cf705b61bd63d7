// Listener lifecycle: both acceptors (hub and CDN, same address), one thread
// per connection, Stop; and the public Server methods.
//
// Threading: one io_context with `threads` threads accepts on both listeners;
// every accepted connection is served by its own thread with synchronous
// Beast reads and writes (connection.cc).
#include <signal.h>
#include <sys/socket.h>

#include <boost/asio.hpp>
#include <condition_variable>
#include <map>
#include <thread>

#include <spdlog/spdlog.h>

#include "hub/server/connection.h"

namespace hubload::server {

using namespace internal;
namespace asio = boost::asio;
namespace fs = std::filesystem;

struct Server::Impl::Net {
  asio::io_context ioc;
  std::unique_ptr<tcp::acceptor> hub_acc, cdn_acc;
  std::vector<std::thread> io_threads;
  bool stopped = false;
  std::mutex stop_mu;

  std::mutex conn_mu;
  std::condition_variable conn_cv;
  std::map<int, int> conn_fds;  // fd -> count
  int active = 0;
  // Connection threads are joined, never detached: a thread's exit runs its
  // libraries' thread-local cleanup (OpenSSL's error state), which must end
  // before the process does. Finished ones are joined at the next accept.
  std::vector<std::thread> conn_threads;
  std::vector<std::thread::id> finished;

  // Joins the threads that said they are done (conn_mu held).
  void ReapLocked() {
    for (const std::thread::id id : finished)
      for (auto it = conn_threads.begin(); it != conn_threads.end(); ++it)
        if (it->get_id() == id) {
          it->join();  // it has left its last lock: only its exit is left
          conn_threads.erase(it);
          break;
        }
    finished.clear();
  }
};

namespace {

void Accept(Server::Impl* impl, tcp::acceptor* acc, bool cdn) {
  acc->async_accept([impl, acc, cdn](boost::system::error_code ec, tcp::socket sock) {
    Server::Impl::Net& net = *impl->net;
    if (impl->stopping) return;
    if (!ec) {
      auto s = std::make_shared<tcp::socket>(std::move(sock));
      int fd = s->native_handle();
      std::lock_guard<std::mutex> held(net.conn_mu);
      net.ReapLocked();
      ++net.active;
      net.conn_fds[fd]++;
      try {
        net.conn_threads.emplace_back([impl, s, cdn, fd]() mutable {
          Server::Impl::Net& n = *impl->net;
          // A client hanging up during sendfile(2) raises SIGPIPE in this thread:
          // block it so the write fails with EPIPE instead of killing the process.
          sigset_t pipe_set;
          sigemptyset(&pipe_set);
          sigaddset(&pipe_set, SIGPIPE);
          pthread_sigmask(SIG_BLOCK, &pipe_set, nullptr);
          ServeConnection(*impl, *s, cdn);
          boost::system::error_code ignored;
          std::lock_guard<std::mutex> lock(n.conn_mu);
          s->shutdown(tcp::socket::shutdown_both, ignored);
          s->close(ignored);
          s.reset();  // before Stop() may return and destroy the io_context
          if (--n.conn_fds[fd] <= 0) n.conn_fds.erase(fd);
          --n.active;
          n.finished.push_back(std::this_thread::get_id());
          n.conn_cv.notify_all();
        });
      } catch (const std::exception& e) {  // no thread to be had (EAGAIN): this connection is dropped
        spdlog::warn("hubload serve: cannot start a connection thread ({}); closing the connection", e.what());
        boost::system::error_code ignored;
        s->close(ignored);
        if (--net.conn_fds[fd] <= 0) net.conn_fds.erase(fd);
        --net.active;
      }
    } else if (ec == asio::error::operation_aborted) {
      return;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // e.g. EMFILE: do not spin
    }
    Accept(impl, acc, cdn);
  });
}

void StopNet(Server::Impl& impl) {
  if (!impl.net) return;
  Server::Impl::Net& net = *impl.net;
  std::lock_guard<std::mutex> g(net.stop_mu);
  if (net.stopped) return;
  net.stopped = true;
  impl.stopping = true;
  net.ioc.stop();
  for (auto& t : net.io_threads)
    if (t.joinable()) t.join();
  {
    // No io thread runs any more: the acceptors can be closed here.
    boost::system::error_code ec;
    if (net.hub_acc) net.hub_acc->close(ec);
    if (net.cdn_acc) net.cdn_acc->close(ec);
  }
  std::unique_lock<std::mutex> lock(net.conn_mu);
  for (auto& [fd, n] : net.conn_fds) ::shutdown(fd, SHUT_RDWR);
  net.conn_cv.wait(lock, [&net] { return net.active == 0; });
  net.ReapLocked();  // every connection thread has finished: join them all
  impl.log.Close();
}

Status Listen(Server::Impl::Net& net, const asio::ip::address& addr, const std::string& host, uint16_t port,
              std::unique_ptr<tcp::acceptor>* acc) {
  *acc = std::make_unique<tcp::acceptor>(net.ioc);
  tcp::endpoint ep(addr, port);
  boost::system::error_code e;
  (*acc)->open(ep.protocol(), e);
  if (!e) (*acc)->set_option(asio::socket_base::reuse_address(true), e);
  if (!e) (*acc)->bind(ep, e);
  if (!e) (*acc)->listen(asio::socket_base::max_listen_connections, e);
  if (e) return Status(Code::kIOError, "cannot listen on " + host + ":" + std::to_string(port) + ": " + e.message());
  return Status::Ok();
}

bool IsHttpUrl(const std::string& u) {
  return (u.rfind("http://", 0) == 0 || u.rfind("https://", 0) == 0) && u.size() > 8 &&
         u.find_first_of(" \r\n\t") == std::string::npos;
}

}  // namespace

Server::Impl::Impl() = default;
Server::Impl::~Impl() { StopNet(*this); }

Result<std::unique_ptr<Server::Impl>> NewServerImpl(ServerOptions options) {
  std::error_code ec;
  if (options.root.empty() || !fs::is_directory(options.root, ec))
    return Status(Code::kInvalidArgument, "server root is not a folder: '" + options.root + "'");
  while (options.public_url.size() > 1 && options.public_url.back() == '/') options.public_url.pop_back();
  if (!options.public_url.empty() && !IsHttpUrl(options.public_url))
    return Status(Code::kInvalidArgument, "public URL must be http(s)://host[:port][/path], got '" +
                                              options.public_url + "'");
  while (options.upstream.size() > 1 && options.upstream.back() == '/') options.upstream.pop_back();
  if (!options.upstream.empty() && !IsHttpUrl(options.upstream))
    return Status(Code::kInvalidArgument, "upstream must be an http(s) URL, got '" + options.upstream + "'");
  std::string prefix = options.faults.path_prefix();
  if (!prefix.empty() && (prefix[0] != '/' || prefix.back() == '/' || prefix.find_first_of(" ?#\r\n") != std::string::npos))
    return Status(Code::kInvalidArgument, "path prefix must start with '/' and not end with one, got '" + prefix + "'");
  auto impl = std::make_unique<Server::Impl>();
  impl->opt = std::move(options);
  impl->root = fs::canonical(impl->opt.root, ec);
  impl->opt.root = impl->root.string();
  impl->faults = &impl->opt.faults;
  if (!impl->signer.ok()) return Status(Code::kInternal, "RAND_bytes failed");
  HUBLOAD_RETURN_IF_ERROR(impl->log.Open(impl->opt.access_log));
  return impl;
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() { Stop(); }

Result<std::unique_ptr<Server>> Server::Start(ServerOptions options) {
  HUBLOAD_ASSIGN_OR_RETURN(std::unique_ptr<Impl> impl, NewServerImpl(std::move(options)));
  impl->net = std::make_unique<Impl::Net>();
  Impl::Net& net = *impl->net;
  boost::system::error_code bec;
  auto addr = asio::ip::make_address(impl->opt.host, bec);
  if (bec) {
    // A host name: resolve it (loopback names like "localhost").
    tcp::resolver res(net.ioc);
    auto results = res.resolve(impl->opt.host, "0", bec);
    if (bec || results.empty())
      return Status(Code::kInvalidArgument, "cannot resolve listen host '" + impl->opt.host + "': " + bec.message());
    addr = results.begin()->endpoint().address();
  }
  HUBLOAD_RETURN_IF_ERROR(Listen(net, addr, impl->opt.host, impl->opt.port, &net.hub_acc));
  HUBLOAD_RETURN_IF_ERROR(Listen(net, addr, impl->opt.host, 0, &net.cdn_acc));
  impl->hub_port = net.hub_acc->local_endpoint().port();
  impl->cdn_port = net.cdn_acc->local_endpoint().port();
  impl->ReportMirrorCompleteness();
  Accept(impl.get(), net.hub_acc.get(), false);
  Accept(impl.get(), net.cdn_acc.get(), true);
  int n = std::max(1, impl->opt.threads);
  for (int i = 0; i < n; ++i) net.io_threads.emplace_back([p = &net] { p->ioc.run(); });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

std::string Server::url() const { return impl_->HubUrl(); }
std::string Server::cdn_url() const { return impl_->CdnUrl(nullptr); }
uint16_t Server::port() const { return impl_->hub_port; }
uint16_t Server::cdn_port() const { return impl_->cdn_port; }
const std::string& Server::root() const { return impl_->opt.root; }
Faults& Server::faults() { return *impl_->faults; }
ServerStats Server::stats() const { return impl_->log.Stats(); }
uint64_t Server::RequestCount(const std::string& path_substring) const {
  return impl_->log.RequestCount(path_substring);
}
void Server::ResetStats() { impl_->log.Reset(); }

void Server::Stop() {
  if (impl_) StopNet(*impl_);
}

}  // namespace hubload::server
