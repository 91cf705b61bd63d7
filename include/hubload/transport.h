// hubload/transport.h: the HTTP seam under the Hub client.
//
// A small interface (HttpTransport) so that the retry policy, the Hub client
// and their tests do not depend on libcurl. Two implementations ship:
//  - MakeCurlTransport(): libcurl, connection reuse (a pool of easy handles
//    sharing one connection cache), HTTP/2 where the server offers it, connect
//    and low-speed (stall) timeouts on every request, redirects followed by hand
//    so that `Authorization` is dropped whenever the host (or scheme/port)
//    changes (field failure B06), user agent `hubload/<version>`.
//  - MakeRetryingTransport(): exponential backoff with jitter on connection
//    errors, 408, 429 (honouring `RateLimit` and `Retry-After`; every worker
//    pauses together, see RetryPolicy::max_rate_limit_wait_s) and 5xx,
//    bounded in count and in total time (huggingface_hub utils/_http.py:
//    _http_backoff_base).
//
// Non-2xx answers are NOT errors at this layer: Send() returns the response and
// the caller classifies it (hub/ maps X-Error-Code and status to Code values).
// Send() fails only when no complete response could be obtained: Code::kNetwork
// (connect, DNS, TLS, timeout, stall, too many redirects), Code::kCancelled
// (the sink returned false), Code::kInvalidArgument (malformed URL or body file,
// a URL that is not http(s) — reason "UnsupportedScheme" —, a header name or
// value with CR, LF or NUL — reason "BadHeaderValue", the value never shown),
// Code::kUnsupported (a redirect to a scheme other than http(s), reason
// "UnsupportedScheme", or from https to http unless
// TransportOptions::allow_https_to_http_redirects, reason "InsecureRedirect";
// the refused URL is never opened). libcurl is restricted to http and https
// (CURLOPT_PROTOCOLS_STR / CURLOPT_REDIR_PROTOCOLS_STR) on every handle.
// Error messages and contexts carry URLs passed through RedactUrl(): never a
// token, a userinfo password or a presigned query string.
//
// Thread safety: every HttpTransport implementation shipped here may be used
// from many threads at once (Send is re-entrant). Request/response are values.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hubload/status.h"

namespace hubload {

/// HTTP header list with case-insensitive lookup (RFC 9110 field names).
class HttpHeaders {
 public:
  /// Appends a field; repeated names are kept in order.
  void Add(std::string name, std::string value);
  /// Replaces every field named `name` (case-insensitive) with one value.
  void Set(const std::string& name, std::string value);
  /// Removes every field named `name` (case-insensitive).
  void Remove(const std::string& name);
  /// Value of the first field named `name` (case-insensitive), or nullopt.
  std::optional<std::string> Get(std::string_view name) const;
  /// True when a field named `name` is present.
  bool Has(std::string_view name) const { return Get(name).has_value(); }
  const std::vector<std::pair<std::string, std::string>>& items() const { return items_; }
  void Clear() { items_.clear(); }

 private:
  std::vector<std::pair<std::string, std::string>> items_;
};

/// Request body read from a file region: re-readable, so a retried or
/// redirected upload sends the same bytes again (uploads of large LFS objects).
struct FileBody {
  std::string path;     // local file
  uint64_t offset = 0;  // bytes from the start of the file
  uint64_t length = 0;  // bytes to send
};

class RetryBudget;

struct HttpRequest {
  std::string method = "GET";  // GET, HEAD, POST, PUT, ...
  /// Absolute http(s) URL, already percent-encoded (hub/ builds it).
  std::string url;
  /// Request header fields in order. `Authorization` here is sent only to the
  /// host of `url`; redirects to any other scheme/host/port drop it.
  std::vector<std::pair<std::string, std::string>> headers;
  /// In-memory body (POST/PUT). Ignored when `body_file` is set.
  std::string body;
  /// Body streamed from a file region instead of `body`.
  std::optional<FileBody> body_file;
  /// Follow 301/302/303/307/308 (303 turns into GET without body). When false
  /// the 3xx response itself is returned (huggingface_hub HEAD probe style).
  bool follow_redirects = true;
  /// Whole-request limit in seconds, 0 = none (only the connect and stall
  /// timeouts of TransportOptions apply). Use for small API calls.
  double timeout_s = 0;
  /// Stall limit of this request in seconds: a transfer that receives no byte
  /// for this long fails with Code::kNetwork reason "Stalled" (huggingface_hub
  /// HF_HUB_DOWNLOAD_TIMEOUT). 0 = TransportOptions::low_speed_time_s.
  double stall_timeout_s = 0;
  /// Retries of this request by MakeRetryingTransport: -1 = the policy's
  /// max_retries, 0 = never retried (a metadata call the cache can answer
  /// instead: huggingface_hub falls back at once). Other transports ignore it.
  int max_retries = -1;
  /// Retry allowance shared with other requests (the attempts and resumes of
  /// one file's download): MakeRetryingTransport draws this request's retries
  /// from it instead of from a fresh allowance per Send. Null = a fresh one.
  std::shared_ptr<RetryBudget> budget;
  /// Called by MakeRetryingTransport on the sending thread just before it
  /// sleeps to retry this request, with the HTTP status that caused the retry
  /// (429, 503, ...) or 0 for a connection error. May be null. The download
  /// scheduler uses it to see throttling.
  std::function<void(int status)> on_retry;
};

struct HttpResponse {
  int status = 0;           // final HTTP status code
  HttpHeaders headers;      // header fields of the final response
  /// Body, when it was not streamed into a BodySink (see BodySink) — for
  /// non-2xx answers with a sink, the error body (first 1 MiB) lands here.
  std::string body;
  /// URL of the final response after redirects (redacted: no query string).
  std::string effective_url;
  /// Body bytes received for the final response (streamed or not).
  uint64_t body_bytes = 0;
  /// Number of redirects followed.
  int redirects = 0;
};

/// Receives a streamed response body. Calls come from the thread running Send.
class BodySink {
 public:
  virtual ~BodySink() = default;
  /// Called once with status + headers of the final 2xx response before any
  /// data. Return false to abort (Send then returns Code::kCancelled). Not
  /// called for non-2xx answers: their body goes to HttpResponse::body.
  virtual bool OnResponseStart(const HttpResponse& head) { return true; }
  /// Called with consecutive body chunks (any size). Return false to abort the
  /// transfer (Send returns Code::kCancelled with reason "SinkAborted").
  virtual bool OnData(const char* data, size_t n) = 0;
};

class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  /// Performs `req`. With `sink` == nullptr the body is returned in
  /// HttpResponse::body; otherwise a 2xx body is streamed to `sink`.
  /// Returns the final response (any status) or an error as described in the
  /// header comment. Thread-safe.
  virtual Result<HttpResponse> Send(const HttpRequest& req, BodySink* sink) = 0;
};

struct TransportOptions {
  /// TCP+TLS connect limit per attempt, seconds.
  double connect_timeout_s = 10;
  /// A transfer slower than `low_speed_limit_bytes` per second for this many
  /// seconds is aborted as stalled (Code::kNetwork, reason "Stalled"). B19.
  double low_speed_time_s = 30;
  uint64_t low_speed_limit_bytes = 1;
  /// Most redirects followed per request.
  int max_redirects = 10;
  /// User-Agent header; default "hubload/<version>".
  std::string user_agent;
  /// Negotiate HTTP/2 over TLS (ALPN) when the server offers it; h2c is never
  /// attempted on plain http.
  bool http2 = true;
  /// Follow a redirect from https to plain http. Off by default (issue 19);
  /// the Hub client turns it on only when its endpoint itself is http.
  bool allow_https_to_http_redirects = false;
  /// Receive buffer per transfer handed to libcurl, bytes (≥ 1 MiB writes are
  /// what performance.md recommends for the cache write path).
  size_t buffer_bytes = 1 << 20;
};

/// libcurl transport; see the header comment. Never fails to construct (curl
/// errors surface per request as Code::kNetwork).
std::shared_ptr<HttpTransport> MakeCurlTransport(const TransportOptions& options = {});

struct RetryPolicy {
  /// Retries after the first attempt (0 disables retrying).
  int max_retries = 5;
  /// First backoff; doubled per retry up to max_backoff_s (huggingface_hub
  /// sleeps 1, 2, 4, 8, 8 s). Seconds.
  double initial_backoff_s = 1.0;
  double max_backoff_s = 8.0;
  /// Random extra delay, uniform in [0, jitter_fraction × backoff].
  double jitter_fraction = 0.25;
  /// No retry is started once this much time (seconds) has been spent in
  /// failed attempts and backoff sleeps (of one Send, or of every request
  /// sharing a RetryBudget), nor one whose sleep would end after it.
  double max_total_s = 60.0;
  /// A refused connection or a DNS failure (reasons kConnectFailed,
  /// kDnsFailed: the host is down or does not exist) is retried at most this
  /// many times, with backoff from unreachable_backoff_s doubling, and only
  /// while the time spent on such failures stays within
  /// max_unreachable_total_s (issue 19: not the full budget; huggingface_hub
  /// does not retry a refused metadata call at all). These retries count
  /// against max_retries too. The first such retry is logged as a warning.
  int max_unreachable_retries = 3;
  double unreachable_backoff_s = 0.5;
  double max_unreachable_total_s = 10.0;
  /// The wait a 429/503 announces replaces the computed backoff, read as
  /// huggingface_hub http_backoff does: `RateLimit: "<group>";r=0;t=<s>`
  /// first, then `Retry-After` as delay-seconds or as an HTTP-date (+1 s:
  /// dates have whole-second resolution). A 503's wait counts against
  /// max_total_s.
  bool honour_retry_after = true;
  /// 429 (field failure B38): the answer closes a gate shared by every
  /// request of this transport to the same rate-limit group (origin plus
  /// "resolvers" for /resolve/ and /raw/ paths, "api" for /api/, the origin
  /// alone otherwise), so all workers pause together until the reset instead
  /// of each burning its retries; a request that meets a closed gate waits
  /// without taking a retry. A 429 takes one retry but no time from
  /// max_total_s. When the announced wait is longer than this many seconds
  /// the request fails at once (no sleep), and so does every request to the
  /// group until the reset: the 429 answer is returned, which the Hub client
  /// turns into Code::kRateLimited naming the wait, the group and its quota.
  /// A request with max_retries == 0 never waits at a closed gate either.
  double max_rate_limit_wait_s = 60.0;
  /// Sleep hook, seconds; null = std::this_thread::sleep_for. Tests record it.
  std::function<void(double)> sleep;
};

/// Retries shared by several Sends through HttpRequest::budget (one file's
/// attempts and resumes: issue 19, the budget no longer restarts per resume).
/// Counts retries and the time spent failing, per RetryPolicy. Thread-safe.
class RetryBudget {
 public:
  /// Takes one retry when `policy` (and the request's `max_retries`, -1 =
  /// the policy's) still allows one after `failed_s` more seconds of failed
  /// attempt and before a sleep of `sleep_s`; `unreachable` selects the
  /// refused-connection limits. False (and exhausted() from then on) otherwise.
  bool Take(const RetryPolicy& policy, int max_retries, bool unreachable, double failed_s, double sleep_s);
  /// True once a retry was refused for lack of budget.
  bool exhausted() const;
  /// Retries taken so far (all kinds) / for refused connections.
  int retries() const;
  int unreachable_retries() const;

 private:
  mutable std::mutex mu_;
  int retries_ = 0, unreachable_ = 0;
  double failing_s_ = 0, unreachable_s_ = 0;
  bool exhausted_ = false;
};

/// True for statuses the policy retries: 408, 429, 500, 502, 503, 504.
bool IsRetryableHttpStatus(int status);

/// Wraps `inner` with `policy`. A request whose body was already partly
/// delivered to a sink is not retried (resuming is the caller's job: hub/
/// continues with Range); everything else that failed with Code::kNetwork or a
/// retryable status is retried. After the last attempt the last response (for
/// a status) or error is returned unchanged. Thread-safe if `inner` is.
std::shared_ptr<HttpTransport> MakeRetryingTransport(std::shared_ptr<HttpTransport> inner, RetryPolicy policy);

/// URL safe to log or put in an error: userinfo and the query string removed
/// ("http://u:pw@h/p?X-Amz-Signature=s" → "http://h/p"). Never fails.
std::string RedactUrl(std::string_view url);

}  // namespace hubload
