// One connection: synchronous Beast reads, the request loop, and response
// writes with the byte-level faults (drop, stall, per-connection and total
// bandwidth, stripped length, signed-URL byte budgets).
#include "hub/server/connection.h"
#include "util/text.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <exception>
#include <thread>

#include <spdlog/spdlog.h>

namespace hubload::server::internal {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

constexpr size_t kHeaderLimit = 64 * 1024;

// Stall fault: waits `stall_ms` with the connection open; false when the
// client hung up or the server is stopping.
bool StallConnection(const std::atomic<bool>& stopping, int sfd, int stall_ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(stall_ms);
  while (!stopping) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0) return true;
    // Wake every 50 ms to notice Stop(); a hang-up by the client ends the stall.
    pollfd p{sfd, POLLRDHUP, 0};
    int k = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 50)));
    if (k > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) return false;
  }
  return false;
}

// Writes `resp`; false when the connection must close (error, fault, or
// Connection: close). *sent = body bytes written.
bool WriteResponse(Server::Impl& impl, tcp::socket& sock, const Request& r, Response& resp, bool head, uint64_t* sent) {
  Faults* faults = impl.faults;
  const std::atomic<bool>& stopping = impl.stopping;
  *sent = 0;
  bool strip = faults->strip_content_length();
  http::response<http::empty_body> res;
  res.version(11);
  res.result(static_cast<unsigned>(resp.status));
  res.set(http::field::server, "hubload-serve");
  for (auto& [k, v] : resp.headers) {
    if (strip && beast::iequals(k, "Content-Range")) continue;
    res.set(k, v);
  }
  bool bodyless_status = resp.status == 304 || resp.status == 204 || (resp.status >= 100 && resp.status < 200);
  uint64_t n = resp.BodySize();
  if (!bodyless_status && !strip) res.set(http::field::content_length, std::to_string(n));
  if (strip || resp.close) res.set(http::field::connection, "close");
  beast::error_code ec;
  http::response_serializer<http::empty_body> sr{res};
  http::write_header(sock, sr, ec);
  if (ec) return false;
  if (head || bodyless_status) return !(strip || resp.close);
  std::optional<uint64_t> drop_after = faults->TakeDrop(r.path);  // only responses with a body count
  if (!resp.budget_sig.empty() && resp.budget_bytes < n)
    drop_after = std::min<uint64_t>(drop_after.value_or(resp.budget_bytes), resp.budget_bytes);
  // Stall fault as plain values (GCC 12 misreads an optional here: -Wmaybe-uninitialized).
  bool stall = false;
  uint64_t stall_at = 0;
  int stall_ms = 0;
  if (auto rule = faults->TakeStall(r.path)) {
    stall = true;
    stall_at = rule->after_bytes;
    stall_ms = rule->stall_ms;
  }

  uint64_t cap = faults->bandwidth_bytes_per_s();
  const uint64_t total_cap = faults->total_bandwidth_bytes_per_s();
  uint64_t piece = cap ? std::max<uint64_t>(1, std::min<uint64_t>(64 * 1024, cap / 20)) : (1u << 20);
  if (total_cap) piece = std::min<uint64_t>(piece, std::max<uint64_t>(1, std::min<uint64_t>(64 * 1024, total_cap / 50)));
  size_t chunk = static_cast<size_t>(piece);
  auto t0 = std::chrono::steady_clock::now();
  int fd = -1;
  std::string buffer;
  if (resp.has_file) {
    fd = ::open(resp.file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    buffer.resize(chunk);
  }
  uint64_t done = 0;
  bool ok = true;
  if (fd >= 0 && !cap && !total_cap && !drop_after && !stall) {
    // Plain file body: sendfile(2), no copy through user space.
    off_t off = static_cast<off_t>(resp.offset);
    int sfd = sock.native_handle();
    while (done < n && !stopping) {
      ssize_t k = ::sendfile(sfd, fd, &off, static_cast<size_t>(std::min<uint64_t>(n - done, 1u << 30)));
      if (k < 0 && errno == EINTR) continue;
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        pollfd p{sfd, POLLOUT, 0};
        if (::poll(&p, 1, 60000) <= 0) break;
        continue;
      }
      if (k <= 0) break;
      done += static_cast<uint64_t>(k);
      *sent = done;
    }
    ::close(fd);
    return done == n && !(strip || resp.close);
  }
  while (done < n) {
    if (stopping) {
      ok = false;
      break;
    }
    size_t want = static_cast<size_t>(std::min<uint64_t>(chunk, n - done));
    if (stall && done == stall_at) {
      // Stall fault: the connection stays open and silent.
      if (!StallConnection(stopping, sock.native_handle(), stall_ms)) {
        ok = false;
        break;
      }
      stall = false;
    }
    if (stall && done + want > stall_at) want = static_cast<size_t>(stall_at - done);
    if (drop_after && done + want > *drop_after) want = static_cast<size_t>(*drop_after - done);
    if (want == 0) {
      ok = false;  // drop fault: close abruptly
      break;
    }
    const char* data;
    if (fd >= 0) {
      ssize_t got = ::pread(fd, buffer.data(), want, static_cast<off_t>(resp.offset + done));
      if (got <= 0) {
        ok = false;
        break;
      }
      want = static_cast<size_t>(got);
      data = buffer.data();
    } else {
      data = resp.body.data() + done;
    }
    if (total_cap) faults->ThrottleTotal(want, stopping);
    asio::write(sock, asio::buffer(data, want), ec);
    if (ec) {
      ok = false;
      break;
    }
    done += want;
    *sent = done;
    if (cap) {
      auto due = t0 + std::chrono::microseconds(static_cast<int64_t>(done * 1000000.0 / static_cast<double>(cap)));
      while (!stopping && std::chrono::steady_clock::now() < due)
        std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
            due - std::chrono::steady_clock::now(), std::chrono::milliseconds(50)));
    }
  }
  if (fd >= 0) ::close(fd);
  if (drop_after && done < n) ok = false;
  return ok && !(strip || resp.close);
}

// Reads the body (if any) and answers one request; returns false to close.
bool ServeOne(Server::Impl& impl, tcp::socket& sock, beast::flat_buffer& buf, std::unique_ptr<HeaderParser>& hp,
              Request& r) {
  beast::error_code ec;
  bool keep_alive = hp->get().keep_alive();
  bool head = r.method == "HEAD";
  int latency = impl.faults->latency_ms();
  if (latency > 0) std::this_thread::sleep_for(std::chrono::milliseconds(latency));

  Response resp;
  bool body_pending = !hp->is_done();
  if (auto early = impl.Early(r)) {
    resp = std::move(*early);
    if (body_pending) resp.close = true;
  } else if (!r.cdn && r.method == "PUT" && r.route_path.rfind("/_lfs/", 0) == 0) {
    resp = HandleUploadPut(impl, sock, buf, hp, r);
  } else if (body_pending) {
    bool is_commit = r.route_path.find("/commit/") != std::string::npos;
    uint64_t limit = is_commit ? impl.opt.max_commit_body_bytes : impl.opt.max_json_body_bytes;
    auto cl = hp->content_length();
    if (cl && *cl > limit) {
      resp = ErrorResponse(413, "", "Request body too large (" + std::to_string(*cl) + " bytes, limit " +
                                        std::to_string(limit) + ")");
      resp.close = true;
    } else {
      if (beast::iequals(r.Header("expect"), "100-continue"))
        asio::write(sock, asio::buffer(std::string("HTTP/1.1 100 Continue\r\n\r\n")), ec);
      http::request_parser<http::string_body> sp{std::move(*hp)};
      sp.body_limit(limit);
      http::read(sock, buf, sp, ec);
      if (ec == http::error::body_limit) {
        resp = ErrorResponse(413, "", "Request body too large (limit " + std::to_string(limit) + " bytes)");
        resp.close = true;
      } else if (ec) {
        if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
            impl.stopping)
          return false;
        resp = ErrorResponse(400, "", "Bad request body: " + ec.message());
        resp.close = true;
      } else {
        r.body = std::move(sp.get().body());
        resp = impl.Dispatch(r);
      }
    }
  } else {
    resp = impl.Dispatch(r);
  }
  if (!keep_alive) resp.close = true;
  // Fault replacements due after this request are committed before its
  // answer goes out (the answer already refers to the old, immutable blob),
  // so the client's next request sees the new content.
  impl.ApplyReplacements(r);
  // Counters are updated before the answer is written so that a client that
  // has read the answer sees them; a short write corrects them afterwards.
  uint64_t planned = (head || resp.status == 304) ? 0 : resp.BodySize();
  impl.log.Count(r, planned);
  uint64_t sent = 0;
  bool ok = WriteResponse(impl, sock, r, resp, head, &sent);
  if (sent < planned) impl.log.Uncount(r, planned - sent);
  if (!resp.budget_sig.empty() && sent < resp.budget_bytes)
    impl.faults->ReleaseUrlBytes(resp.budget_sig, resp.budget_bytes - sent);
  impl.log.Write(r, resp.status, sent, resp.unproven);
  return ok;
}

}  // namespace

void ServeConnection(Server::Impl& impl, tcp::socket& sock, bool cdn) {
  // Idle connections are closed after 120 s without a request byte.
  timeval tv{120, 0};
  ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  beast::error_code ec;
  sock.set_option(tcp::no_delay(true), ec);
  beast::flat_buffer buf;
  try {
    for (int served = 0; served < 100000 && !impl.stopping; ++served) {
      auto hp = std::make_unique<HeaderParser>();
      hp->header_limit(kHeaderLimit);
      hp->body_limit(boost::none);
      http::read_header(sock, buf, *hp, ec);
      if (ec) {
        if (ec != http::error::end_of_stream && ec != asio::error::connection_reset && ec != asio::error::eof &&
            !impl.stopping) {
          // Malformed or oversized header: answer 400/431 and close.
          Request bad;
          bad.method = "?";
          bad.path = "?";
          bad.cdn = cdn;
          Response resp =
              ErrorResponse(ec == http::error::header_limit ? 431 : 400, "", "Bad request: " + ec.message());
          resp.close = true;
          uint64_t sent = 0;
          WriteResponse(impl, sock, bad, resp, false, &sent);
          impl.log.Count(bad, sent);
          impl.log.Write(bad, resp.status, sent, false);
        }
        return;
      }
      Request r;
      r.cdn = cdn;
      r.method = std::string(hp->get().method_string());
      r.target = std::string(hp->get().target());
      for (auto& f : hp->get()) r.headers.emplace_back(util::AsciiLower(f.name_string()), std::string(f.value()));
      impl.Prepare(r);
      if (!ServeOne(impl, sock, buf, hp, r)) return;
    }
  } catch (const std::exception& e) {
    spdlog::error("hubload serve: connection closed after an internal error: {}", e.what());
  } catch (...) {
    spdlog::error("hubload serve: connection closed after an unknown internal error");
  }
}

}  // namespace hubload::server::internal
