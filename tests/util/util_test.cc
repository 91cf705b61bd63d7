// util/: expected values are published test vectors (FIPS 180-2, RFC 4231,
// RFC 4648) and `git hash-object` output, never the code under test.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "testing/util.h"
#include "util/base64.h"
#include "util/digest.h"
#include "util/file_io.h"
#include "util/hex.h"
#include "util/text.h"
#include "util/utf8.h"
#include "testing/status_matchers.h"

namespace hubload::util {
namespace {

TEST(Hex, LowerCase) {
  const unsigned char b[] = {0x00, 0x01, 0xab, 0xff};
  EXPECT_EQ(Hex(b, 4), "0001abff");
  EXPECT_EQ(Hex(std::string_view()), "");
  EXPECT_TRUE(IsLowerHex("0123456789abcdef"));
  EXPECT_FALSE(IsLowerHex("ABC"));
  EXPECT_FALSE(IsLowerHex(""));
}

// RFC 3629 section 7 examples and its rules (overlongs, surrogates, > U+10FFFF).
TEST(Utf8, Rfc3629) {
  size_t pos = 0;
  uint32_t cp = 0;
  const std::string han = "\xE6\x97\xA5";  // U+65E5 (RFC 3629 example 3)
  ASSERT_TRUE(NextCodePoint(han, &pos, &cp));
  EXPECT_EQ(cp, 0x65E5u);
  EXPECT_EQ(pos, 3u);
  pos = 0;
  const std::string emoji = "\xF0\xA3\x8E\xB4";  // U+233B4 (example 4)
  ASSERT_TRUE(NextCodePoint(emoji, &pos, &cp));
  EXPECT_EQ(cp, 0x233B4u);
  EXPECT_TRUE(IsValidUtf8("A\xE2\x89\xA2\xCE\x91."));  // example 1
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_EQ(FindInvalidUtf8(reinterpret_cast<const uint8_t*>("ab\xC0\xAF"), 4), 2u);  // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate U+D800
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // U+110000
  EXPECT_FALSE(IsValidUtf8("\x80"));                // lone continuation
  EXPECT_FALSE(IsValidUtf8("\xE6\x97"));            // truncated
  pos = 0;
  EXPECT_FALSE(NextCodePoint("\xFF", &pos, &cp));
  EXPECT_EQ(pos, 0u);
}

TEST(Digest, Sha256Vectors) {
  // FIPS 180-2 appendix B.1 and the empty message.
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha1Hex("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
}

TEST(Digest, StreamingAndCopyAreIndependent) {
  Digest d;
  d.Update("ab");
  Digest copy = d;  // a copy finishes without disturbing the original
  d.Update("c");
  EXPECT_EQ(d.HexDigest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  copy.Update("c");
  EXPECT_EQ(copy.HexDigest(), d.HexDigest());
  EXPECT_EQ(d.HexDigest(), d.HexDigest());  // HexDigest does not finalise
  d.Reset();
  EXPECT_EQ(d.HexDigest(), Sha256Hex(""));
}

TEST(Digest, GitBlobIdMatchesGitHashObject) {
  // `printf 'hello\n' | git hash-object --stdin` and the empty blob.
  EXPECT_EQ(GitBlobId("hello\n"), "ce013625030ba8dba906f756967f9e9ca394464a");
  EXPECT_EQ(GitBlobId(""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
  Digest g = GitBlobHasher(6);
  g.Update("hel");
  g.Update("lo\n");
  EXPECT_EQ(g.HexDigest(), "ce013625030ba8dba906f756967f9e9ca394464a");
}

TEST(Digest, HmacRfc4231Case2) {
  EXPECT_EQ(Hex(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(Digest, Files) {
  hubload::testing::TempDir dir;
  std::string p = dir.str() + "/f";
  std::ofstream(p) << "hello\n";
  auto s = Sha256File(p);
  ASSERT_OK(s);
  EXPECT_EQ(*s, "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03");  // sha256sum
  auto g = GitBlobIdOfFile(p);
  ASSERT_OK(g);
  EXPECT_EQ(*g, "ce013625030ba8dba906f756967f9e9ca394464a");
  auto missing = Sha256File(dir.str() + "/nope");
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
}

TEST(Digest, FileHashReportsEachBlock) {
  hubload::testing::TempDir dir;
  const std::string p = dir.str() + "/f";
  const size_t n = (2u << 20) + 5;  // two 1 MiB blocks and 5 bytes
  std::ofstream(p, std::ios::binary) << std::string(n, 'x');
  std::vector<uint64_t> seen;
  auto s = Sha256File(p, [&](uint64_t b) { seen.push_back(b); });
  ASSERT_OK(s);
  EXPECT_EQ(seen, (std::vector<uint64_t>{1u << 20, 2u << 20, n}));
  seen.clear();
  ASSERT_OK(GitBlobIdOfFile(p, [&](uint64_t b) { seen.push_back(b); }));
  EXPECT_EQ(seen.back(), n);
}

TEST(Base64, Rfc4648Vectors) {
  const std::pair<const char*, const char*> v[] = {{"", ""},        {"f", "Zg=="},         {"fo", "Zm8="},
                                                    {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="},
                                                    {"foobar", "Zm9vYmFy"}};
  for (auto [plain, enc] : v) {
    EXPECT_EQ(Base64Encode(plain), enc);
    auto d = Base64Decode(enc);
    ASSERT_TRUE(d.has_value()) << enc;
    EXPECT_EQ(*d, plain);
  }
  std::string bin("\x00\xff\x10", 3);
  EXPECT_EQ(*Base64Decode(Base64Encode(bin)), bin);
}

TEST(Base64, RejectsNonCanonical) {
  for (const char* bad : {"Zg", "Zg=", "Z===", "Zm9v\n", "Zm=v", "Zm9*", "=Zm9"}) EXPECT_FALSE(Base64Decode(bad)) << bad;
}

TEST(FileIo, AtomicWriteReplacesAndLeavesNoTemp) {
  hubload::testing::TempDir dir;
  std::string p = dir.str() + "/sub/x.json";
  ASSERT_OK(AtomicWriteFile(p, "one"));
  ASSERT_OK(AtomicWriteFile(p, "two", {.mode = 0600, .durable = true}));
  auto r = ReadSmallFile(p);
  ASSERT_OK(r);
  EXPECT_EQ(*r, "two");
  struct stat st;
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.str() + "/sub")) n += e.is_regular_file();
  EXPECT_EQ(n, 1);
}

TEST(FileIo, ErrnoMapping) {
  EXPECT_EQ(IoError("write", "/x", ENOSPC).code(), Code::kDiskFull);
  EXPECT_EQ(IoError("write", "/x", EDQUOT).reason(), "DiskFull");
  EXPECT_EQ(IoError("open", "/x", ENOENT).code(), Code::kNotFound);
  EXPECT_EQ(IoError("open", "/x/y", ENOTDIR).reason(), "NotFound");
  EXPECT_EQ(IoError("open", "/x", EACCES).reason(), "PermissionDenied");
  Status ro = IoError("create", "/ro/lock", EROFS);
  EXPECT_EQ(ro.code(), Code::kIOError);
  EXPECT_EQ(ro.reason(), "ReadOnlyFileSystem");
  EXPECT_NE(ro.message().find("/ro/lock"), std::string::npos);
  EXPECT_EQ(ro.context().file, "/ro/lock");
}

// The streamed form (the safetensors writer's): a body that fails leaves the old
// file and no temp; a missing folder is an error when create_parents is false.
TEST(FileIo, AtomicWriteWithBodyIsAllOrNothing) {
  hubload::testing::TempDir dir;
  const std::string p = dir.str() + "/w.bin";
  ASSERT_OK(AtomicWriteFile(p, "old"));
  Status st = AtomicWriteFileWith(p, [](int fd, const std::string& tmp) {
    EXPECT_OK(WriteAll(fd, "new but", 7, tmp));
    return Status(Code::kIOError, "body failed", "BodyFailed");
  });
  EXPECT_EQ(st.reason(), "BodyFailed");
  EXPECT_EQ(*ReadSmallFile(p), "old");
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.str())) n += e.is_regular_file();
  EXPECT_EQ(n, 1) << "the temp file is removed";
  ASSERT_OK(AtomicWriteFileWith(p, [](int fd, const std::string& tmp) {
    HUBLOAD_RETURN_IF_ERROR(WriteAll(fd, "ab", 2, tmp));
    return WriteAll(fd, "cd", 2, tmp);  // appends at the file position
  }));
  EXPECT_EQ(*ReadSmallFile(p), "abcd");
  Status missing = AtomicWriteFileWith(dir.str() + "/no/such/x", {}, {.create_parents = false});
  EXPECT_EQ(missing.code(), Code::kNotFound) << missing.ToString();
  EXPECT_FALSE(std::filesystem::exists(dir.str() + "/no"));
}

TEST(FileIo, ReadSmallFileLimits) {
  hubload::testing::TempDir dir;
  std::string p = dir.str() + "/big";
  std::ofstream(p) << std::string(100, 'x');
  EXPECT_EQ(ReadSmallFile(p, 99).status().reason(), "FileTooLarge");
  EXPECT_EQ(ReadSmallFile(dir.str()).status().reason(), "NotARegularFile");
}

TEST(StatusDiscipline, ResultFromOkStatusIsInternal) {
  Result<int> r = Status::Ok();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInternal);
  EXPECT_EQ(r.status().reason(), "OkStatusAsError");
}

TEST(StatusDiscipline, AnnotateFillsOnlyEmptyFields) {
  ErrorContext low;
  low.file = "blobs/abc";
  Status s(Code::kIOError, "x", "IOError", low);
  ErrorContext up;
  up.repo_id = "org/m";
  up.file = "model.safetensors";
  Status a = s.Annotate(up);
  EXPECT_EQ(a.context().repo_id, "org/m");
  EXPECT_EQ(a.context().file, "blobs/abc");
  EXPECT_TRUE(a.Is("IOError"));
  EXPECT_FALSE(Status::Ok().Is(""));
}

TEST(Text, TrimBlanksAndDigits) {
  EXPECT_EQ(TrimBlanks(" \t10 GB\t "), "10 GB");
  EXPECT_EQ(TrimBlanks("   "), "");
  EXPECT_EQ(TrimBlanks("\nx"), "\nx");  // only spaces and tabs
  EXPECT_TRUE(AllDigits("0123456789"));
  EXPECT_FALSE(AllDigits(""));
  EXPECT_FALSE(AllDigits("12a"));
  EXPECT_FALSE(AllDigits("-1"));
}

// Untrusted names in messages: expected strings written by hand.
TEST(Text, PrintableAndQuoted) {
  EXPECT_EQ(Printable("a\nb\x7f"), "a\\x0ab\\x7f");
  EXPECT_EQ(Printable("caf\xc3\xa9"), "caf\xc3\xa9");       // valid UTF-8 kept
  EXPECT_EQ(Printable("f\xff.txt"), "f\\xff.txt");           // not UTF-8: every byte >= 0x80 escaped
  EXPECT_EQ(Printable("abcdef", 4), "abcd...");
  EXPECT_EQ(Printable("ab\xc3\xa9", 3), "ab...");              // never cut inside a character
  EXPECT_EQ(Printable("a\"b\\c"), "a\"b\\c");                // quotes and backslashes as they are
  EXPECT_EQ(Quoted("a\"b\\c"), "\"a\\\"b\\\\c\"");          // "a\"b\\c"
  EXPECT_EQ(Quoted("x\ty"), "\"x\\x09y\"");
  EXPECT_EQ(Quoted(""), "\"\"");
}

TEST(Text, CaseInsensitive) {
  EXPECT_TRUE(EqualsIgnoreCase("Content-Length", "content-length"));
  EXPECT_FALSE(EqualsIgnoreCase("ab", "abc"));
  EXPECT_FALSE(EqualsIgnoreCase("\xc3\xa9", "\xc3\x89"));  // ASCII only: no Unicode folding
  EXPECT_TRUE(EndsWithIgnoreCase("model-Q4_K_M.GGUF", ".gguf"));
  EXPECT_FALSE(EndsWithIgnoreCase("gguf", ".gguf"));
  EXPECT_EQ(AsciiLower("HTTP/1.1 OK"), "http/1.1 ok");
}

// The shard suffix huggingface_hub and gguf-split write: "-00002-of-00005".
TEST(Text, ShardSuffix) {
  auto s = ParseShardSuffix("model-00002-of-00005");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->prefix_len, 5u);
  EXPECT_EQ(s->shard, 2);
  EXPECT_EQ(s->count, 5);
  EXPECT_FALSE(s->malformed);
  EXPECT_TRUE(ParseShardSuffix("m-00000-of-00005")->malformed);
  EXPECT_TRUE(ParseShardSuffix("m-00006-of-00005")->malformed);
  EXPECT_FALSE(ParseShardSuffix("-00001-of-00002"));   // nothing before the suffix
  EXPECT_FALSE(ParseShardSuffix("m-0001-of-00002"));   // four digits
  EXPECT_FALSE(ParseShardSuffix("m-00001-of-0000x"));
  EXPECT_FALSE(ParseShardSuffix("model"));
  EXPECT_EQ(FormatShardSuffix(2, 5), "-00002-of-00005");
  EXPECT_EQ(FormatShardSuffix(12, 100000), "-00012-of-100000");  // as Python's {:05d}
}

// Long lists in one-line errors: the first N, then the count of the rest.
TEST(JoinCut, FirstItemsThenTheCountOfTheRest) {
  std::vector<std::string> v;
  for (int i = 1; i <= 162; ++i) v.push_back("s" + std::to_string(i));
  EXPECT_EQ(JoinCut(v, 3), "s1, s2, s3 ... and 159 more");
  EXPECT_EQ(JoinCut({"a", "b"}, 3), "a, b");
  EXPECT_EQ(JoinCut({"a", "b", "c"}, 3), "a, b, c");
  EXPECT_EQ(JoinCut({"a", "b"}, 0), "a, b");
  EXPECT_EQ(JoinCut({}, 3), "");
  EXPECT_EQ(JoinCut(v).size(), std::string("s1, s2, s3, s4, s5, s6, s7, s8, s9, s10 ... and 152 more").size());
}

}  // namespace
}  // namespace hubload::util
