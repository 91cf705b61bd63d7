// hubload/server_faults.h: the fault switches of `hubload serve` (a test
// double of the Hub; see hubload/server.h). Part of the `hubload_server`
// target only, never of the umbrella `hubload::hubload` consumers link.
//
// Each switch is also a `hubload serve --fault-...` flag (README, "hubload
// serve"). The behaviour each one produces on the wire is the one described in
// ../shared/docs/field-failures.md for the item named in its comment.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "hubload/cache.h"

namespace hubload::server {

/// Fault switches injected by the server. Every switch can be set before
/// Start (in ServerOptions::faults) and changed on a running server through
/// Server::faults(). A `path_substring` matches when it occurs in the request
/// target's path (percent-decoded, query excluded, path prefix included); empty
/// matches every path. Rules with a count apply to the next `count` matching
/// requests/responses and then expire; count < 0 means "forever".
///
/// Thread safety: all methods are safe to call concurrently with each other
/// and with a running server. Copying copies the current switch values (and
/// resets the rate-limit windows and byte budgets).
class Faults {
 public:
  Faults() = default;
  Faults(const Faults& other);
  Faults& operator=(const Faults& other);

  /// Answers the next `count` requests whose path contains `path_substring`
  /// with `status` (e.g. 500, 503, 429) and a JSON body {"error": ...};
  /// when retry_after_s >= 0 the answer carries `Retry-After: retry_after_s`.
  void SetStatusForNext(std::string path_substring, int status, int count, int retry_after_s = -1);

  /// For the next `count` responses with a body (HEAD and 304 answers do not
  /// count) to matching paths, closes the connection abruptly after
  /// `after_bytes` bytes of the body (headers are sent whole). An LFS file's
  /// body comes from the CDN listener, whose paths are
  /// "/<repo folder>/<blob>", e.g. match "models--org--name".
  void SetDropAfterBytes(std::string path_substring, uint64_t after_bytes, int count);

  /// For the next `count` responses with a body to matching paths, sends
  /// `after_bytes` bytes of the body, then nothing for `stall_ms`
  /// milliseconds while keeping the connection open (a proxy or CDN that
  /// hangs mid-transfer: B19 b), then the rest of the body. The stall ends
  /// early when the client closes the connection or the server stops.
  /// Paths match as in SetDropAfterBytes (LFS bodies: "/<repo folder>/<blob>").
  void SetStallAfterBytes(std::string path_substring, uint64_t after_bytes, int stall_ms, int count);

  /// Sleeps `ms` milliseconds before answering every request (0 = off).
  void SetLatencyMs(int ms);

  /// Caps every connection's body throughput at `bytes_per_s` (0 = off).
  void SetBandwidthBytesPerSec(uint64_t bytes_per_s);

  /// Caps the SUM of all connections' body throughput at `bytes_per_s`
  /// (0 = off): one link shared by every connection (a home line, a node's
  /// uplink; issue 13). Connections take turns in pieces of at most 64 KiB, so
  /// each gets an equal share while several are busy. Combines with the
  /// per-connection cap (both apply).
  void SetTotalBandwidthBytesPerSec(uint64_t bytes_per_s);

  /// When true, `Range` headers are ignored: 200 with the full body.
  void SetIgnoreRange(bool on);

  /// When true, responses carry neither Content-Length nor Content-Range; the
  /// body is close-delimited (`Connection: close`, connection closed after it).
  void SetStripContentLength(bool on);

  /// After the `after_requests`-th request (counted from now) whose path
  /// contains `path_substring` has been answered, replaces `path_in_repo` of
  /// repo `repo_id` on `branch` with `new_content` (a new commit, so the file
  /// gets a new etag and the branch a new head; older snapshots stay).
  /// Use it to test "file changed between HEAD and GET".
  void ReplaceFileAfter(std::string path_substring, int after_requests, std::string repo_id,
                        std::string path_in_repo, std::string new_content,
                        RepoType repo_type = RepoType::kModel, std::string branch = "main");

  // ---- rate limits (B38) ----------------------------------------------------
  /// Hint headers sent with a rate-limit 429 (bit set).
  static constexpr unsigned kRateLimitHeaders = 1;   ///< RateLimit + RateLimit-Policy (IETF draft, as the Hub)
  static constexpr unsigned kRetryAfterSeconds = 2;  ///< Retry-After: <delay-seconds>
  static constexpr unsigned kRetryAfterDate = 4;     ///< Retry-After: <IMF-fixdate> (RFC 9110 HTTP-date)

  /// Counts requests of endpoint group `group` in a fixed window of
  /// `window_s` seconds (the window starts with the first request of the
  /// group, a new one with the first request after it ended). The first
  /// `quota` requests of a window are served, with
  /// `RateLimit: "<group>";r=<left>;t=<s to reset>` when kRateLimitHeaders is
  /// in `hints`; later ones answer 429, body {"error":"rate limited"}, with the
  /// headers in `hints`: `RateLimit: "<group>";r=0;t=<s>`,
  /// `RateLimit-Policy: "fixed window";"<group>";q=<quota>;w=<window_s>`,
  /// `Retry-After: <s>` and/or `Retry-After: <HTTP-date>` (both -> the date
  /// form wins). t counts whole seconds, rounded up. Groups: "resolvers"
  /// (/resolve/ and /raw/ on the hub listener), "api" (every other hub route,
  /// /api/, LFS batch and upload URLs), "cdn" (the CDN listener). A refused
  /// request does not count towards the quota. Setting a group again replaces
  /// its rule and starts a new window; quota < 0 removes the rule.
  void SetRateLimit(std::string group, int quota, int window_s, unsigned hints = kRateLimitHeaders);

  // ---- redirects (B46) ------------------------------------------------------
  enum class RedirectForm {
    kPathOnly,          ///< `Location: /to/rest` (the Hub's rename/case redirect)
    kRelative,          ///< `Location: ../../to/rest` (relative to the request path, RFC 3986 §5.2)
    kAbsolute,          ///< `Location: http://<host the client used>/to/rest`
    kProtocolRelative,  ///< `Location: //<host the client used>/to/rest`
  };
  /// Answers hub requests whose path (raw, below the path prefix) starts with
  /// `from_prefix` with `status` (301, 302, 307, 308) and a Location to
  /// `to_prefix` + the rest of the path + the query, written in `form` (with
  /// the path prefix in front). No Hub headers on the redirect itself. Two
  /// rules "/a" -> "/b" and "/b" -> "/a" make a loop. `count` as above.
  void SetRedirect(std::string from_prefix, std::string to_prefix, int status = 307,
                   RedirectForm form = RedirectForm::kPathOnly, int count = -1);

  // ---- signed CDN URLs (B44) -----------------------------------------------
  /// Signed CDN and upload URLs handed out from now on expire `seconds` after
  /// they were made (0 = ServerOptions::signed_url_ttl_s). The expiry is part
  /// of the signed text (`exp=<unix s>&sig=<hmac>`); after it the CDN answers
  /// 403, Content-Type application/xml, body
  /// `<Error><Code>AccessDenied</Code><Message>Request has expired</Message>...`.
  void SetSignedUrlTtl(int seconds);
  /// Each signed CDN URL serves at most `bytes` body bytes in all requests
  /// together (0 = unlimited): the response that reaches the budget is cut
  /// there (connection closed) and every later request with that URL gets the
  /// 403 "Request has expired" answer above (a URL that expires mid-download).
  void SetSignedUrlByteBudget(uint64_t bytes);

  // ---- path prefix (B41) ---------------------------------------------------
  /// Serves the whole hub API under `prefix` ("/artifactory/api/huggingfaceml/x";
  /// "" = off): requests elsewhere get 404; URLs the server hands out
  /// (pagination links, upload actions, commit URLs, Locations) carry the
  /// prefix. The CDN listener has no prefix.
  void SetPathPrefix(std::string prefix);

  /// Removes every switch.
  void Clear();

  // ---- used by the server (also readable by tests) ----
  struct StatusRule {
    std::string path_substring;
    int status = 500;
    int remaining = 1;
    int retry_after_s = -1;
  };
  struct DropRule {
    std::string path_substring;
    uint64_t after_bytes = 0;
    int remaining = 1;
  };
  struct StallRule {
    std::string path_substring;
    uint64_t after_bytes = 0;
    int stall_ms = 0;
    int remaining = 1;
  };
  struct ReplaceRule {
    std::string path_substring;
    int remaining_requests = 1;
    std::string repo_id, path_in_repo, new_content;
    RepoType repo_type = RepoType::kModel;
    std::string branch;
  };
  struct RateLimitRule {
    std::string group;
    int quota = 0;
    int window_s = 1;
    unsigned hints = kRateLimitHeaders;
    // Window state.
    bool started = false;
    std::chrono::steady_clock::time_point window_start{};
    int used = 0;
  };
  /// One rate-limit decision: `limited` means answer 429.
  struct RateDecision {
    bool limited = false;
    std::string group;
    int quota = 0, window_s = 0, remaining = 0, reset_s = 0;
    unsigned hints = 0;
  };
  struct RedirectRule {
    std::string from_prefix, to_prefix;
    int status = 307;
    RedirectForm form = RedirectForm::kPathOnly;
    int remaining = -1;
  };
  /// Consumes one use of the first status rule matching `path`, if any.
  std::optional<StatusRule> TakeStatus(const std::string& path);
  /// Consumes one use of the first drop rule matching `path`; returns the byte
  /// count after which to drop.
  std::optional<uint64_t> TakeDrop(const std::string& path);
  /// Consumes one use of the first stall rule matching `path`, if any.
  std::optional<StallRule> TakeStall(const std::string& path);
  /// Counts one answered request to `path`; returns the replacements now due.
  std::vector<ReplaceRule> TakeDueReplacements(const std::string& path);
  /// Counts one request of `group` against its rate limit; nullopt when the
  /// group has no rule.
  std::optional<RateDecision> TakeRate(const std::string& group);
  /// Consumes one use of the first redirect rule whose from_prefix starts `raw_path`.
  std::optional<RedirectRule> TakeRedirect(const std::string& raw_path);
  /// Reserves up to `want` body bytes of signed URL `sig` under the byte
  /// budget; returns the bytes allowed (0 = the URL is used up), or `want`
  /// when no budget is set. Give back what was not sent with ReleaseBytes.
  uint64_t ReserveUrlBytes(const std::string& sig, uint64_t want);
  void ReleaseUrlBytes(const std::string& sig, uint64_t unused);
  int latency_ms() const;
  uint64_t bandwidth_bytes_per_s() const;
  uint64_t total_bandwidth_bytes_per_s() const;
  /// Blocks until `n` more body bytes fit under the total cap (returns at once
  /// when it is off, or when `stopping` becomes true while waiting).
  void ThrottleTotal(uint64_t n, const std::atomic<bool>& stopping);
  bool ignore_range() const;
  bool strip_content_length() const;
  int signed_url_ttl_s() const;
  uint64_t signed_url_byte_budget() const;
  std::string path_prefix() const;

 private:
  mutable std::mutex mu_;
  std::vector<StatusRule> status_rules_;
  std::vector<DropRule> drop_rules_;
  std::vector<StallRule> stall_rules_;
  std::vector<ReplaceRule> replace_rules_;
  std::vector<RateLimitRule> rate_rules_;
  std::vector<RedirectRule> redirect_rules_;
  int latency_ms_ = 0;
  uint64_t bandwidth_ = 0;
  uint64_t total_bandwidth_ = 0;
  /// Total cap: the time at which the link is free again (virtual clock).
  std::chrono::steady_clock::time_point link_free_at_{};
  bool ignore_range_ = false;
  bool strip_length_ = false;
  int signed_ttl_s_ = 0;
  uint64_t url_byte_budget_ = 0;
  std::map<std::string, uint64_t> url_bytes_used_;
  std::string path_prefix_;
};

}  // namespace hubload::server
