// Fault switches of `hubload serve`, checked on the wire with libcurl.
#include "server/server_fixture.h"

namespace hubload::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// ---- faults ----

TEST_F(ServerTest, FaultStatusForNextRequests) {
  hub_->faults().SetStatusForNext("config.json", 503, 2, 7);
  std::string url = U("/org/model/resolve/main/config.json");
  Reply a = Get(url);
  EXPECT_EQ(a.status, 503);
  EXPECT_EQ(a.h("retry-after"), "7");
  EXPECT_EQ(Get(url).status, 503);
  EXPECT_EQ(Get(url).status, 200);
  hub_->faults().SetStatusForNext("", 429, 1, 3);
  Reply b = Get(U("/api/models/org/model"));
  EXPECT_EQ(b.status, 429);
  EXPECT_EQ(b.h("retry-after"), "3");
}

TEST_F(ServerTest, FaultDropAfterBytes) {
  const std::string& content = files_["weights/model.safetensors"];
  hub_->faults().SetDropAfterBytes("models--org--model", 1234, 1);  // the CDN path holds the folder name
  Reply r = Http("GET", U("/org/model/resolve/main/weights/model.safetensors"), {}, nullptr, true);
  EXPECT_NE(r.code, CURLE_OK);  // partial body: connection closed early
  EXPECT_EQ(r.body, content.substr(0, 1234));
  Reply again = Http("GET", U("/org/model/resolve/main/weights/model.safetensors"), {}, nullptr, true);
  EXPECT_EQ(again.code, CURLE_OK);
  EXPECT_EQ(again.body, content);
}

TEST_F(ServerTest, FaultIgnoreRangeAndStripLength) {
  std::string url = U("/org/model/resolve/main/config.json");
  hub_->faults().SetIgnoreRange(true);
  Reply r = Get(url, {"Range: bytes=0-0"});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, files_["config.json"]);
  hub_->faults().SetIgnoreRange(false);
  hub_->faults().SetStripContentLength(true);
  Reply s = Get(url, {"Range: bytes=1-3"});
  EXPECT_EQ(s.status, 206);
  EXPECT_FALSE(s.has("content-length"));
  EXPECT_FALSE(s.has("content-range"));
  EXPECT_EQ(s.body, files_["config.json"].substr(1, 3));
  hub_->faults().SetStripContentLength(false);
  // Bandwidth cap and latency change timing only: the bytes stay right.
  hub_->faults().SetBandwidthBytesPerSec(200000);
  hub_->faults().SetLatencyMs(5);
  EXPECT_EQ(Http("GET", U("/org/model/resolve/main/weights/model.safetensors"), {}, nullptr, true).body,
            files_["weights/model.safetensors"]);
}

TEST_F(ServerTest, FaultReplaceFileBetweenRequests) {
  std::string url = U("/org/model/resolve/main/config.json");
  hub_->faults().ReplaceFileAfter("config.json", 1, "org/model", "config.json", "{\"hidden_size\": 16}\n");
  Reply first = Http("HEAD", url);
  Reply second = Get(url);
  EXPECT_EQ(first.h("etag"), "\"" + GitSha1(files_["config.json"]) + "\"");
  EXPECT_EQ(second.body, "{\"hidden_size\": 16}\n");
  EXPECT_EQ(second.h("etag"), "\"" + GitSha1("{\"hidden_size\": 16}\n") + "\"");
  EXPECT_NE(second.h("x-repo-commit"), commit_);
  // The old snapshot stays reachable by its commit.
  EXPECT_EQ(Get(U("/org/model/resolve/" + commit_ + "/config.json")).body, files_["config.json"]);
}

}  // namespace
}  // namespace hubload::testing
