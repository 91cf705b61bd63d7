// The scheme / redirect / header decisions of the client (hub/url_policy.h),
// tested directly: an https -> http redirect needs a TLS server to happen on
// the wire, which the test suite does not have, so the decision function the
// transport and the HEAD probe call is checked here instead.
#include "hub/url_policy.h"

#include <gtest/gtest.h>

#include "hubload/reasons.h"
#include "testing/status_matchers.h"

namespace hi = hubload::hub_internal;

TEST(UrlPolicy, SchemeOfUrl) {
  EXPECT_EQ(hi::UrlScheme("https://huggingface.co/x"), "https");
  EXPECT_EQ(hi::UrlScheme("HTTP://h/"), "http");
  EXPECT_EQ(hi::UrlScheme("file:///etc/passwd"), "file");
  EXPECT_EQ(hi::UrlScheme("/relative/path"), "");
  EXPECT_EQ(hi::UrlScheme("://nohost"), "");
  EXPECT_EQ(hi::UrlScheme("1http://h"), "");
}

TEST(UrlPolicy, OnlyHttpAndHttpsEndpoints) {
  EXPECT_OK(hi::CheckHttpUrl("https://huggingface.co", "endpoint"));
  EXPECT_OK(hi::CheckHttpUrl("http://127.0.0.1:8080", "endpoint"));
  for (const char* bad : {"ftp://x", "file:///tmp", "gopher://h", "dict://h", "ldap://h", "127.0.0.1:80", ""}) {
    auto st = hi::CheckHttpUrl(bad, "endpoint");
    EXPECT_EQ(st.code(), hubload::Code::kInvalidArgument) << bad;
    EXPECT_TRUE(st.Is(hubload::reason::kUnsupportedScheme)) << bad;
    EXPECT_NE(st.message().find("endpoint"), std::string::npos) << st.message();
  }
  // The named URL is shown redacted: no password, no query string.
  auto st = hi::CheckHttpUrl("ftp://user:pw@h/p?token=s3cret", "endpoint");
  EXPECT_EQ(st.message().find("pw"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("s3cret"), std::string::npos) << st.message();
}

TEST(UrlPolicy, RedirectDecisions) {
  // Followed: same scheme, and an upgrade to https.
  EXPECT_OK(hi::CheckRedirect("https://hub/x", "https://cdn/y", false));
  EXPECT_OK(hi::CheckRedirect("http://hub/x", "http://cdn/y", false));
  EXPECT_OK(hi::CheckRedirect("http://hub/x", "https://cdn/y", false));
  // https -> http: refused unless the endpoint itself is http.
  auto down = hi::CheckRedirect("https://hub/x", "http://cdn/y?X-Amz-Signature=sig", false);
  EXPECT_EQ(down.code(), hubload::Code::kUnsupported);
  EXPECT_TRUE(down.Is(hubload::reason::kInsecureRedirect)) << down.ToString();
  EXPECT_EQ(down.message().find("sig"), std::string::npos) << down.message();
  EXPECT_OK(hi::CheckRedirect("https://hub/x", "HTTP://cdn/y", true));
  EXPECT_TRUE(hi::CheckRedirect("HTTPS://hub/x", "http://cdn/y", false).Is(hubload::reason::kInsecureRedirect));
  // Other schemes: never, whatever the endpoint.
  for (const char* to : {"file:///etc/passwd", "ftp://h/f", "gopher://h/1", "dict://h/d:x", "FILE:///x", "smb://h/s"}) {
    for (bool allow : {false, true}) {
      auto st = hi::CheckRedirect("http://hub/x", to, allow);
      EXPECT_EQ(st.code(), hubload::Code::kUnsupported) << to;
      EXPECT_TRUE(st.Is(hubload::reason::kUnsupportedScheme)) << to;
    }
  }
}

TEST(UrlPolicy, HeaderValuesWithoutLineBreaksOrNul) {
  EXPECT_OK(hi::CheckHeader("Authorization", "Bearer hf_abc"));
  EXPECT_OK(hi::CheckHeader("User-Agent", "hubload/1.0; python/3.11"));
  for (std::string v : {std::string("a\r\nX: y"), std::string("a\nb"), std::string("a\rb"), std::string("a\0b", 3)}) {
    auto st = hi::CheckHeader("Authorization", "Bearer " + v);
    EXPECT_EQ(st.code(), hubload::Code::kInvalidArgument);
    EXPECT_TRUE(st.Is(hubload::reason::kBadHeaderValue));
    EXPECT_NE(st.message().find("Authorization"), std::string::npos);
    EXPECT_EQ(st.message().find("Bearer"), std::string::npos) << st.message();  // the value is never shown
  }
  EXPECT_TRUE(hi::CheckHeader("X-A\r\nB", "v").Is(hubload::reason::kBadHeaderValue));
  EXPECT_TRUE(hi::CheckHeader("", "v").Is(hubload::reason::kBadHeaderValue));
  EXPECT_TRUE(hi::CheckHeader("X:Y", "v").Is(hubload::reason::kBadHeaderValue));
}
