// libcurl HttpTransport: pooled easy handles (connection reuse), redirects by
// hand with Authorization dropped across origins, connect + stall timeouts.
#include <curl/curl.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "hub/url.h"
#include "hub/url_policy.h"
#include "hubload/reasons.h"
#include "hubload/transport.h"
#include "util/text.h"

#ifndef HUBLOAD_VERSION
#define HUBLOAD_VERSION "0"
#endif

namespace hubload {
namespace {

constexpr size_t kMaxErrorBody = 1 << 20;

std::once_flag g_curl_init;

struct Transfer {
  const HttpRequest* req = nullptr;
  BodySink* sink = nullptr;
  CURL* curl = nullptr;
  HttpResponse resp;
  bool started = false;     // OnResponseStart called (2xx with sink)
  bool streaming = false;   // body goes to sink
  bool sink_aborted = false;
  bool redirect = false;    // this response is a redirect we will follow
  int follow_status = 0;
  // Upload state
  int body_fd = -1;
  uint64_t body_left = 0;
  uint64_t body_pos = 0;
};

size_t HeaderCb(char* buf, size_t size, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  size_t len = size * n;
  std::string_view line(buf, len);
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
  if (line.substr(0, 5) == "HTTP/") {
    t->resp.headers.Clear();  // a new response (after 100-continue or a redirect)
    return len;
  }
  size_t colon = line.find(':');
  if (colon == std::string_view::npos) return len;
  std::string name(line.substr(0, colon));
  std::string_view v = line.substr(colon + 1);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  t->resp.headers.Add(std::move(name), std::string(v));
  return len;
}

size_t WriteCb(char* buf, size_t size, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  size_t len = size * n;
  if (!t->started) {
    t->started = true;
    long code = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
    t->resp.status = static_cast<int>(code);
    bool is_redirect = (code == 301 || code == 302 || code == 303 || code == 307 || code == 308) &&
                       t->req->follow_redirects && t->resp.headers.Has("Location");
    t->redirect = is_redirect;
    t->streaming = t->sink && code >= 200 && code < 300;
    if (t->streaming && !t->sink->OnResponseStart(t->resp)) {
      t->sink_aborted = true;
      return 0;
    }
  }
  if (t->redirect) return len;  // discard redirect bodies
  t->resp.body_bytes += len;
  if (t->streaming) {
    if (!t->sink->OnData(buf, len)) {
      t->sink_aborted = true;
      return 0;
    }
    return len;
  }
  if (t->resp.body.size() < kMaxErrorBody || !t->sink)
    t->resp.body.append(buf, std::min(len, t->sink ? kMaxErrorBody - t->resp.body.size() : len));
  return len;
}

size_t ReadCb(char* buf, size_t size, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  size_t want = std::min<uint64_t>(size * n, t->body_left);
  if (want == 0) return 0;
  ssize_t r = ::pread(t->body_fd, buf, want, static_cast<off_t>(t->body_pos));
  if (r <= 0) return CURL_READFUNC_ABORT;
  t->body_pos += static_cast<uint64_t>(r);
  t->body_left -= static_cast<uint64_t>(r);
  return static_cast<size_t>(r);
}

class CurlTransport : public HttpTransport {
 public:
  explicit CurlTransport(TransportOptions o) : opt_(std::move(o)) {
    std::call_once(g_curl_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    if (opt_.user_agent.empty()) opt_.user_agent = std::string("hubload/") + HUBLOAD_VERSION;
  }
  ~CurlTransport() override {
    for (CURL* c : pool_) curl_easy_cleanup(c);
  }

  Result<HttpResponse> Send(const HttpRequest& req, BodySink* sink) override {
    CURL* c = Take();
    auto r = SendWith(c, req, sink);
    Give(c);
    return r;
  }

 private:
  CURL* Take() {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!pool_.empty()) {
        CURL* c = pool_.back();
        pool_.pop_back();
        return c;
      }
    }
    return curl_easy_init();
  }
  void Give(CURL* c) {
    std::lock_guard<std::mutex> l(mu_);
    if (pool_.size() < 64) pool_.push_back(c);
    else curl_easy_cleanup(c);
  }

  Result<HttpResponse> SendWith(CURL* c, const HttpRequest& req0, BodySink* sink) {
    // Issue 19: only http(s) is ever handed to libcurl; no header value may
    // carry CR/LF/NUL (libcurl would send it raw: header injection).
    HUBLOAD_RETURN_IF_ERROR(hub_internal::CheckHttpUrl(req0.url, "request URL"));
    HUBLOAD_RETURN_IF_ERROR(hub_internal::CheckHeader("User-Agent", opt_.user_agent));
    for (const auto& [k, v] : req0.headers) HUBLOAD_RETURN_IF_ERROR(hub_internal::CheckHeader(k, v));
    HttpRequest req = req0;
    std::string origin0 = UrlOrigin(req.url);
    int redirects = 0;
    while (true) {
      Transfer t;
      t.req = &req;
      t.sink = sink;
      t.curl = c;
      auto st = Perform(c, req, &t);
      if (!st.ok()) return st;
      t.resp.redirects = redirects;
      if (!t.redirect) {
        t.resp.effective_url = RedactUrl(req.url);
        return std::move(t.resp);
      }
      if (++redirects > opt_.max_redirects) {
        Status s(Code::kNetwork, "too many redirects (more than " + std::to_string(opt_.max_redirects) +
                                     ") starting at " + RedactUrl(req0.url), reason::kTooManyRedirects);
        s.mutable_context().url = RedactUrl(req0.url);
        return s;
      }
      std::string next = ResolveUrl(req.url, *t.resp.headers.Get("Location"));
      HUBLOAD_RETURN_IF_ERROR(hub_internal::CheckRedirect(req.url, next, opt_.allow_https_to_http_redirects));
      if (UrlOrigin(next) != UrlOrigin(req.url)) {
        // B06: credentials never follow a redirect to another origin.
        auto& h = req.headers;
        h.erase(std::remove_if(h.begin(), h.end(),
                               [](const auto& kv) {
                                 return util::EqualsIgnoreCase(kv.first, "Authorization") ||
                                        util::EqualsIgnoreCase(kv.first, "Cookie");
                               }),
                h.end());
      }
      int code = t.resp.status;
      if (code == 303 || ((code == 301 || code == 302) && req.method == "POST")) {
        if (req.method != "HEAD") req.method = "GET";
        req.body.clear();
        req.body_file.reset();
      }
      req.url = next;
    }
  }

  Status Perform(CURL* c, const HttpRequest& req, Transfer* t) {
    curl_easy_reset(c);  // keeps the connection cache
    curl_easy_setopt(c, CURLOPT_URL, req.url.c_str());
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    // Belt and braces under CheckHttpUrl/CheckRedirect: libcurl itself speaks
    // nothing but http(s) on this handle (file://, ftp://, gopher://, dict://...).
#if LIBCURL_VERSION_NUM >= 0x075500  // 7.85.0
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(c, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(c, CURLOPT_USERAGENT, opt_.user_agent.c_str());
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(opt_.connect_timeout_s * 1000));
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, static_cast<long>(opt_.low_speed_limit_bytes));
    double stall_s = req.stall_timeout_s > 0 ? req.stall_timeout_s : opt_.low_speed_time_s;
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, std::max(1L, static_cast<long>(stall_s + 0.5)));
    if (req.timeout_s > 0) curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(req.timeout_s * 1000));
    curl_easy_setopt(c, CURLOPT_HTTP_VERSION, opt_.http2 ? CURL_HTTP_VERSION_2TLS : CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(c, CURLOPT_BUFFERSIZE, static_cast<long>(std::min<size_t>(opt_.buffer_bytes, CURL_MAX_READ_SIZE)));
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, HeaderCb);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, t);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, WriteCb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, t);
    struct curl_slist* hl = nullptr;
    for (const auto& [k, v] : req.headers) hl = curl_slist_append(hl, (k + ": " + v).c_str());
    hl = curl_slist_append(hl, "Expect:");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    bool has_body = req.body_file.has_value() || !req.body.empty() || req.method == "POST" || req.method == "PUT";
    if (req.method == "HEAD") {
      curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (req.method == "GET") {
      curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    } else if (has_body) {
      if (req.body_file) {
        t->body_fd = ::open(req.body_file->path.c_str(), O_RDONLY | O_CLOEXEC);
        if (t->body_fd < 0) {
          curl_slist_free_all(hl);
          return Status(Code::kInvalidArgument, "cannot open request body file " + req.body_file->path + ": " +
                                                    std::strerror(errno), reason::kBodyFile);
        }
        t->body_pos = req.body_file->offset;
        t->body_left = req.body_file->length;
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, ReadCb);
        curl_easy_setopt(c, CURLOPT_READDATA, t);
        curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(req.body_file->length));
      } else {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, req.body.data());
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
      }
      curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    } else {
      curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    }
    CURLcode rc = curl_easy_perform(c);
    curl_slist_free_all(hl);
    if (t->body_fd >= 0) ::close(t->body_fd);
    if (!t->started) {  // no body at all (HEAD, empty body): status still needed
      long code = 0;
      curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
      t->resp.status = static_cast<int>(code);
      t->redirect = (code == 301 || code == 302 || code == 303 || code == 307 || code == 308) &&
                    req.follow_redirects && t->resp.headers.Has("Location");
      if (rc == CURLE_OK && t->sink && code >= 200 && code < 300 && !t->sink->OnResponseStart(t->resp)) {
        t->sink_aborted = true;
      }
    }
    std::string url = RedactUrl(req.url);
    if (t->sink_aborted) {
      Status s(Code::kCancelled, "transfer of " + url + " stopped by the receiver", reason::kSinkAborted);
      s.mutable_context().url = url;
      s.mutable_context().http_status = t->resp.status;
      return s;
    }
    if (rc != CURLE_OK) {
      std::string_view why = reason::kNetwork;
      if (rc == CURLE_OPERATION_TIMEDOUT) why = t->started ? reason::kStalled : reason::kTimeout;
      else if (rc == CURLE_COULDNT_CONNECT) why = reason::kConnectFailed;
      else if (rc == CURLE_COULDNT_RESOLVE_HOST) why = reason::kDnsFailed;
      else if (rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR) why = reason::kConnectionLost;
      std::string what = curl_easy_strerror(rc);
      if (rc == CURLE_OPERATION_TIMEDOUT) {
        // Name the limit that was hit (HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT in the CLI).
        double limit = t->started ? (req.stall_timeout_s > 0 ? req.stall_timeout_s : opt_.low_speed_time_s)
                                  : (req.timeout_s > 0 ? req.timeout_s : opt_.connect_timeout_s);
        char buf[64];
        std::snprintf(buf, sizeof buf, " after %g s", limit);
        what += buf;
      }
      Status s(Code::kNetwork, what + " (" + req.method + " " + url + ")", why);
      s.mutable_context().url = url;
      s.mutable_context().http_status = t->resp.status;
      return s;
    }
    return Status::Ok();
  }

  TransportOptions opt_;
  std::mutex mu_;
  std::vector<CURL*> pool_;
};

}  // namespace

std::shared_ptr<HttpTransport> MakeCurlTransport(const TransportOptions& options) {
  return std::make_shared<CurlTransport>(options);
}

}  // namespace hubload
