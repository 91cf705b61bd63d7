// Retrying HttpTransport: exponential backoff + jitter, Retry-After, bounded.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>

#include "hubload/transport.h"

namespace hubload {
namespace {

// Records whether any body byte reached the caller's sink (then no retry).
class TrackingSink : public BodySink {
 public:
  explicit TrackingSink(BodySink* inner) : inner_(inner) {}
  bool OnResponseStart(const HttpResponse& head) override { return inner_->OnResponseStart(head); }
  bool OnData(const char* d, size_t n) override {
    delivered_ = true;
    return inner_->OnData(d, n);
  }
  bool delivered() const { return delivered_; }

 private:
  BodySink* inner_;
  bool delivered_ = false;
};

std::optional<double> RetryAfterSeconds(const HttpHeaders& h) {
  auto v = h.Get("Retry-After");
  if (!v || v->empty()) return std::nullopt;
  for (char c : *v)
    if (c < '0' || c > '9') return std::nullopt;  // HTTP-date: use the computed backoff
  return std::strtod(v->c_str(), nullptr);
}

class RetryingTransport : public HttpTransport {
 public:
  RetryingTransport(std::shared_ptr<HttpTransport> inner, RetryPolicy p) : inner_(std::move(inner)), p_(std::move(p)) {}

  Result<HttpResponse> Send(const HttpRequest& req, BodySink* sink) override {
    auto start = std::chrono::steady_clock::now();
    double backoff = p_.initial_backoff_s;
    double hooked_sleep = 0;  // time "slept" through a test hook (not on the clock)
    thread_local std::mt19937_64 rng{std::random_device{}()};
    for (int attempt = 0;; ++attempt) {
      std::optional<TrackingSink> tracking;
      if (sink) tracking.emplace(sink);
      auto r = inner_->Send(req, sink ? &*tracking : nullptr);
      bool retryable = false;
      std::optional<double> retry_after;
      if (r.ok()) {
        retryable = IsRetryableHttpStatus(r->status);
        if (retryable && p_.honour_retry_after && (r->status == 429 || r->status == 503))
          retry_after = RetryAfterSeconds(r->headers);
      } else {
        retryable = r.status().code() == Code::kNetwork;
      }
      if (tracking && tracking->delivered()) retryable = false;  // caller resumes with Range
      int max_retries = req.max_retries >= 0 ? std::min(req.max_retries, p_.max_retries) : p_.max_retries;
      if (!retryable || attempt >= max_retries) return r;
      double sleep = retry_after ? *retry_after : backoff;
      if (!retry_after && p_.jitter_fraction > 0) {
        std::uniform_real_distribution<double> d(0, p_.jitter_fraction * backoff);
        sleep += d(rng);
      }
      double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() + hooked_sleep;
      if (elapsed + sleep > p_.max_total_s) return r;
      // Say so: a client retrying quietly for a minute looks hung (huggingface_hub
      // logs "Retrying in Xs [Retry n/N]" the same way). URL redacted, no token.
      spdlog::warn("{} {}: {}; retrying in {:.1f} s [retry {}/{}]", req.method, RedactUrl(req.url),
                   r.ok() ? "HTTP " + std::to_string(r->status) : r.status().message(), sleep, attempt + 1,
                   max_retries);
      if (req.on_retry) req.on_retry(r.ok() ? r->status : 0);
      if (p_.sleep) {
        p_.sleep(sleep);
        hooked_sleep += sleep;
      }
      else std::this_thread::sleep_for(std::chrono::duration<double>(sleep));
      backoff = std::min(backoff * 2, p_.max_backoff_s);
    }
  }

 private:
  std::shared_ptr<HttpTransport> inner_;
  RetryPolicy p_;
};

}  // namespace

bool IsRetryableHttpStatus(int s) { return s == 408 || s == 429 || s == 500 || s == 502 || s == 503 || s == 504; }

std::shared_ptr<HttpTransport> MakeRetryingTransport(std::shared_ptr<HttpTransport> inner, RetryPolicy policy) {
  return std::make_shared<RetryingTransport>(std::move(inner), std::move(policy));
}

}  // namespace hubload
