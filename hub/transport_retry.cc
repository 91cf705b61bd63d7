// Retrying HttpTransport: exponential backoff + jitter, Retry-After, bounded.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>

#include "hub/http_parse.h"
#include "hubload/reasons.h"
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

std::optional<double> RetryAfterOf(const HttpHeaders& h) {
  auto v = h.Get("Retry-After");
  if (!v) return std::nullopt;
  return hub_internal::RetryAfterSeconds(*v);  // HTTP-date: nullopt, the computed backoff applies
}

class RetryingTransport : public HttpTransport {
 public:
  RetryingTransport(std::shared_ptr<HttpTransport> inner, RetryPolicy p) : inner_(std::move(inner)), p_(std::move(p)) {}

  Result<HttpResponse> Send(const HttpRequest& req, BodySink* sink) override {
    // A fresh allowance per Send unless the caller shares one (a file's resumes).
    std::shared_ptr<RetryBudget> budget = req.budget ? req.budget : std::make_shared<RetryBudget>();
    double backoff = p_.initial_backoff_s;
    double unreachable_backoff = p_.unreachable_backoff_s;
    thread_local std::mt19937_64 rng{std::random_device{}()};
    for (int attempt = 0;; ++attempt) {
      std::optional<TrackingSink> tracking;
      if (sink) tracking.emplace(sink);
      auto t0 = std::chrono::steady_clock::now();
      auto r = inner_->Send(req, sink ? &*tracking : nullptr);
      double failed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      bool retryable = false;
      std::optional<double> retry_after;
      if (r.ok()) {
        retryable = IsRetryableHttpStatus(r->status);
        if (retryable && p_.honour_retry_after && (r->status == 429 || r->status == 503))
          retry_after = RetryAfterOf(r->headers);
      } else {
        retryable = r.status().code() == Code::kNetwork;
      }
      if (tracking && tracking->delivered()) retryable = false;  // caller resumes with Range
      if (!retryable) return r;
      const bool unreachable =
          !r.ok() && (r.status().Is(reason::kConnectFailed) || r.status().Is(reason::kDnsFailed));
      double base = unreachable ? unreachable_backoff : backoff;
      double sleep = retry_after ? *retry_after : base;
      if (!retry_after && p_.jitter_fraction > 0) {
        std::uniform_real_distribution<double> d(0, p_.jitter_fraction * base);
        sleep += d(rng);
      }
      if (!budget->Take(p_, req.max_retries, unreachable, failed_s, sleep)) return r;
      // Say so: a client retrying quietly for a minute looks hung (huggingface_hub
      // logs "Retrying in Xs [Retry n/N]" the same way). URL redacted, no token.
      // A host that refuses connections is announced once, then retried quietly.
      const int max_retries = req.max_retries >= 0 ? std::min(req.max_retries, p_.max_retries) : p_.max_retries;
      std::string what = r.ok() ? "HTTP " + std::to_string(r->status) : r.status().message();
      if (!unreachable) {
        spdlog::warn("{} {}: {}; retrying in {:.1f} s [retry {}/{}]", req.method, RedactUrl(req.url), what, sleep,
                     budget->retries(), max_retries);
      } else if (budget->unreachable_retries() == 1) {
        spdlog::warn("{} {}: {}; retrying at most {} times within {:.0f} s", req.method, RedactUrl(req.url), what,
                     std::min(p_.max_unreachable_retries, max_retries), p_.max_unreachable_total_s);
      } else {
        spdlog::debug("{} {}: {}; retry {}", req.method, RedactUrl(req.url), what, budget->unreachable_retries());
      }
      if (req.on_retry) req.on_retry(r.ok() ? r->status : 0);
      if (p_.sleep) p_.sleep(sleep);
      else std::this_thread::sleep_for(std::chrono::duration<double>(sleep));
      if (unreachable) unreachable_backoff = std::min(unreachable_backoff * 2, p_.max_backoff_s);
      else backoff = std::min(backoff * 2, p_.max_backoff_s);
    }
  }

 private:
  std::shared_ptr<HttpTransport> inner_;
  RetryPolicy p_;
};

}  // namespace

bool RetryBudget::Take(const RetryPolicy& p, int max_retries, bool unreachable, double failed_s, double sleep_s) {
  std::lock_guard<std::mutex> l(mu_);
  const int max = max_retries >= 0 ? std::min(max_retries, p.max_retries) : p.max_retries;
  failing_s_ += failed_s;
  if (unreachable) unreachable_s_ += failed_s;
  bool ok = retries_ < max && failing_s_ + sleep_s <= p.max_total_s;
  if (unreachable)
    ok = ok && unreachable_ < p.max_unreachable_retries && unreachable_s_ + sleep_s <= p.max_unreachable_total_s;
  if (!ok) {
    exhausted_ = true;
    return false;
  }
  ++retries_;
  failing_s_ += sleep_s;
  if (unreachable) {
    ++unreachable_;
    unreachable_s_ += sleep_s;
  }
  return true;
}

bool RetryBudget::exhausted() const {
  std::lock_guard<std::mutex> l(mu_);
  return exhausted_;
}

int RetryBudget::retries() const {
  std::lock_guard<std::mutex> l(mu_);
  return retries_;
}

int RetryBudget::unreachable_retries() const {
  std::lock_guard<std::mutex> l(mu_);
  return unreachable_;
}

bool IsRetryableHttpStatus(int s) { return s == 408 || s == 429 || s == 500 || s == 502 || s == 503 || s == 504; }

std::shared_ptr<HttpTransport> MakeRetryingTransport(std::shared_ptr<HttpTransport> inner, RetryPolicy policy) {
  return std::make_shared<RetryingTransport>(std::move(inner), std::move(policy));
}

}  // namespace hubload
