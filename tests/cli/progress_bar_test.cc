// The CLI renderer's formatting (tools/hubload/progress_bar.h): every expected
// string is computed by hand from the documented layout (24-cell bar, binary
// units with one decimal, percentage and ETA rounded down).
#include "tools/hubload/progress_bar.h"

#include <gtest/gtest.h>

namespace {
using namespace hubload::cli;

TEST(ProgressFormat, HumanBytesUsesBinaryUnits) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
  EXPECT_EQ(HumanBytes(1024), "1.0 KiB");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");                         // 1536 / 1024
  EXPECT_EQ(HumanBytes(3.0 * 1024 * 1024 + 2), "3.0 MiB");        // 3.0000019 MiB
  EXPECT_EQ(HumanBytes(5.0 * 1024 * 1024 * 1024), "5.0 GiB");
}

TEST(ProgressFormat, BarCellsAreDoneOverTotalRoundedDown) {
  EXPECT_EQ(FormatBar(0, 0), "[........................]");
  EXPECT_EQ(FormatBar(1, 2), "[############............]");  // 12 of 24
  EXPECT_EQ(FormatBar(1, 3), "[########................]");  // 8 of 24
  EXPECT_EQ(FormatBar(2, 3), "[################........]");  // 16 of 24
  EXPECT_EQ(FormatBar(99, 100), "[#######################.]");  // 23.76 -> 23
  EXPECT_EQ(FormatBar(5, 4), "[########################]");  // more than the total: full
}

TEST(ProgressFormat, EtaIsBytesLeftOverRate) {
  EXPECT_EQ(FormatEta(0, 100, 0), "-");      // no rate yet
  EXPECT_EQ(FormatEta(100, 100, 10), "-");   // nothing left
  EXPECT_EQ(FormatEta(0, 100, 10), "10 s");  // 100 B at 10 B/s
  EXPECT_EQ(FormatEta(1, 600, 10), "59 s");  // 59.9 s
  EXPECT_EQ(FormatEta(0, 600, 10), "1 min 00 s");
  EXPECT_EQ(FormatEta(0, 3599, 1), "59 min 59 s");
  EXPECT_EQ(FormatEta(0, 3725, 1), "1 h 02 min");  // 1 h 2 min 5 s
}

TEST(ProgressFormat, FileLine) {
  EXPECT_EQ(FormatFileLine("a.bin", 512, 2048), "[######..................] 512 B / 2.0 KiB  a.bin");  // 1/4 of 24
  EXPECT_EQ(FormatFileLine("x", 0, 0), "[........................] 0 B / ?  x");
}

TEST(ProgressFormat, TotalLine) {
  // 512 KiB of 1 MiB at 256 KiB/s: 50 %, (1 MiB - 512 KiB) / 256 KiB/s = 2 s.
  EXPECT_EQ(FormatTotalLine("", 524288, 1048576, 262144.0, ""),
            "[############............]  50% 512.0 KiB / 1.0 MiB  256.0 KiB/s  ETA 2 s");
  EXPECT_EQ(FormatTotalLine("", 524288, 1048576, 262144.0, "total"),
            "[############............]  50% 512.0 KiB / 1.0 MiB  256.0 KiB/s  ETA 2 s  total");
  // 1 of 3 bytes: 33.3 % -> 33, no rate: ETA "-".
  EXPECT_EQ(FormatTotalLine("", 1, 3, 0, ""), "[########................]  33% 1 B / 3 B  0 B/s  ETA -");
  EXPECT_EQ(FormatTotalLine("uploading", 3 << 20, 3 << 20, 1.5 * (1 << 20), "shards 2/2"),
            "uploading [########################] 100% 3.0 MiB / 3.0 MiB  1.5 MiB/s  ETA -  shards 2/2");
  // A phase with nothing counted is its label alone; with a suffix it is a full line.
  EXPECT_EQ(FormatTotalLine("committing", 0, 0, 0, ""), "committing");
  EXPECT_EQ(FormatTotalLine("", 0, 0, 0, "shards 0/2"), "[........................]   0% 0 B / 0 B  0 B/s  ETA -  shards 0/2");
  // 10 MiB left at 1 MiB/s with 2 of 12 MiB done: 16.6 % -> 16, ETA 10 s.
  EXPECT_EQ(FormatTotalLine("hashing", 2 << 20, 12 << 20, 1 << 20, ""),
            "hashing [####....................]  16% 2.0 MiB / 12.0 MiB  1.0 MiB/s  ETA 10 s");
}

TEST(ProgressFormat, NamesAreShortenedInTheMiddleToFitTheWidth) {
  // 32 characters; at 20 columns: 17 left after "...", 17/3 = 5 from the start, 12 from the end.
  EXPECT_EQ(ShortenMiddle("model-00001-of-00004.safetensors", 20), "model....safetensors");
  EXPECT_EQ(ShortenMiddle("model-00001-of-00004.safetensors", 32), "model-00001-of-00004.safetensors");
  EXPECT_EQ(ShortenMiddle("abcdef", 3), "def");
  // UTF-8: "é" is two bytes, one column; 7 characters at 5 columns: 2/3 = 0 from the start, 2 from the end.
  EXPECT_EQ(TextColumns("\xc3\xa9t\xc3\xa9.bin"), 7u);
  EXPECT_EQ(ShortenMiddle("\xc3\xa9t\xc3\xa9.bin", 5), "...in");
  // 6 characters at 4 columns: 1 after "...", from the end; at 3 columns: the last 3.
  EXPECT_EQ(ShortenMiddle("\xc3\xa9t\xc3\xa9\xc3\xa9\xc3\xa9", 4), "...\xc3\xa9");
  EXPECT_EQ(ShortenMiddle("\xc3\xa9t\xc3\xa9\xc3\xa9\xc3\xa9", 3), "\xc3\xa9\xc3\xa9\xc3\xa9");
  EXPECT_EQ(CutToColumns("\xc3\xa9t\xc3\xa9.bin", 3), "\xc3\xa9t\xc3\xa9");
  EXPECT_EQ(CutToColumns("abc", 0), "abc");
}

TEST(ProgressFormat, LinesFitTheColumnsGiven) {
  // The file line's head "[" + 24 + "] 512 B / 2.0 KiB  " is 44 columns; at 55 the name gets 11:
  // 8 after "...", 8/3 = 2 from the start, 6 from the end.
  const std::string head = "[######..................] 512 B / 2.0 KiB  ";
  ASSERT_EQ(head.size(), 44u);
  EXPECT_EQ(FormatFileLine("transformer/model.bin", 512, 2048, 55), head + "tr...el.bin");
  EXPECT_EQ(FormatFileLine("a.bin", 512, 2048, 55), head + "a.bin");
  // Too narrow for the name: the whole line is cut.
  EXPECT_EQ(FormatFileLine("a.bin", 512, 2048, 30), head.substr(0, 30));
  // The total line (84 columns) loses its bar and the space after it (57 left) first, then is cut.
  const std::string total = "[############............]  50% 512.0 KiB / 1.0 MiB  256.0 KiB/s  ETA 2 s  files 1/2";
  EXPECT_EQ(FitTotalLine(total, 0), total);
  EXPECT_EQ(FitTotalLine(total, total.size()), total);
  EXPECT_EQ(FitTotalLine(total, 70), " 50% 512.0 KiB / 1.0 MiB  256.0 KiB/s  ETA 2 s  files 1/2");
  EXPECT_EQ(FitTotalLine(total, 20), " 50% 512.0 KiB / 1.0");
  EXPECT_EQ(FitTotalLine("hashing [####....................]  16% 2.0 MiB", 20), "hashing  16% 2.0 MiB");
}

}  // namespace
