// URL encoding (B17), redaction (B22), origins, fnmatch filters (huggingface_hub rules).
#include <gtest/gtest.h>

#include "hub/url.h"
#include "hubload/hub.h"

TEST(HubUrl, RevisionIsOneEncodedSegment) {
  // huggingface_hub quote(rev, safe=""); expected strings from field-failures.md B17.
  EXPECT_EQ(hubload::EncodeRevision("refs/pr/1"), "refs%2Fpr%2F1");
  EXPECT_EQ(hubload::EncodeRevision("feature/x"), "feature%2Fx");
  EXPECT_EQ(hubload::EncodeRevision("fix#1"), "fix%231");
  EXPECT_EQ(hubload::EncodeRevision("a%20b"), "a%2520b");  // a literal percent sign
  EXPECT_EQ(hubload::EncodeRevision("main"), "main");
}

TEST(HubUrl, PathKeepsSeparatorsAndEncodesTheRest) {
  EXPECT_EQ(hubload::EncodePath("eval/C1_or_C2?_premise/x.json"), "eval/C1_or_C2%3F_premise/x.json");
  EXPECT_EQ(hubload::EncodePath("dir with space/\xc3\xbc-na\xc3\xafve.txt"), "dir%20with%20space/%C3%BC-na%C3%AFve.txt");
  EXPECT_EQ(hubload::EncodePath("a#b.txt"), "a%23b.txt");
  EXPECT_EQ(hubload::EncodePath("100%.txt"), "100%25.txt");
  EXPECT_EQ(hubload::EncodePath("plus+sign.txt"), "plus%2Bsign.txt");
}

TEST(HubUrl, RedactDropsUserinfoAndQuery) {
  EXPECT_EQ(hubload::RedactUrl("http://user:pw123@proxy:3128/x?X-Amz-Signature=SIGSECRET"), "http://proxy:3128/x");
  EXPECT_EQ(hubload::RedactUrl("https://h/a/b"), "https://h/a/b");
}

TEST(HubUrl, OriginsCompareSchemeHostPort) {
  EXPECT_EQ(hubload::UrlOrigin("http://127.0.0.1:80/x"), hubload::UrlOrigin("http://127.0.0.1/y"));
  EXPECT_NE(hubload::UrlOrigin("http://127.0.0.1:8000/x"), hubload::UrlOrigin("http://localhost:8000/x"));
  EXPECT_NE(hubload::UrlOrigin("http://h:1/x"), hubload::UrlOrigin("http://h:2/x"));
  EXPECT_NE(hubload::UrlOrigin("http://h/x"), hubload::UrlOrigin("https://h/x"));
}

TEST(HubUrl, ResolveLocation) {
  EXPECT_EQ(hubload::ResolveUrl("http://h:1/a/b/c", "/new/p"), "http://h:1/new/p");
  EXPECT_EQ(hubload::ResolveUrl("http://h:1/a/b/c", "d"), "http://h:1/a/b/d");
  EXPECT_EQ(hubload::ResolveUrl("http://h:1/a/b/c", "../d"), "http://h:1/a/d");
  EXPECT_EQ(hubload::ResolveUrl("http://h:1/a", "//cdn:2/f?s=1"), "http://cdn:2/f?s=1");
  EXPECT_EQ(hubload::ResolveUrl("http://h:1/a", "http://cdn:2/f"), "http://cdn:2/f");
}

TEST(HubPatterns, FnmatchLikePython) {
  // Python fnmatch.fnmatchcase results, computed by hand.
  EXPECT_TRUE(hubload::FnMatch("*.json", "config.json"));
  EXPECT_TRUE(hubload::FnMatch("*.json", "sub/x.json"));  // * crosses '/'
  EXPECT_TRUE(hubload::FnMatch("data/*.json", "data/x/y.json"));
  EXPECT_FALSE(hubload::FnMatch("*.JSON", "config.json"));  // case-sensitive
  EXPECT_TRUE(hubload::FnMatch("model-0000?-of-00002.safetensors", "model-00001-of-00002.safetensors"));
  EXPECT_TRUE(hubload::FnMatch("[ab].txt", "a.txt"));
  EXPECT_FALSE(hubload::FnMatch("[!ab].txt", "a.txt"));
  EXPECT_TRUE(hubload::FnMatch("[!ab].txt", "c.txt"));
  EXPECT_TRUE(hubload::FnMatch("[a-c]x", "bx"));
  EXPECT_FALSE(hubload::FnMatch("a", "ab"));
  EXPECT_TRUE(hubload::FnMatch("*", ""));
  EXPECT_TRUE(hubload::FnMatch("[", "["));
}

TEST(HubPatterns, AllowIgnoreAndTrailingSlash) {
  using V = std::vector<std::string>;
  EXPECT_TRUE(hubload::MatchesPatterns("sub/a.bin", V{"sub/"}, {}));  // "sub/" → "sub/*"
  EXPECT_FALSE(hubload::MatchesPatterns("other/a.bin", V{"sub/"}, {}));
  EXPECT_TRUE(hubload::MatchesPatterns("x.json", {}, {}));
  EXPECT_FALSE(hubload::MatchesPatterns("x.bin", V{"*.json"}, {}));
  EXPECT_FALSE(hubload::MatchesPatterns("x.json", V{"*.json"}, V{"x*"}));
  EXPECT_TRUE(hubload::MatchesPatterns("y.json", V{"*.json"}, V{"x*"}));
}
