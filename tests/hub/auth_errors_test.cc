// Field failure B45: token hygiene and the 401/403/404 + X-Error-Code
// taxonomy. A raw loopback server (tests/hub/raw_server.h) answers with
// hand-written status lines and headers and records every request, so the
// Authorization header on the wire and the number of requests are read
// straight from what the client sent.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "field_support.h"
#include "hubload/hub.h"
#include "raw_server.h"
#include "testing/status_matchers.h"

namespace fs = std::filesystem;
using hubload::Code;
using hubload::testing::RawServer;
using hubload::testing::TempDir;
using namespace hubload::testing::field;  // NOLINT(build/namespaces)

namespace {

const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";
const std::string kBody = "hello b45\n";

std::string Answer(int status, const std::vector<std::pair<std::string, std::string>>& headers,
                   const std::string& body = "") {
  std::string r = "HTTP/1.1 " + std::to_string(status) + " X\r\n";
  for (auto& [k, v] : headers) r += k + ": " + v + "\r\n";
  return r + "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

// The file f.txt at kCommit: HEAD and GET as the Hub answers a regular file.
std::string FileAnswer(const std::string& request) {
  std::vector<std::pair<std::string, std::string>> h = {
      {"X-Repo-Commit", kCommit}, {"ETag", "\"" + hubload::testing::GitBlobSha1Hex(kBody) + "\""}};
  if (request.rfind("HEAD ", 0) == 0) {
    std::string r = Answer(200, h);
    // A HEAD answer announces the body's length without sending it.
    return r.replace(r.find("Content-Length: 0"), 17, "Content-Length: " + std::to_string(kBody.size()));
  }
  return Answer(200, h, kBody);
}

hubload::ClientOptions RawOpts(const RawServer& s, const std::string& cache, const std::string& token) {
  hubload::ClientOptions o;
  o.config.endpoint = "http://127.0.0.1:" + std::to_string(s.port());
  o.config.cache_dir = cache;
  o.config.token = token;
  o.retry.initial_backoff_s = 0.01;
  o.retry.jitter_fraction = 0;
  return o;
}

std::vector<std::string> AuthLines(const std::vector<std::string>& requests) {
  std::vector<std::string> out;
  for (auto& r : requests)
    for (size_t p = 0; (p = r.find("\r\n", p)) != std::string::npos;) {
      p += 2;
      size_t e = r.find("\r\n", p);
      std::string line = r.substr(p, e - p);
      if (line.size() > 14 && (line.rfind("Authorization:", 0) == 0 || line.rfind("authorization:", 0) == 0))
        out.push_back(line);
    }
  return out;
}

}  // namespace

TEST(FieldB45, BlankTokensSendNoAuthorizationAndFileTokensAreTrimmed) {
  TempDir home, cache;
  ScopedEnv env;
  env.Set("HF_HOME", home.str());
  env.Unset("HF_TOKEN_PATH");
  for (std::string blank : {"", "   ", "\t\n"}) {
    env.Set("HF_TOKEN", blank);
    RawServer s(FileAnswer);
    auto o = RawOpts(s, cache.str(), "");
    o.config.token = hubload::HubConfig::FromEnvironment().token;
    ASSERT_OK(hubload::HubClient(o).Download(Req("org/m", "f.txt")));
    EXPECT_TRUE(AuthLines(s.requests()).empty()) << "HF_TOKEN='" << blank << "'";
    fs::remove_all(cache.path() / "models--org--m");
  }
  env.Unset("HF_TOKEN");
  for (std::string file : {"hf_GOOD\n", "hf_GOOD\r\n", "  hf_GOOD  \n"}) {
    hubload::testing::WriteFileBytes(home.path() / "token", file);
    RawServer s(FileAnswer);
    auto o = RawOpts(s, cache.str(), "");
    o.config.token = hubload::HubConfig::FromEnvironment().token;
    ASSERT_OK(hubload::HubClient(o).Download(Req("org/m", "f.txt")));
    auto auth = AuthLines(s.requests());
    ASSERT_FALSE(auth.empty());
    for (auto& a : auth) {
      EXPECT_EQ(a, "Authorization: Bearer hf_GOOD");
    }
    fs::remove_all(cache.path() / "models--org--m");
  }
}

TEST(FieldB45, ARevokedTokenIsReportedAsARejectedTokenNotAMissingRepo) {
  RawServer s([](const std::string&) {
    return Answer(401,
                  {{"X-Error-Message", "Invalid credentials in Authorization header"}, {"X-Request-Id", "req-123"}});
  });
  TempDir cache;
  auto r = hubload::HubClient(RawOpts(s, cache.str(), "hf_OLD")).Download(Req("org/public", "f.txt"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnauthorized) << r.status().ToString();
  EXPECT_EQ(r.status().reason(), "InvalidCredentials");
  for (const char* part : {"token was rejected", "hf auth login", "HF_TOKEN", "req-123"}) {
    EXPECT_NE(r.status().message().find(part), std::string::npos) << part << " not in " << r.status().message();
  }
  EXPECT_EQ(r.status().message().find("hf_OLD"), std::string::npos);
  EXPECT_EQ(s.requests().size(), 1u);  // a 401 is never retried
}

TEST(FieldB45, EightAnswersGiveTheHubsErrorCategoriesEachSentOnce) {
  struct Case {
    int status;
    std::string code, message;
    Code want;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {401, "RepoNotFound", "Repository not found", Code::kRepoNotFound, "RepoNotFound"},
      {401, "", "Invalid credentials in Authorization header", Code::kUnauthorized, "InvalidCredentials"},
      {403, "GatedRepo", "Access to model org/g is restricted. You must have access to it.", Code::kGated, "GatedRepo"},
      {403, "", "This request needs a token with the repo.content.read scope", Code::kPermissionDenied, "Http403"},
      {403, "", "Access to this resource is disabled.", Code::kPermissionDenied, "DisabledRepo"},
      {404, "RepoNotFound", "Repository not found", Code::kRepoNotFound, "RepoNotFound"},
      {404, "RevisionNotFound", "Invalid rev id: v9", Code::kRevisionNotFound, "RevisionNotFound"},
      {404, "EntryNotFound", "Entry not found", Code::kEntryNotFound, "EntryNotFound"},
  };
  std::set<std::pair<int, std::string>> categories;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    RawServer s([&](const std::string&) {
      std::vector<std::pair<std::string, std::string>> h = {{"X-Error-Message", c.message},
                                                            {"X-Request-Id", "req-123"}};
      if (!c.code.empty()) h.emplace_back("X-Error-Code", c.code);
      if (c.code == "EntryNotFound") h.emplace_back("X-Repo-Commit", kCommit);
      return Answer(c.status, h);
    });
    TempDir cache;
    auto r = hubload::HubClient(RawOpts(s, cache.str(), i == 0 ? "" : "hf_x")).Download(Req("org/g", "f.txt"));
    ASSERT_FALSE(r.ok()) << "case " << i + 1;
    EXPECT_EQ(r.status().code(), c.want) << "case " << i + 1 << ": " << r.status().ToString();
    EXPECT_EQ(r.status().reason(), c.reason) << "case " << i + 1;
    EXPECT_EQ(r.status().context().http_status, c.status) << "case " << i + 1;
    EXPECT_NE(r.status().message().find(c.message), std::string::npos)
        << "case " << i + 1 << ": " << r.status().message();
    EXPECT_NE(r.status().message().find("req-123"), std::string::npos) << "case " << i + 1;
    EXPECT_EQ(s.requests().size(), 1u) << "case " << i + 1 << ": a 4xx is sent once";
    // A "known absent" marker only for a file missing at a known commit.
    EXPECT_EQ(fs::exists(cache.path() / "models--org--g" / ".no_exist" / kCommit / "f.txt"), c.code == "EntryNotFound")
        << "case " << i + 1;
    categories.insert({static_cast<int>(r.status().code()), r.status().reason()});
  }
  // 1 and 6 are one category (huggingface_hub RepositoryNotFoundError), told apart by the status.
  EXPECT_EQ(categories.size(), 7u);
}

TEST(FieldB45, GrantedAccessWorksAtOnceWithoutCleaningTheCache) {
  std::atomic<bool> granted{false};
  RawServer s([&](const std::string& req) {
    if (!granted)
      return Answer(403, {{"X-Error-Code", "GatedRepo"}, {"X-Error-Message", "Access to model org/g is restricted."}});
    return FileAnswer(req);
  });
  TempDir cache;
  auto o = RawOpts(s, cache.str(), "hf_x");
  auto denied = hubload::HubClient(o).Download(Req("org/g", "f.txt"));
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().code(), Code::kGated);
  granted = true;
  auto ok = hubload::HubClient(o).Download(Req("org/g", "f.txt"));
  ASSERT_OK(ok);
  EXPECT_EQ(FileSha256(*ok), Sha256(kBody));
}
