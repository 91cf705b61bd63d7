// The fault switches the client issues need (issues 13, 14 item 5;
// field-failures.md B38, B41, B44, B46), each checked on the wire with libcurl
// or a raw socket (never the hubload client): the total bandwidth cap, 429
// rate limits with RateLimit / RateLimit-Policy / Retry-After, redirect forms,
// expiring signed CDN URLs, the path prefix; and the `hubload serve` flags
// that set them.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <ctime>
#include <thread>

#include "server/server_fixture.h"
#include "testing/status_matchers.h"

namespace hubload::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

int64_t NowUnix() { return static_cast<int64_t>(std::time(nullptr)); }

// "exp" of a signed URL.
int64_t ExpOf(const std::string& url) {
  size_t at = url.find("exp=");
  return at == std::string::npos ? -1 : std::stoll(url.substr(at + 4, url.find('&', at) - at - 4));
}

TEST(FaultsWire, TotalBandwidthIsSharedByConnections) {
  server::ServerOptions o;
  auto hub = StartTestHub(o);
  ASSERT_TRUE(hub);
  std::string a = PatternBytes(1 << 20, 31), b = PatternBytes(1 << 20, 32);
  hub->AddRepo("org/big", {{"a.txt", a}, {"b.txt", b}});  // regular files: served by the hub listener
  hub->faults().SetTotalBandwidthBytesPerSec(4 << 20);
  std::string got_a, got_b;
  auto t0 = Clock::now();
  std::thread ta([&] { got_a = Get(hub->url() + "/org/big/resolve/main/a.txt").body; });
  std::thread tb([&] { got_b = Get(hub->url() + "/org/big/resolve/main/b.txt").body; });
  ta.join();
  tb.join();
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_TRUE(got_a == a && got_b == b);
  // 2 MiB through one 4 MiB/s link take >= 0.5 s (a lower bound only: a slow machine cannot break it).
  EXPECT_GE(s, 0.45);
}

class RateLimitTest : public ServerTest {};

TEST_F(RateLimitTest, FixedWindowQuotaWithRateLimitHeaders) {
  hub_->faults().SetRateLimit("api", 3, 10, server::Faults::kRateLimitHeaders);
  for (int i = 0; i < 3; ++i) {
    Reply r = Get(U("/api/models/org/model"));
    ASSERT_EQ(r.status, 200);
    std::string rl = r.h("ratelimit");
    EXPECT_EQ(rl.rfind("\"api\";r=" + std::to_string(2 - i) + ";t=", 0), 0u) << rl;
  }
  Reply limited = Get(U("/api/models/org/model/tree/main"));
  ASSERT_EQ(limited.status, 429);
  EXPECT_EQ(json::parse(limited.body), (json{{"error", "rate limited"}}));
  EXPECT_EQ(limited.h("ratelimit-policy"), "\"fixed window\";\"api\";q=3;w=10");
  std::string rl = limited.h("ratelimit");
  ASSERT_EQ(rl.rfind("\"api\";r=0;t=", 0), 0u) << rl;
  int t = std::stoi(rl.substr(rl.find("t=") + 2));
  EXPECT_GE(t, 1);
  EXPECT_LE(t, 10);
  EXPECT_FALSE(limited.has("retry-after"));
  // Another endpoint group is not limited; refused requests do not count.
  EXPECT_EQ(Get(U("/org/model/resolve/main/config.json")).status, 200);
  EXPECT_EQ(Get(U("/api/models/org/model")).status, 429);
}

TEST_F(RateLimitTest, RetryAfterSecondsAndHttpDateAndWindowReset) {
  hub_->faults().SetRateLimit("resolvers", 1, 1, server::Faults::kRetryAfterSeconds);
  std::string url = U("/org/model/resolve/main/config.json");
  EXPECT_EQ(Get(url).status, 200);
  Reply r = Get(url);
  ASSERT_EQ(r.status, 429);
  EXPECT_EQ(r.h("retry-after"), "1");
  EXPECT_FALSE(r.has("ratelimit"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the 1 s window is over
  EXPECT_EQ(Get(url).status, 200);

  hub_->faults().SetRateLimit("resolvers", 0, 30, server::Faults::kRetryAfterDate | server::Faults::kRateLimitHeaders);
  int64_t before = NowUnix();
  Reply d = Get(url);
  ASSERT_EQ(d.status, 429);
  std::tm tm{};
  std::string date = d.h("retry-after");
  const char* end = strptime(date.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  ASSERT_TRUE(end && *end == '\0') << date;
  int64_t when = static_cast<int64_t>(timegm(&tm));
  EXPECT_GE(when, before + 29);
  EXPECT_LE(when, NowUnix() + 31);
  EXPECT_EQ(d.h("ratelimit-policy"), "\"fixed window\";\"resolvers\";q=0;w=30");
  hub_->faults().SetRateLimit("resolvers", -1, 1);  // removed
  EXPECT_EQ(Get(url).status, 200);
}

TEST_F(RateLimitTest, CdnGroupLimitsRangedGets) {
  Reply head = Http("HEAD", U("/org/model/resolve/main/weights/model.safetensors"));
  std::string loc = head.h("location");
  hub_->faults().SetRateLimit("cdn", 1, 60, server::Faults::kRetryAfterSeconds);
  EXPECT_EQ(Get(loc, {"Range: bytes=0-9"}).status, 206);
  Reply r = Get(loc, {"Range: bytes=10-19"});
  EXPECT_EQ(r.status, 429);
  EXPECT_FALSE(r.h("retry-after").empty());
}

class RedirectTest : public ServerTest {};

TEST_F(RedirectTest, PathOnlyRelativeAbsoluteAndProtocolRelativeForms) {
  std::string port = std::to_string(hub_->server->port());
  std::string want_path = "/org/model/resolve/main/config.json?x=1";
  struct Case {
    server::Faults::RedirectForm form;
    std::string location;
  } cases[] = {
      {server::Faults::RedirectForm::kPathOnly, want_path},
      // Request /Org/Model/resolve/main/config.json: its folder is 4 levels deep.
      {server::Faults::RedirectForm::kRelative, "../../../../org/model/resolve/main/config.json?x=1"},
      {server::Faults::RedirectForm::kAbsolute, "http://127.0.0.1:" + port + want_path},
      {server::Faults::RedirectForm::kProtocolRelative, "//127.0.0.1:" + port + want_path},
  };
  for (auto& c : cases) {
    hub_->faults().Clear();
    hub_->faults().SetRedirect("/Org/Model/", "/org/model/", 307, c.form);
    Reply r = Http("HEAD", U("/Org/Model/resolve/main/config.json?x=1"));
    EXPECT_EQ(r.status, 307);
    EXPECT_EQ(r.h("location"), c.location);
    EXPECT_FALSE(r.has("x-repo-commit"));  // no Hub headers on the hop itself
    Reply f = Http("GET", U("/Org/Model/resolve/main/config.json?x=1"), {}, nullptr, true);
    EXPECT_EQ(f.status, 200) << c.location;
    EXPECT_EQ(f.body, files_["config.json"]);
    EXPECT_EQ(f.h("x-repo-commit"), commit_);
  }
}

TEST_F(RedirectTest, PostIsReplayedOn307And308AndLoopsEnd) {
  std::string body = "paths=config.json&expand=false";
  std::vector<std::string> form = {"Content-Type: application/x-www-form-urlencoded"};
  Reply direct = Http("POST", U("/api/models/org/model/paths-info/main"), form, &body);
  ASSERT_EQ(direct.status, 200);
  for (int status : {307, 308}) {
    hub_->faults().Clear();
    hub_->faults().SetRedirect("/api/models/Org/Model/", "/api/models/org/model/", status);
    Reply hop = Http("POST", U("/api/models/Org/Model/paths-info/main"), form, &body);
    EXPECT_EQ(hop.status, status);
    EXPECT_EQ(hop.h("location"), "/api/models/org/model/paths-info/main");
    Reply f = Http("POST", U("/api/models/Org/Model/paths-info/main"), form, &body, true);
    EXPECT_EQ(f.status, 200) << status;
    EXPECT_EQ(json::parse(f.body), json::parse(direct.body)) << status;
  }
  hub_->faults().Clear();
  hub_->faults().SetRedirect("/a", "/b");
  hub_->faults().SetRedirect("/b", "/a");
  Reply loop = Http("GET", U("/a"), {}, nullptr, true);
  EXPECT_EQ(loop.code, CURLE_TOO_MANY_REDIRECTS);
  // A counted rule expires.
  hub_->faults().Clear();
  hub_->faults().SetRedirect("/Org/", "/org/", 302, server::Faults::RedirectForm::kPathOnly, 1);
  EXPECT_EQ(Get(U("/Org/model/resolve/main/config.json")).status, 302);
  EXPECT_EQ(Get(U("/Org/model/resolve/main/config.json")).status, 401);  // no rule: repo Org/model is unknown
}

class SignedUrlTest : public ServerTest {};

TEST_F(SignedUrlTest, UrlsExpireAfterTheirTtl) {
  hub_->faults().SetSignedUrlTtl(1);
  int64_t before = NowUnix();
  std::string loc = Http("HEAD", U("/org/model/resolve/main/weights/model.safetensors")).h("location");
  int64_t exp = ExpOf(loc);
  EXPECT_GE(exp, before + 1);
  EXPECT_LE(exp, NowUnix() + 1);
  while (NowUnix() <= exp) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Reply r = Get(loc);
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.h("content-type"), "application/xml");
  EXPECT_NE(r.body.find("<Code>AccessDenied</Code>"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("<Message>Request has expired</Message>"), std::string::npos) << r.body;
  // A tampered signature is a different 403.
  std::string bad = loc;
  bad[bad.find("sig=") + 4] = bad[bad.find("sig=") + 4] == 'a' ? 'b' : 'a';
  EXPECT_EQ(Get(bad).body.find("expired"), std::string::npos);
  // A fresh resolve gives a URL that works.
  hub_->faults().SetSignedUrlTtl(0);
  EXPECT_EQ(Http("GET", U("/org/model/resolve/main/weights/model.safetensors"), {}, nullptr, true).body,
            files_["weights/model.safetensors"]);
}

TEST_F(SignedUrlTest, UrlsExpireAfterAByteBudget) {
  const std::string& content = files_["weights/model.safetensors"];  // 5000 bytes
  hub_->faults().SetSignedUrlByteBudget(3000);
  std::string loc = Http("HEAD", U("/org/model/resolve/main/weights/model.safetensors")).h("location");
  Reply first = Get(loc);
  EXPECT_NE(first.code, CURLE_OK);  // cut when the budget is used up
  EXPECT_TRUE(first.body == content.substr(0, 3000)) << first.body.size();
  Reply again = Get(loc, {"Range: bytes=3000-"});
  EXPECT_EQ(again.status, 403);
  EXPECT_NE(again.body.find("Request has expired"), std::string::npos);
  // A new URL resumes the rest.
  std::string fresh = Http("HEAD", U("/org/model/resolve/main/weights/model.safetensors")).h("location");
  EXPECT_NE(fresh, loc);
  Reply rest = Get(fresh, {"Range: bytes=3000-"});
  EXPECT_EQ(rest.status, 206);
  EXPECT_TRUE(rest.body == content.substr(3000));
}

class PathPrefixTest : public ServerTest {};

TEST_F(PathPrefixTest, WholeApiUnderThePrefixAndLinksCarryIt) {
  const std::string prefix = "/artifactory/api/huggingfaceml/x";
  hub_->faults().SetPathPrefix(prefix + "/");  // a trailing slash is dropped
  std::string root = "http://127.0.0.1:" + std::to_string(hub_->server->port());
  std::string base = root + prefix;
  EXPECT_EQ(hub_->url(), base);
  EXPECT_EQ(Get(root + "/org/model/resolve/main/config.json").status, 404);
  EXPECT_EQ(Get(root + prefix + "y/org/model/resolve/main/config.json").status, 404);
  EXPECT_EQ(Get(base + "/org/model/resolve/main/config.json").body, files_["config.json"]);
  EXPECT_EQ(Http("GET", base + "/org/model/resolve/main/weights/model.safetensors", {}, nullptr, true).body,
            files_["weights/model.safetensors"]);
  Reply tree = Get(base + "/api/models/org/model/tree/main?recursive=true");
  EXPECT_EQ(tree.h("link").rfind("<" + base + "/api/models/org/model/tree/main?", 0), 0u) << tree.h("link");
  // Upload actions and commit URLs carry it, and work.
  std::vector<std::string> w = {Auth(kGood), "Content-Type: application/json"};
  std::string content = "prefixed upload";
  std::string batch = json{{"operation", "upload"}, {"objects", {{{"oid", Sha256(content)}, {"size", content.size()}}}}}.dump();
  Reply b = Http("POST", base + "/org/model.git/info/lfs/objects/batch", w, &batch);
  ASSERT_EQ(b.status, 200) << b.body;
  std::string href = json::parse(b.body)["objects"][0]["actions"]["upload"]["href"];
  EXPECT_EQ(href.rfind(base + "/_lfs/", 0), 0u) << href;
  EXPECT_EQ(Http("PUT", href, {}, &content).status, 200);
  std::string commit = json{{"key", "header"}, {"value", {{"summary", "p"}}}}.dump() + "\n" +
                       json{{"key", "lfsFile"}, {"value", {{"path", "p.bin"}, {"oid", Sha256(content)}}}}.dump();
  Reply c = Http("POST", base + "/api/models/org/model/commit/main", w, &commit);
  ASSERT_EQ(c.status, 200) << c.body;
  std::string commit_url = json::parse(c.body)["commitUrl"];
  EXPECT_EQ(commit_url.rfind(base + "/org/model/commit/", 0), 0u) << commit_url;
  EXPECT_EQ(Get(commit_url).status, 200);
  // Redirect Locations are relative to the prefix.
  hub_->faults().SetRedirect("/Org/", "/org/");
  Reply hop = Http("HEAD", base + "/Org/model/resolve/main/config.json");
  EXPECT_EQ(hop.h("location"), prefix + "/org/model/resolve/main/config.json");
}

// ---- the same switches through `hubload serve` flags ----

struct ServeProcess {
  pid_t pid = -1;
  std::string url;
  ~ServeProcess() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      int st = 0;
      ::waitpid(pid, &st, 0);
    }
  }
};

// Starts `hubload serve ROOT args...` and reads "listening on URL".
bool StartServe(const std::string& root, const std::vector<std::string>& args, ServeProcess* p) {
  int out[2];
  if (::pipe(out) != 0) return false;
  p->pid = ::fork();
  if (p->pid == 0) {
    ::dup2(out[1], 1);
    ::close(out[0]);
    std::vector<std::string> all = {HubloadBin(), "serve", root, "--port", "0"};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  std::string line;
  char c;
  while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;
  ::close(out[0]);
  if (line.rfind("listening on ", 0) != 0) return false;
  p->url = line.substr(13);
  return true;
}

TEST(FaultsWire, ServeFlagsSetTheSwitches) {
  if (!fs::exists(HubloadBin())) GTEST_SKIP() << "the hubload CLI is not built (" << HubloadBin() << ")";
  TempDir store;
  server::CreateRepoOptions co;
  co.lfs_threshold_bytes = 100;
  std::string big = PatternBytes(1000, 41);
  ASSERT_OK(server::CreateRepoFromFiles(store.str(), "org/m", {{"a.txt", "a"}, {"w.bin", big}}, co));
  ServeProcess p;
  ASSERT_TRUE(StartServe(store.str(),
                         {"--path-prefix", "/pre", "--fault-rate-limit", "api:1:60:retry-after", "--fault-redirect",
                          "/Org/:/org/:308:relative:1", "--fault-url-bytes", "600", "--fault-url-ttl", "30",
                          "--fault-total-bandwidth", "1000000"},
                         &p))
      << HubloadBin();
  ASSERT_EQ(p.url.substr(p.url.size() - 4), "/pre");
  EXPECT_EQ(Get(p.url + "/api/models/org/m").status, 200);
  Reply limited = Get(p.url + "/api/models/org/m");
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(limited.h("retry-after").empty(), false);
  Reply hop = Http("HEAD", p.url + "/Org/m/resolve/main/a.txt");
  EXPECT_EQ(hop.status, 308);
  EXPECT_EQ(hop.h("location"), "../../../../../pre/org/m/resolve/main/a.txt");  // from /pre/Org/m/resolve/main/
  std::string loc = Http("HEAD", p.url + "/org/m/resolve/main/w.bin").h("location");
  int64_t exp = ExpOf(loc);
  EXPECT_LE(exp, NowUnix() + 31);
  EXPECT_GE(exp, NowUnix() + 28);
  Reply cut = Get(loc);
  EXPECT_TRUE(cut.body == big.substr(0, 600)) << cut.body.size();
  EXPECT_EQ(Get(loc).status, 403);
  // Bad flag values are refused with the flag named.
  std::string out, err;
  int rc = RunCommand(HubloadBin() + " serve " + store.str() + " --fault-rate-limit bogus:1:1", &out, &err);
  EXPECT_NE(rc, 0);
  EXPECT_NE(err.find("--fault-rate-limit"), std::string::npos) << err;
}

// Sizes of `hubload serve` and `hubload store add` in the one size grammar (10MB = 10^7, 10MiB = 10*2^20):
// "0.6KB" of --fault-url-bytes is 600 bytes served per signed URL (worked out by hand); store add's
// --lfs-threshold 1KB makes a 1000-byte file LFS (its blob named by a 64-hex sha256) and a 999-byte one not,
// 1KiB neither.
TEST(FaultsWire, ServeAndStoreSizesUseTheOneGrammar) {
  if (!fs::exists(HubloadBin())) GTEST_SKIP() << "the hubload CLI is not built (" << HubloadBin() << ")";
  TempDir store, src;
  WriteFileBytes(src.path() / "a.txt", std::string(1000, 'a'));
  WriteFileBytes(src.path() / "b.txt", std::string(999, 'b'));
  std::string out, err;
  auto blob_name_size = [&](const std::string& repo, const std::string& commit, const std::string& file) {
    fs::path link = store.path() / ("models--org--" + repo) / "snapshots" / commit / file;
    return fs::canonical(link).filename().string().size();
  };
  ASSERT_EQ(RunCommand(HubloadBin() + " store add " + store.str() + " org/kb " + src.str() + " --lfs-threshold 1KB",
                       &out, &err),
            0)
      << err;
  std::string kb = out.substr(0, 40);
  EXPECT_EQ(blob_name_size("kb", kb, "a.txt"), 64u);  // LFS: 1000 >= 1KB
  EXPECT_EQ(blob_name_size("kb", kb, "b.txt"), 40u);
  ASSERT_EQ(RunCommand(HubloadBin() + " store add " + store.str() + " org/kib " + src.str() + " --lfs-threshold 1KiB",
                       &out, &err),
            0)
      << err;
  std::string kib = out.substr(0, 40);
  EXPECT_EQ(blob_name_size("kib", kib, "a.txt"), 40u);  // 1000 < 1024
  std::string big = PatternBytes(1000, 43);
  server::CreateRepoOptions co;
  co.lfs_threshold_bytes = 100;
  ASSERT_OK(server::CreateRepoFromFiles(store.str(), "org/m", {{"w.bin", big}}, co));
  ServeProcess p;
  ASSERT_TRUE(StartServe(store.str(),
                         {"--fault-url-bytes", "0.6KB", "--fault-bandwidth", "150MB", "--fault-total-bandwidth", "1GiB",
                          "--lfs-threshold", "10MB", "--multipart-chunk-size", "5MiB", "--threads", "1"},
                         &p))
      << HubloadBin();
  std::string loc = Http("HEAD", p.url + "/org/m/resolve/main/w.bin").h("location");
  Reply cut = Get(loc);
  EXPECT_TRUE(cut.body == big.substr(0, 600)) << cut.body.size();
  EXPECT_EQ(Get(loc).status, 403);
  // A refused size is a usage error naming the option and the text.
  int rc = RunCommand(HubloadBin() + " serve " + store.str() + " --fault-bandwidth 150Mb", &out, &err);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(err.find("--fault-bandwidth"), std::string::npos) << err;
  EXPECT_NE(err.find("150Mb"), std::string::npos) << err;
}

}  // namespace
}  // namespace hubload::testing
