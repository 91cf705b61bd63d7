// VerifyFolder's progress callback (hubload/cache.h): bytes hashed of the
// listed total, one last call per listed file (absent ones included), the
// totals computed here from the files written.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hubload/cache.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace hubload {
namespace {

TEST(VerifyProgress, BytesHashedOfTheListedTotalPerFile) {
  testing::TempDir dir;
  const std::string big((1u << 20) + 100, 'b'), small = "hello\n";
  testing::WriteFileBytes(dir.path() / "big.bin", big);
  testing::WriteFileBytes(dir.path() / "small.txt", small);
  const std::vector<ExpectedFile> expected = {
      {"big.bin", big.size(), "", testing::Sha256Hex(big.data(), big.size())},
      {"missing.txt", 7, testing::GitBlobSha1Hex("absent\n"), ""},
      {"small.txt", small.size(), testing::GitBlobSha1Hex(small), ""},
  };
  const uint64_t total = big.size() + 7 + small.size();
  std::vector<VerifyProgress> calls;
  auto rep = VerifyFolder(dir.str(), expected, [&](const VerifyProgress& p) { calls.push_back(p); });
  ASSERT_OK(rep);
  EXPECT_EQ(rep->verified, (std::vector<std::string>{"big.bin", "small.txt"}));
  EXPECT_EQ(rep->missing, (std::vector<std::string>{"missing.txt"}));
  ASSERT_FALSE(calls.empty());
  std::vector<std::string> ends;  // the file of each call with files_done advanced
  size_t files_done = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].bytes_total, total);
    EXPECT_EQ(calls[i].files_total, 3u);
    if (i) {
      EXPECT_GE(calls[i].bytes_done, calls[i - 1].bytes_done);
    }
    if (calls[i].files_done != files_done) {
      files_done = calls[i].files_done;
      ends.push_back(calls[i].path);
      EXPECT_EQ(calls[i].file_bytes_done, calls[i].file_bytes_total) << calls[i].path;
    }
  }
  EXPECT_EQ(ends, (std::vector<std::string>{"big.bin", "missing.txt", "small.txt"}));
  // big.bin is hashed in two blocks: 1 MiB, then the rest.
  EXPECT_EQ(calls[0].path, "big.bin");
  EXPECT_EQ(calls[0].file_bytes_done, 1u << 20);
  EXPECT_EQ(calls.back().bytes_done, total);
  EXPECT_EQ(calls.back().files_done, 3u);
}

}  // namespace
}  // namespace hubload
