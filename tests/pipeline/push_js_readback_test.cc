// A sharded checkpoint pushed with PushStateDict is read back by the JS client
// (@huggingface/hub, pinned in tests/js): every file's bytes (sha256 of what
// JS downloaded) equal the bytes of a local SaveSharded of the same state
// dict, LFS oids in the JS listing equal those sha256, and after a push with
// fewer shards JS no longer sees the stale shards. Skipped (with a message)
// when node or the pinned JS client is not installed (tools/js-deps.sh).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "hubload/upload_torch.h"
#include "testing/push_server.h"
#include "testing/status_matchers.h"

namespace hubload {
namespace {
namespace fs = std::filesystem;
using pushtest::PushServer;
using pushtest::ReadText;
using testing::TempDir;

fs::path JsDir() {
  const char* src = std::getenv("HUBLOAD_SOURCE_DIR");
  return fs::path(src && *src ? src : HUBLOAD_TEST_SOURCE_DIR) / "tests" / "js";
}

bool JsClientAvailable(std::string* why) {
  std::string out;
  if (testing::RunCommand("node --version", &out) != 0) {
    *why = "node is not installed";
    return false;
  }
  if (!fs::exists(JsDir() / "node_modules" / "@huggingface" / "hub" / "package.json")) {
    *why = "@huggingface/hub is not installed in tests/js (run tools/js-deps.sh)";
    return false;
  }
  return true;
}

nlohmann::json ReadWithJs(PushServer& hub, const std::string& repo, const std::string& revision) {
  std::string out, err;
  int rc = testing::RunCommand("node " + (JsDir() / "push_read.mjs").string() + " " + hub.server().url() + " " + repo +
                                   " " + revision + " " + pushtest::kToken,
                               &out, &err);
  EXPECT_EQ(rc, 0) << err;
  auto j = nlohmann::json::parse(out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << out << err;
  return j.is_discarded() ? nlohmann::json::object() : j["files"];
}

StateDict MakeStateDict() {
  StateDict sd;
  for (int i = 0; i < 5; ++i)
    sd.emplace_back("block." + std::to_string(i) + ".weight", at::arange(512, at::kFloat).mul(i + 1).to(at::kHalf));
  return sd;
}

TEST(PushJs, JsClientReadsWhatWasPushed) {
  std::string why;
  if (!JsClientAvailable(&why)) GTEST_SKIP() << why;
  PushServer hub(512);  // small multipart chunk: the 1 KiB shards go multipart
  ASSERT_OK(hub);
  StateDict sd = MakeStateDict();
  PushStateDictRequest req;
  req.repo_id = "org/js";
  req.create_repo = true;
  req.save.max_shard_size = uint64_t{1024};
  auto p1 = PushStateDict(hub.client(), sd, req);
  ASSERT_OK(p1);

  TempDir local;
  SaveOptions so;
  so.max_shard_size = uint64_t{1024};
  auto saved = SaveSharded(sd, local.str(), so);
  ASSERT_OK(saved);
  ASSERT_EQ(saved->files.size(), 5u);

  auto files = ReadWithJs(hub, "org/js", p1->commit_oid);
  std::set<std::string> want_names{".gitattributes", saved->index_file};
  for (auto& f : saved->files) want_names.insert(f);
  std::set<std::string> got_names;
  for (auto& [p, v] : files.items()) got_names.insert(p);
  EXPECT_EQ(got_names, want_names);
  for (auto name : want_names) {
    if (name == ".gitattributes") continue;
    std::string bytes = ReadText(local.path() / name);
    ASSERT_TRUE(files.contains(name)) << name;
    EXPECT_EQ(files[name]["size"].get<uint64_t>(), bytes.size()) << name;
    EXPECT_EQ(files[name]["sha256"].get<std::string>(), testing::Sha256Hex(bytes.data(), bytes.size())) << name;
    if (name.find(".json") == std::string::npos) {
      EXPECT_EQ(files[name]["lfsOid"], testing::Sha256Hex(bytes.data(), bytes.size())) << name;
    }
  }

  // Fewer shards: JS sees exactly the new set at the new head.
  req.save.max_shard_size = uint64_t{2048};
  auto p2 = PushStateDict(hub.client(), sd, req);
  ASSERT_OK(p2);
  auto files2 = ReadWithJs(hub, "org/js", "main");
  std::set<std::string> got2;
  for (auto& [p, v] : files2.items()) got2.insert(p);
  EXPECT_EQ(got2, (std::set<std::string>{".gitattributes", "model-00001-of-00003.safetensors",
                                          "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors",
                                          "model.safetensors.index.json"}));
}

}  // namespace
}  // namespace hubload
