// util/percent.h: expected values are Python's urllib.parse.quote/unquote and
// parse_qsl outputs (written by hand here), never the code under test.
#include <gtest/gtest.h>

#include "util/percent.h"

namespace hubload::util {
namespace {

TEST(Percent, DecodeEscapesAndRejectsBadOnes) {
  EXPECT_EQ(PercentDecode("refs%2Fpr%2F1"), "refs/pr/1");
  EXPECT_EQ(PercentDecode("a%20b%23c%3F.txt"), "a b#c?.txt");
  EXPECT_EQ(PercentDecode("%2f%2F"), "//");  // both hex cases
  EXPECT_EQ(PercentDecode("a+b"), "a+b");     // '+' is literal in paths
  EXPECT_EQ(PercentDecode("a+b", true), "a b");
  EXPECT_EQ(PercentDecode("%00x")->size(), 2u);
  EXPECT_EQ(PercentDecode("raw space \"{}\""), "raw space \"{}\"");
  EXPECT_FALSE(PercentDecode("bad%zzescape").has_value());
  EXPECT_FALSE(PercentDecode("%").has_value());
  EXPECT_FALSE(PercentDecode("%4").has_value());
  EXPECT_EQ(PercentDecode(""), "");
}

TEST(Percent, EncodeAsPythonQuote) {
  // urllib.parse.quote("a b/#c?.txt~") == "a%20b/%23c%3F.txt~"
  EXPECT_EQ(PercentEncode("a b/#c?.txt~", "/"), "a%20b/%23c%3F.txt~");
  // quote("refs/pr/1", safe="") == "refs%2Fpr%2F1"
  EXPECT_EQ(PercentEncode("refs/pr/1"), "refs%2Fpr%2F1");
  EXPECT_EQ(PercentEncode("\xc3\xa9"), "%C3%A9");
  EXPECT_EQ(PercentEncode(std::string("\0", 1)), "%00");
}

TEST(Percent, ParseQueryAsParseQsl) {
  // parse_qsl("paths=a+b&paths=c%2Fd&expand=true&flag", keep_blank_values=True)
  auto q = ParseQuery("paths=a+b&paths=c%2Fd&expand=true&flag&&x=");
  ASSERT_TRUE(q.has_value());
  ASSERT_EQ(q->size(), 5u);
  EXPECT_EQ((*q)[0], (std::pair<std::string, std::string>{"paths", "a b"}));
  EXPECT_EQ((*q)[1], (std::pair<std::string, std::string>{"paths", "c/d"}));
  EXPECT_EQ((*q)[2], (std::pair<std::string, std::string>{"expand", "true"}));
  EXPECT_EQ((*q)[3], (std::pair<std::string, std::string>{"flag", ""}));
  EXPECT_EQ((*q)[4], (std::pair<std::string, std::string>{"x", ""}));
  EXPECT_FALSE(ParseQuery("a=%G1").has_value());
  EXPECT_TRUE(ParseQuery("")->empty());
}

}  // namespace
}  // namespace hubload::util
