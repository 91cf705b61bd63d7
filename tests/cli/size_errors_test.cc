// Issue 20: every CLI option that takes a size goes through the one size
// grammar (hubload/size.h): 1GiB and 1GB are sizes, bits (1Gb), signs and
// words are usage errors (exit 2) quoting the user's text; and a long list a
// message cuts ("... and 152 more") is printed whole in the --json error.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "testing/util.h"

namespace {
namespace fs = std::filesystem;
using hubload::testing::HubloadBin;
using hubload::testing::RunCommand;
using hubload::testing::TempDir;
using json = nlohmann::json;

std::string Q(const std::string& s) { return "'" + s + "'"; }

TEST(SizeOptions, EveryOptionUsesTheOneGrammarAndQuotesRefusedText) {
  TempDir d;
  const std::string missing = (d.path() / "no-such-checkpoint").string();
  const std::string cache = (d.path() / "cache").string();
  fs::create_directories(cache);
  // {V} is the size; each command fails (exit 1) or succeeds after the option is read.
  const std::vector<std::string> commands = {
      "load " + Q(missing) + " --local --device-backend fake --fake-gpus 1 --fake-gpu-memory {V}",
      "load " + Q(missing) + " --local --device-map auto --device-backend fake --max-memory 0={V},cpu={V}",
      "reshard " + Q(missing) + " " + Q((d.path() / "out").string()) + " --max-shard-size {V}",
      "--cache-dir " + Q(cache) + " cache ls --filter 'size>{V}'",
      // rank 5 of 2: refused after the options are read, before any rendezvous.
      "download-distributed org/m --master-addr 127.0.0.1 --master-port 1 --rank 5 --world-size 2 --chunk-bytes {V}",
      "load-distributed org/m --master-addr 127.0.0.1 --master-port 1 --rank 5 --world-size 2 --chunk-bytes {V}",
  };
  for (const auto& c : commands) {
    auto with = [&](const std::string& v) {
      std::string s = c;
      for (size_t p; (p = s.find("{V}")) != std::string::npos;) s.replace(p, 3, v);
      return s;
    };
    for (const std::string ok : {"1GiB", "1GB"}) {
      SCOPED_TRACE(with(ok));
      std::string out, err;
      const int rc = RunCommand(Q(HubloadBin()) + " " + with(ok), &out, &err);
      EXPECT_NE(rc, 2) << err;
      EXPECT_EQ(err.find("invalid size"), std::string::npos) << err;
    }
    for (const std::string bad : {"1Gb", "-5GB", "abc"}) {
      SCOPED_TRACE(with(bad));
      std::string out, err;
      EXPECT_EQ(RunCommand(Q(HubloadBin()) + " " + with(bad), &out, &err), 2) << err;
      EXPECT_NE(err.find("'" + bad + "'"), std::string::npos) << err;
      EXPECT_NE(err.find("invalid size"), std::string::npos) << err;
    }
  }
  EXPECT_FALSE(fs::exists(d.path() / "out"));
}

TEST(JsonErrors, MissingShardsMessageIsCutTheJsonErrorListsEveryShard) {
  TempDir d;
  // An index naming 162 shards, none of them present.
  constexpr int kShards = 162;
  std::vector<std::string> expected;
  json wm = json::object();
  for (int i = 1; i <= kShards; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", i, kShards);
    expected.push_back(name);
    wm["layer." + std::to_string(i) + ".weight"] = name;
  }
  hubload::testing::WriteFileBytes(d.path() / "model.safetensors.index.json",
                                   json{{"metadata", {{"total_size", 0}}}, {"weight_map", wm}}.dump());
  std::string out, err;
  EXPECT_EQ(RunCommand(Q(HubloadBin()) + " load " + Q(d.str()) + " --local --json", &out, &err), 1) << err;
  // The message: the first 10 names, then the count of the rest.
  EXPECT_NE(err.find("names 162 shard(s) that are not present"), std::string::npos) << err;
  EXPECT_NE(err.find("... and 152 more"), std::string::npos) << err;
  EXPECT_EQ(err.find(expected.back()), std::string::npos) << "the message should cut the list";
  // The --json error on stdout: all 162.
  json j = json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  ASSERT_TRUE(j.contains("error")) << out;
  EXPECT_EQ(j["error"]["reason"], "MissingShards");
  EXPECT_EQ(j["error"]["code"], "NotFound");
  ASSERT_TRUE(j["error"]["names"].is_array()) << out;
  std::vector<std::string> names;
  for (const auto& n : j["error"]["names"]) names.push_back(n.get<std::string>());
  EXPECT_EQ(names, expected);
  // Without --json, stdout stays empty.
  out.clear();
  EXPECT_EQ(RunCommand(Q(HubloadBin()) + " load " + Q(d.str()) + " --local", &out, &err), 1);
  EXPECT_EQ(out, "");
}

}  // namespace
