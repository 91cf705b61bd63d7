// Field failure B38 (../shared/docs/field-failures.md): HTTP 429 with the
// Hub's RateLimit headers, Retry-After in seconds and as an HTTP-date, no
// hint at all, a reset too far away, a 429 from the CDN on a ranged part,
// and a pinned commit that needs no request. The server is the in-process
// `hubload serve` with Faults::SetRateLimit; what the client sent comes from
// its access log, expected bytes and hashes from the test's own data.
#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "field_support.h"
#include "hubload/hub.h"
#include "testing/status_matchers.h"

using hubload::Code;
using hubload::server::Faults;
using hubload::testing::TempDir;
using namespace hubload::testing::field;  // NOLINT(build/namespaces)

namespace {

// Requests of a snapshot with 8 connections that can be on the wire at once:
// 8 transfers and 8 metadata HEADs of the files prepared ahead (hub/scheduler.cc).
constexpr size_t kInFlight = 16;

// Seconds since the epoch of an access-log "time" (2026-12-02T01:02:03.456Z).
double LogTime(const nlohmann::json& line) {
  std::string t = line.value("time", "");
  std::tm tm{};
  int ms = 0;
  if (std::sscanf(t.c_str(), "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                  &tm.tm_sec, &ms) != 7)
    return -1;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<double>(timegm(&tm)) + ms / 1000.0;
}

// Requests of the "resolvers" group (/resolve/ on the hub listener), in log order.
std::vector<nlohmann::json> Resolvers(const std::vector<nlohmann::json>& log) {
  std::vector<nlohmann::json> out;
  for (auto& j : log)
    if (j.value("path", "").find("/resolve/") != std::string::npos && !j.contains("listener")) out.push_back(j);
  return out;
}

// 16 small regular files: a snapshot costs 32 resolver requests (HEAD + GET each).
std::map<std::string, std::string> SmallFiles() {
  std::map<std::string, std::string> files;
  for (int i = 0; i < 16; ++i) files["f" + std::to_string(i) + ".txt"] = PatternBytes(100, 100 + i);
  return files;
}

struct Outcome {
  hubload::Result<std::string> result = hubload::Status::Ok();
  std::vector<nlohmann::json> log;
};

// Snapshot of org/m with 8 connections under `quota` resolver requests per `window_s`.
Outcome SnapshotUnderLimit(const std::map<std::string, std::string>& files, int quota, int window_s, unsigned hints,
                       double max_wait_s = 60) {
  TempDir logs, cache;
  auto hub = HubWithLog(logs);
  Outcome run;
  if (!hub) return run;
  hub->AddRepo("org/m", files);
  hub->faults().SetRateLimit("resolvers", quota, window_s, hints);
  auto o = Opts(*hub, cache.str());
  o.max_workers = 8;
  o.connections = 8;
  o.retry.initial_backoff_s = 0.25;
  o.retry.max_backoff_s = 2;
  o.retry.max_rate_limit_wait_s = max_wait_s;
  hubload::SnapshotRequest req;
  req.repo_id = "org/m";
  run.result = hubload::HubClient(o).Snapshot(req);
  if (run.result.ok()) {
    for (auto& [name, bytes] : files) {
      EXPECT_EQ(FileSha256(*run.result + "/" + name), Sha256(bytes)) << name;
    }
  }
  run.log = AccessLog(*hub, logs);
  return run;
}

// The main scenario and R1/R2: the download finishes; every connection
// pauses at the first 429 until the announced reset, so the server answers
// at most one 429 per request in flight when the quota ran out (8 connections
// plus the 8 threads that send the files' HEADs ahead of them: kInFlight), and no resolver
// request reaches it for about the announced wait after them.
void ExpectPausedTogether(const Outcome& run, double min_gap_s) {
  ASSERT_OK(run.result);
  auto res = Resolvers(run.log);
  EXPECT_EQ(res.size() - std::count_if(res.begin(), res.end(), [](auto& j) { return j.value("status", 0) == 429; }),
            32u);  // every HEAD and GET answered once
  size_t n429 = 0;
  for (auto& j : res) n429 += j.value("status", 0) == 429;
  ASSERT_GE(n429, 1u) << "the quota (20 of 32 requests) was never exceeded: the test proves nothing";
  EXPECT_LE(n429, kInFlight) << "connections did not pause together";
  // The log is written as answers complete, so requests that arrived before
  // the quota ran out may be logged after the first 429. In time order, after
  // the first 429 there must be a silence of about the announced wait (whole
  // seconds, >= 1 s), and nothing after it is refused again: nobody came back
  // before the reset.
  std::vector<std::pair<double, int>> t;  // (time, status)
  for (auto& j : res) t.emplace_back(LogTime(j), j.value("status", 0));
  std::sort(t.begin(), t.end());
  double t429 = 0;
  for (auto& [when, status] : t)
    if (status == 429) {
      t429 = when;
      break;
    }
  size_t gap_at = t.size();
  for (size_t i = 1; i < t.size(); ++i)
    if (t[i - 1].first >= t429 && t[i].first - t[i - 1].first >= min_gap_s) {
      gap_at = i;
      break;
    }
  ASSERT_LT(gap_at, t.size()) << "no pause after the first 429";
  for (size_t i = gap_at; i < t.size(); ++i) EXPECT_NE(t[i].second, 429) << "refused again after the pause";
  if (::testing::Test::HasFailure())
    for (auto& j : res) std::fprintf(stderr, "%s\n", j.dump().c_str());
}

}  // namespace

TEST(FieldB38, RateLimitHeadersPauseEveryWorkerUntilTheReset) {
  ExpectPausedTogether(SnapshotUnderLimit(SmallFiles(), 20, 2, Faults::kRateLimitHeaders), 0.9);
}

TEST(FieldB38, R1_RetryAfterSecondsPausesEveryWorker) {
  ExpectPausedTogether(SnapshotUnderLimit(SmallFiles(), 20, 2, Faults::kRetryAfterSeconds), 0.9);
}

TEST(FieldB38, R2_RetryAfterHttpDateIsHonoured) {
  // The date has whole seconds: the client waits until it plus 1 s.
  ExpectPausedTogether(SnapshotUnderLimit(SmallFiles(), 20, 2, Faults::kRetryAfterDate), 0.9);
}

TEST(FieldB38, R3_NoHintHeadersBackOffAndSucceed) {
  Outcome run = SnapshotUnderLimit(SmallFiles(), 20, 2, 0);
  ASSERT_OK(run.result);
  auto res = Resolvers(run.log);
  size_t ok = 0;
  for (auto& j : res) ok += j.value("status", 0) != 429;
  EXPECT_EQ(ok, 32u);
}

TEST(FieldB38, R4_AResetFurtherThanTheLimitFailsFastNamingTheWait) {
  // 3 requests per 900 s window; the client waits at most 60 s.
  Outcome run = SnapshotUnderLimit(SmallFiles(), 3, 900, Faults::kRateLimitHeaders, 60);
  ASSERT_FALSE(run.result.ok());
  const hubload::Status& s = run.result.status();
  EXPECT_EQ(s.code(), Code::kRateLimited) << s.ToString();
  for (const char* part : {"429", "900 s", "'resolvers'", "0/3 requests", "900 s window", "HF_TOKEN"}) {
    EXPECT_NE(s.message().find(part), std::string::npos) << part << " not in: " << s.message();
  }
  auto res = Resolvers(run.log);
  size_t n429 = 0;
  for (auto& j : res) n429 += j.value("status", 0) == 429;
  EXPECT_GE(n429, 1u);
  EXPECT_LE(n429, kInFlight) << "requests kept going to a group closed for 900 s";
}

TEST(FieldB38, R4_AfterAFailFastTheClientSendsNothingToTheGroupUntilTheReset) {
  TempDir logs, cache;
  auto hub = HubWithLog(logs);
  ASSERT_TRUE(hub);
  hub->AddRepo("org/m", SmallFiles());
  hub->faults().SetRateLimit("resolvers", 1, 900, Faults::kRateLimitHeaders);  // the HEAD of f0 only
  hubload::HubClient client(Opts(*hub, cache.str()));
  auto first = client.Download(Req("org/m", "f0.txt"));
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), Code::kRateLimited) << first.status().ToString();
  // Another file through the same client: refused from the pause, not sent.
  auto second = client.Download(Req("org/m", "f1.txt"));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kRateLimited) << second.status().ToString();
  EXPECT_NE(second.status().message().find("'resolvers'"), std::string::npos) << second.status().message();
  auto log = AccessLog(*hub, logs);
  EXPECT_TRUE(Lines(log, "HEAD", "/f1.txt").empty() && Lines(log, "GET", "/f1.txt").empty())
      << "a request reached a group closed for 900 s";
  EXPECT_EQ(Lines(log, "GET", "/f0.txt").size(), 1u);  // the one 429, not retried
}

TEST(FieldB38, R5_A429FromTheCdnOnARangedPartRetriesOnlyThatPart) {
  TempDir logs, cache;
  auto hub = HubWithLog(logs);
  ASSERT_TRUE(hub);
  std::string data = PatternBytes(4 * kMiB, 5);
  hub->AddRepo("org/big", {{"w.bin", data}}, SmallLfs());
  hub->faults().SetRateLimit("cdn", 2, 2, Faults::kRateLimitHeaders);
  auto o = Opts(*hub, cache.str());
  o.range_threshold_bytes = 1 * kMiB;
  o.range_chunk_bytes = 1 * kMiB;
  o.connections = 4;
  auto p = hubload::HubClient(o).Download(Req("org/big", "w.bin"));
  ASSERT_OK(p);
  EXPECT_EQ(FileSha256(*p), Sha256(data));
  auto log = AccessLog(*hub, logs);
  uint64_t served = 0;
  size_t n429 = 0;
  std::map<std::string, int> ranges;
  for (auto& j : log) {
    if (j.value("listener", "") != "cdn" || j.value("method", "") != "GET") continue;
    if (j.value("status", 0) == 429) {
      ++n429;
      continue;
    }
    served += j.value("bytes", uint64_t{0});
    ranges[j["range"].is_string() ? j["range"].get<std::string>() : ""]++;
  }
  EXPECT_GE(n429, 1u);  // the limit was hit
  EXPECT_EQ(served, data.size()) << "a part was fetched twice or restarted";
  for (auto& [r, n] : ranges) {
    EXPECT_EQ(n, 1) << r;
  }
}

TEST(FieldB38, R6_APinnedCommitCompleteInTheCacheCostsNoRequest) {
  TempDir logs, cache;
  auto hub = HubWithLog(logs);
  ASSERT_TRUE(hub);
  auto files = SmallFiles();
  std::string commit = hub->AddRepo("org/m", files);
  auto o = Opts(*hub, cache.str());
  hubload::SnapshotRequest req;
  req.repo_id = "org/m";
  ASSERT_OK(hubload::HubClient(o).Snapshot(req));
  const uint64_t before = hub->server->stats().requests;
  // Every group is closed now; a pinned, complete snapshot must not notice.
  hub->faults().SetRateLimit("resolvers", 0, 900, Faults::kRateLimitHeaders);
  hub->faults().SetRateLimit("api", 0, 900, Faults::kRateLimitHeaders);
  req.revision = commit;
  auto again = hubload::HubClient(o).Snapshot(req);
  ASSERT_OK(again);
  EXPECT_EQ(*again, cache.str() + "/models--org--m/snapshots/" + commit);
  EXPECT_EQ(hub->server->stats().requests, before);
}
