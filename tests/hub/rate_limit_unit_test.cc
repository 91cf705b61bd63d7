// B38 and B44 pieces without a server: the RateLimit / Retry-After parsers on
// hand-written header values, the shared 429 gate of the retrying transport
// over a scripted transport, and the 429 and CDN 403 error messages.
#include <gtest/gtest.h>

#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "hub/errors.h"
#include "hub/http_parse.h"
#include "hub/rate_gate.h"
#include "hubload/hub.h"
#include "testing/status_matchers.h"

using hubload::HttpHeaders;
using hubload::HttpResponse;
namespace hi = hubload::hub_internal;

namespace {

HttpHeaders H(std::vector<std::pair<std::string, std::string>> kv) {
  HttpHeaders h;
  for (auto& [k, v] : kv) h.Add(k, v);
  return h;
}

// Answers each request with the next scripted response; records the URLs sent.
class Script : public hubload::HttpTransport {
 public:
  explicit Script(std::deque<HttpResponse> r) : script_(std::move(r)) {}
  hubload::Result<HttpResponse> Send(const hubload::HttpRequest& req, hubload::BodySink*) override {
    std::lock_guard<std::mutex> l(mu_);
    sent.push_back(req.url);
    HttpResponse r;
    r.status = 200;
    if (!script_.empty()) {
      r = script_.front();
      script_.pop_front();
    }
    return r;
  }
  std::vector<std::string> sent;

 private:
  std::mutex mu_;
  std::deque<HttpResponse> script_;
};

HttpResponse TooMany(HttpHeaders h) {
  HttpResponse r;
  r.status = 429;
  r.headers = std::move(h);
  return r;
}

hubload::RetryPolicy Recording(std::vector<double>* sleeps) {
  hubload::RetryPolicy p;
  p.initial_backoff_s = 1;
  p.jitter_fraction = 0;
  p.max_total_s = 1e9;
  p.max_rate_limit_wait_s = 60;
  p.sleep = [sleeps](double s) { sleeps->push_back(s); };
  return p;
}

}  // namespace

TEST(RateLimitHeaders, TheHubsStructuredForm) {
  // The values huggingface_hub issue #3553 shows from the Hub.
  auto i = hi::ParseRateLimit(
      H({{"RateLimit", "\"api\";r=0;t=55"}, {"RateLimit-Policy", "\"fixed window\";\"api\";q=500;w=300"}}));
  ASSERT_TRUE(i);
  EXPECT_EQ(i->group, "api");
  EXPECT_EQ(i->remaining, 0);
  EXPECT_EQ(i->reset_s, 55);
  EXPECT_EQ(i->quota, 500);
  EXPECT_EQ(i->window_s, 300);
  auto only_policy = hi::ParseRateLimit(H({{"RateLimit-Policy", "\"fixed window\";\"resolvers\";q=20;w=10"}}));
  ASSERT_TRUE(only_policy);
  EXPECT_EQ(only_policy->group, "resolvers");
  EXPECT_EQ(only_policy->reset_s, -1);
  EXPECT_FALSE(hi::ParseRateLimit(H({{"Retry-After", "3"}})));
  // Malformed numbers stay unknown, never a throw.
  auto bad = hi::ParseRateLimit(H({{"RateLimit", "\"api\";r=x;t=-4"}}));
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->remaining, -1);
  EXPECT_EQ(bad->reset_s, -1);
}

TEST(RateLimitHeaders, RetryAfterSecondsOrHttpDate) {
  // RFC 9110's example date is 784111777 s after the epoch (python3 email.utils).
  const int64_t date = 784111777;
  EXPECT_EQ(hi::RetryAfterSecondsAt("Sun, 06 Nov 1994 08:49:37 GMT", date - 10), 11.0);  // + 1 s: whole seconds
  EXPECT_EQ(hi::RetryAfterSecondsAt("Sun, 06 Nov 1994 08:49:37 GMT", date + 5), 0.0);    // in the past
  EXPECT_EQ(hi::RetryAfterSecondsAt(" 120 ", date), 120.0);
  EXPECT_FALSE(hi::RetryAfterSecondsAt("soon", date));
  EXPECT_FALSE(hi::RetryAfterSecondsAt("", date));
  // RateLimit's t wins over Retry-After, as in huggingface_hub http_backoff.
  EXPECT_EQ(hi::AnnouncedWait(H({{"Retry-After", "9"}, {"RateLimit", "\"api\";r=0;t=4"}}), date), 4.0);
  EXPECT_EQ(hi::AnnouncedWait(H({{"Retry-After", "9"}}), date), 9.0);
  EXPECT_FALSE(hi::AnnouncedWait(H({}), date));
}

TEST(RateLimitGate, GroupsFollowTheHubsBuckets) {
  EXPECT_EQ(hi::RateKey("http://h:1/org/m/resolve/main/a.txt"), "http://h:1 resolvers");
  EXPECT_EQ(hi::RateKey("http://h:1/datasets/org/d/resolve/main/a.txt?x=/api/"), "http://h:1 resolvers");
  EXPECT_EQ(hi::RateKey("http://h:1/api/models/org/m/revision/main"), "http://h:1 api");
  EXPECT_EQ(hi::RateKey("http://h:1/prefix/api/models/org/m/resolve/main/a"), "http://h:1 resolvers");
  EXPECT_EQ(hi::RateKey("http://cdn:2/models--org--m/abc?sig=1"), "http://cdn:2");
}

TEST(RateLimitGate, SleepsTheAnnouncedResetOnce) {
  auto fake = std::make_shared<Script>(std::deque<HttpResponse>{TooMany(H({{"RateLimit", "\"resolvers\";r=0;t=5"}}))});
  std::vector<double> sleeps;
  auto t = hubload::MakeRetryingTransport(fake, Recording(&sleeps));
  hubload::HttpRequest req;
  req.url = "http://h:1/org/m/resolve/main/a";
  auto r = t->Send(req, nullptr);
  ASSERT_OK(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(sleeps, (std::vector<double>{5}));  // not 5 at the gate again
  EXPECT_EQ(fake->sent.size(), 2u);
}

TEST(RateLimitGate, AWaitLongerThanTheLimitFailsFastForTheWholeGroupOnly) {
  auto fake = std::make_shared<Script>(std::deque<HttpResponse>{TooMany(H(
      {{"RateLimit", "\"resolvers\";r=0;t=900"}, {"RateLimit-Policy", "\"fixed window\";\"resolvers\";q=20;w=900"}}))});
  std::vector<double> sleeps;
  auto t = hubload::MakeRetryingTransport(fake, Recording(&sleeps));
  hubload::HttpRequest a;
  a.url = "http://h:1/org/m/resolve/main/a";
  auto r = t->Send(a, nullptr);
  ASSERT_OK(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_TRUE(sleeps.empty());  // no 900 s sleep
  // Another file of the same group: answered from the gate, nothing sent.
  hubload::HttpRequest b;
  b.url = "http://h:1/org/m/resolve/main/b";
  auto rb = t->Send(b, nullptr);
  ASSERT_OK(rb);
  EXPECT_EQ(rb->status, 429);
  EXPECT_EQ(fake->sent.size(), 1u);
  // The api group is not closed.
  hubload::HttpRequest c;
  c.url = "http://h:1/api/models/org/m/revision/main";
  auto rc = t->Send(c, nullptr);
  ASSERT_OK(rc);
  EXPECT_EQ(rc->status, 200);
  EXPECT_EQ(fake->sent.size(), 2u);
  EXPECT_TRUE(sleeps.empty());
}

TEST(RateLimitGate, ARequestMeetingAClosedGateWaitsWithoutSending) {
  hi::RateGate gate;
  HttpResponse closed = TooMany(H({{"Retry-After", "30"}}));
  auto until = gate.Close("http://h:1/org/m/resolve/main/a", 30, closed);
  HttpResponse seen;
  double left = gate.Remaining("http://h:1/org/m/resolve/main/b", {}, &seen);
  EXPECT_GT(left, 29.0);
  EXPECT_LE(left, 30.0);
  EXPECT_EQ(seen.status, 429);
  EXPECT_EQ(gate.Remaining("http://h:1/org/m/resolve/main/b", until, nullptr), 0.0);  // already waited
  EXPECT_EQ(gate.Remaining("http://h:1/api/models/org/m", {}, nullptr), 0.0);
  // A shorter wait never reopens the gate early.
  gate.Close("http://h:1/org/m/resolve/main/c", 1, closed);
  EXPECT_GT(gate.Remaining("http://h:1/org/m/resolve/main/b", {}, nullptr), 29.0);
}

TEST(RateLimitMessages, A429NamesTheWaitTheGroupAndTheQuota) {
  hubload::ErrorContext ctx;
  ctx.repo_id = "org/m";
  auto s = hubload::StatusFromHttp(
      429,
      H({{"RateLimit", "\"resolvers\";r=0;t=900"}, {"RateLimit-Policy", "\"fixed window\";\"resolvers\";q=20;w=3600"}}),
      "{\"error\":\"rate limited\"}", ctx);
  EXPECT_EQ(s.code(), hubload::Code::kRateLimited);
  for (const char* part :
       {"HTTP 429", "retry after 900 s", "'resolvers'", "0/20 requests", "3600 s window", "HF_TOKEN"})
    EXPECT_NE(s.message().find(part), std::string::npos) << part << " not in: " << s.message();
  auto plain = hubload::StatusFromHttp(429, H({{"Retry-After", "7"}}), "", ctx);
  EXPECT_NE(plain.message().find("retry after 7 s"), std::string::npos) << plain.message();
}

TEST(RateLimitMessages, ACdnXmlErrorBodyIsQuoted) {
  hubload::ErrorContext ctx;
  ctx.url = "http://cdn.test:9/obj";
  auto s = hubload::StatusFromHttp(
      403, H({}), "<?xml version=\"1.0\"?>\n<Error><Code>InvalidRange</Code><Message>bad range</Message></Error>", ctx);
  EXPECT_EQ(s.code(), hubload::Code::kPermissionDenied);
  EXPECT_NE(s.message().find("(InvalidRange: bad range)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("cdn.test:9"), std::string::npos) << s.message();
}
