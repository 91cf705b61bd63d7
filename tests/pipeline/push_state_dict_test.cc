// PushStateDict: save sharded + one upload commit that deletes stale shards
// of the same weights name and variant. Expected tensors are the in-memory
// originals; expected bytes are those of a local SaveSharded of the same
// state dict (the loader's save, independent of the upload code); expected
// trees are read from the server's store folder.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hub/url.h"
#include "hubload/hub.h"
#include "hubload/pipeline.h"
#include "hubload/upload_torch.h"
#include "testing/push_server.h"
#include "testing/status_matchers.h"

namespace hubload {
namespace {
namespace fs = std::filesystem;
using pushtest::PushServer;
using pushtest::ReadText;
using testing::TempDir;

// 6 float32 tensors of 256 elements (1 KiB each) and one bf16 tensor.
StateDict MakeStateDict() {
  StateDict sd;
  for (int i = 0; i < 6; ++i) {
    at::Tensor t = at::arange(256, at::kFloat).mul(0.5 + i).add(i);
    sd.emplace_back("layers." + std::to_string(i) + ".weight", t);
  }
  sd.emplace_back("norm.bias", at::linspace(-2, 2, 64, at::kFloat).to(at::kBFloat16));  // 128 bytes
  return sd;
}

std::set<std::string> Names(const std::map<std::string, std::string>& tree) {
  std::set<std::string> s;
  for (auto& [p, b] : tree) s.insert(p);
  return s;
}

// Loads the checkpoint of `commit` through hubload's downloader (fresh cache)
// and compares every tensor with the original.
void ExpectLoadsBack(PushServer& hub, const std::string& repo, const std::string& commit, const std::string& index_or_file,
                     const StateDict& want) {
  TempDir cache;
  HubClient client(hub.ReaderOptions(cache.str()));
  SnapshotRequest sr;
  sr.repo_id = repo;
  sr.revision = commit;
  auto snap = client.Snapshot(sr);
  ASSERT_OK(snap);
  auto ck = LoadCheckpoint(*snap + "/" + index_or_file, ResolveOptions{}, LoadOptions{});
  ASSERT_OK(ck);
  std::map<std::string, at::Tensor> got(ck->tensors.begin(), ck->tensors.end());
  ASSERT_EQ(got.size(), want.size());
  for (auto& [name, t] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_EQ(got[name].scalar_type(), t.scalar_type()) << name;
    EXPECT_TRUE(at::equal(got[name], t)) << name;
  }
}

PushStateDictRequest Req(const std::string& repo, uint64_t max_shard) {
  PushStateDictRequest r;
  r.repo_id = repo;
  r.create_repo = true;
  r.save.max_shard_size = max_shard;
  return r;
}

TEST(PushStateDict, ShardsRoundTripAndStaleShardsAreDeletedInTheSameCommit) {
  PushServer hub(4096);
  ASSERT_OK(hub);
  const std::string repo = "org/sharded";
  StateDict sd = MakeStateDict();

  // Files that must survive every push: another variant and an unrelated file.
  TempDir other;
  testing::WriteFileBytes(other.path() / "model.fp16.safetensors", pushtest::PatternBytes(300, 2));
  testing::WriteFileBytes(other.path() / "README.md", std::string("# model\n"));
  UploadFolderRequest ur;
  ur.repo_id = repo;
  ur.folder = other.str();
  ur.create_repo = true;
  auto base = hub.client().UploadFolder(ur);
  ASSERT_OK(base);

  // 1) 2 KiB shards: 3 shards + index.
  auto p1 = PushStateDict(hub.client(), sd, Req(repo, 2048));
  ASSERT_OK(p1);
  auto tree1 = hub.Tree(repo, p1->commit_oid);
  EXPECT_EQ(Names(tree1), (std::set<std::string>{".gitattributes", "README.md", "model.fp16.safetensors",
                                                  "model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors",
                                                  "model-00003-of-00004.safetensors", "model-00004-of-00004.safetensors",
                                                  "model.safetensors.index.json"}));
  // Byte-for-byte what the loader's save writes locally.
  TempDir local;
  SaveOptions so;
  so.max_shard_size = uint64_t{2048};
  auto saved = SaveSharded(sd, local.str(), so);
  ASSERT_OK(saved);
  ASSERT_EQ(saved->files.size(), 4u);  // [w0 w1] [w2 w3] [w4 w5] [bias]: 2048 + 128 > 2048
  for (auto& f : saved->files) EXPECT_EQ(tree1[f], ReadText(local.path() / f)) << f;
  EXPECT_EQ(tree1["model.safetensors.index.json"], ReadText(local.path() / "model.safetensors.index.json"));
  ExpectLoadsBack(hub, repo, p1->commit_oid, "model.safetensors.index.json", sd);

  // 2) Bigger shards: [w0..w3] [w4 w5 bias]; the four -of-00004 shards go in the same commit.
  size_t snaps = hub.Snapshots(repo);
  auto p2 = PushStateDict(hub.client(), sd, Req(repo, 4096));
  ASSERT_OK(p2);
  EXPECT_EQ(hub.Snapshots(repo), snaps + 1) << "one commit";
  EXPECT_EQ(p2->deleted, (std::vector<std::string>{"model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors",
                                                    "model-00003-of-00004.safetensors", "model-00004-of-00004.safetensors"}));
  auto tree2 = hub.Tree(repo, p2->commit_oid);
  EXPECT_EQ(Names(tree2), (std::set<std::string>{".gitattributes", "README.md", "model.fp16.safetensors",
                                                  "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                                                  "model.safetensors.index.json"}));
  EXPECT_EQ(tree2["model.fp16.safetensors"], tree1["model.fp16.safetensors"]);
  ExpectLoadsBack(hub, repo, p2->commit_oid, "model.safetensors.index.json", sd);

  // 3) One file: the shards and the index are stale now.
  auto p3 = PushStateDict(hub.client(), sd, Req(repo, 1ull << 30));
  ASSERT_OK(p3);
  EXPECT_EQ(p3->deleted, (std::vector<std::string>{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                                                    "model.safetensors.index.json"}));
  auto tree3 = hub.Tree(repo, p3->commit_oid);
  EXPECT_EQ(Names(tree3),
            (std::set<std::string>{".gitattributes", "README.md", "model.fp16.safetensors", "model.safetensors"}));
  ExpectLoadsBack(hub, repo, p3->commit_oid, "model.safetensors", sd);

  // 4) Same state dict again: nothing changed, no commit, no bytes.
  hub.recorder().Clear();
  auto p4 = PushStateDict(hub.client(), sd, Req(repo, 1ull << 30));
  ASSERT_OK(p4);
  EXPECT_FALSE(p4->committed);
  EXPECT_EQ(p4->commit_oid, p3->commit_oid);
  EXPECT_EQ(hub.Puts(), 0u);
}

TEST(PushStateDict, VariantPushLeavesOtherVariantsAlone) {
  PushServer hub(4096);
  ASSERT_OK(hub);
  const std::string repo = "org/variants";
  StateDict sd = MakeStateDict();
  auto plain = PushStateDict(hub.client(), sd, Req(repo, 2048));
  ASSERT_OK(plain);
  auto r = Req(repo, 2048);
  r.save.variant = "fp16";
  r.path_in_repo = "";
  auto v1 = PushStateDict(hub.client(), sd, r);
  ASSERT_OK(v1);
  EXPECT_TRUE(v1->deleted.empty());
  r.save.max_shard_size = uint64_t{1} << 30;
  auto v2 = PushStateDict(hub.client(), sd, r);
  ASSERT_OK(v2);
  EXPECT_EQ(v2->deleted, (std::vector<std::string>{"model.fp16-00001-of-00004.safetensors",
                                                    "model.fp16-00002-of-00004.safetensors",
                                                    "model.fp16-00003-of-00004.safetensors",
                                                    "model.fp16-00004-of-00004.safetensors",
                                                    "model.safetensors.index.fp16.json"}));
  auto tree = hub.Tree(repo, v2->commit_oid);
  EXPECT_EQ(Names(tree), (std::set<std::string>{".gitattributes", "model-00001-of-00004.safetensors",
                                                 "model-00002-of-00004.safetensors", "model-00003-of-00004.safetensors",
                                                 "model-00004-of-00004.safetensors",
                                                 "model.safetensors.index.json", "model.fp16.safetensors"}));
  ExpectLoadsBack(hub, repo, v2->commit_oid, "model.safetensors.index.json", sd);
}

TEST(PushStateDict, SubfolderAndWeightsName) {
  PushServer hub(4096);
  ASSERT_OK(hub);
  StateDict sd = MakeStateDict();
  auto r = Req("org/pipe", 2048);
  r.path_in_repo = "unet";
  r.save.weights_name = "diffusion_pytorch_model";
  auto a = PushStateDict(hub.client(), sd, r);
  ASSERT_OK(a);
  auto r2 = Req("org/pipe", 2048);
  r2.path_in_repo = "text_encoder";
  auto b = PushStateDict(hub.client(), sd, r2);
  ASSERT_OK(b);
  r.save.max_shard_size = uint64_t{1} << 30;
  auto c = PushStateDict(hub.client(), sd, r);
  ASSERT_OK(c);
  auto tree = hub.Tree("org/pipe", c->commit_oid);
  EXPECT_EQ(Names(tree), (std::set<std::string>{".gitattributes", "unet/diffusion_pytorch_model.safetensors",
                                                 "text_encoder/model-00001-of-00004.safetensors",
                                                 "text_encoder/model-00002-of-00004.safetensors",
                                                 "text_encoder/model-00003-of-00004.safetensors",
                                                 "text_encoder/model-00004-of-00004.safetensors",
                                                 "text_encoder/model.safetensors.index.json"}));
  ExpectLoadsBack(hub, "org/pipe", c->commit_oid, "unet/diffusion_pytorch_model.safetensors", sd);
}

TEST(PushStateDict, StalePatternsAreExact) {
  EXPECT_EQ(StaleCheckpointPatterns("model", "fp16"),
            (std::vector<std::string>{
                "model.fp16.safetensors",
                "model.fp16-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9].safetensors",
                "model.safetensors.index.fp16.json"}));
  auto p = StaleCheckpointPatterns("model", "");
  EXPECT_TRUE(FnMatch(p[1], "model-00002-of-00003.safetensors"));
  EXPECT_FALSE(FnMatch(p[1], "model.fp16-00002-of-00003.safetensors"));
  EXPECT_FALSE(FnMatch(p[0], "model.fp16.safetensors"));
  EXPECT_FALSE(FnMatch(p[1], "model-0002-of-00003.safetensors"));
}

TEST(PushStateDict, FailureLeavesNoCommit) {
  PushServer hub(4096);
  ASSERT_OK(hub);
  StateDict sd = MakeStateDict();
  auto first = PushStateDict(hub.client(), sd, Req("org/fail", 2048));
  ASSERT_OK(first);
  StateDict sd2 = MakeStateDict();
  sd2[0].second = sd2[0].second.add(1);  // new bytes for shard 1
  hub.server().faults().SetStatusForNext("/_lfs/", 500, -1);
  auto r = PushStateDict(hub.client(), sd2, Req("org/fail", 2048));
  hub.server().faults().Clear();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("model-00001-of-00004.safetensors"), std::string::npos) << r.status().message();
  EXPECT_EQ(hub.Ref("org/fail"), first->commit_oid);
}

}  // namespace
}  // namespace hubload
