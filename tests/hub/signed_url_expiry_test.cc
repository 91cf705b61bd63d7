// Field failure B44 (../shared/docs/field-failures.md): the signed CDN URL a
// file was redirected to expires mid-download. `hubload serve` stands for
// the Hub and the CDN: Faults::SetSignedUrlByteBudget makes each signed URL
// serve a fixed number of bytes and then answer 403 "Request has expired"
// (every re-resolve hands out a new URL). Expected bytes and hashes come from
// the test's data; request counts from the server's access log.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "field_support.h"
#include "hubload/hub.h"
#include "testing/status_matchers.h"

namespace fs = std::filesystem;
using hubload::Code;
using hubload::testing::TempDir;
using namespace hubload::testing::field;  // NOLINT(build/namespaces)

namespace {

struct Counts {
  size_t heads = 0;        // HEAD /org/big/resolve/... (first resolve + re-resolves)
  size_t cdn_gets = 0;     // GETs on the CDN listener
  size_t cdn_403 = 0;      // of which answered 403
  uint64_t cdn_bytes = 0;  // body bytes of the 200/206 answers
};

Counts Count(const std::vector<nlohmann::json>& log) {
  Counts c;
  for (auto& j : log) {
    const std::string path = j.value("path", ""), method = j.value("method", "");
    if (method == "HEAD" && path.find("/org/big/resolve/") != std::string::npos) ++c.heads;
    if (j.value("listener", "") == "cdn" && method == "GET") {
      ++c.cdn_gets;
      c.cdn_403 += j.value("status", 0) == 403;
      const int st = j.value("status", 0);
      if (st == 200 || st == 206) c.cdn_bytes += j.value("bytes", uint64_t{0});
    }
  }
  return c;
}

// Downloads org/big/w.bin (`size` bytes) with `connections` connections and
// ranges of 1 MiB (ranged = false: one stream) while each signed URL serves
// at most `budget` bytes.
struct Outcome {
  hubload::Result<std::string> path = hubload::Status::Ok();
  std::string data, cache, cdn;
  Counts counts;
};
Outcome DownloadUnderBudget(uint64_t size, uint64_t budget, int connections, bool ranged, int max_retries = 5,
                            const std::function<void(hubload::server::Faults&)>& more_faults = nullptr) {
  Outcome out;
  TempDir logs;
  static int seed = 40;
  auto hub = HubWithLog(logs);
  if (!hub) return out;
  out.data = PatternBytes(size, ++seed);
  hub->AddRepo("org/big", {{"w.bin", out.data}}, SmallLfs());
  hub->faults().SetSignedUrlByteBudget(budget);
  if (more_faults) more_faults(hub->faults());
  out.cdn = hub->server->cdn_url();
  TempDir cache;
  out.cache = cache.str();
  auto o = Opts(*hub, cache.str());
  o.range_threshold_bytes = ranged ? 1 * kMiB : 0;
  o.range_chunk_bytes = 1 * kMiB;
  o.connections = connections;
  o.max_workers = connections;
  o.retry.max_retries = max_retries;
  out.path = hubload::HubClient(o).Download(Req("org/big", "w.bin"));
  if (out.path.ok()) {
    EXPECT_EQ(FileSha256(*out.path), Sha256(out.data));
    EXPECT_FALSE(fs::exists(out.cache + "/models--org--big/blobs/" + Sha256(out.data) + ".incomplete"));
  }
  out.counts = Count(AccessLog(*hub, logs));
  return out;
}

}  // namespace

TEST(FieldB44, ParallelRangesContinueOnARenewedUrlAndRefreshesAreCoalesced) {
  const uint64_t size = 8 * kMiB, budget = 3 * kMiB;
  Outcome o = DownloadUnderBudget(size, budget, 8, true);
  ASSERT_OK(o.path);
  // Each URL serves 3 MiB, so 8 MiB need at least 3 URLs: 2 re-resolves. One
  // per expiry (coalesced), not one per worker that saw the 403 (up to 8).
  EXPECT_GE(o.counts.heads, 3u);
  EXPECT_LE(o.counts.heads, 1u + 3u + 1u) << "re-resolves were not coalesced";
  EXPECT_GE(o.counts.cdn_403, 1u);
  // Each worker continued with Range at its first missing byte: at most one
  // chunk per worker is sent again, never the whole file.
  EXPECT_GE(o.counts.cdn_bytes, size);
  EXPECT_LE(o.counts.cdn_bytes, size + 1 * kMiB);
}

TEST(FieldB44, OneStreamResumesWithRangeOnEachRenewedUrl) {
  const uint64_t size = 2 * kMiB, budget = 512 * 1024;
  Outcome o = DownloadUnderBudget(size, budget, 1, false);
  ASSERT_OK(o.path);
  EXPECT_EQ(o.counts.heads, 4u);  // 2 MiB at 512 KiB per URL: the first URL and 3 renewals
  EXPECT_EQ(o.counts.cdn_403, 3u);
  EXPECT_EQ(o.counts.cdn_bytes, size);  // every byte sent once
}

TEST(FieldB44, C_RenewalDoesNotTakeFromTheRetryBudget) {
  // One transport retry, spent at once on a 503 from the CDN; each of the 2
  // expiries after it still gets its fresh URL.
  const uint64_t size = 2 * kMiB, budget = 800 * 1024;
  Outcome o = DownloadUnderBudget(size, budget, 1, false, /*max_retries=*/1,
                                  [](hubload::server::Faults& f) { f.SetStatusForNext("models--org--big/", 503, 1); });
  ASSERT_OK(o.path);
  EXPECT_EQ(o.counts.heads, 3u);  // 2 MiB at 800 KiB per URL: 3 URLs
  EXPECT_EQ(o.counts.cdn_403, 2u);
  EXPECT_EQ(o.counts.cdn_bytes, size);
}

TEST(FieldB44, B_A403OnAFreshUrlIsFinalAndNamesTheCdnAnswer) {
  // Every CDN request is refused (not an expiry): one renewal, then the error.
  Outcome o = DownloadUnderBudget(1 * kMiB + 5, 0, 1, false, 5,
                                  [](hubload::server::Faults& f) { f.SetStatusForNext("models--org--big/", 403, -1); });
  ASSERT_FALSE(o.path.ok());
  const hubload::Status& s = o.path.status();
  EXPECT_EQ(s.code(), Code::kPermissionDenied) << s.ToString();
  EXPECT_EQ(s.context().http_status, 403);
  std::string cdn_host = o.cdn.substr(o.cdn.find("://") + 3);
  EXPECT_NE(s.message().find("HTTP 403"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(cdn_host), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("Injected fault"), std::string::npos) << s.message();  // the CDN's own words
  EXPECT_EQ(s.message().find("sig="), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("exp="), std::string::npos) << s.message();
  EXPECT_EQ(o.counts.cdn_gets, 2u);  // the first URL and the renewed one, nothing more
  EXPECT_EQ(o.counts.heads, 2u);
  EXPECT_FALSE(fs::exists(o.cache + "/models--org--big/blobs/" + Sha256(o.data)));
}
