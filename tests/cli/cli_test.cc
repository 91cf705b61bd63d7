// Top-level CLI behaviour (tools/hubload/main.cc): global flags, exit codes,
// and the --distributed spelling of download/load.
#include <gtest/gtest.h>

#include <string>

#include "testing/util.h"

namespace {
using hubload::testing::HubloadBin;
using hubload::testing::RunCommand;

TEST(Cli, DistributedFlagSelectsTheJobWideDownload) {
  std::string out, err;
  int rc = RunCommand(HubloadBin() + " download org/name --distributed --help", &out, &err);
  EXPECT_EQ(rc, 0) << err;
  EXPECT_NE(out.find("Usage: hubload download-distributed"), std::string::npos) << out;
  rc = RunCommand(HubloadBin() + " load org/name --distributed --help", &out, &err);
  EXPECT_EQ(rc, 0) << err;
  EXPECT_NE(out.find("Usage: hubload load-distributed"), std::string::npos) << out;
}

TEST(Cli, DistributedFlagElsewhereIsAUsageError) {
  std::string out, err;
  int rc = RunCommand(HubloadBin() + " inspect x.safetensors --distributed", &out, &err);
  EXPECT_GT(rc, 0);
  EXPECT_LT(rc, 128);
  EXPECT_NE(err.find("--distributed"), std::string::npos) << err;
}

TEST(Cli, UnknownSubcommandAndMissingSubcommandFailBelow128) {
  std::string out, err;
  int rc = RunCommand(HubloadBin() + " no-such-command", &out, &err);
  EXPECT_GT(rc, 0);
  EXPECT_LT(rc, 128);
  rc = RunCommand(HubloadBin(), &out, &err);
  EXPECT_GT(rc, 0);
  EXPECT_LT(rc, 128);
}

TEST(Cli, VersionNamesHubload) {
  std::string out;
  ASSERT_EQ(RunCommand(HubloadBin() + " --version", &out), 0);
  EXPECT_EQ(out.rfind("hubload ", 0), 0u) << out;
}

}  // namespace
