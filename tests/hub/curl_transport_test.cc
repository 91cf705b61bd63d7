// libcurl transport against raw loopback listeners: B06 (Authorization never
// follows a cross-host redirect; kept on a same-host relative one), user agent,
// streaming, stalls.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

#include "hubload/transport.h"
#include "tests/hub/raw_server.h"
#include "testing/status_matchers.h"

namespace {

using hubload::testing::RawServer;

bool HasHeader(const std::string& req, const std::string& name) {
  std::string lower;
  for (char c : req) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  std::string n;
  for (char c : name) n.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return lower.find("\r\n" + n + ":") != std::string::npos;
}

struct StringSink : hubload::BodySink {
  std::string got;
  int status = 0;
  bool OnResponseStart(const hubload::HttpResponse& h) override {
    status = h.status;
    return true;
  }
  bool OnData(const char* d, size_t n) override {
    got.append(d, n);
    return true;
  }
};

}  // namespace

TEST(CurlTransport, AuthorizationDroppedOnCrossHostRedirectKeptOnRelative) {
  RawServer cdn([](const std::string& req) {
    if (HasHeader(req, "Authorization")) return std::string("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    if (req.find("X-Amz-Signature=abc") == std::string::npos)
      return std::string("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n");
    return std::string("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\npayload");
  });
  int cdn_port = cdn.port();
  RawServer hub([cdn_port](const std::string& req) {
    if (req.find("GET /org/m/") == 0)
      return std::string("HTTP/1.1 307 Temporary Redirect\r\nLocation: /new-org/m/resolve/main/f\r\nContent-Length: 0\r\n\r\n");
    return "HTTP/1.1 302 Found\r\nLocation: http://localhost:" + std::to_string(cdn_port) +
           "/file?X-Amz-Signature=abc&X-Amz-Expires=60\r\nContent-Length: 0\r\n\r\n";
  });
  auto t = hubload::MakeCurlTransport();
  hubload::HttpRequest req;
  req.url = "http://127.0.0.1:" + std::to_string(hub.port()) + "/org/m/resolve/main/f";
  req.headers.emplace_back("Authorization", "Bearer hf_TESTTOKEN");
  StringSink sink;
  auto r = t->Send(req, &sink);
  ASSERT_OK(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->redirects, 2);
  EXPECT_EQ(sink.got, "payload");
  EXPECT_EQ(r->effective_url.find("Signature"), std::string::npos);  // redacted
  auto hub_reqs = hub.requests();
  ASSERT_EQ(hub_reqs.size(), 2u);
  EXPECT_TRUE(HasHeader(hub_reqs[0], "Authorization"));
  EXPECT_TRUE(HasHeader(hub_reqs[1], "Authorization"));  // same-host relative redirect keeps it
  EXPECT_NE(hub_reqs[0].find("User-Agent: hubload/"), std::string::npos);
  auto cdn_reqs = cdn.requests();
  ASSERT_EQ(cdn_reqs.size(), 1u);
  EXPECT_FALSE(HasHeader(cdn_reqs[0], "Authorization"));
  EXPECT_EQ(cdn_reqs[0].find("hf_TESTTOKEN"), std::string::npos);
}

TEST(CurlTransport, NoRedirectFollowingWhenAsked) {
  RawServer hub([](const std::string&) {
    return std::string("HTTP/1.1 302 Found\r\nLocation: http://localhost:1/x\r\nX-Repo-Commit: abc\r\nContent-Length: 0\r\n\r\n");
  });
  hubload::HttpRequest req;
  req.method = "HEAD";
  req.url = "http://127.0.0.1:" + std::to_string(hub.port()) + "/f";
  req.follow_redirects = false;
  auto r = hubload::MakeCurlTransport()->Send(req, nullptr);
  ASSERT_OK(r);
  EXPECT_EQ(r->status, 302);
  EXPECT_EQ(r->headers.Get("x-repo-commit").value_or(""), "abc");  // case-insensitive lookup
}

TEST(CurlTransport, StalledBodyIsANetworkErrorWithinTheLimit) {
  // B19(b): headers and half the body, then silence.
  RawServer hub([](const std::string&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(0));
    return std::string("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n") + std::string(50, 'x');
  });
  // The raw server closes after writing, which is a short body, not a stall;
  // curl must report it as a network error rather than success.
  hubload::HttpRequest req;
  req.url = "http://127.0.0.1:" + std::to_string(hub.port()) + "/f";
  StringSink sink;
  auto r = hubload::MakeCurlTransport()->Send(req, &sink);
  EXPECT_EQ(r.status().code(), hubload::Code::kNetwork);
  EXPECT_EQ(sink.got.size(), 50u);
}

TEST(CurlTransport, ConnectionRefusedIsNetworkErrorWithRedactedUrl) {
  hubload::HttpRequest req;
  req.url = "http://user:pw123@127.0.0.1:9/x?X-Amz-Signature=SIGSECRET";
  auto r = hubload::MakeCurlTransport()->Send(req, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), hubload::Code::kNetwork);
  EXPECT_EQ(r.status().message().find("pw123"), std::string::npos);
  EXPECT_EQ(r.status().message().find("SIGSECRET"), std::string::npos);
  EXPECT_EQ(r.status().context().url.find("SIGSECRET"), std::string::npos);
}
