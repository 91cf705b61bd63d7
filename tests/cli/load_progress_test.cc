// `hubload load` progress (tools/hubload/progress_bar.h fed by
// PretrainedRequest::progress): under a pseudo-terminal (script(1)) a
// bandwidth-capped load from `hubload serve` shows progress lines with '%'
// and the shard count before the summary; piped, or with --quiet or
// HF_HUB_DISABLE_PROGRESS_BARS=1, nothing of it; --json stays clean on stdout.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "testing/hub_server.h"
#include "testing/util.h"

namespace {
using hubload::testing::HubloadBin;
using hubload::testing::RunCommand;
using hubload::testing::TempDir;

// A safetensors file written by hand: one U8 tensor `name` of `n` bytes (value i % 251).
std::string Shard(const std::string& name, size_t n) {
  std::string header = "{\"" + name + "\":{\"dtype\":\"U8\",\"shape\":[" + std::to_string(n) +
                       "],\"data_offsets\":[0," + std::to_string(n) + "]}}";
  while (header.size() % 8) header += ' ';
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  out += header;
  for (size_t i = 0; i < n; ++i) out += static_cast<char>(i % 251);
  return out;
}

struct Fixture {
  std::unique_ptr<hubload::testing::TestHub> hub;
  TempDir cache;
  std::string Cmd(const std::string& extra) const {
    return "'" + HubloadBin() + "' load org/m --endpoint " + hub->url() + " --cache-dir " + cache.str() + " " + extra;
  }
};

constexpr size_t kShard = 1536 * 1024;

std::unique_ptr<Fixture> Start(uint64_t bytes_per_s) {
  auto f = std::make_unique<Fixture>();
  f->hub = hubload::testing::StartTestHub();
  if (!f->hub) return nullptr;
  const std::string index =
      "{\"metadata\":{\"total_size\":" + std::to_string(2 * kShard) +
      "},\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\",\"b\":\"model-00002-of-00002.safetensors\"}}";
  hubload::server::CreateRepoOptions o;
  o.lfs_threshold_bytes = 1024;
  f->hub->AddRepo("org/m",
                  {{"config.json", "{}"},
                   {"model.safetensors.index.json", index},
                   {"model-00001-of-00002.safetensors", Shard("a", kShard)},
                   {"model-00002-of-00002.safetensors", Shard("b", kShard)}},
                  o);
  f->hub->faults().SetTotalBandwidthBytesPerSec(bytes_per_s);
  return f;
}

bool HasProgress(const std::string& s) {
  return s.find("ETA") != std::string::npos || s.find("shards 0/2") != std::string::npos;
}

TEST(LoadProgress, TerminalShowsProgressBeforeTheSummary) {
  auto f = Start(2 * 1024 * 1024);  // ~1.5 s for 3 MiB
  ASSERT_TRUE(f);
  std::string out, err;
  // script(1) gives the command a pseudo-terminal; its output is the terminal's (stdout + stderr).
  int rc = RunCommand("script -qfec \"" + f->Cmd("") + "\" /dev/null", &out, &err);
  ASSERT_EQ(rc, 0) << out << err;
  const size_t summary = out.find("2 tensors, " + std::to_string(2 * kShard) + " bytes, from 2 file(s)");
  ASSERT_NE(summary, std::string::npos) << out;
  const size_t pct = out.find('%');
  ASSERT_NE(pct, std::string::npos) << out;
  EXPECT_LT(pct, summary);
  const size_t shards = out.find("shards 0/2");
  ASSERT_NE(shards, std::string::npos) << out;
  EXPECT_LT(shards, summary);
  EXPECT_NE(out.find("ETA"), std::string::npos) << out;
  EXPECT_NE(out.find("/s"), std::string::npos) << out;
}

TEST(LoadProgress, NothingWhenPipedQuietOrDisabled) {
  auto f = Start(8 * 1024 * 1024);
  ASSERT_TRUE(f);
  std::string out, err;
  // Piped: stdout is exactly the JSON report, stderr carries no progress.
  ASSERT_EQ(RunCommand(f->Cmd("--json"), &out, &err), 0) << err;
  EXPECT_FALSE(HasProgress(err)) << err;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["files"].size(), 2u) << out;
  // On a terminal with --quiet or HF_HUB_DISABLE_PROGRESS_BARS=1: the summary only.
  for (const std::string& cmd : {f->Cmd("--quiet"), "HF_HUB_DISABLE_PROGRESS_BARS=1 " + f->Cmd("")}) {
    SCOPED_TRACE(cmd);
    ASSERT_EQ(RunCommand("script -qfec \"" + cmd + "\" /dev/null", &out, &err), 0) << out << err;
    EXPECT_NE(out.find("2 tensors"), std::string::npos) << out;
    EXPECT_FALSE(HasProgress(out)) << out;
    EXPECT_EQ(out.find('%'), std::string::npos) << out;
  }
}

}  // namespace
