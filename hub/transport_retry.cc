// Retrying HttpTransport: exponential backoff + jitter, Retry-After, bounded.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <random>
#include <thread>

#include "hub/http_parse.h"
#include "hub/rate_gate.h"
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

std::optional<double> AnnouncedWaitOf(const HttpHeaders& h) {
  return hub_internal::AnnouncedWait(h, static_cast<int64_t>(std::time(nullptr)));
}

void Sleep(const RetryPolicy& p, double s) {
  if (p.sleep) p.sleep(s);
  else std::this_thread::sleep_for(std::chrono::duration<double>(s));
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
    // B38: the end of this Send's own pause after a 429 (it need not wait for
    // it again at the gate).
    hub_internal::RateGate::Clock::time_point waited_until{};
    for (int attempt = 0;; ++attempt) {
      {
        // Every request to a rate-limited group waits for its reset; one that
        // cannot wait that long (or may not be retried at all) gets the 429.
        HttpResponse closed;
        double gate = gate_.Remaining(req.url, waited_until, &closed);
        if (gate > 0 && (gate > p_.max_rate_limit_wait_s || req.max_retries == 0)) return closed;
        if (gate > 0) {
          spdlog::debug("{} {}: waiting {:.1f} s for the rate limit to reset", req.method, RedactUrl(req.url), gate);
          waited_until = hub_internal::RateGate::Clock::now() +
                         std::chrono::duration_cast<hub_internal::RateGate::Clock::duration>(
                             std::chrono::duration<double>(gate));
          Sleep(p_, gate);
        }
      }
      std::optional<TrackingSink> tracking;
      if (sink) tracking.emplace(sink);
      auto t0 = std::chrono::steady_clock::now();
      auto r = inner_->Send(req, sink ? &*tracking : nullptr);
      double failed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      bool retryable = false;
      std::optional<double> retry_after;
      const bool rate_limited = r.ok() && r->status == 429;
      if (r.ok()) {
        retryable = IsRetryableHttpStatus(r->status);
        if (retryable && p_.honour_retry_after && (r->status == 429 || r->status == 503))
          retry_after = AnnouncedWaitOf(r->headers);
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
      if (rate_limited) {
        // B38: the whole group pauses until the reset (the computed backoff
        // when the answer names no wait); a wait longer than the policy
        // allows fails at once, naming it (hub/errors.cc).
        if (retry_after && *retry_after > p_.max_rate_limit_wait_s) {
          gate_.Close(req.url, *retry_after, *r);
          spdlog::warn("{} {}: HTTP 429, the rate limit resets in {:.0f} s, longer than the {:.0f} s this client "
                       "waits; giving up",
                       req.method, RedactUrl(req.url), *retry_after, p_.max_rate_limit_wait_s);
          return r;
        }
        waited_until = gate_.Close(req.url, sleep, *r);
        const auto left = waited_until - hub_internal::RateGate::Clock::now();
        sleep = std::max(sleep, std::chrono::duration<double>(left).count());
      }
      // A rate-limit wait takes a retry but not from the time budget: it is
      // bounded by max_rate_limit_wait_s instead.
      if (!budget->Take(p_, req.max_retries, unreachable, failed_s, rate_limited ? 0.0 : sleep)) return r;
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
      Sleep(p_, sleep);
      if (unreachable) unreachable_backoff = std::min(unreachable_backoff * 2, p_.max_backoff_s);
      else backoff = std::min(backoff * 2, p_.max_backoff_s);
    }
  }

 private:
  std::shared_ptr<HttpTransport> inner_;
  RetryPolicy p_;
  hub_internal::RateGate gate_;
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
