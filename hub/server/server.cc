// `hubload serve`: the Hub-compatible HTTP server (Boost.Beast), see hubload/server.h.
//
// Threading: one io_context with `threads` threads accepts on both listeners;
// every accepted connection is served by its own thread with synchronous
// Beast reads and writes (simple pacing/dropping for the fault switches).
#include <utility>  // before Asio (std::exchange with GCC 12 / C++20)

#include <fcntl.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <poll.h>
#include <signal.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "hub/server/store_internal.h"
#include "hubload/server.h"

namespace hubload::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using json = nlohmann::json;
namespace fs = std::filesystem;
using namespace internal;

namespace {

constexpr size_t kHeaderLimit = 64 * 1024;

struct Request {
  std::string method;
  std::string target;  // raw
  std::string raw_path;
  std::string path;  // decoded (for logs, stats, faults)
  std::multimap<std::string, std::string> query;
  http::request_header<> header;
  std::string body;
  std::string token;  // bearer token, "" = anonymous
  bool cdn = false;
  std::string endpoint;  // http://host:port as seen by the client

  std::string Header(http::field f) const {
    auto it = header.find(f);
    return it == header.end() ? std::string() : std::string(it->value());
  }
  std::string Query(const std::string& k, const std::string& dflt = "") const {
    auto it = query.find(k);
    return it == query.end() ? dflt : it->second;
  }
  bool QueryBool(const std::string& k) const {
    std::string v = Query(k);
    return v == "true" || v == "1" || v == "True";
  }
};

struct Response {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // File body (when has_file): bytes [offset, offset+length) of `file`.
  bool has_file = false;
  fs::path file;
  uint64_t offset = 0, length = 0;
  bool close = false;

  void Set(const std::string& k, const std::string& v) {
    for (auto& h : headers)
      if (beast::iequals(h.first, k)) {
        h.second = v;
        return;
      }
    headers.push_back({k, v});
  }
  uint64_t BodySize() const { return has_file ? length : body.size(); }
};

Response JsonResponse(int status, const json& j) {
  Response r;
  r.status = status;
  r.body = j.dump();
  r.Set("Content-Type", "application/json; charset=utf-8");
  return r;
}

Response ErrorResponse(int status, const std::string& error_code, const std::string& message) {
  Response r = JsonResponse(status, json{{"error", message}});
  if (!error_code.empty()) r.Set("X-Error-Code", error_code);
  r.Set("X-Error-Message", message);
  return r;
}

std::vector<std::string> SplitRaw(const std::string& path) {
  std::vector<std::string> segs;
  size_t start = 1;
  if (path.empty() || path[0] != '/') start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    segs.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  if (!segs.empty() && segs.back().empty()) segs.pop_back();
  return segs;
}

bool DecodeSeg(const std::string& raw, std::string* out) { return PercentDecode(raw, out, false); }

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

std::multimap<std::string, std::string> ParseForm(const std::string& q) {
  std::multimap<std::string, std::string> m;
  size_t start = 0;
  while (start <= q.size()) {
    size_t end = q.find('&', start);
    if (end == std::string::npos) end = q.size();
    std::string kv = q.substr(start, end - start);
    if (!kv.empty()) {
      size_t eq = kv.find('=');
      std::string k, v;
      PercentDecode(kv.substr(0, eq), &k, true);
      if (eq != std::string::npos) PercentDecode(kv.substr(eq + 1), &v, true);
      m.insert({k, v});
    }
    start = end + 1;
  }
  return m;
}

const char* TypePrefix(const std::string& type) {
  if (type == "dataset") return "datasets/";
  if (type == "space") return "spaces/";
  return "";
}

}  // namespace

// ---------------------------------------------------------------------------

struct Server::Impl {
  ServerOptions opt;
  fs::path root;
  Faults* faults = nullptr;  // points at opt.faults
  asio::io_context ioc;
  std::unique_ptr<tcp::acceptor> hub_acc, cdn_acc;
  std::vector<std::thread> io_threads;
  uint16_t hub_port = 0, cdn_port = 0;
  std::string key;  // HMAC key for signed URLs
  std::atomic<bool> stopping{false};
  bool stopped = false;
  std::mutex stop_mu;

  std::mutex conn_mu;
  std::condition_variable conn_cv;
  std::map<int, int> conn_fds;  // fd -> count
  int active = 0;

  mutable std::mutex stats_mu;
  ServerStats stats;
  std::mutex log_mu;
  std::FILE* log = nullptr;

  std::mutex upload_mu;  // multipart completion and PR numbering

  // ---- lifecycle ----
  void Accept(tcp::acceptor* acc, bool cdn) {
    acc->async_accept([this, acc, cdn](beast::error_code ec, tcp::socket sock) {
      if (stopping) return;
      if (!ec) {
        auto s = std::make_shared<tcp::socket>(std::move(sock));
        int fd = s->native_handle();
        {
          std::lock_guard<std::mutex> lock(conn_mu);
          ++active;
          conn_fds[fd]++;
        }
        std::thread([this, s, cdn, fd]() mutable {
          // A client hanging up during sendfile(2) raises SIGPIPE in this thread:
          // block it so the write fails with EPIPE instead of killing the process.
          sigset_t pipe_set;
          sigemptyset(&pipe_set);
          sigaddset(&pipe_set, SIGPIPE);
          pthread_sigmask(SIG_BLOCK, &pipe_set, nullptr);
          Serve(*s, cdn);
          beast::error_code ignored;
          std::lock_guard<std::mutex> lock(conn_mu);
          s->shutdown(tcp::socket::shutdown_both, ignored);
          s->close(ignored);
          s.reset();  // before Stop() may return and destroy the io_context
          if (--conn_fds[fd] <= 0) conn_fds.erase(fd);
          --active;
          conn_cv.notify_all();
        }).detach();
      } else if (ec == asio::error::operation_aborted) {
        return;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));  // e.g. EMFILE: do not spin
      }
      Accept(acc, cdn);
    });
  }

  void Stop() {
    std::lock_guard<std::mutex> g(stop_mu);
    if (stopped) return;
    stopped = true;
    stopping = true;
    ioc.stop();
    for (auto& t : io_threads)
      if (t.joinable()) t.join();
    {
      // No io thread runs any more: the acceptors can be closed here.
      beast::error_code ec;
      if (hub_acc) hub_acc->close(ec);
      if (cdn_acc) cdn_acc->close(ec);
    }
    std::unique_lock<std::mutex> lock(conn_mu);
    for (auto& [fd, n] : conn_fds) ::shutdown(fd, SHUT_RDWR);
    conn_cv.wait(lock, [this] { return active == 0; });
    if (log) {
      std::fclose(log);
      log = nullptr;
    }
  }

  std::string HubUrl() const { return "http://" + opt.host + ":" + std::to_string(hub_port); }
  std::string CdnUrl() const { return "http://" + opt.cdn_host + ":" + std::to_string(cdn_port); }

  // ---- signing ----
  std::string Sign(const std::string& path, int64_t exp) const {
    std::string msg = path + "\n" + std::to_string(exp);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(msg.data()),
         msg.size(), md, &len);
    return HexOf(md, len);
  }
  std::string SignedQuery(const std::string& path) const {
    int64_t exp = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count() +
                  opt.signed_url_ttl_s;
    return "?exp=" + std::to_string(exp) + "&sig=" + Sign(path, exp);
  }
  bool CheckSigned(const Request& r) const {
    std::string exp_s = r.Query("exp"), sig = r.Query("sig");
    if (exp_s.empty() || sig.empty() || exp_s.size() > 18) return false;
    for (char c : exp_s)
      if (c < '0' || c > '9') return false;
    int64_t exp = std::stoll(exp_s);
    int64_t now =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    if (exp < now) return false;
    std::string want = Sign(r.raw_path, exp);
    return want.size() == sig.size() && CRYPTO_memcmp(want.data(), sig.data(), want.size()) == 0;
  }

  // ---- logging / stats ----
  void CountStats(const Request& r, uint64_t bytes) {
    std::lock_guard<std::mutex> lock(stats_mu);
    stats.requests++;
    stats.body_bytes_sent += bytes;
    stats.requests_per_path[r.path]++;
    stats.body_bytes_per_path[r.path] += bytes;
  }
  void UncountBytes(const Request& r, uint64_t bytes) {
    std::lock_guard<std::mutex> lock(stats_mu);
    stats.body_bytes_sent -= std::min(bytes, stats.body_bytes_sent);
    stats.body_bytes_per_path[r.path] -= std::min(bytes, stats.body_bytes_per_path[r.path]);
  }
  void Record(const Request& r, int status, uint64_t bytes) {
    CountStats(r, bytes);
    Log(r, status, bytes);
  }
  void Log(const Request& r, int status, uint64_t bytes) {
    if (log) {
      json j{{"time", NowIso8601()}, {"method", r.method}, {"path", r.path}, {"status", status}, {"bytes", bytes}};
      std::string range = r.Header(http::field::range);
      j["range"] = range.empty() ? json(nullptr) : json(range);
      if (r.cdn) j["listener"] = "cdn";
      std::string line = j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
      std::lock_guard<std::mutex> lock(log_mu);
      std::fwrite(line.data(), 1, line.size(), log);
      std::fflush(log);
    }
  }

  // ---- connection ----
  void Serve(tcp::socket& sock, bool cdn);
  bool WriteResponse(tcp::socket& sock, const Request& r, Response& resp, bool head, uint64_t* sent);
  // Stall fault: waits `stall_ms` with the connection open; false when the
  // client hung up or the server is stopping.
  bool StallConnection(int sfd, int stall_ms);
  Response Handle(Request& r);
  Response HandleCdn(Request& r);
  Response HandleUploadPut(tcp::socket& sock, beast::flat_buffer& buf,
                           std::unique_ptr<http::request_parser<http::empty_body>>& hp, Request& r);

  // ---- access ----
  enum class Need { kRead, kDownload, kWrite };
  std::optional<Response> CheckAccess(const Request& r, const std::string& repo_id, const fs::path& repo_dir,
                                      Need need) const;

  // ---- handlers ----
  Response ServeFile(const Request& r, Response base, const fs::path& file, uint64_t size, const std::string& etag);
  Response Resolve(Request& r, const std::string& type, const std::string& repo_id, const std::string& rev,
                   const std::string& path, bool raw);
  Response RepoInfo(Request& r, const std::string& type, const std::string& repo_id, const std::string& rev);
  Response Tree(Request& r, const std::string& type, const std::string& repo_id, const std::string& rev,
                const std::string& path);
  Response PathsInfo(Request& r, const std::string& type, const std::string& repo_id, const std::string& rev);
  Response Preupload(Request& r, const std::string& type, const std::string& repo_id, const std::string& rev);
  Response CommitApi(Request& r, const std::string& type, const std::string& repo_id, const std::string& rev);
  Response CreateRepo(Request& r);
  Response LfsBatch(Request& r, const std::string& type, const std::string& repo_id);
  Response LfsComplete(Request& r, const std::string& folder, const std::string& oid, uint64_t size);
  Response LfsVerify(Request& r, const std::string& folder, const std::string& oid, uint64_t size);
  json EntryJson(const Entry& e, const fs::path& repo_dir, const std::string& commit, bool expand) const;
};

// ---------------------------------------------------------------------------

std::optional<Response> Server::Impl::CheckAccess(const Request& r, const std::string& repo_id,
                                                  const fs::path& repo_dir, Need need) const {
  std::error_code ec;
  bool anon = r.token.empty();
  if (!fs::is_directory(repo_dir, ec) || !fs::is_directory(repo_dir / "snapshots", ec)) {
    return ErrorResponse(anon ? 401 : 404, "RepoNotFound",
                         "Repository Not Found for url: " + r.path + ". Please make sure you specified the correct "
                         "`repo_id` and `repo_type`. If you are trying to access a private or gated repo, make sure "
                         "you are authenticated.");
  }
  RepoSettings s = LoadSettings(repo_dir);
  std::string tok_hash = anon ? "" : Sha256Hex(r.token);
  auto listed = [&](const std::vector<std::string>& v) {
    return std::find(v.begin(), v.end(), tok_hash) != v.end();
  };
  if (s.private_repo) {
    if (anon)
      return ErrorResponse(401, "RepoNotFound", "Repository Not Found for url: " + r.path + " (private repository).");
    if (!s.read_sha256.empty() && !listed(s.read_sha256))
      return ErrorResponse(404, "RepoNotFound", "Repository Not Found for url: " + r.path + ".");
  }
  if (need == Need::kDownload && !s.gated.empty()) {
    if (anon)
      return ErrorResponse(401, "GatedRepo",
                           "Access to model " + repo_id + " is restricted. You must have access to it and be "
                           "authenticated to access it. Please log in.");
    if (!listed(s.gated_sha256))
      return ErrorResponse(403, "GatedRepo",
                           "Access to model " + repo_id + " is restricted and you are not in the authorized list.");
  }
  if (need == Need::kWrite) {
    if (anon) return ErrorResponse(401, "", "Authorization header is required to write to " + repo_id + ".");
    if (opt.read_only) return ErrorResponse(403, "", "This server is a read-only mirror; writes are disabled.");
  }
  return std::nullopt;
}

// Serves [range of] a file with etag/range/conditional semantics.
Response Server::Impl::ServeFile(const Request& r, Response resp, const fs::path& file, uint64_t size,
                                 const std::string& etag) {
  resp.Set("ETag", Quote(etag));
  resp.Set("Accept-Ranges", "bytes");
  resp.Set("Content-Type", "application/octet-stream");
  std::string inm = r.Header(http::field::if_none_match);
  if (!inm.empty()) {
    bool match = false;
    size_t start = 0;
    while (start < inm.size()) {
      size_t end = inm.find(',', start);
      if (end == std::string::npos) end = inm.size();
      std::string t = inm.substr(start, end - start);
      while (!t.empty() && t.front() == ' ') t.erase(0, 1);
      while (!t.empty() && t.back() == ' ') t.pop_back();
      if (t.rfind("W/", 0) == 0) t = t.substr(2);
      if (t == "*" || t == Quote(etag)) match = true;
      start = end + 1;
    }
    if (match) {
      resp.status = 304;
      resp.Set("Content-Type", "application/octet-stream");
      return resp;
    }
  }
  resp.has_file = true;
  resp.file = file;
  resp.offset = 0;
  resp.length = size;
  std::string range = r.Header(http::field::range);
  if (range.empty() || faults->ignore_range()) return resp;
  std::string if_range = r.Header(http::field::if_range);
  if (!if_range.empty() && if_range != Quote(etag)) return resp;  // changed: full body
  if (range.rfind("bytes=", 0) != 0) return resp;
  std::string spec = range.substr(6);
  if (spec.find(',') != std::string::npos) return resp;  // multi-range: full body
  size_t dash = spec.find('-');
  if (dash == std::string::npos) return resp;
  std::string a = spec.substr(0, dash), b = spec.substr(dash + 1);
  auto num = [](const std::string& s, uint64_t* v) {
    if (s.empty() || s.size() > 19) return false;
    for (char c : s)
      if (c < '0' || c > '9') return false;
    *v = std::stoull(s);
    return true;
  };
  uint64_t first = 0, last = 0;
  if (a.empty()) {
    uint64_t n;
    if (!num(b, &n)) return resp;
    if (n == 0 || size == 0) {
      if (size == 0) {
        resp.Set("Content-Range", "bytes */0");
        return resp;
      }
      resp.has_file = false;
      resp.status = 416;
      resp.Set("Content-Range", "bytes */" + std::to_string(size));
      return resp;
    }
    first = n >= size ? 0 : size - n;
    last = size - 1;
  } else {
    if (!num(a, &first)) return resp;
    if (b.empty()) {
      last = size == 0 ? 0 : size - 1;
    } else if (!num(b, &last) || last < first) {
      return resp;
    }
    if (size == 0) {
      // bytes=0-0 on an empty file: 200, empty body, Content-Range bytes */0 (hub-protocol.md §1.7).
      resp.Set("Content-Range", "bytes */0");
      return resp;
    }
    if (first >= size) {
      resp.has_file = false;
      resp.status = 416;
      resp.Set("Content-Range", "bytes */" + std::to_string(size));
      resp.Set("Content-Type", "application/json; charset=utf-8");
      resp.body = json{{"error", "Requested range not satisfiable: " + range}}.dump();
      return resp;
    }
    if (last >= size) last = size - 1;
  }
  resp.status = 206;
  resp.offset = first;
  resp.length = last - first + 1;
  resp.Set("Content-Range", "bytes " + std::to_string(first) + "-" + std::to_string(last) + "/" + std::to_string(size));
  return resp;
}

bool Server::Impl::StallConnection(int sfd, int stall_ms) {
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

bool Server::Impl::WriteResponse(tcp::socket& sock, const Request& r, Response& resp, bool head, uint64_t* sent) {
  *sent = 0;
  bool strip = faults->strip_content_length();
  http::response<http::empty_body> res;
  res.version(11);
  res.result(static_cast<unsigned>(resp.status));
  res.set(http::field::server, "hubload-serve");
  for (auto& [k, v] : resp.headers) {
    if (strip && (beast::iequals(k, "Content-Range"))) continue;
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
      if (!StallConnection(sock.native_handle(), stall_ms)) {
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

void Server::Impl::Serve(tcp::socket& sock, bool cdn) {
  // Idle connections are closed after 120 s without a request byte.
  timeval tv{120, 0};
  ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  beast::error_code ec;
  sock.set_option(tcp::no_delay(true), ec);
  beast::flat_buffer buf;
  for (int served = 0; served < 100000 && !stopping; ++served) {
    auto hp = std::make_unique<http::request_parser<http::empty_body>>();
    hp->header_limit(kHeaderLimit);
    hp->body_limit(boost::none);
    http::read_header(sock, buf, *hp, ec);
    if (ec) {
      if (ec != http::error::end_of_stream && ec != asio::error::connection_reset && ec != asio::error::eof &&
          !stopping) {
        // Malformed or oversized header: answer 400/431 and close.
        Request bad;
        bad.method = "?";
        bad.path = "?";
        Response resp = ErrorResponse(ec == http::error::header_limit ? 431 : 400, "",
                                      "Bad request: " + ec.message());
        resp.close = true;
        uint64_t sent = 0;
        WriteResponse(sock, bad, resp, false, &sent);
        Record(bad, resp.status, sent);
      }
      return;
    }
    Request r;
    r.cdn = cdn;
    r.header = hp->get().base();
    r.method = std::string(hp->get().method_string());
    r.target = std::string(hp->get().target());
    size_t q = r.target.find('?');
    r.raw_path = r.target.substr(0, q);
    if (q != std::string::npos) r.query = ParseForm(r.target.substr(q + 1));
    if (!PercentDecode(r.raw_path, &r.path)) r.path = r.raw_path;
    std::string auth = r.Header(http::field::authorization);
    if (auth.size() > 7 && beast::iequals(auth.substr(0, 7), "Bearer ")) r.token = auth.substr(7);
    std::string host = r.Header(http::field::host);
    bool host_ok = !host.empty() && host.size() < 256;
    for (char c : host)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' || c == '[' || c == ']'))
        host_ok = false;
    r.endpoint = host_ok ? "http://" + host : HubUrl();
    bool keep_alive = hp->get().keep_alive();
    bool head = r.method == "HEAD";

    int latency = faults->latency_ms();
    if (latency > 0) std::this_thread::sleep_for(std::chrono::milliseconds(latency));

    Response resp;
    bool handled = false;
    bool body_pending = !hp->is_done();
    if (auto rule = faults->TakeStatus(r.path)) {
      resp = ErrorResponse(rule->status, "", "Injected fault: status " + std::to_string(rule->status));
      if (rule->retry_after_s >= 0) resp.Set("Retry-After", std::to_string(rule->retry_after_s));
      if (body_pending) resp.close = true;
      handled = true;
    } else if (!cdn && r.method == "PUT" && r.path.rfind("/_lfs/", 0) == 0) {
      resp = HandleUploadPut(sock, buf, hp, r);
      handled = true;
    }
    if (!handled) {
      if (body_pending) {
        std::string expect = r.Header(http::field::expect);
        bool is_commit = r.path.find("/commit/") != std::string::npos;
        uint64_t limit = is_commit ? opt.max_commit_body_bytes : opt.max_json_body_bytes;
        auto cl = hp->content_length();
        if (cl && *cl > limit) {
          resp = ErrorResponse(413, "", "Request body too large (" + std::to_string(*cl) + " bytes, limit " +
                                            std::to_string(limit) + ")");
          resp.close = true;
        } else {
          if (beast::iequals(expect, "100-continue")) {
            asio::write(sock, asio::buffer(std::string("HTTP/1.1 100 Continue\r\n\r\n")), ec);
          }
          http::request_parser<http::string_body> sp{std::move(*hp)};
          sp.body_limit(limit);
          http::read(sock, buf, sp, ec);
          if (ec) {
            if (ec == http::error::body_limit) {
              resp = ErrorResponse(413, "", "Request body too large (limit " + std::to_string(limit) + " bytes)");
              resp.close = true;
            } else {
              return;
            }
          } else {
            r.body = std::move(sp.get().body());
            resp = cdn ? HandleCdn(r) : Handle(r);
          }
        }
      } else {
        resp = cdn ? HandleCdn(r) : Handle(r);
      }
    }
    if (!keep_alive) resp.close = true;
    // Fault replacements due after this request are committed before its
    // answer goes out (the answer already refers to the old, immutable blob),
    // so the client's next request sees the new content.
    for (auto& rep : faults->TakeDueReplacements(r.path)) {
      CommitOptions co;
      co.repo_type = rep.repo_type;
      co.branch = rep.branch;
      co.message = "Replace " + rep.path_in_repo + " (fault switch)";
      co.lfs_threshold_bytes = opt.lfs_threshold_bytes;
      co.lfs_by_extension = opt.lfs_by_extension;
      auto c = ReplaceFile(opt.root, rep.repo_id, rep.path_in_repo, rep.new_content, co);
      if (!c.ok()) spdlog::warn("hubload serve: fault replacement failed: {}", c.status().ToString());
    }
    // Counters are updated before the answer is written so that a client that
    // has read the answer sees them; a short write corrects them afterwards.
    uint64_t planned = (head || resp.status == 304) ? 0 : resp.BodySize();
    CountStats(r, planned);
    uint64_t sent = 0;
    bool ok = WriteResponse(sock, r, resp, head, &sent);
    if (sent < planned) UncountBytes(r, planned - sent);
    Log(r, resp.status, sent);
    if (!ok) return;
  }
}

// ---------------------------------------------------------------------------
// Routing.

Response Server::Impl::Handle(Request& r) {
  std::vector<std::string> raw = SplitRaw(r.raw_path);
  std::vector<std::string> seg(raw.size());
  for (size_t i = 0; i < raw.size(); ++i)
    if (!DecodeSeg(raw[i], &seg[i])) return ErrorResponse(400, "", "Bad percent-encoding in path");
  // Tokens the server does not accept (except on self-authorising URLs).
  bool signed_route = !seg.empty() && seg[0] == "_lfs";
  if (!r.token.empty() && !opt.tokens.empty() && !signed_route &&
      std::find(opt.tokens.begin(), opt.tokens.end(), r.token) == opt.tokens.end()) {
    Response e = ErrorResponse(401, "", "Invalid credentials in Authorization header");
    return e;
  }
  auto repo_exists = [&](const std::string& type, const std::string& id) {
    auto d = RepoDir(root, type, id);
    std::error_code ec;
    return d && fs::is_directory(*d, ec);
  };
  const bool get = r.method == "GET" || r.method == "HEAD";
  const bool post = r.method == "POST";
  if (seg.empty()) return JsonResponse(200, json{{"server", "hubload serve"}});

  if (seg[0] == "_lfs" && seg.size() >= 5 && post) {
    if (!CheckSigned(r)) return ErrorResponse(403, "", "Invalid or expired signed upload URL");
    uint64_t size = 0;
    try {
      size = std::stoull(seg[3]);
    } catch (...) {
      return ErrorResponse(400, "", "bad size");
    }
    if (seg[4] == "complete") return LfsComplete(r, seg[1], seg[2], size);
    if (seg[4] == "verify") return LfsVerify(r, seg[1], seg[2], size);
  }

  if (seg[0] == "api") {
    if (seg.size() == 2 && seg[1] == "whoami-v2") {
      if (r.token.empty()) return ErrorResponse(401, "", "Invalid credentials in Authorization header");
      return JsonResponse(200, json{{"type", "user"}, {"name", "hubload"}, {"auth", {{"type", "access_token"}}}});
    }
    if (seg.size() == 2 && seg[1] == "validate-yaml" && post) return JsonResponse(200, json{{"warnings", json::array()}});
    if (seg.size() == 3 && seg[1] == "repos" && seg[2] == "create" && post) return CreateRepo(r);
    if (seg.size() >= 3 && (seg[1] == "models" || seg[1] == "datasets" || seg[1] == "spaces")) {
      std::string type = seg[1].substr(0, seg[1].size() - 1);
      static const std::set<std::string> kActions = {"revision", "tree", "paths-info", "preupload", "commit"};
      std::string repo_id;
      size_t action_at = 0;
      bool two = seg.size() >= 4;
      if (seg.size() >= 5) {
        bool two_ok = kActions.count(seg[4]) > 0, one_ok = kActions.count(seg[3]) > 0;
        if (two_ok && one_ok) {
          two = repo_exists(type, seg[2] + "/" + seg[3]) || !repo_exists(type, seg[2]);
        } else {
          two = two_ok || !one_ok;
        }
      }
      if (two) {
        repo_id = seg[2] + "/" + seg[3];
        action_at = 4;
      } else {
        repo_id = seg[2];
        action_at = 3;
      }
      if (seg.size() == action_at && get) return RepoInfo(r, type, repo_id, "");
      if (seg.size() > action_at) {
        const std::string& action = seg[action_at];
        // The revision is one segment (may hold %2F); for `tree` the rest is the path.
        if (seg.size() >= action_at + 2) {
          std::string rev = seg[action_at + 1];
          size_t rest_at = action_at + 2;
          // js sends tree revisions raw: "refs/pr/1" arrives as three segments.
          if (action == "tree" && rev == "refs" && seg.size() >= action_at + 4 &&
              (seg[action_at + 2] == "pr" || seg[action_at + 2] == "convert")) {
            rev = "refs/" + seg[action_at + 2] + "/" + seg[action_at + 3];
            rest_at = action_at + 4;
          }
          std::string rest;
          for (size_t i = rest_at; i < seg.size(); ++i) rest += (rest.empty() ? "" : "/") + seg[i];
          if (action == "revision" && get) {
            // A revision with literal slashes (refs/pr/1) arrives as several segments.
            std::string full = rev + (rest.empty() ? "" : "/" + rest);
            return RepoInfo(r, type, repo_id, full);
          }
          if (action == "tree" && get) return Tree(r, type, repo_id, rev, rest);
          std::string full = rev + (rest.empty() ? "" : "/" + rest);
          if (action == "paths-info" && post) return PathsInfo(r, type, repo_id, full);
          if (action == "preupload" && post) return Preupload(r, type, repo_id, full);
          if (action == "commit" && post) return CommitApi(r, type, repo_id, full);
        }
      }
    }
    return ErrorResponse(404, "", "Not found: " + r.path);
  }

  // Web routes: [datasets|spaces/]repo/(resolve|raw)/rev/path and repo.git/info/lfs/objects/batch.
  std::string type = "model";
  size_t i0 = 0;
  if (seg[0] == "datasets" || seg[0] == "spaces") {
    type = seg[0].substr(0, seg[0].size() - 1);
    i0 = 1;
  }
  // LFS batch.
  for (size_t k = i0; k < seg.size() && k <= i0 + 1; ++k) {
    const std::string& s = seg[k];
    if (s.size() > 4 && s.compare(s.size() - 4, 4, ".git") == 0 && seg.size() == k + 5 && seg[k + 1] == "info" &&
        seg[k + 2] == "lfs" && seg[k + 3] == "objects" && seg[k + 4] == "batch" && post) {
      std::string repo_id;
      for (size_t j = i0; j <= k; ++j) repo_id += (repo_id.empty() ? "" : "/") + seg[j];
      repo_id.resize(repo_id.size() - 4);
      return LfsBatch(r, type, repo_id);
    }
  }
  for (size_t k : {i0 + 2, i0 + 1}) {
    if (k >= seg.size() || (seg[k] != "resolve" && seg[k] != "raw")) continue;
    if (seg.size() < k + 3) continue;
    std::string repo_id = seg[i0];
    if (k == i0 + 2) repo_id += "/" + seg[i0 + 1];
    if (k == i0 + 2 && !repo_exists(type, repo_id) && (seg[i0 + 1] == "resolve" || seg[i0 + 1] == "raw") &&
        repo_exists(type, seg[i0]))
      continue;  // a one-segment repo whose revision is named resolve/raw
    std::string path;
    for (size_t j = k + 2; j < seg.size(); ++j) path += (path.empty() ? "" : "/") + seg[j];
    if (!get) return ErrorResponse(405, "", "Method not allowed");
    return Resolve(r, type, repo_id, seg[k + 1], path, seg[k] == "raw");
  }
  return ErrorResponse(404, "", "Not found: " + r.path);
}

// ---------------------------------------------------------------------------
// Downloads.

Response Server::Impl::Resolve(Request& r, const std::string& type, const std::string& repo_id,
                               const std::string& rev, const std::string& path, bool raw) {
  auto repo_dir = RepoDir(root, type, repo_id);
  if (!repo_dir)
    return ErrorResponse(r.token.empty() ? 401 : 404, "RepoNotFound", "Repository Not Found: invalid repo id " + repo_id);
  if (auto deny = CheckAccess(r, repo_id, *repo_dir, Need::kDownload)) return *deny;
  auto commit = ResolveRevision(*repo_dir, rev);
  if (!commit) return ErrorResponse(404, "RevisionNotFound", "Invalid rev id: " + rev);
  Response base;
  base.Set("X-Repo-Commit", *commit);
  auto missing = [&](const std::string& why) {
    Response e = ErrorResponse(404, "EntryNotFound", why);
    e.Set("X-Repo-Commit", *commit);
    return e;
  };
  if (!IsSafeRepoPath(path)) return missing("Invalid path in repo: " + path);
  auto st = Stat(root, *repo_dir, *commit, path);
  if (!st.ok()) {
    if (st.status().code() == Code::kPermissionDenied) return ErrorResponse(403, "", "Access outside the store denied");
    return missing("Entry not found: " + path + " at " + *commit);
  }
  const Entry& e = *st;
  if (e.is_dir) return missing("Entry not found (is a directory): " + path);
  if (raw && e.lfs) {
    // /raw/ of an LFS file serves the git object: the pointer.
    Response resp = base;
    std::string ptr = LfsPointer(e.sha256, e.size);
    resp.Set("ETag", Quote(e.oid));
    resp.Set("Content-Type", "text/plain; charset=utf-8");
    if (r.Header(http::field::if_none_match) == Quote(e.oid)) {
      resp.status = 304;
      return resp;
    }
    resp.body = ptr;
    return resp;
  }
  base.Set("X-Linked-Etag", Quote(e.etag));
  base.Set("X-Linked-Size", std::to_string(e.size));
  if (e.lfs && !raw) {
    base.Set("ETag", Quote(e.etag));
    base.Set("Accept-Ranges", "bytes");
    std::string inm = r.Header(http::field::if_none_match);
    if (!inm.empty() && (inm == Quote(e.etag) || inm == "*")) {
      base.status = 304;
      return base;
    }
    std::string folder = repo_dir->filename().string();
    std::string cdn_path = "/" + folder + "/" + e.blob_name;
    base.status = 302;
    base.Set("Location", CdnUrl() + cdn_path + SignedQuery(cdn_path) + "&name=" + PercentEncode(path, true));
    base.Set("Content-Type", "text/plain; charset=utf-8");
    base.body = "Found. Redirecting to " + CdnUrl() + cdn_path;
    return base;
  }
  return ServeFile(r, base, e.file, e.size, e.etag);
}

Response Server::Impl::HandleCdn(Request& r) {
  if (r.method != "GET" && r.method != "HEAD") return ErrorResponse(405, "", "Method not allowed");
  std::vector<std::string> seg = SplitRaw(r.raw_path);
  if (seg.size() != 2 || !CheckSigned(r)) return ErrorResponse(403, "", "Invalid or expired signed URL");
  const std::string& folder = seg[0];
  const std::string& blob = seg[1];
  if (folder.find("..") != std::string::npos || folder.empty() || folder[0] == '.' ||
      !(IsHex(blob, 40, 40) || IsHex(blob, 64, 64)))
    return ErrorResponse(404, "", "Not found");
  fs::path file = root / folder / "blobs" / blob;
  std::error_code ec;
  fs::path canon = fs::canonical(file, ec);
  fs::path croot = fs::canonical(root, ec);
  if (canon.native().rfind(croot.native() + "/", 0) != 0) return ErrorResponse(404, "", "Not found");
  uint64_t size = fs::file_size(canon, ec);
  if (ec) return ErrorResponse(404, "", "Not found");
  Response base;
  base.Set("X-Linked-Size", std::to_string(size));
  return ServeFile(r, base, canon, size, blob);
}

json Server::Impl::EntryJson(const Entry& e, const fs::path& repo_dir, const std::string& commit, bool expand) const {
  json j;
  j["type"] = e.is_dir ? "directory" : "file";
  j["oid"] = e.oid;
  j["size"] = e.is_dir ? 0 : e.size;
  j["path"] = e.path;
  if (!e.is_dir && e.lfs) j["lfs"] = {{"oid", e.sha256}, {"size", e.size}, {"pointerSize", e.pointer_size}};
  if (expand) {
    LastCommit lc = LastCommitFor(repo_dir, commit, e.path);
    j["lastCommit"] = {{"id", lc.id}, {"title", lc.title}, {"date", lc.date}};
    if (!e.is_dir) j["securityFileStatus"] = {{"status", "safe"}};
  }
  return j;
}

Response Server::Impl::RepoInfo(Request& r, const std::string& type, const std::string& repo_id,
                                const std::string& rev) {
  auto repo_dir = RepoDir(root, type, repo_id);
  if (!repo_dir) return ErrorResponse(r.token.empty() ? 401 : 404, "RepoNotFound", "Repository Not Found: " + repo_id);
  if (auto deny = CheckAccess(r, repo_id, *repo_dir, Need::kRead)) return *deny;
  std::string want = rev.empty() ? "main" : rev;
  auto commit = ResolveRevision(*repo_dir, want);
  if (!commit) {
    if (rev.empty()) {
      // An empty repo (no main): no sha, no siblings.
      return JsonResponse(200, json{{"id", repo_id}, {"_id", Sha1Hex(repo_id).substr(0, 24)},
                                    {"private", LoadSettings(*repo_dir).private_repo}, {"siblings", json::array()}});
    }
    return ErrorResponse(404, "RevisionNotFound", "Invalid rev id: " + rev);
  }
  RepoSettings s = LoadSettings(*repo_dir);
  auto listing = List(root, *repo_dir, *commit, "", true);
  if (!listing.ok()) return ErrorResponse(500, "", listing.status().message());
  bool blobs = r.QueryBool("blobs");
  json siblings = json::array();
  for (auto& e : *listing) {
    if (e.is_dir) continue;
    json sj{{"rfilename", e.path}};
    if (blobs) {
      sj["size"] = e.size;
      sj["blobId"] = e.oid;
      if (e.lfs) sj["lfs"] = {{"sha256", e.sha256}, {"size", e.size}, {"pointerSize", e.pointer_size}};
    }
    siblings.push_back(sj);
  }
  LastCommit lc;
  lc.date = s.commits.contains(*commit) ? s.commits[*commit].value("date", "") : "";
  if (lc.date.empty()) lc.date = NowIso8601();
  std::string author = repo_id.find('/') == std::string::npos ? "" : repo_id.substr(0, repo_id.find('/'));
  json j{{"_id", Sha1Hex(type + "/" + repo_id).substr(0, 24)},
         {"id", repo_id},
         {"modelId", repo_id},
         {"author", author},
         {"sha", *commit},
         {"lastModified", lc.date},
         {"createdAt", s.created_at.empty() ? lc.date : s.created_at},
         {"private", s.private_repo},
         {"disabled", false},
         {"downloads", 0},
         {"likes", 0},
         {"tags", json::array()},
         {"siblings", siblings}};
  if (s.gated.empty()) {
    j["gated"] = false;
  } else {
    j["gated"] = s.gated;
  }
  if (type == "space") j["sdk"] = "static";
  if (type != "model") j.erase("modelId");
  return JsonResponse(200, j);
}

Response Server::Impl::Tree(Request& r, const std::string& type, const std::string& repo_id, const std::string& rev,
                            const std::string& path) {
  auto repo_dir = RepoDir(root, type, repo_id);
  if (!repo_dir) return ErrorResponse(r.token.empty() ? 401 : 404, "RepoNotFound", "Repository Not Found: " + repo_id);
  if (auto deny = CheckAccess(r, repo_id, *repo_dir, Need::kRead)) return *deny;
  auto commit = ResolveRevision(*repo_dir, rev);
  if (!commit) return ErrorResponse(404, "RevisionNotFound", "Invalid rev id: " + rev);
  if (!path.empty() && !IsSafeRepoPath(path)) return ErrorResponse(404, "EntryNotFound", "Invalid path: " + path);
  auto listing = List(root, *repo_dir, *commit, path, r.QueryBool("recursive"));
  if (!listing.ok()) {
    Response e = ErrorResponse(404, "EntryNotFound", "Path not found: " + path);
    e.Set("X-Repo-Commit", *commit);
    return e;
  }
  bool expand = r.QueryBool("expand");
  size_t page = static_cast<size_t>(std::max(1, opt.tree_page_size));
  std::string limit_s = r.Query("limit");  // overrides the page size, at most 10000
  if (!limit_s.empty() && limit_s.size() < 7 && std::all_of(limit_s.begin(), limit_s.end(), ::isdigit) &&
      std::stoul(limit_s) > 0)
    page = std::min<size_t>(10000, std::stoul(limit_s));
  size_t cursor = 0;
  std::string cursor_s = r.Query("cursor");
  if (!cursor_s.empty()) {
    if (cursor_s.size() > 12 || !std::all_of(cursor_s.begin(), cursor_s.end(), ::isdigit))
      return ErrorResponse(400, "", "Invalid cursor");
    cursor = std::stoul(cursor_s);
  }
  json arr = json::array();
  size_t end = std::min(listing->size(), cursor + page);
  for (size_t i = cursor; i < end; ++i) arr.push_back(EntryJson((*listing)[i], *repo_dir, *commit, expand));
  Response resp = JsonResponse(200, arr);
  resp.Set("X-Repo-Commit", *commit);
  if (end < listing->size()) {
    std::string next = r.endpoint + r.raw_path + "?recursive=" + (r.QueryBool("recursive") ? "true" : "false") +
                       "&expand=" + (expand ? "true" : "false") + "&cursor=" + std::to_string(end);
    if (!limit_s.empty()) next += "&limit=" + PercentEncode(limit_s, false);
    resp.Set("Link", "<" + next + ">; rel=\"next\"");
  }
  return resp;
}

Response Server::Impl::PathsInfo(Request& r, const std::string& type, const std::string& repo_id,
                                 const std::string& rev) {
  auto repo_dir = RepoDir(root, type, repo_id);
  if (!repo_dir) return ErrorResponse(r.token.empty() ? 401 : 404, "RepoNotFound", "Repository Not Found: " + repo_id);
  if (auto deny = CheckAccess(r, repo_id, *repo_dir, Need::kRead)) return *deny;
  auto commit = ResolveRevision(*repo_dir, rev);
  if (!commit) return ErrorResponse(404, "RevisionNotFound", "Invalid rev id: " + rev);
  std::vector<std::string> paths;
  bool expand = false;
  std::string ctype = r.Header(http::field::content_type);
  if (ctype.find("json") != std::string::npos) {
    auto j = json::parse(r.body, nullptr, false);
    if (!j.is_object() || !j.contains("paths") || !j["paths"].is_array())
      return ErrorResponse(400, "", "paths-info: body must be {\"paths\": [...]}");
    for (auto& p : j["paths"])
      if (p.is_string()) paths.push_back(p.get<std::string>());
    if (j.contains("expand") && j["expand"].is_boolean()) expand = j["expand"].get<bool>();
  } else {
    auto form = ParseForm(r.body);
    auto range = form.equal_range("paths");
    for (auto it = range.first; it != range.second; ++it) paths.push_back(it->second);
    auto ex = form.find("expand");
    expand = ex != form.end() && (ex->second == "true" || ex->second == "1" || ex->second == "True");
  }
  if (paths.size() > 10000) return ErrorResponse(400, "", "paths-info: too many paths");
  json arr = json::array();
  for (auto& p : paths) {
    std::string clean = p;
    while (!clean.empty() && clean.back() == '/') clean.pop_back();
    if (!IsSafeRepoPath(clean)) continue;
    auto st = Stat(root, *repo_dir, *commit, clean);
    if (!st.ok()) continue;
    arr.push_back(EntryJson(*st, *repo_dir, *commit, expand));
  }
  Response resp = JsonResponse(200, arr);
  resp.Set("X-Repo-Commit", *commit);
  return resp;
}

// ---------------------------------------------------------------------------
// Uploads.

Response Server::Impl::CreateRepo(Request& r) {
  if (r.token.empty()) return ErrorResponse(401, "", "Authorization header is required to create a repository.");
  if (opt.read_only) return ErrorResponse(403, "", "This server is a read-only mirror; writes are disabled.");
  auto j = json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string())
    return ErrorResponse(400, "", "repos/create: body must be JSON with a string `name`");
  std::string name = j["name"].get<std::string>();
  std::string org = j.contains("organization") && j["organization"].is_string() ? j["organization"].get<std::string>()
                                                                                  : "";
  std::string type = j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : "model";
  bool priv = j.contains("private") && j["private"].is_boolean() && j["private"].get<bool>();
  if (j.contains("visibility") && j["visibility"].is_string()) priv = j["visibility"].get<std::string>() != "public";
  std::string repo_id = org.empty() ? name : org + "/" + name;
  if (!IsValidRepoType(type)) return ErrorResponse(400, "", "Invalid repo type: " + type);
  if (!IsValidRepoId(repo_id)) return ErrorResponse(400, "", "Invalid repo id: " + repo_id);
  auto dir = RepoDir(root, type, repo_id);
  std::string url = r.endpoint + "/" + TypePrefix(type) + repo_id;
  std::error_code ec;
  if (fs::exists(*dir, ec))
    return JsonResponse(409, json{{"error", "You already created this " + type + " repo"}, {"url", url}});
  CreateRepoOptions co;
  co.repo_type = type;
  co.private_repo = priv;
  co.commit_message = "initial commit";
  co.fail_if_exists = true;
  if (priv) co.read_tokens = {r.token};
  std::string attrs;
  for (const char* ext : {"*.safetensors", "*.bin", "*.pt", "*.pth", "*.ckpt", "*.h5", "*.onnx", "*.msgpack",
                          "*.gguf", "*.npy", "*.npz", "*.pkl", "*.parquet", "*.arrow", "*.zip", "*.tar.*"})
    attrs += std::string(ext) + " filter=lfs diff=lfs merge=lfs -text\n";
  std::map<std::string, std::string> files{{".gitattributes", attrs}};
  if (j.contains("files") && j["files"].is_array()) {
    for (auto& f : j["files"]) {
      if (!f.is_object() || !f.contains("path") || !f["path"].is_string() || !f.contains("content") ||
          !f["content"].is_string())
        return ErrorResponse(400, "", "repos/create: files[] entries need path and content");
      bool ok = true;
      std::string content = f["content"].get<std::string>();
      if (f.value("encoding", "") == "base64") content = Base64Decode(content, &ok);
      if (!ok) return ErrorResponse(400, "", "repos/create: bad base64 for " + f["path"].get<std::string>());
      files[f["path"].get<std::string>()] = content;
    }
  }
  co.lfs_threshold_bytes = opt.lfs_threshold_bytes;
  co.lfs_by_extension = opt.lfs_by_extension;
  auto c = CreateRepoFromFiles(opt.root, repo_id, files, co);
  if (!c.ok()) {
    if (c.status().code() == Code::kConflict)
      return JsonResponse(409, json{{"error", "You already created this " + type + " repo"}, {"url", url}});
    return ErrorResponse(400, "", c.status().message());
  }
  return JsonResponse(200, json{{"url", url}, {"id", repo_id}, {"name", repo_id}});
}

Response Server::Impl::Preupload(Request& r, const std::string& type, const std::string& repo_id,
                                 const std::string& rev) {
  auto repo_dir = RepoDir(root, type, repo_id);
  if (!repo_dir) return ErrorResponse(r.token.empty() ? 401 : 404, "RepoNotFound", "Repository Not Found: " + repo_id);
  if (auto deny = CheckAccess(r, repo_id, *repo_dir, Need::kWrite)) return *deny;
  auto j = json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("files") || !j["files"].is_array())
    return ErrorResponse(400, "", "preupload: body must be {\"files\": [...]}");
  auto commit = ResolveRevision(*repo_dir, rev);
  json out = json::array();
  for (auto& f : j["files"]) {
    if (!f.is_object() || !f.contains("path") || !f["path"].is_string())
      return ErrorResponse(400, "", "preupload: each file needs a string path");
    std::string path = f["path"].get<std::string>();
    uint64_t size = f.contains("size") && f["size"].is_number_unsigned() ? f["size"].get<uint64_t>() : 0;
    bool lfs = IsLfsPath(path, size, opt.lfs_threshold_bytes, opt.lfs_by_extension);
    json e{{"path", path}, {"uploadMode", lfs ? "lfs" : "regular"}, {"shouldIgnore", false}};
    if (commit && IsSafeRepoPath(path)) {
      auto st = Stat(root, *repo_dir, *commit, path);
      if (st.ok() && !st->is_dir) e["oid"] = st->lfs ? st->sha256 : st->oid;
    }
    out.push_back(e);
  }
  return JsonResponse(200, json{{"files", out}, {"commitOid", commit ? *commit : ""}});
}

Response Server::Impl::LfsBatch(Request& r, const std::string& type, const std::string& repo_id) {
  auto repo_dir = RepoDir(root, type, repo_id);
  if (!repo_dir) return ErrorResponse(r.token.empty() ? 401 : 404, "RepoNotFound", "Repository Not Found: " + repo_id);
  auto j = json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("objects") || !j["objects"].is_array())
    return ErrorResponse(400, "", "LFS batch: body must have objects[]");
  std::string operation = j.value("operation", "download");
  if (auto deny = CheckAccess(r, repo_id, *repo_dir, operation == "upload" ? Need::kWrite : Need::kDownload))
    return *deny;
  std::string algo = j.value("hash_algo", "sha256");
  if (algo != "sha256" && algo != "sha_256") return ErrorResponse(422, "", "Unsupported hash_algo " + algo);
  bool multipart_ok = false;
  if (j.contains("transfers") && j["transfers"].is_array())
    for (auto& t : j["transfers"])
      if (t == "multipart") multipart_ok = true;
  std::string folder = repo_dir->filename().string();
  json objs = json::array();
  bool any_multipart = false;
  for (auto& o : j["objects"]) {
    if (!o.is_object() || !o.contains("oid") || !o["oid"].is_string() || !o.contains("size") ||
        !o["size"].is_number_unsigned())
      return ErrorResponse(422, "", "LFS batch: objects need oid (sha256 hex) and size");
    std::string oid = o["oid"].get<std::string>();
    uint64_t size = o["size"].get<uint64_t>();
    json out{{"oid", oid}, {"size", size}};
    if (!IsHex(oid, 64, 64)) {
      out["error"] = {{"code", 422}, {"message", "oid must be 64 lower-case hex"}};
      objs.push_back(out);
      continue;
    }
    std::error_code ec;
    fs::path blob = *repo_dir / "blobs" / oid;
    bool have = fs::is_regular_file(blob, ec) && fs::file_size(blob, ec) == size;
    std::string base = "/_lfs/" + folder + "/" + oid + "/" + std::to_string(size);
    if (operation == "download") {
      if (!have) {
        out["error"] = {{"code", 404}, {"message", "Object does not exist"}};
      } else {
        std::string p = "/" + folder + "/" + oid;
        out["actions"] = {{"download", {{"href", CdnUrl() + p + SignedQuery(p)}}}};
      }
    } else if (!have) {
      json actions;
      std::string verify = base + "/verify";
      actions["verify"] = {{"href", r.endpoint + verify + SignedQuery(verify)}};
      uint64_t chunk = std::max<uint64_t>(1, opt.multipart_chunk_size);
      if (multipart_ok && size > chunk) {
        any_multipart = true;
        std::string complete = base + "/complete";
        json header{{"chunk_size", std::to_string(chunk)}};
        uint64_t parts = (size + chunk - 1) / chunk;
        for (uint64_t i = 1; i <= parts; ++i) {
          char key[16];
          std::snprintf(key, sizeof key, "%05llu", static_cast<unsigned long long>(i));
          std::string pp = base + "/part/" + std::to_string(i);
          header[key] = r.endpoint + pp + SignedQuery(pp);
        }
        actions["upload"] = {{"href", r.endpoint + complete + SignedQuery(complete)}, {"header", header}};
      } else {
        actions["upload"] = {{"href", r.endpoint + base + SignedQuery(base)}};
      }
      out["actions"] = actions;
    }
    objs.push_back(out);
  }
  Response resp = JsonResponse(200, json{{"transfer", any_multipart ? "multipart" : "basic"}, {"objects", objs}});
  resp.Set("Content-Type", "application/vnd.git-lfs+json");
  return resp;
}

// PUT /_lfs/<folder>/<oid>/<size>[/part/<n>]?exp&sig: streams the body to a file.
Response Server::Impl::HandleUploadPut(tcp::socket& sock, beast::flat_buffer& buf,
                                       std::unique_ptr<http::request_parser<http::empty_body>>& hp, Request& r) {
  std::vector<std::string> seg = SplitRaw(r.raw_path);
  auto fail = [&](int status, const std::string& msg) {
    Response e = ErrorResponse(status, "", msg);
    if (!hp->is_done()) e.close = true;  // body not read
    return e;
  };
  if (opt.read_only) return fail(403, "This server is a read-only mirror; writes are disabled.");
  if (!CheckSigned(r)) return fail(403, "Invalid or expired signed upload URL");
  if (seg.size() != 4 && seg.size() != 6) return fail(404, "Not found");
  const std::string folder = seg[1], oid = seg[2];
  uint64_t size = 0;
  try {
    size = std::stoull(seg[3]);
  } catch (...) {
    return fail(400, "bad size");
  }
  fs::path repo_dir = root / folder;
  std::error_code ec;
  if (!fs::is_directory(repo_dir / "blobs", ec)) return fail(404, "Repository not found");
  uint64_t expect = size;
  fs::path target;
  uint64_t part = 0;
  if (seg.size() == 6) {
    if (seg[4] != "part") return fail(404, "Not found");
    try {
      part = std::stoull(seg[5]);
    } catch (...) {
      return fail(400, "bad part number");
    }
    uint64_t chunk = std::max<uint64_t>(1, opt.multipart_chunk_size);
    uint64_t parts = (size + chunk - 1) / chunk;
    if (part < 1 || part > parts) return fail(400, "part number out of range");
    expect = std::min(chunk, size - (part - 1) * chunk);
    fs::path dir = root / ".hubload-uploads" / (folder + "-" + oid);
    fs::create_directories(dir, ec);
    target = dir / ("part-" + std::to_string(part));
  }
  auto cl = hp->content_length();
  if (cl && *cl != expect)
    return fail(400, "Upload size mismatch: got Content-Length " + std::to_string(*cl) + ", expected " +
                         std::to_string(expect));
  // Unique per request: parallel parts of one object must never share a temp file.
  static std::atomic<uint64_t> upload_seq{0};
  fs::path tmp = repo_dir / "blobs" / (".upload-" + oid.substr(0, 16) + "-" + std::to_string(::getpid()) + "-" +
                                       std::to_string(upload_seq.fetch_add(1)));
  beast::error_code bec;
  if (beast::iequals(r.Header(http::field::expect), "100-continue"))
    asio::write(sock, asio::buffer(std::string("HTTP/1.1 100 Continue\r\n\r\n")), bec);
  http::request_parser<http::file_body> fp{std::move(*hp)};
  fp.body_limit(expect);
  fp.get().body().open(tmp.c_str(), beast::file_mode::write, bec);
  if (bec) return fail(500, "cannot open upload file: " + bec.message());
  http::read(sock, buf, fp, bec);
  fp.get().body().close();
  if (bec) {
    fs::remove(tmp, ec);
    Response e = ErrorResponse(bec == http::error::body_limit ? 413 : 400, "", "Upload failed: " + bec.message());
    e.close = true;
    return e;
  }
  uint64_t got = fs::file_size(tmp, ec);
  if (ec || got != expect) {
    fs::remove(tmp, ec);
    return ErrorResponse(400, "", "Upload size mismatch: got " + std::to_string(got) + " bytes, expected " +
                                      std::to_string(expect));
  }
  if (part) {
    std::string sha256;
    HashFile(tmp, &sha256, nullptr, nullptr);
    fs::rename(tmp, target, ec);
    if (ec) return ErrorResponse(500, "", "cannot store part");
    Response resp;
    resp.Set("ETag", Quote(sha256.substr(0, 32)));
    return resp;
  }
  std::string sha256;
  if (!IsHex(oid, 64, 64) || !HashFile(tmp, &sha256, nullptr, nullptr) || sha256 != oid) {
    fs::remove(tmp, ec);
    return ErrorResponse(400, "", "Uploaded content does not match its oid: sha256 is " + sha256 + ", expected " + oid);
  }
  Status st = InstallBlob(repo_dir, tmp, oid);
  if (!st.ok()) return ErrorResponse(500, "", st.message());
  return JsonResponse(200, json::object());
}

Response Server::Impl::LfsComplete(Request& r, const std::string& folder, const std::string& oid, uint64_t size) {
  if (opt.read_only) return ErrorResponse(403, "", "This server is a read-only mirror; writes are disabled.");
  auto j = json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("parts") || !j["parts"].is_array())
    return ErrorResponse(400, "", "multipart completion: body must have parts[]");
  if (j.contains("oid") && j["oid"] != oid) return ErrorResponse(400, "", "multipart completion: oid mismatch");
  fs::path repo_dir = root / folder;
  std::error_code ec;
  if (!fs::is_directory(repo_dir / "blobs", ec)) return ErrorResponse(404, "", "Repository not found");
  uint64_t chunk = std::max<uint64_t>(1, opt.multipart_chunk_size);
  uint64_t parts = (size + chunk - 1) / chunk;
  if (j["parts"].size() != parts)
    return ErrorResponse(400, "", "multipart completion: expected " + std::to_string(parts) + " parts, got " +
                                      std::to_string(j["parts"].size()));
  std::lock_guard<std::mutex> lock(upload_mu);
  fs::path dir = root / ".hubload-uploads" / (folder + "-" + oid);
  fs::path tmp = repo_dir / "blobs" / (".assemble-" + oid.substr(0, 16));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    for (uint64_t i = 1; i <= parts; ++i) {
      const json* pj = nullptr;
      for (auto& p : j["parts"])
        if (p.is_object() && p.value("partNumber", 0ull) == i) pj = &p;
      fs::path pf = dir / ("part-" + std::to_string(i));
      if (!pj || !fs::exists(pf, ec)) {
        out.close();
        fs::remove(tmp, ec);
        return ErrorResponse(400, "", "multipart completion: part " + std::to_string(i) + " missing");
      }
      std::string sha;
      HashFile(pf, &sha, nullptr, nullptr);
      std::string etag = pj->value("etag", "");
      if (etag != Quote(sha.substr(0, 32)) && etag != sha.substr(0, 32)) {
        out.close();
        fs::remove(tmp, ec);
        return ErrorResponse(400, "", "multipart completion: etag of part " + std::to_string(i) + " does not match");
      }
      std::ifstream in(pf, std::ios::binary);
      out << in.rdbuf();
    }
    out.flush();
    if (!out) {
      fs::remove(tmp, ec);
      return ErrorResponse(500, "", "cannot assemble object");
    }
  }
  std::string sha256;
  uint64_t got = 0;
  if (!HashFile(tmp, &sha256, nullptr, &got) || sha256 != oid || got != size) {
    fs::remove(tmp, ec);
    return ErrorResponse(400, "", "Assembled object does not match: sha256 " + sha256 + " size " + std::to_string(got) +
                                      ", expected " + oid + " size " + std::to_string(size));
  }
  Status st = InstallBlob(repo_dir, tmp, oid);
  fs::remove_all(dir, ec);
  if (!st.ok()) return ErrorResponse(500, "", st.message());
  return JsonResponse(200, json::object());
}

Response Server::Impl::LfsVerify(Request& r, const std::string& folder, const std::string& oid, uint64_t size) {
  std::error_code ec;
  fs::path blob = root / folder / "blobs" / oid;
  if (!IsHex(oid, 64, 64) || !fs::is_regular_file(blob, ec) || fs::file_size(blob, ec) != size)
    return ErrorResponse(404, "", "Object " + oid + " not found or wrong size");
  return JsonResponse(200, json::object());
}

Response Server::Impl::CommitApi(Request& r, const std::string& type, const std::string& repo_id,
                                 const std::string& rev) {
  auto repo_dir = RepoDir(root, type, repo_id);
  if (!repo_dir) return ErrorResponse(r.token.empty() ? 401 : 404, "RepoNotFound", "Repository Not Found: " + repo_id);
  if (auto deny = CheckAccess(r, repo_id, *repo_dir, Need::kWrite)) return *deny;
  CommitOptions co;
  co.repo_type = type;
  co.lfs_threshold_bytes = opt.lfs_threshold_bytes;
  co.lfs_by_extension = opt.lfs_by_extension;
  std::vector<Op> ops;
  bool have_header = false;
  size_t start = 0;
  int line_no = 0;
  while (start < r.body.size()) {
    size_t end = r.body.find('\n', start);
    if (end == std::string::npos) end = r.body.size();
    std::string line = r.body.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (line.empty() || line == "\r") continue;
    auto j = json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("key") || !j["key"].is_string() || !j.contains("value") ||
        !j["value"].is_object())
      return ErrorResponse(400, "", "commit: line " + std::to_string(line_no) + " is not {key, value}");
    std::string key = j["key"].get<std::string>();
    const json& v = j["value"];
    if (key == "header") {
      have_header = true;
      co.message = v.value("summary", "");
      co.description = v.value("description", "");
      if (v.contains("parentCommit") && v["parentCommit"].is_string()) co.parent_commit = v["parentCommit"];
      continue;
    }
    if (!v.contains("path") || !v["path"].is_string())
      return ErrorResponse(400, "", "commit: line " + std::to_string(line_no) + " has no path");
    Op op;
    op.path = v["path"].get<std::string>();
    if (!IsSafeRepoPath(op.path)) return ErrorResponse(400, "", "commit: invalid path in repo '" + op.path + "'");
    if (key == "file") {
      bool ok = true;
      std::string content = v.contains("content") && v["content"].is_string() ? v["content"].get<std::string>() : "";
      if (v.value("encoding", "base64") == "base64") content = Base64Decode(content, &ok);
      if (!ok) return ErrorResponse(400, "", "commit: bad base64 content for " + op.path);
      op.content = std::move(content);
    } else if (key == "lfsFile") {
      std::string oid = v.value("oid", "");
      if (!IsHex(oid, 64, 64)) return ErrorResponse(400, "", "commit: lfsFile " + op.path + " needs a sha256 oid");
      std::error_code ec;
      fs::path blob = *repo_dir / "blobs" / oid;
      if (!fs::is_regular_file(blob, ec))
        return ErrorResponse(422, "", "commit: LFS object " + oid + " for " + op.path + " was not uploaded");
      if (v.contains("size") && v["size"].is_number_unsigned() && v["size"].get<uint64_t>() != fs::file_size(blob, ec))
        return ErrorResponse(422, "", "commit: LFS object " + oid + " for " + op.path + " has a different size");
      op.existing_blob = oid;
    } else if (key == "deletedFile") {
      op.kind = CommitOperation::Kind::kDelete;
    } else if (key == "deletedFolder") {
      op.kind = CommitOperation::Kind::kDeleteFolder;
      while (!op.path.empty() && op.path.back() == '/') op.path.pop_back();
    } else {
      return ErrorResponse(400, "", "commit: unknown operation key '" + key + "'");
    }
    ops.push_back(std::move(op));
  }
  if (!have_header) return ErrorResponse(400, "", "commit: missing header line");
  if (co.message.empty()) co.message = "Upload files";
  bool create_pr = r.QueryBool("create_pr");
  std::string pr_url;
  std::lock_guard<std::mutex> lock(upload_mu);
  if (create_pr) {
    auto base = ResolveRevision(*repo_dir, co.parent_commit.empty() ? rev : co.parent_commit);
    if (!base) return ErrorResponse(404, "RevisionNotFound", "Invalid rev id: " + rev);
    int n = 1;
    std::error_code ec;
    for (auto it = fs::directory_iterator(*repo_dir / "refs" / "refs" / "pr", ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      std::string name = it->path().filename().string();
      if (!name.empty() && name.size() < 9 && std::all_of(name.begin(), name.end(), ::isdigit))
        n = std::max(n, std::stoi(name) + 1);
    }
    co.branch = "refs/pr/" + std::to_string(n);
    co.base_commit = *base;
    co.parent_commit.clear();
    pr_url = r.endpoint + "/" + TypePrefix(type) + repo_id + "/discussions/" + std::to_string(n);
  } else {
    if (IsHex(rev, 40, 40) || !IsSafeRefName(rev))
      return ErrorResponse(400, "", "commit: revision must be a branch, got '" + rev + "'");
    std::error_code ec;
    bool branch_exists = fs::exists(*repo_dir / "refs" / rev, ec);
    bool any_ref = false;
    for (auto it = fs::directory_iterator(*repo_dir / "refs", ec); !ec && it != fs::directory_iterator();
         it.increment(ec))
      any_ref = true;
    if (!branch_exists && any_ref) return ErrorResponse(404, "RevisionNotFound", "Invalid rev id: " + rev);
    co.branch = rev;
  }
  auto c = Commit(root, repo_id, ops, co, false);
  if (!c.ok()) {
    const Status& s = c.status();
    switch (s.code()) {
      case Code::kConflict:
        return ErrorResponse(412, "", "A commit has happened since. Please refresh and try again. (" + s.message() + ")");
      case Code::kEntryNotFound:
        return ErrorResponse(404, "EntryNotFound", s.message());
      case Code::kRepoNotFound:
        return ErrorResponse(404, "RepoNotFound", s.message());
      case Code::kRevisionNotFound:
        return ErrorResponse(404, "RevisionNotFound", s.message());
      case Code::kInvalidArgument:
      case Code::kNotFound:
        return ErrorResponse(400, "", s.message());
      default:
        return ErrorResponse(500, "", s.message());
    }
  }
  json out{{"commitOid", *c},
           {"commitUrl", r.endpoint + "/" + TypePrefix(type) + repo_id + "/commit/" + *c},
           {"hookOutput", ""},
           {"success", true}};
  if (create_pr) {
    out["pullRequestUrl"] = pr_url;
    out["prNum"] = std::stoi(pr_url.substr(pr_url.rfind('/') + 1));
  }
  return JsonResponse(200, out);
}

// ---------------------------------------------------------------------------
// Public API.

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() { Stop(); }

Result<std::unique_ptr<Server>> Server::Start(ServerOptions options) {
  std::error_code ec;
  if (options.root.empty() || !fs::is_directory(options.root, ec))
    return Status(Code::kInvalidArgument, "server root is not a folder: '" + options.root + "'");
  auto impl = std::make_unique<Impl>();
  impl->opt = std::move(options);
  impl->root = fs::canonical(impl->opt.root, ec);
  impl->opt.root = impl->root.string();
  impl->faults = &impl->opt.faults;
  impl->key.resize(32);
  if (RAND_bytes(reinterpret_cast<unsigned char*>(impl->key.data()), 32) != 1)
    return Status(Code::kInternal, "RAND_bytes failed");
  if (!impl->opt.access_log.empty()) {
    impl->log = std::fopen(impl->opt.access_log.c_str(), "a");
    if (!impl->log) return Status(Code::kIOError, "cannot open access log " + impl->opt.access_log);
  }
  beast::error_code bec;
  auto addr = asio::ip::make_address(impl->opt.host, bec);
  if (bec) {
    // A host name: resolve it (loopback names like "localhost").
    tcp::resolver res(impl->ioc);
    auto results = res.resolve(impl->opt.host, "0", bec);
    if (bec || results.empty())
      return Status(Code::kInvalidArgument, "cannot resolve listen host '" + impl->opt.host + "': " + bec.message());
    addr = results.begin()->endpoint().address();
  }
  auto open = [&](uint16_t port, std::unique_ptr<tcp::acceptor>* acc) -> Status {
    *acc = std::make_unique<tcp::acceptor>(impl->ioc);
    tcp::endpoint ep(addr, port);
    beast::error_code e;
    (*acc)->open(ep.protocol(), e);
    if (!e) (*acc)->set_option(asio::socket_base::reuse_address(true), e);
    if (!e) (*acc)->bind(ep, e);
    if (!e) (*acc)->listen(asio::socket_base::max_listen_connections, e);
    if (e)
      return Status(Code::kIOError, "cannot listen on " + impl->opt.host + ":" + std::to_string(port) + ": " +
                                        e.message());
    return Status::Ok();
  };
  HUBLOAD_RETURN_IF_ERROR(open(impl->opt.port, &impl->hub_acc));
  HUBLOAD_RETURN_IF_ERROR(open(0, &impl->cdn_acc));
  impl->hub_port = impl->hub_acc->local_endpoint().port();
  impl->cdn_port = impl->cdn_acc->local_endpoint().port();
  impl->Accept(impl->hub_acc.get(), false);
  impl->Accept(impl->cdn_acc.get(), true);
  int n = std::max(1, impl->opt.threads);
  for (int i = 0; i < n; ++i) impl->io_threads.emplace_back([p = impl.get()] { p->ioc.run(); });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

std::string Server::url() const { return impl_->HubUrl(); }
std::string Server::cdn_url() const { return impl_->CdnUrl(); }
uint16_t Server::port() const { return impl_->hub_port; }
uint16_t Server::cdn_port() const { return impl_->cdn_port; }
const std::string& Server::root() const { return impl_->opt.root; }
Faults& Server::faults() { return *impl_->faults; }

ServerStats Server::stats() const {
  std::lock_guard<std::mutex> lock(impl_->stats_mu);
  return impl_->stats;
}

uint64_t Server::RequestCount(const std::string& path_substring) const {
  std::lock_guard<std::mutex> lock(impl_->stats_mu);
  uint64_t n = 0;
  for (auto& [p, c] : impl_->stats.requests_per_path)
    if (p.find(path_substring) != std::string::npos) n += c;
  return n;
}

void Server::ResetStats() {
  std::lock_guard<std::mutex> lock(impl_->stats_mu);
  impl_->stats = ServerStats{};
}

void Server::Stop() {
  if (impl_) impl_->Stop();
}

}  // namespace hubload::server
