// `hubload inspect INDEX` with the shards beside it: the same cross-check as
// `load` (safetensors::CheckIndexAgainstShards), every problem named, and
// metadata.total_size against the tensors' bytes. Shards are written here
// byte by byte (BuildFile: length + header text + data); the expected
// problems and byte sums are worked out by hand from what the test wrote.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hubload/reasons.h"
#include "hubload/safetensors.h"
#include "safetensors/cli_run.h"
#include "safetensors/independent.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

using namespace hubload::testing;
namespace st = hubload::safetensors;

namespace {

// A shard of F32 vectors: {name -> elements}; data is zeros.
void WriteShard(const std::filesystem::path& p, const std::vector<std::pair<std::string, int>>& tensors) {
  nlohmann::json h = nlohmann::json::object();
  uint64_t off = 0;
  for (const auto& [name, n] : tensors) {
    h[name] = {{"dtype", "F32"}, {"shape", {n}}, {"data_offsets", {off, off + 4 * n}}};
    off += 4 * n;
  }
  auto bytes = BuildFile(h.dump(), std::vector<uint8_t>(off, 0));
  WriteFileBytes(p, bytes.data(), bytes.size());
}

void WriteIndex(const std::filesystem::path& p, const std::map<std::string, std::string>& wm,
                std::optional<uint64_t> total_size) {
  nlohmann::json j{{"weight_map", wm}, {"metadata", nlohmann::json::object()}};
  if (total_size) j["metadata"]["total_size"] = *total_size;
  WriteFileBytes(p, j.dump());
}

struct CliRun {
  int rc;
  std::string out, err;
};
CliRun Inspect(const std::filesystem::path& index, const std::string& flags = "") {
  CliRun r;
  r.rc = RunCommand(Q(Bin()) + " inspect " + flags + " " + Q(index.string()), &r.out, &r.err);
  return r;
}

constexpr const char* kS1 = "model-00001-of-00002.safetensors";
constexpr const char* kS2 = "model-00002-of-00002.safetensors";

TEST(InspectIndexCrossCheck, ConsistentCheckpointPasses) {
  TempDir tmp;
  WriteShard(tmp.path() / kS1, {{"a", 3}, {"b", 2}});
  WriteShard(tmp.path() / kS2, {{"c", 5}});
  WriteIndex(tmp.path() / "model.safetensors.index.json", {{"a", kS1}, {"b", kS1}, {"c", kS2}}, 4 * (3 + 2 + 5));
  CliRun r = Inspect(tmp.path() / "model.safetensors.index.json", "--json --strict");
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["problems"], nlohmann::json::array());
  EXPECT_EQ(j["warnings"], nlohmann::json::array());
  EXPECT_EQ(j["tensor_bytes"], 40);
  EXPECT_EQ(j["cross_checked"], true);
}

TEST(InspectIndexCrossCheck, EveryProblemIsNamed) {
  TempDir tmp;
  // Index: a,b,c -> s1; d,x -> s2.  s1 holds a, d;  s2 holds b, d, e, x.
  //  s1: b and c listed there but absent (Missing); d stored twice (s1 and s2; index says s2).
  //  s2: b held but the index puts it in s1 (InOtherShard); e unlisted.
  WriteShard(tmp.path() / kS1, {{"a", 1}, {"d", 1}});
  WriteShard(tmp.path() / kS2, {{"b", 1}, {"d", 1}, {"e", 1}, {"x", 1}});
  WriteIndex(tmp.path() / "model.safetensors.index.json",
             {{"a", kS1}, {"b", kS1}, {"c", kS1}, {"d", kS2}, {"x", kS2}}, std::nullopt);
  CliRun r = Inspect(tmp.path() / "model.safetensors.index.json", "--json");
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  auto j = nlohmann::json::parse(r.out);
  std::vector<std::tuple<std::string, std::string, std::string>> got;
  for (auto& p : j["problems"]) got.emplace_back(p["reason"], p["shard"], p["tensor"]);
  std::vector<std::tuple<std::string, std::string, std::string>> want = {
      {"IndexTensorMissing", kS1, "b"},
      {"IndexTensorMissing", kS1, "c"},
      {"IndexTensorStoredTwice", kS1, "d"},
      {"IndexTensorInOtherShard", kS2, "b"},
      {"IndexTensorUnlisted", kS2, "e"},
  };
  EXPECT_EQ(got, want) << r.out;
  EXPECT_EQ(j["ok"], false);
  // Text: exit 1, each problem on stderr naming shard and tensor.
  CliRun t = Inspect(tmp.path() / "model.safetensors.index.json");
  EXPECT_EQ(t.rc, 1);
  EXPECT_NE(t.err.find("5 problem(s)"), std::string::npos) << t.err;
  EXPECT_NE(t.err.find(std::string(kS2) + ": tensor \"e\""), std::string::npos) << t.err;
  EXPECT_NE(t.err.find("stored in 2 shards"), std::string::npos) << t.err;
}

TEST(InspectIndexCrossCheck, LongListsAreCutWithTheFullListInJson) {
  TempDir tmp;
  std::vector<std::pair<std::string, int>> many{{"a", 1}};
  for (int i = 0; i < 25; ++i) many.emplace_back("extra." + std::to_string(i), 1);
  WriteShard(tmp.path() / kS1, many);
  WriteShard(tmp.path() / kS2, {{"z", 1}});
  WriteIndex(tmp.path() / "model.safetensors.index.json", {{"a", kS1}, {"z", kS2}}, std::nullopt);
  CliRun t = Inspect(tmp.path() / "model.safetensors.index.json");
  EXPECT_EQ(t.rc, 1);
  EXPECT_NE(t.err.find("... and 15 more"), std::string::npos) << t.err;
  EXPECT_EQ(t.err.find("\"extra.24\""), std::string::npos) << t.err;
  CliRun j = Inspect(tmp.path() / "model.safetensors.index.json", "--json");
  EXPECT_EQ(nlohmann::json::parse(j.out)["problems"].size(), 25u);
}

TEST(InspectIndexCrossCheck, AbsentShardIsNamedAndAnIndexAloneIsNotCrossChecked) {
  TempDir tmp;
  WriteShard(tmp.path() / kS1, {{"a", 1}});
  WriteIndex(tmp.path() / "model.safetensors.index.json", {{"a", kS1}, {"b", kS2}, {"c", kS2}}, std::nullopt);
  CliRun r = Inspect(tmp.path() / "model.safetensors.index.json", "--json");
  EXPECT_EQ(r.rc, 1);
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["problems"].size(), 1u) << r.out;
  EXPECT_EQ(j["problems"][0]["reason"], "IndexShardMissing");
  EXPECT_EQ(j["problems"][0]["shard"], kS2);
  std::filesystem::remove(tmp.path() / kS1);
  CliRun alone = Inspect(tmp.path() / "model.safetensors.index.json", "--json");
  EXPECT_EQ(alone.rc, 0) << alone.err;
  EXPECT_EQ(nlohmann::json::parse(alone.out)["cross_checked"], false);
}

TEST(InspectIndexCrossCheck, TotalSizeMismatchWarnsAndFailsUnderStrict) {
  TempDir tmp;
  WriteShard(tmp.path() / kS1, {{"a", 3}});
  WriteShard(tmp.path() / kS2, {{"b", 4}});
  WriteIndex(tmp.path() / "model.safetensors.index.json", {{"a", kS1}, {"b", kS2}}, 29);  // tensors hold 28
  CliRun r = Inspect(tmp.path() / "model.safetensors.index.json");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("warning:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("total_size is 29 bytes but the tensors hold 28 bytes"), std::string::npos) << r.err;
  CliRun s = Inspect(tmp.path() / "model.safetensors.index.json", "--strict");
  EXPECT_EQ(s.rc, 1) << s.err;
  CliRun sj = Inspect(tmp.path() / "model.safetensors.index.json", "--strict --json");
  EXPECT_EQ(sj.rc, 1);
  EXPECT_EQ(nlohmann::json::parse(sj.out)["warnings"].size(), 1u);
}

// The library function, and that load's per-shard check names the same first problem.
TEST(CheckIndexAgainstShards, SameRulesAsTheLoadCheck) {
  auto idx = st::ParseIndex(R"({"metadata":{"total_size":12},"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}})",
                            "idx");
  ASSERT_OK(idx);
  std::vector<st::ShardTensors> shards(2);
  shards[0].shard = "s1.safetensors";
  shards[0].tensors = {{"a", 4}, {"b", 4}};
  shards[1].shard = "s2.safetensors";
  shards[1].tensors = {{"b", 4}};
  st::IndexCheck c = st::CheckIndexAgainstShards(*idx, shards);
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_EQ(c.problems[0].reason, hubload::reason::kIndexTensorStoredTwice);
  EXPECT_EQ(c.tensor_bytes, 12u);
  EXPECT_EQ(c.total_size_warning, "");
  std::vector<std::string_view> names{"a", "b"};
  hubload::Status one = st::CheckShardNamesAgainstIndex(*idx, "s1.safetensors", names);
  EXPECT_TRUE(one.Is(hubload::reason::kIndexTensorInOtherShard)) << one.ToString();
  EXPECT_EQ(one.context().tensor, "b");
  shards[0].tensors = {{"a", 4}};
  c = st::CheckIndexAgainstShards(*idx, shards);
  EXPECT_TRUE(c.problems.empty());
  EXPECT_EQ(c.tensor_bytes, 8u);
  EXPECT_NE(c.total_size_warning.find("total_size is 12 bytes but the tensors hold 8 bytes"), std::string::npos);
  EXPECT_EQ(st::TotalSizeWarning(*idx, 12), "");
}

}  // namespace

namespace {

// `load` reports the same total_size mismatch as a warning and still loads.
TEST(InspectIndexCrossCheck, LoadWarnsAboutTotalSize) {
  TempDir tmp;
  WriteShard(tmp.path() / kS1, {{"a", 3}});
  WriteShard(tmp.path() / kS2, {{"b", 4}});
  WriteIndex(tmp.path() / "model.safetensors.index.json", {{"a", kS1}, {"b", kS2}}, 100);  // tensors hold 28
  std::string out, err;
  ASSERT_EQ(RunCommand(Q(Bin()) + " load " + Q(tmp.str()) + " --json", &out, &err), 0) << out << err;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  bool found = false;
  for (auto& w : j["warnings"])
    found |= w.get<std::string>().find("total_size is 100 bytes but the tensors hold 28 bytes") != std::string::npos;
  EXPECT_TRUE(found) << j["warnings"].dump();
  WriteIndex(tmp.path() / "model.safetensors.index.json", {{"a", kS1}, {"b", kS2}}, 28);
  ASSERT_EQ(RunCommand(Q(Bin()) + " load " + Q(tmp.str()) + " --json", &out, &err), 0) << out << err;
  j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  for (auto& w : j["warnings"]) EXPECT_EQ(w.get<std::string>().find("total_size"), std::string::npos) << w;
}

// `load --strict`: the same mismatch is an error (exit 1, nothing printed as a report), as `inspect --strict`;
// the --json error names the reason. A matching total_size loads under --strict.
TEST(InspectIndexCrossCheck, LoadStrictFailsOnTotalSize) {
  TempDir tmp;
  WriteShard(tmp.path() / kS1, {{"a", 3}});
  WriteShard(tmp.path() / kS2, {{"b", 4}});
  WriteIndex(tmp.path() / "model.safetensors.index.json", {{"a", kS1}, {"b", kS2}}, 100);  // tensors hold 28
  std::string out, err;
  EXPECT_EQ(RunCommand(Q(Bin()) + " load " + Q(tmp.str()) + " --strict", &out, &err), 1) << out << err;
  EXPECT_EQ(out, "");
  EXPECT_NE(err.find("total_size is 100 bytes but the tensors hold 28 bytes"), std::string::npos) << err;
  EXPECT_NE(err.find("--strict"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_EQ(RunCommand(Q(Bin()) + " load " + Q(tmp.str()) + " --strict --json", &out, &err), 1) << out << err;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["error"]["reason"], hubload::reason::kTotalSizeMismatch);
  EXPECT_EQ(j["error"]["file"], (tmp.path() / "model.safetensors.index.json").string());
  WriteIndex(tmp.path() / "model.safetensors.index.json", {{"a", kS1}, {"b", kS2}}, 28);
  EXPECT_EQ(RunCommand(Q(Bin()) + " load " + Q(tmp.str()) + " --strict --json", &out, &err), 0) << out << err;
}

// An index error of `load` names the shard once (the index's name for it), not the local path and then
// the index's name again.
TEST(InspectIndexCrossCheck, LoadNamesTheShardOnce) {
  TempDir tmp;
  WriteShard(tmp.path() / kS1, {{"a", 1}});
  WriteShard(tmp.path() / kS2, {{"b", 1}});
  WriteIndex(tmp.path() / "model.safetensors.index.json", {{"a", kS1}, {"b", kS2}, {"d", kS1}}, std::nullopt);
  std::string out, err;
  EXPECT_EQ(RunCommand(Q(Bin()) + " load " + Q(tmp.str()), &out, &err), 1) << out << err;
  EXPECT_NE(err.find("tensor \"d\""), std::string::npos) << err;
  size_t n = 0;
  for (size_t p = err.find(kS1); p != std::string::npos; p = err.find(kS1, p + 1)) ++n;
  EXPECT_EQ(n, 1u) << err;
}

}  // namespace
