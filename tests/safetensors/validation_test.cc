// One test per validation rule (loading-semantics.md E.1) with hand-built bytes,
// plus acceptance cases and truncation at every prefix of small real files.
#include <gtest/gtest.h>

#include <filesystem>

#include "hubload/safetensors.h"
#include "safetensors/independent.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace st = hubload::safetensors;
using hubload::Code;
using namespace hubload::testing;

namespace {

constexpr const char* kLabel = "model.safetensors";

hubload::Result<st::Header> Parse(const std::vector<uint8_t>& b) {
  return st::ParseHeader(b.data(), b.size(), b.size(), kLabel);
}

std::vector<uint8_t> Zeros(size_t n) { return std::vector<uint8_t>(n, 0); }

// Expects failure with `reason`; the message names the label, the reason, and
// `tensor` when given. Returns the message for further checks.
std::string ExpectReason(const hubload::Result<st::Header>& r, const std::string& reason,
                         const std::string& tensor = {}) {
  EXPECT_FALSE(r.ok());
  if (r.ok()) return {};
  const auto& s = r.status();
  EXPECT_EQ(s.code(), Code::kInvalidFormat) << s.ToString();
  EXPECT_EQ(s.reason(), reason) << s.ToString();
  EXPECT_NE(s.message().find(kLabel), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("(" + reason + ")"), std::string::npos) << s.message();
  EXPECT_EQ(s.context().file, kLabel);
  if (!tensor.empty()) {
    EXPECT_NE(s.message().find("tensor \"" + tensor + "\""), std::string::npos) << s.message();
    EXPECT_EQ(s.context().tensor, tensor);
  }
  return s.message();
}

std::string T(const std::string& name, const std::string& dtype, const std::string& shape, uint64_t b, uint64_t e) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
         std::to_string(b) + "," + std::to_string(e) + "]}";
}

TEST(SafetensorsValidation, HeaderTooSmall) {
  for (size_t n = 0; n < 8; ++n) {
    std::vector<uint8_t> b(n, 0);
    ExpectReason(Parse(b), "HeaderTooSmall");
  }
}

TEST(SafetensorsValidation, HeaderTooLarge) {
  // N = 100,000,001 (> the 100 MB limit), file claims to be big enough.
  std::vector<uint8_t> b = BuildFile("{}");
  uint64_t n = 100'000'001;
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(n >> (8 * i));
  auto r = st::ParseHeader(b.data(), b.size(), 200'000'000, kLabel);
  ExpectReason(r, "HeaderTooLarge");
  // Exactly the limit is not "too large" (it fails later, on length).
  n = 100'000'000;
  for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(n >> (8 * i));
  ExpectReason(Parse(b), "InvalidHeaderLength");
  // u64 max.
  std::fill(b.begin(), b.begin() + 8, 0xFF);
  ExpectReason(Parse(b), "HeaderTooLarge");
}

TEST(SafetensorsValidation, InvalidHeaderLengthSaysTruncated) {
  auto b = BuildFile("{\"a\":1}");
  b.pop_back();
  auto msg = ExpectReason(Parse(b), "InvalidHeaderLength");
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

TEST(SafetensorsValidation, InvalidHeaderUtf8) {
  const std::vector<std::string> bad = {
      "\xC0\xAF",          // overlong '/'
      "\xE0\x80\xAF",      // overlong 3-byte
      "\xED\xA0\x80",      // surrogate U+D800
      "\xF4\x90\x80\x80",  // U+110000
      "\x80",              // lone continuation
      "\xC3",              // truncated sequence
      "\xFF",
  };
  for (const auto& s : bad) {
    std::string text = "{\"" + s + "\":{}}";
    ExpectReason(Parse(BuildFile(text)), "InvalidHeaderUtf8");
  }
  // Valid multi-byte names (2-, 3-, 4-byte sequences, U+10FFFF) pass UTF-8 and parse.
  std::string name = "w\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF";
  auto r = Parse(BuildFile("{" + T(name, "U8", "[2]", 0, 2) + "}", Zeros(2)));
  ASSERT_OK(r);
  EXPECT_EQ(r->tensors[0].name, name);
}

TEST(SafetensorsValidation, InvalidHeaderJson) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", ""},
      {"[1,2]", ""},
      {"{\"a\":1}", "a"},
      {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}}", "a"},                        // no dtype
      {"{\"a\":{\"dtype\":8,\"shape\":[1],\"data_offsets\":[0,1]}}", "a"},            // dtype not string
      {"{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", "a"},                     // no shape
      {"{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", "a"},      // negative dim
      {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1.0],\"data_offsets\":[0,1]}}", "a"},     // float dim
      {"{\"a\":{\"dtype\":\"U8\",\"shape\":1,\"data_offsets\":[0,1]}}", "a"},         // shape not array
      {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}", "a"},     // 3 offsets
      {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0]}}", "a"},         // 1 offset
      {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[\"0\",\"1\"]}}", "a"},
      {"{\"__metadata__\":{\"k\":1}}", ""},                                          // non-string metadata
      {"{\"__metadata__\":[\"k\"]}", ""},
      {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,18446744073709551616]}}", "a"},  // > u64
  };
  for (const auto& [text, tensor] : cases) {
    SCOPED_TRACE(text);
    ExpectReason(Parse(BuildFile(text, Zeros(1))), "InvalidHeaderJson", tensor);
  }
}

TEST(SafetensorsValidation, DeepNestingIsRejectedWithoutCrash) {
  for (const std::string open : {"[", "{\"a\":"}) {
    std::string text;
    for (int i = 0; i < 100000; ++i) text += open;
    ExpectReason(Parse(BuildFile(text)), "InvalidHeaderJson");
  }
  // Brackets inside strings do not count.
  std::string name(500, '[');
  auto r = Parse(BuildFile("{" + T(name, "U8", "[1]", 0, 1) + "}", Zeros(1)));
  EXPECT_OK(r);
}

TEST(SafetensorsValidation, UnknownDtype) {
  for (const std::string dt : {"F128", "f32", "FLOAT", "", "F8_E4M3FN"}) {
    SCOPED_TRACE(dt);
    auto msg = ExpectReason(Parse(BuildFile("{" + T("w", dt, "[1]", 0, 4) + "}", Zeros(4))), "UnknownDtype", "w");
  }
}

TEST(SafetensorsValidation, DuplicateTensor) {
  std::string text = "{" + T("w", "U8", "[1]", 0, 1) + "," + T("w", "U8", "[1]", 1, 2) + "}";
  ExpectReason(Parse(BuildFile(text, Zeros(2))), "DuplicateTensor", "w");
}

TEST(SafetensorsValidation, InvalidOffset) {
  // First tensor does not begin at 0.
  auto m1 = ExpectReason(Parse(BuildFile("{" + T("a", "U8", "[2]", 2, 4) + "}", Zeros(4))), "InvalidOffset", "a");
  EXPECT_NE(m1.find("begin at 2"), std::string::npos) << m1;
  // Hole between a [0,2] and b [3,5].
  auto m2 = ExpectReason(
      Parse(BuildFile("{" + T("a", "U8", "[2]", 0, 2) + "," + T("b", "U8", "[2]", 3, 5) + "}", Zeros(5))),
      "InvalidOffset", "b");
  EXPECT_NE(m2.find("hole of 1 bytes"), std::string::npos) << m2;
  // Overlap.
  auto m3 = ExpectReason(
      Parse(BuildFile("{" + T("a", "U8", "[2]", 0, 2) + "," + T("b", "U8", "[2]", 1, 3) + "}", Zeros(3))),
      "InvalidOffset", "b");
  EXPECT_NE(m3.find("overlap"), std::string::npos) << m3;
  // end < begin.
  ExpectReason(Parse(BuildFile("{" + T("a", "U8", "[0]", 0, 0) + "," + T("b", "U8", "[2]", 2, 0) + "}", Zeros(2))),
               "InvalidOffset", "b");
  // Two names on the same byte range (aliasing) -> InvalidOffset, as the Rust parser.
  ExpectReason(
      Parse(BuildFile("{" + T("a", "U8", "[2]", 0, 2) + "," + T("b", "U8", "[2]", 0, 2) + "}", Zeros(2))),
      "InvalidOffset", "b");
}

TEST(SafetensorsValidation, ValidationOverflow) {
  // 2^32 * 2^32 elements overflows u64.
  ExpectReason(Parse(BuildFile("{" + T("a", "U8", "[4294967296,4294967296]", 0, 1) + "}", Zeros(1))),
               "ValidationOverflow", "a");
  // 2^60 elements fits, * 64 bits does not.
  ExpectReason(Parse(BuildFile("{" + T("a", "F64", "[1152921504606846976]", 0, 1) + "}", Zeros(1))),
               "ValidationOverflow", "a");
}

TEST(SafetensorsValidation, MisalignedSlice) {
  // 3 x 4-bit = 12 bits, 3 x 6-bit = 18 bits.
  ExpectReason(Parse(BuildFile("{" + T("a", "F4", "[3]", 0, 2) + "}", Zeros(2))), "MisalignedSlice", "a");
  ExpectReason(Parse(BuildFile("{" + T("a", "F6_E2M3", "[3]", 0, 2) + "}", Zeros(2))), "MisalignedSlice", "a");
  // 4 x 6-bit = 3 bytes is fine; 2 x 4-bit = 1 byte is fine.
  EXPECT_OK(Parse(BuildFile("{" + T("a", "F6_E3M2", "[4]", 0, 3) + "}", Zeros(3))));
  EXPECT_OK(Parse(BuildFile("{" + T("a", "F4", "[2]", 0, 1) + "}", Zeros(1))));
}

TEST(SafetensorsValidation, TensorInvalidInfoMessage) {
  auto r = Parse(BuildFile("{" + T("a.weight", "F32", "[2,2]", 0, 12) + "}", Zeros(12)));
  auto msg = ExpectReason(r, "TensorInvalidInfo", "a.weight");
  EXPECT_EQ(msg,
            "model.safetensors: tensor \"a.weight\": data_offsets [0,12] hold 12 bytes but shape [2,2] of F32 "
            "needs 16 (TensorInvalidInfo)");
}

TEST(SafetensorsValidation, MetadataIncompleteBuffer) {
  auto trailing = ExpectReason(Parse(BuildFile("{" + T("a", "U8", "[2]", 0, 2) + "}", Zeros(5))),
                               "MetadataIncompleteBuffer");
  EXPECT_NE(trailing.find("3 trailing bytes"), std::string::npos) << trailing;
  auto trunc = ExpectReason(Parse(BuildFile("{" + T("a", "U8", "[8]", 0, 8) + "}", Zeros(5))),
                            "MetadataIncompleteBuffer");
  EXPECT_NE(trunc.find("truncated"), std::string::npos) << trunc;
}

TEST(SafetensorsValidation, GitLfsPointer) {
  std::string ptr =
      "version https://git-lfs.github.com/spec/v1\n"
      "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
      "size 12345\n";
  std::vector<uint8_t> b(ptr.begin(), ptr.end());
  ExpectReason(Parse(b), "GitLfsPointer");
  // Recognised from the first 8 bytes too (the pipeline peeks early).
  auto peek = st::PeekHeaderLength(b.data(), 8, 1'000'000, kLabel);
  ASSERT_FALSE(peek.ok());
  EXPECT_EQ(peek.status().reason(), "GitLfsPointer");
}

TEST(SafetensorsValidation, HtmlPage) {
  for (const std::string page : {"<!DOCTYPE html><html><body>Not found</body></html>",
                                  "\n  <html lang=en><head></head></html>", "<!doctype html>\n<p>x</p>",
                                  "<HTML>"}) {
    SCOPED_TRACE(page);
    std::vector<uint8_t> b(page.begin(), page.end());
    ExpectReason(Parse(b), "HtmlPage");
  }
}

TEST(SafetensorsValidation, AcceptedEdgeCases) {
  // Leading/trailing JSON whitespace (Rust test_whitespace_*_padded_header).
  {
    auto r = Parse(BuildFile("  \n{" + T("a", "U8", "[2]", 0, 2) + "}\t  ", Zeros(2)));
    ASSERT_OK(r);
    EXPECT_EQ(r->tensors.size(), 1u);
  }
  // Empty header "{}" padded to 8: zero tensors, no data.
  {
    auto r = Parse(BuildFile("{}      "));
    ASSERT_OK(r);
    EXPECT_TRUE(r->tensors.empty());
    EXPECT_EQ(r->data_start, 16u);
  }
  // Zero-sized tensors may share an offset; 0-d tensor holds one element;
  // unknown fields ignored; __metadata__ null accepted.
  {
    std::string text = "{\"__metadata__\":null," + T("z1", "F32", "[0,3]", 0, 0) + "," +
                       T("z2", "I64", "[5,0]", 0, 0) + "," + T("s", "F64", "[]", 0, 8) + "," +
                       "\"x\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12],\"extra\":[1]}}";
    auto r = Parse(BuildFile(text, Zeros(12)));
    ASSERT_OK(r);
    ASSERT_EQ(r->tensors.size(), 4u);
    EXPECT_TRUE(r->metadata.empty());
    // File order: z1, z2 (both [0,0], by name), s [0,8], x [8,12].
    EXPECT_EQ(r->tensors[0].name, "z1");
    EXPECT_EQ(r->tensors[1].name, "z2");
    EXPECT_EQ(r->tensors[2].name, "s");
    EXPECT_EQ(r->tensors[3].name, "x");
    EXPECT_EQ(r->Find("s")->num_elements(), 1u);
    EXPECT_EQ(r->Find("z2")->num_elements(), 0u);
    EXPECT_EQ(r->Find("x")->dtype, st::Dtype::BF16);
  }
}

TEST(SafetensorsValidation, EveryPrefixOfSmallFilesFails) {
  std::vector<std::vector<uint8_t>> files;
  // A hand-built file ...
  files.push_back(BuildFile("{\"__metadata__\":{\"format\":\"pt\"}," + T("a", "F32", "[2]", 0, 8) + "," +
                                T("b", "U8", "[3]", 8, 11) + "}",
                            Zeros(11)));
  // ... and small real files when the corpus is present.
  auto root = SharedDataDir();
  if (!root.empty()) {
    for (const char* rel : {"safetensors/huggingface__safetensors__B.safetensors",
                            "safetensors/run-ai__runai-model-streamer__test.safetensors",
                            "safetensors/run-ai__runai-model-streamer__test_empty.safetensors"}) {
      files.push_back(ReadFileBytes(root / rel));
    }
  }
  TempDir tmp;
  for (const auto& full : files) {
    ASSERT_OK(Parse(full));
    for (size_t len = 0; len < full.size(); ++len) {
      std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(len));
      auto r = st::ParseHeader(prefix.data(), prefix.size(), prefix.size(), kLabel);
      ASSERT_FALSE(r.ok()) << "prefix of " << len << " bytes parsed";
      EXPECT_EQ(r.status().code(), Code::kInvalidFormat);
      if (len >= 8) {
        EXPECT_NE(r.status().message().find("truncated"), std::string::npos)
            << len << ": " << r.status().message();
      }
    }
    // Through the file APIs too, for a handful of prefixes.
    for (size_t len : {size_t{0}, size_t{7}, size_t{8}, full.size() / 2, full.size() - 1}) {
      auto p = tmp.path() / ("prefix" + std::to_string(len));
      WriteFileBytes(p, full.data(), len);
      EXPECT_FALSE(st::ReadMetadata(p.string()).ok()) << len;
      auto f = st::SafetensorsFile::Open(p.string());
      ASSERT_FALSE(f.ok()) << len;
      EXPECT_EQ(f.status().code(), Code::kInvalidFormat);
      EXPECT_EQ(f.status().context().file, p.string());
    }
  }
}

TEST(SafetensorsValidation, FileErrors) {
  auto r = st::ReadMetadata("/nonexistent/dir/model.safetensors");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/dir/model.safetensors"), std::string::npos);
  TempDir tmp;
  auto m = st::MappedFile::Open(tmp.str());  // a directory
  EXPECT_FALSE(m.ok());
  // Empty file maps fine (size 0), but is not a valid safetensors file.
  auto empty = tmp.path() / "empty.safetensors";
  WriteFileBytes(empty, "");
  auto em = st::MappedFile::Open(empty.string());
  ASSERT_OK(em);
  EXPECT_EQ((*em)->size(), 0u);
  EXPECT_EQ((*em)->path(), empty.string());
  auto ef = st::SafetensorsFile::Open(empty.string());
  ASSERT_FALSE(ef.ok());
  EXPECT_EQ(ef.status().reason(), "HeaderTooSmall");
}

TEST(SafetensorsDtype, TableMatchesSpec) {
  ASSERT_EQ(static_cast<size_t>(st::kNumDtypes), SpecDtypes().size());
  for (int i = 0; i < st::kNumDtypes; ++i) {
    auto d = static_cast<st::Dtype>(i);
    EXPECT_EQ(st::DtypeName(d), SpecDtypes()[i].first);
    EXPECT_EQ(st::DtypeBits(d), SpecDtypes()[i].second);
    EXPECT_EQ(st::DtypeFromName(SpecDtypes()[i].first), d);
  }
  EXPECT_FALSE(st::DtypeFromName("f32").has_value());
  EXPECT_FALSE(st::DtypeFromName("F32 ").has_value());
}

}  // namespace
