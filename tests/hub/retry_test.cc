// Retry policy over a fake transport: statuses retried, Retry-After, bounds,
// no retry after streamed bytes.
#include <gtest/gtest.h>

#include <deque>
#include <mutex>

#include "hub/errors.h"
#include "hubload/hub.h"
#include "testing/status_matchers.h"

namespace {

struct Scripted {
  Scripted(int s = 200, std::string ra = "", std::string b = "") : status(s), retry_after(std::move(ra)), body(std::move(b)) {}
  int status;  // 0 = connection refused, -1 = timeout
  std::string retry_after;
  std::string body;
};

class FakeTransport : public hubload::HttpTransport {
 public:
  explicit FakeTransport(std::deque<Scripted> s) : script_(std::move(s)) {}
  hubload::Result<hubload::HttpResponse> Send(const hubload::HttpRequest& req, hubload::BodySink* sink) override {
    std::lock_guard<std::mutex> l(mu_);
    ++calls;
    Scripted s = script_.empty() ? Scripted{} : script_.front();
    if (!script_.empty()) script_.pop_front();
    if (s.status == 0) return hubload::Status(hubload::Code::kNetwork, "connection refused", "ConnectFailed");
    if (s.status == -1) return hubload::Status(hubload::Code::kNetwork, "timed out", "Timeout");
    hubload::HttpResponse r;
    r.status = s.status;
    if (!s.retry_after.empty()) r.headers.Add("Retry-After", s.retry_after);
    if (sink && s.status < 300) {
      sink->OnResponseStart(r);
      sink->OnData(s.body.data(), s.body.size());
      if (s.body == "partial") return hubload::Status(hubload::Code::kNetwork, "connection lost", "ConnectionLost");
    } else {
      r.body = s.body;
    }
    return r;
  }
  int calls = 0;

 private:
  std::mutex mu_;
  std::deque<Scripted> script_;
};

struct Sink : hubload::BodySink {
  std::string got;
  bool OnData(const char* d, size_t n) override {
    got.append(d, n);
    return true;
  }
};

hubload::RetryPolicy Policy(std::vector<double>* sleeps) {
  hubload::RetryPolicy p;
  p.max_retries = 5;
  p.initial_backoff_s = 1;
  p.max_backoff_s = 8;
  p.jitter_fraction = 0;
  p.max_total_s = 1e9;
  p.sleep = [sleeps](double s) { sleeps->push_back(s); };
  return p;
}

}  // namespace

TEST(RetryPolicy, RetriesTransientStatusesWithExponentialBackoff) {
  auto fake = std::make_shared<FakeTransport>(std::deque<Scripted>{{500}, {502}, {503}, {504}, {200, "", "ok"}});
  std::vector<double> sleeps;
  auto t = hubload::MakeRetryingTransport(fake, Policy(&sleeps));
  auto r = t->Send({}, nullptr);
  ASSERT_OK(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "ok");
  EXPECT_EQ(fake->calls, 5);
  EXPECT_EQ(sleeps, (std::vector<double>{1, 2, 4, 8}));  // huggingface_hub: 1, 2, 4, 8, 8
}

TEST(RetryPolicy, HonoursRetryAfterOn429) {
  auto fake = std::make_shared<FakeTransport>(std::deque<Scripted>{{429, "7"}, {200}});
  std::vector<double> sleeps;
  auto r = hubload::MakeRetryingTransport(fake, Policy(&sleeps))->Send({}, nullptr);
  ASSERT_OK(r);
  EXPECT_EQ(sleeps, (std::vector<double>{7}));
}

TEST(RetryPolicy, RetriesNetworkErrorsAnd408) {
  auto fake = std::make_shared<FakeTransport>(std::deque<Scripted>{{0}, {408}, {200}});
  std::vector<double> sleeps;
  auto r = hubload::MakeRetryingTransport(fake, Policy(&sleeps))->Send({}, nullptr);
  ASSERT_OK(r);
  EXPECT_EQ(fake->calls, 3);
}

TEST(RetryPolicy, DoesNotRetryClientErrors) {
  for (int code : {400, 401, 403, 404, 416}) {
    auto fake = std::make_shared<FakeTransport>(std::deque<Scripted>{{code}, {200}});
    std::vector<double> sleeps;
    auto r = hubload::MakeRetryingTransport(fake, Policy(&sleeps))->Send({}, nullptr);
    ASSERT_OK(r);
    EXPECT_EQ(r->status, code);
    EXPECT_EQ(fake->calls, 1) << code;
  }
}

TEST(RetryPolicy, GivesUpAfterMaxRetriesWithLastAnswer) {
  auto fake = std::make_shared<FakeTransport>(std::deque<Scripted>(10, Scripted{503}));
  std::vector<double> sleeps;
  auto p = Policy(&sleeps);
  p.max_retries = 3;
  auto r = hubload::MakeRetryingTransport(fake, p)->Send({}, nullptr);
  ASSERT_OK(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(fake->calls, 4);
}

TEST(RetryPolicy, TotalTimeBudgetStopsRetrying) {
  // A timeout (a refused connection has its own shorter limits, below).
  auto fake = std::make_shared<FakeTransport>(std::deque<Scripted>(10, Scripted{-1}));
  std::vector<double> sleeps;
  auto p = Policy(&sleeps);
  p.max_total_s = 2.5;  // 1 s fits, 1 + 2 s does not
  auto r = hubload::MakeRetryingTransport(fake, p)->Send({}, nullptr);
  EXPECT_EQ(r.status().code(), hubload::Code::kNetwork);
  EXPECT_EQ(sleeps, (std::vector<double>{1}));
  EXPECT_EQ(fake->calls, 2);
}

TEST(RetryPolicy, NoRetryOnceBodyBytesReachedTheSink) {
  auto fake = std::make_shared<FakeTransport>(std::deque<Scripted>{{200, "", "partial"}, {200, "", "full"}});
  std::vector<double> sleeps;
  Sink sink;
  auto r = hubload::MakeRetryingTransport(fake, Policy(&sleeps))->Send({}, &sink);
  EXPECT_EQ(r.status().code(), hubload::Code::kNetwork);
  EXPECT_EQ(sink.got, "partial");
  EXPECT_EQ(fake->calls, 1);
}

TEST(RetryPolicy, PerRequestLimitAndRetryObserver) {
  // max_retries = 0 on the request: a refused connection is answered at once
  // (a metadata call the cache can answer instead).
  auto fake = std::make_shared<FakeTransport>(std::deque<Scripted>{{0}, {200}});
  std::vector<double> sleeps;
  hubload::HttpRequest once;
  once.max_retries = 0;
  auto r = hubload::MakeRetryingTransport(fake, Policy(&sleeps))->Send(once, nullptr);
  EXPECT_EQ(r.status().code(), hubload::Code::kNetwork);
  EXPECT_EQ(fake->calls, 1);
  EXPECT_TRUE(sleeps.empty());
  // on_retry sees the status of each answer that is retried (0 = connection error).
  auto fake2 = std::make_shared<FakeTransport>(std::deque<Scripted>{{429, "0"}, {0}, {503}, {200}});
  std::vector<int> seen;
  hubload::HttpRequest req;
  req.on_retry = [&](int status) { seen.push_back(status); };
  auto r2 = hubload::MakeRetryingTransport(fake2, Policy(&sleeps))->Send(req, nullptr);
  ASSERT_OK(r2);
  EXPECT_EQ(r2->status, 200);
  EXPECT_EQ(seen, (std::vector<int>{429, 0, 503}));
  // A per-request limit above the policy's is capped by the policy.
  auto fake3 = std::make_shared<FakeTransport>(std::deque<Scripted>(10, Scripted{503}));
  auto p = Policy(&sleeps);
  p.max_retries = 2;
  hubload::HttpRequest many;
  many.max_retries = 9;
  auto r3 = hubload::MakeRetryingTransport(fake3, p)->Send(many, nullptr);
  ASSERT_OK(r3);
  EXPECT_EQ(fake3->calls, 3);
}

TEST(RetryPolicy, JitterStaysWithinFraction) {
  auto fake = std::make_shared<FakeTransport>(std::deque<Scripted>{{500}, {500}, {200}});
  std::vector<double> sleeps;
  auto p = Policy(&sleeps);
  p.jitter_fraction = 0.5;
  ASSERT_OK(hubload::MakeRetryingTransport(fake, p)->Send({}, nullptr));
  ASSERT_EQ(sleeps.size(), 2u);
  EXPECT_GE(sleeps[0], 1.0);
  EXPECT_LE(sleeps[0], 1.5);
  EXPECT_GE(sleeps[1], 2.0);
  EXPECT_LE(sleeps[1], 3.0);
}

TEST(HttpErrors, ClassifiedByErrorCodeThenStatus) {
  hubload::ErrorContext ctx;
  ctx.repo_id = "org/m";
  ctx.revision = "main";
  ctx.file = "f.bin";
  auto with = [](std::string code, std::string msg = {}) {
    hubload::HttpHeaders h;
    if (!code.empty()) h.Add("X-Error-Code", code);
    if (!msg.empty()) h.Add("X-Error-Message", msg);
    h.Add("X-Request-Id", "req-42");
    return h;
  };
  using hubload::Code;
  EXPECT_EQ(hubload::StatusFromHttp(404, with("RevisionNotFound"), "", ctx).code(), Code::kRevisionNotFound);
  EXPECT_EQ(hubload::StatusFromHttp(404, with("EntryNotFound"), "", ctx).code(), Code::kEntryNotFound);
  EXPECT_EQ(hubload::StatusFromHttp(401, with("GatedRepo"), "", ctx).code(), Code::kGated);
  EXPECT_EQ(hubload::StatusFromHttp(403, with("GatedRepo"), "", ctx).code(), Code::kGated);
  EXPECT_EQ(hubload::StatusFromHttp(401, with("RepoNotFound"), "", ctx).code(), Code::kRepoNotFound);
  EXPECT_EQ(hubload::StatusFromHttp(401, with("", "Invalid credentials in Authorization header"), "", ctx).code(),
            Code::kUnauthorized);
  EXPECT_EQ(hubload::StatusFromHttp(403, with(""), "", ctx).code(), Code::kPermissionDenied);
  EXPECT_EQ(hubload::StatusFromHttp(429, with(""), "", ctx).code(), Code::kRateLimited);
  EXPECT_EQ(hubload::StatusFromHttp(503, with(""), "", ctx).code(), Code::kServerError);
  auto s = hubload::StatusFromHttp(404, with("EntryNotFound"), "{\"error\":\"Entry not found\"}", ctx);
  EXPECT_EQ(s.context().http_status, 404);
  EXPECT_EQ(s.context().request_id, "req-42");
  EXPECT_EQ(s.context().error_code, "EntryNotFound");
  EXPECT_EQ(s.context().repo_id, "org/m");
  EXPECT_NE(s.message().find("f.bin"), std::string::npos);
  EXPECT_OK(hubload::StatusFromHttp(302, with(""), "", ctx));
}

TEST(RetryPolicy, RefusedConnectionIsRetriedOnlyAFewTimesQuickly) {
  // A host that refuses connections: max_unreachable_retries (3) short sleeps,
  // not max_retries (5) long ones; 5xx keeps the full count.
  auto fake = std::make_shared<FakeTransport>(std::deque<Scripted>(10, Scripted{0}));
  std::vector<double> sleeps;
  auto p = Policy(&sleeps);
  p.max_unreachable_retries = 3;
  p.unreachable_backoff_s = 0.5;
  p.max_unreachable_total_s = 10;
  auto r = hubload::MakeRetryingTransport(fake, p)->Send({}, nullptr);
  EXPECT_EQ(r.status().code(), hubload::Code::kNetwork);
  EXPECT_EQ(fake->calls, 4);
  EXPECT_EQ(sleeps, (std::vector<double>{0.5, 1, 2}));
  // The unreachable time bound cuts earlier: 0.5 + 1 fits in 2 s, + 2 does not.
  auto fake2 = std::make_shared<FakeTransport>(std::deque<Scripted>(10, Scripted{0}));
  sleeps.clear();
  p.max_unreachable_total_s = 2;
  (void)hubload::MakeRetryingTransport(fake2, p)->Send({}, nullptr);
  EXPECT_EQ(fake2->calls, 3);
  EXPECT_EQ(sleeps, (std::vector<double>{0.5, 1}));
  auto fake3 = std::make_shared<FakeTransport>(std::deque<Scripted>(10, Scripted{503}));
  sleeps.clear();
  (void)hubload::MakeRetryingTransport(fake3, p)->Send({}, nullptr);
  EXPECT_EQ(fake3->calls, 6);
  EXPECT_EQ(sleeps, (std::vector<double>{1, 2, 4, 8, 8}));
}

TEST(RetryPolicy, SharedBudgetIsNotRestartedPerSend) {
  // Two Sends of one file (a resume) share one RetryBudget: 5 retries in all.
  auto fake = std::make_shared<FakeTransport>(std::deque<Scripted>(20, Scripted{503}));
  std::vector<double> sleeps;
  auto t = hubload::MakeRetryingTransport(fake, Policy(&sleeps));
  hubload::HttpRequest req;
  req.budget = std::make_shared<hubload::RetryBudget>();
  (void)t->Send(req, nullptr);
  EXPECT_EQ(fake->calls, 6);
  (void)t->Send(req, nullptr);
  EXPECT_EQ(fake->calls, 7);  // one attempt, no retry left
  EXPECT_EQ(req.budget->retries(), 5);
  EXPECT_TRUE(req.budget->exhausted());
  EXPECT_EQ(sleeps.size(), 5u);
  // Without a shared budget each Send has its own (the old behaviour).
  hubload::HttpRequest fresh;
  (void)t->Send(fresh, nullptr);
  EXPECT_EQ(fake->calls, 13);
}
