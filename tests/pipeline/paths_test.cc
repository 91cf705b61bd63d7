// The behaviours that used to drift between the load paths, checked on every
// path of the one driver: CPU state dict, module, device (fake backend), local
// checkpoint (distributed: tests/distributed). Expected values come from the
// bytes the test wrote.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <nlohmann/json.hpp>
#include <set>

#include "hubload/device.h"
#include "hubload/device_pipeline.h"
#include "hubload/pipeline.h"
#include "hubload/reasons.h"
#include "tests/hub/endpoints.h"
#include "tests/pipeline/fixtures.h"
#include "testing/json_mutate.h"
#include "testing/report.h"
#include "testing/status_matchers.h"
#include "util/log_capture.h"

namespace hubload::pipeline_test {
namespace {

using hubload::testing::TempDir;

std::string Bytes(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel()) * c.element_size());
}

struct Lin : torch::nn::Module {
  explicit Lin(int64_t n) { weight = register_parameter("weight", torch::zeros({n})); }
  torch::Tensor weight;
};
/// embed.weight [4], lm_head.weight [4], layer.weight [2].
struct Net : torch::nn::Module {
  Net() {
    embed = register_module("embed", std::make_shared<Lin>(4));
    lm_head = register_module("lm_head", std::make_shared<Lin>(4));
    layer = register_module("layer", std::make_shared<Lin>(2));
  }
  std::shared_ptr<Lin> embed, lm_head, layer;
};

/// The device path on one fake GPU (cuda:0, host memory).
DeviceLoadOptions OneFakeGpu() {
  DeviceLoadOptions o;
  o.device = "cuda:0";
  FakeDeviceOptions fo;
  fo.devices = 1;
  o.backend = MakeFakeDeviceBackend(fo);
  return o;
}

/// What one path produced: its status and, when OK, its report.
struct Outcome {
  std::string path;
  Status status;
  PretrainedInfo info;
};

/// Loads `repo_or_path` on every path. `hub` selects the Hub source.
std::vector<Outcome> LoadEveryWay(const HubClient& client, const std::string& repo_or_path, bool hub) {
  PretrainedRequest req;
  req.repo_id = repo_or_path;
  req.source = hub ? PretrainedRequest::Source::kHub : PretrainedRequest::Source::kLocal;
  req.digests = true;
  std::vector<Outcome> out;
  {
    auto r = LoadStateDict(client, req);
    out.push_back({"cpu", r.ok() ? Status::Ok() : r.status(), r.ok() ? r->info : PretrainedInfo{}});
  }
  {
    Net net;
    auto r = LoadModule(client, req, net);
    out.push_back({"module", r.ok() ? Status::Ok() : r.status(), r.ok() ? r->info : PretrainedInfo{}});
  }
  {
    auto r = FetchAndLoadToDevice(client, req, OneFakeGpu());
    out.push_back({"device", r.ok() ? Status::Ok() : r.status(), r.ok() ? r->info : PretrainedInfo{}});
  }
  return out;
}

struct Repo {
  TempDir src;
  RawTensor embed = MakeTensor("embed.weight", "F32", {4}, 11);
  RawTensor layer = MakeTensor("layer.weight", "F32", {2}, 12);
};

void WriteIndex(const fs::path& dir, const nlohmann::json& weight_map, const nlohmann::json& metadata) {
  nlohmann::json idx{{"metadata", metadata}, {"weight_map", weight_map}};
  WriteText(dir / "model.safetensors.index.json", idx.dump(2));
}

TEST(EveryPath, IndexShardMismatchHasOneReason) {
  Repo r;
  // The index puts layer.weight in shard 1, which lacks it (shard 2 agrees with the index).
  WriteText(r.src.path() / "model-00001-of-00002.safetensors", SafetensorsBytes({r.embed}));
  WriteText(r.src.path() / "model-00002-of-00002.safetensors", SafetensorsBytes({MakeTensor("z", "F32", {2}, 13)}));
  WriteIndex(r.src.path(),
             {{"embed.weight", "model-00001-of-00002.safetensors"}, {"layer.weight", "model-00001-of-00002.safetensors"},
              {"z", "model-00002-of-00002.safetensors"}},
             {{"total_size", 24}});
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/mismatch", r.src.path());
  TempDir cache;
  HubClient client = MakeClient(store.url(), cache.str());
  for (bool hub : {true, false}) {
    for (const Outcome& o : LoadEveryWay(client, hub ? "org/mismatch" : r.src.str(), hub)) {
      SCOPED_TRACE(o.path + (hub ? " (hub)" : " (local)"));
      ASSERT_FALSE(o.status.ok());
      EXPECT_EQ(o.status.code(), Code::kInvalidFormat) << o.status.ToString();
      EXPECT_EQ(o.status.reason(), "IndexTensorMissing") << o.status.ToString();
      EXPECT_NE(o.status.message().find("layer.weight"), std::string::npos) << o.status.ToString();
      EXPECT_NE(o.status.message().find("model-00001-of-00002.safetensors"), std::string::npos)
          << o.status.ToString();
      EXPECT_EQ(o.status.context().repo_id, hub ? "org/mismatch" : r.src.str());
    }
  }
}

// Field failure B49: the index is the authority over its shards. s1 holds
// embed.weight, layer.weight and an unindexed old.weight; s2 holds
// lm_head.weight and a second, different embed.weight; the index (tool
// metadata, no total_size) maps embed.weight to s1. Strict (default): an error
// naming a tensor the index does not map there. Lenient: the mapped copies
// load (embed.weight's bytes are s1's), the others are named in one warning per
// shard, on every path. The Hub download takes the index's files only, never
// original/ nor the stray single file.
TEST(EveryPath, LenientIndexLoadsTheMappedShardsTensorsB49) {
  TempDir src;
  const RawTensor embed = MakeTensor("embed.weight", "F32", {4}, 31);
  const RawTensor embed_stale = MakeTensor("embed.weight", "F32", {4}, 32);
  const RawTensor layer = MakeTensor("layer.weight", "F32", {2}, 33);
  const RawTensor old = MakeTensor("old.weight", "F32", {2}, 34);
  const RawTensor head = MakeTensor("lm_head.weight", "F32", {4}, 35);
  ASSERT_NE(embed.bytes, embed_stale.bytes);
  const std::string s1 = "model-00001-of-00002.safetensors", s2 = "model-00002-of-00002.safetensors";
  WriteText(src.path() / s1, SafetensorsBytes({embed, layer, old}));
  WriteText(src.path() / s2, SafetensorsBytes({head, embed_stale}));
  WriteIndex(src.path(), {{"embed.weight", s1}, {"layer.weight", s1}, {"lm_head.weight", s2}},
             {{"quantization_level", "4"}, {"tool_version", "0.1"}});
  WriteText(src.path() / "original" / s1, SafetensorsBytes({embed, layer, old}));
  WriteText(src.path() / "original" / s2, SafetensorsBytes({head, embed_stale}));
  WriteText(src.path() / "model.safetensors", SafetensorsBytes({embed_stale}));
  ServedStore store;
  ASSERT_OK(store);
  const std::string commit = store.AddRepo("org/b49", src.path());
  TempDir cache;
  HubClient client = MakeClient(store.url(), cache.str());
  for (bool hub : {true, false}) {
    // Strict: every path fails naming a tensor the index does not map to its shard.
    for (const Outcome& o : LoadEveryWay(client, hub ? "org/b49" : src.str(), hub)) {
      SCOPED_TRACE(o.path + (hub ? " (hub, strict)" : " (local, strict)"));
      ASSERT_FALSE(o.status.ok());
      EXPECT_TRUE(o.status.reason() == "IndexTensorUnlisted" || o.status.reason() == "IndexTensorInOtherShard")
          << o.status.ToString();
      EXPECT_TRUE(o.status.message().find("old.weight") != std::string::npos ||
                  o.status.message().find("embed.weight") != std::string::npos)
          << o.status.ToString();
    }
    PretrainedRequest req;
    req.repo_id = hub ? "org/b49" : src.str();
    req.source = hub ? PretrainedRequest::Source::kHub : PretrainedRequest::Source::kLocal;
    req.digests = true;
    req.lenient_index = true;
    std::vector<Outcome> lenient;
    {
      auto r = LoadStateDict(client, req);
      lenient.push_back({"cpu", r.ok() ? Status::Ok() : r.status(), r.ok() ? r->info : PretrainedInfo{}});
      if (r.ok()) {
        std::map<std::string, at::Tensor> m(r->tensors.begin(), r->tensors.end());
        ASSERT_TRUE(m.count("embed.weight"));
        EXPECT_EQ(Bytes(m["embed.weight"]), embed.bytes);  // s1's copy, never s2's
        EXPECT_FALSE(m.count("old.weight"));
      }
    }
    {
      Net net;
      auto r = LoadModule(client, req, net);
      lenient.push_back({"module", r.ok() ? Status::Ok() : r.status(), r.ok() ? r->info : PretrainedInfo{}});
      if (r.ok()) {
        EXPECT_EQ(Bytes(net.embed->weight), embed.bytes);
      }
    }
    {
      auto r = FetchAndLoadToDevice(client, req, OneFakeGpu());
      lenient.push_back({"device", r.ok() ? Status::Ok() : r.status(), r.ok() ? r->info : PretrainedInfo{}});
    }
    for (const Outcome& o : lenient) {
      SCOPED_TRACE(o.path + (hub ? " (hub, lenient)" : " (local, lenient)"));
      ASSERT_OK(o.status);
      std::map<std::string, std::string> sha;
      for (const auto& t : o.info.tensors) sha[t.name] = t.sha256;
      EXPECT_EQ(sha, (std::map<std::string, std::string>{
                         {"embed.weight", hubload::testing::Sha256Hex(embed.bytes.data(), embed.bytes.size())},
                         {"layer.weight", hubload::testing::Sha256Hex(layer.bytes.data(), layer.bytes.size())},
                         {"lm_head.weight", hubload::testing::Sha256Hex(head.bytes.data(), head.bytes.size())}}));
      std::vector<std::string> skipped;
      for (const auto& w : o.info.warnings)
        if (w.find("the index does not map to this shard") != std::string::npos) skipped.push_back(w);
      ASSERT_EQ(skipped.size(), 2u) << ::testing::PrintToString(o.info.warnings);
      std::sort(skipped.begin(), skipped.end());
      EXPECT_NE(skipped[0].find(s1), std::string::npos) << skipped[0];
      EXPECT_NE(skipped[0].find("old.weight"), std::string::npos) << skipped[0];
      EXPECT_NE(skipped[1].find(s2), std::string::npos) << skipped[1];
      EXPECT_NE(skipped[1].find("embed.weight"), std::string::npos) << skipped[1];
    }
  }
  // The download took the index's files only (B23-3): nothing from original/, no stray single file.
  std::set<std::string> snapshot;
  const fs::path snap = cache.path() / "models--org--b49" / "snapshots" / commit;
  for (const auto& e : fs::recursive_directory_iterator(snap))
    if (!e.is_directory()) snapshot.insert(e.path().lexically_relative(snap).string());
  EXPECT_EQ(snapshot, (std::set<std::string>{"model.safetensors.index.json", s1, s2}));
}

TEST(EveryPath, AliasesUnnamedShardsAndTheReport) {
  Repo r;
  WriteText(r.src.path() / "model-00001-of-00002.safetensors", SafetensorsBytes({r.embed}));
  WriteText(r.src.path() / "model-00002-of-00002.safetensors", SafetensorsBytes({r.layer}));
  // A stray shard of the same family that the index does not name.
  WriteText(r.src.path() / "model-00003-of-00003.safetensors", SafetensorsBytes({r.layer}));
  // huggingface_hub save_torch_state_dict records the dropped alias as "removed": "kept".
  WriteIndex(r.src.path(),
             {{"embed.weight", "model-00001-of-00002.safetensors"}, {"layer.weight", "model-00002-of-00002.safetensors"}},
             {{"total_size", 24}, {"lm_head.weight", "embed.weight"}});
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/alias", r.src.path());
  TempDir cache;
  HubClient client = MakeClient(store.url(), cache.str());
  for (bool hub : {true, false}) {
    for (const Outcome& o : LoadEveryWay(client, hub ? "org/alias" : r.src.str(), hub)) {
      SCOPED_TRACE(o.path + (hub ? " (hub)" : " (local)"));
      ASSERT_OK(o.status);
      // Aliases: restored on every path, named in the report.
      ASSERT_EQ(o.info.aliases.size(), 1u);
      EXPECT_EQ(o.info.aliases[0].first, "lm_head.weight");
      EXPECT_EQ(o.info.aliases[0].second, "embed.weight");
      // The unnamed shard: one warning naming it, on every path.
      int named = 0;
      for (const auto& w : o.info.warnings) named += w.find("model-00003-of-00003.safetensors") != std::string::npos;
      EXPECT_EQ(named, 1) << ::testing::PrintToString(o.info.warnings);
      // One report: schema, checkpoint order, digests of the bytes written.
      nlohmann::json j = nlohmann::json::parse(LoadReportJson(o.info));
      EXPECT_EQ(j["schema"], "hubload.load/1");
      ASSERT_EQ(j["tensors"].size(), 2u);
      EXPECT_EQ(j["tensors"][0]["name"], "embed.weight");
      EXPECT_EQ(j["tensors"][1]["name"], "layer.weight");
      EXPECT_EQ(j["tensors"][0]["sha256"], hubload::testing::Sha256Hex(r.embed.bytes.data(), r.embed.bytes.size()));
      EXPECT_EQ(j["tensors"][1]["sha256"], hubload::testing::Sha256Hex(r.layer.bytes.data(), r.layer.bytes.size()));
      EXPECT_EQ(j["tensors"][0]["device"], o.path == "device" ? "cuda:0" : "cpu");
      EXPECT_EQ(j["aliases"]["lm_head.weight"], "embed.weight");
      EXPECT_EQ(j["files"].size(), 2u);
    }
  }
  // The state dict and the module carry the restored alias's bytes.
  PretrainedRequest req;
  req.repo_id = "org/alias";
  auto sd = LoadStateDict(client, req);
  ASSERT_OK(sd);
  std::map<std::string, at::Tensor> by_name(sd->tensors.begin(), sd->tensors.end());
  ASSERT_TRUE(by_name.count("lm_head.weight"));
  EXPECT_EQ(Bytes(by_name["lm_head.weight"]), r.embed.bytes);
  EXPECT_EQ(by_name["lm_head.weight"].data_ptr(), by_name["embed.weight"].data_ptr());  // shared, not copied
  Net net;
  auto m = LoadModule(client, req, net);
  ASSERT_OK(m);
  EXPECT_TRUE(m->report.missing.empty()) << ::testing::PrintToString(m->report.missing);
  EXPECT_EQ(Bytes(net.lm_head->weight), r.embed.bytes);
}

// Aliases are restored by the one driver on every path: the removed name is
// delivered with the kept tensor's bytes to the caller's callback, the state
// dict and the device state dict (fake backend), for the index's metadata
// (sharded) and a single file's header metadata, from the Hub and locally.
TEST(EveryPath, AliasIsDeliveredWithTheKeptTensorsBytes) {
  for (bool sharded : {true, false}) {
    SCOPED_TRACE(sharded ? "sharded" : "single file");
    Repo r;
    if (sharded) {
      WriteText(r.src.path() / "model-00001-of-00002.safetensors", SafetensorsBytes({r.embed}));
      WriteText(r.src.path() / "model-00002-of-00002.safetensors", SafetensorsBytes({r.layer}));
      WriteIndex(r.src.path(),
                 {{"embed.weight", "model-00001-of-00002.safetensors"},
                  {"layer.weight", "model-00002-of-00002.safetensors"}},
                 {{"total_size", 24}, {"lm_head.weight", "embed.weight"}});
    } else {
      WriteText(r.src.path() / "model.safetensors",
                SafetensorsBytes({r.embed, r.layer}, {{"lm_head.weight", "embed.weight"}}));
    }
    ServedStore store;
    ASSERT_OK(store);
    store.AddRepo("org/tied", r.src.path());
    TempDir cache;
    HubClient client = MakeClient(store.url(), cache.str());
    for (bool hub : {true, false}) {
      SCOPED_TRACE(hub ? "hub" : "local");
      PretrainedRequest req;
      req.repo_id = hub ? "org/tied" : r.src.str();
      req.source = hub ? PretrainedRequest::Source::kHub : PretrainedRequest::Source::kLocal;
      // The callback path.
      std::map<std::string, std::string> got;
      PretrainedCallbacks cb;
      cb.on_tensor = [&](const std::string& name, at::Tensor t) {
        EXPECT_FALSE(got.count(name)) << name << " delivered twice";
        got[name] = Bytes(t);
        return Status::Ok();
      };
      ASSERT_OK(FetchAndLoad(client, req, cb).status());
      EXPECT_EQ(got.size(), 3u);
      EXPECT_EQ(got["lm_head.weight"], r.embed.bytes);
      EXPECT_EQ(got["embed.weight"], r.embed.bytes);
      EXPECT_EQ(got["layer.weight"], r.layer.bytes);
      // The state dict.
      auto sd = LoadStateDict(client, req);
      ASSERT_OK(sd.status());
      ASSERT_EQ(sd->tensors.size(), 3u);
      EXPECT_EQ(sd->tensors[2].first, "lm_head.weight");
      EXPECT_EQ(Bytes(sd->tensors[2].second), r.embed.bytes);
      // The device path: an entry sharing the kept tensor's device memory.
      auto dev = FetchAndLoadToDevice(client, req, OneFakeGpu());
      ASSERT_OK(dev.status());
      EXPECT_EQ(dev->tensors.tensors().size(), 3u);
      const DeviceTensor* alias = dev->tensors.Find("lm_head.weight");
      const DeviceTensor* kept = dev->tensors.Find("embed.weight");
      ASSERT_NE(alias, nullptr);
      ASSERT_NE(kept, nullptr);
      EXPECT_EQ(alias->alias_of, "embed.weight");
      EXPECT_EQ(alias->data, kept->data);
      EXPECT_EQ(alias->device.ToString(), "cuda:0");
      auto host = dev->tensors.CopyToHost(*alias);
      ASSERT_OK(host.status());
      EXPECT_EQ(std::string(host->begin(), host->end()), r.embed.bytes);
      ASSERT_EQ(dev->info.aliases.size(), 1u);
    }
  }
}

// Every dtype conversion a load performs is a warning of its report, on every
// path: the CPU paths widen U16 to I32 (LibTorch 1.13 has no uint16) and, with
// --dtype fp32, convert BF16; the device path converts BF16 only (it keeps U16).
TEST(EveryPath, DtypeConversionsAreReportWarnings) {
  TempDir src;
  WriteText(src.path() / "model.safetensors",
            SafetensorsBytes({MakeTensor("a.weight", "BF16", {4}, 21), MakeTensor("b.weight", "BF16", {2}, 22),
                              MakeTensor("ids", "U16", {3}, 23), MakeTensor("c.weight", "F32", {2}, 24)}));
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/conv", src.path());
  TempDir cache;
  HubClient client = MakeClient(store.url(), cache.str());
  auto warnings_with = [](const PretrainedInfo& info, const std::string& what) {
    std::vector<std::string> out;
    for (const auto& w : info.warnings)
      if (w.find(what) != std::string::npos) out.push_back(w);
    return out;
  };
  PretrainedRequest req;
  req.repo_id = "org/conv";
  req.load.dtype = TargetDtype::kF32;
  auto sd = LoadStateDict(client, req);
  ASSERT_OK(sd.status());
  auto bf16 = warnings_with(sd->info, "BF16 -> F32");
  ASSERT_EQ(bf16.size(), 1u) << ::testing::PrintToString(sd->info.warnings);
  EXPECT_NE(bf16[0].find("2 tensors"), std::string::npos) << bf16[0];
  EXPECT_NE(bf16[0].find("a.weight"), std::string::npos) << bf16[0];
  EXPECT_NE(bf16[0].find("b.weight"), std::string::npos) << bf16[0];
  auto u16 = warnings_with(sd->info, "U16 -> I32");
  ASSERT_EQ(u16.size(), 1u) << ::testing::PrintToString(sd->info.warnings);
  EXPECT_NE(u16[0].find("1 tensor "), std::string::npos) << u16[0];
  EXPECT_NE(u16[0].find("ids"), std::string::npos) << u16[0];
  EXPECT_TRUE(warnings_with(sd->info, "c.weight").empty()) << "F32 is not converted";
  // Without a target dtype only the widening remains.
  req.load.dtype = TargetDtype::kAuto;
  auto plain = LoadStateDict(client, req);
  ASSERT_OK(plain.status());
  EXPECT_TRUE(warnings_with(plain->info, "BF16").empty()) << ::testing::PrintToString(plain->info.warnings);
  EXPECT_EQ(warnings_with(plain->info, "U16 -> I32").size(), 1u);
  // The device path (fake backend) with fp32: BF16 converted, U16 kept as stored.
  req.load.dtype = TargetDtype::kF32;
  auto dev = FetchAndLoadToDevice(client, req, OneFakeGpu());
  ASSERT_OK(dev.status());
  auto dbf16 = warnings_with(dev->info, "BF16 -> F32");
  ASSERT_EQ(dbf16.size(), 1u) << ::testing::PrintToString(dev->info.warnings);
  EXPECT_NE(dbf16[0].find("2 tensors"), std::string::npos) << dbf16[0];
  EXPECT_TRUE(warnings_with(dev->info, "U16").empty()) << ::testing::PrintToString(dev->info.warnings);
}

// The conversion warning names its tensors in checkpoint order even when the
// second shard's header arrives first (the first shard's download stalls), so
// the report reads the same whatever the network did (user pass: the names
// listed changed from run to run on a throttled link).
TEST(EveryPath, ConversionWarningsNameTensorsInCheckpointOrder) {
  TempDir src;
  const std::vector<RawTensor> first = {MakeTensor("a.weight", "BF16", {4}, 31), MakeTensor("b.weight", "BF16", {4}, 32)};
  const std::vector<RawTensor> second = {MakeTensor("c.weight", "BF16", {4}, 33), MakeTensor("d.weight", "BF16", {4}, 34)};
  WriteSharded(src.path(), "model.safetensors.index.json",
               {{"model-00001-of-00002.safetensors", first}, {"model-00002-of-00002.safetensors", second}});
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/order", src.path());
  const std::string shard1 = SafetensorsBytes(first);
  // Every GET of the first shard (resolve or CDN path) waits 700 ms before its first byte.
  store.server().faults().SetStallAfterBytes("model-00001-of-00002", 0, 700, -1);
  store.server().faults().SetStallAfterBytes(hubload::testing::Sha256Hex(shard1.data(), shard1.size()), 0, 700, -1);
  TempDir cache;
  PretrainedRequest req;
  req.repo_id = "org/order";
  req.load.dtype = TargetDtype::kF32;
  auto sd = LoadStateDict(MakeClient(store.url(), cache.str()), req);
  ASSERT_OK(sd.status());
  ASSERT_EQ(sd->info.load_order,
            (std::vector<std::string>{"model-00002-of-00002.safetensors", "model-00001-of-00002.safetensors"}))
      << "the second shard was not loaded first: the case is not exercised";
  std::vector<std::string> conv;
  for (const auto& w : sd->info.warnings)
    if (w.find("BF16 -> F32") != std::string::npos) conv.push_back(w);
  ASSERT_EQ(conv.size(), 1u) << ::testing::PrintToString(sd->info.warnings);
  EXPECT_NE(conv[0].find("4 tensors"), std::string::npos) << conv[0];
  EXPECT_NE(conv[0].find(": a.weight, b.weight, c.weight"), std::string::npos) << conv[0];
}

// The Hub unreachable (connection refused, or a silent server that accepts
// connections and never answers) with the snapshot complete in the cache:
// every path loads from the cache, as from_pretrained / hf_hub_download fall
// back to the cache, with the same bytes and exactly one warning naming the
// commit (in the report, and once in the log); the CLI prints it once.
TEST(EveryPath, HubUnreachableLoadsTheCachedSnapshot) {
  Repo r;
  WriteText(r.src.path() / "model-00001-of-00002.safetensors", SafetensorsBytes({r.embed}));
  WriteText(r.src.path() / "model-00002-of-00002.safetensors", SafetensorsBytes({r.layer}));
  WriteIndex(r.src.path(),
             {{"embed.weight", "model-00001-of-00002.safetensors"}, {"layer.weight", "model-00002-of-00002.safetensors"}},
             {{"total_size", 24}});
  TempDir cache;
  std::string commit;
  {
    ServedStore store;
    ASSERT_OK(store);
    commit = store.AddRepo("org/away", r.src.path());
    PretrainedRequest req;
    req.repo_id = "org/away";
    ASSERT_OK(LoadStateDict(MakeClient(store.url(), cache.str()), req).status());
  }
  hubload::testing::SilentServer silent;
  for (const std::string& endpoint : {hubload::testing::RefusedUrl(), silent.url()}) {
    SCOPED_TRACE(endpoint == silent.url() ? "silent" : "refused");
    ClientOptions o = MakeClient(endpoint, cache.str()).options();
    o.config.etag_timeout_s = 1;
    std::vector<double> sleeps;
    o.retry.sleep = [&](double s) { sleeps.push_back(s); };
    HubClient gone(o);
    util::WarningCapture log;
    for (const Outcome& out : LoadEveryWay(gone, "org/away", /*hub=*/true)) {
      SCOPED_TRACE(out.path);
      ASSERT_OK(out.status);
      nlohmann::json j = nlohmann::json::parse(LoadReportJson(out.info));
      ASSERT_EQ(j["tensors"].size(), 2u);
      EXPECT_EQ(j["tensors"][0]["sha256"], hubload::testing::Sha256Hex(r.embed.bytes.data(), r.embed.bytes.size()));
      EXPECT_EQ(j["tensors"][1]["sha256"], hubload::testing::Sha256Hex(r.layer.bytes.data(), r.layer.bytes.size()));
      int unreachable = 0;
      for (const auto& w : out.info.warnings) {
        if (w.find("could not be reached") == std::string::npos) continue;
        ++unreachable;
        EXPECT_NE(w.find(commit), std::string::npos) << w;
        EXPECT_NE(w.find("'main'"), std::string::npos) << w;
      }
      EXPECT_EQ(unreachable, 1) << ::testing::PrintToString(out.info.warnings);
    }
    EXPECT_EQ(log.Count("could not be reached"), 3) << "one per load: " << ::testing::PrintToString(log.Lines());
    EXPECT_TRUE(sleeps.empty()) << "no retry round when the cache can answer (" << sleeps.size() << " sleeps)";
    // The CLI shows the warning once (the client's log line; the report's copy is not printed again).
    std::string out, err;
    ASSERT_EQ(hubload::testing::RunCommand("HF_HUB_ETAG_TIMEOUT=1 " + hubload::testing::HubloadBin() +
                                               " --endpoint " + endpoint + " --cache-dir " + cache.str() +
                                               " load org/away --quiet",
                                           &out, &err),
              0)
        << err;
    size_t n = 0;
    for (size_t p = err.find("could not be reached"); p != std::string::npos;
         p = err.find("could not be reached", p + 1))
      ++n;
    EXPECT_EQ(n, 1u) << err;
    EXPECT_NE(err.find(commit), std::string::npos) << err;
  }
  // Nothing cached for another repo: the network error, not a cache miss in disguise.
  HubClient gone = MakeClient(hubload::testing::RefusedUrl(), cache.str());
  PretrainedRequest other;
  other.repo_id = "org/never-fetched";
  auto miss = LoadStateDict(gone, other);
  ASSERT_FALSE(miss.ok());
  EXPECT_EQ(miss.status().code(), Code::kNetwork) << miss.status().ToString();
}

// `.bin` weights: the CPU and module paths read them with the restricted
// reader (a file that is not a torch checkpoint fails naming it); the device
// path refuses them with one reason before anything is downloaded.
TEST(EveryPath, PickleWeightsAreReadOrRefusedWithOneReason) {
  TempDir src;
  constexpr char kNotAZip[] = "PK\x03\x04 not really a zip";
  WriteText(src.path() / "pytorch_model.bin", std::string(kNotAZip, sizeof kNotAZip - 1));
  WriteText(src.path() / "config.json", "{}");
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/pickle", src.path());
  TempDir cache;
  HubClient client = MakeClient(store.url(), cache.str());
  for (bool hub : {true, false}) {
    for (const Outcome& o : LoadEveryWay(client, hub ? "org/pickle" : src.str(), hub)) {
      SCOPED_TRACE(o.path + (hub ? " (hub)" : " (local)"));
      ASSERT_FALSE(o.status.ok());
      EXPECT_NE(o.status.message().find("pytorch_model.bin"), std::string::npos) << o.status.ToString();
      if (o.path == "device") {
        EXPECT_EQ(o.status.code(), Code::kUnsupported);
        EXPECT_TRUE(o.status.Is(reason::kPickleUnsupported)) << o.status.ToString();
      } else {
        EXPECT_EQ(o.status.code(), Code::kInvalidFormat) << o.status.ToString();
      }
    }
  }
}

TEST(EveryPath, CorruptLastShardFailsAndLeavesNoBlob) {
  TempDir src, cache;
  RawTensor a = MakeTensor("a", "F32", {64}, 21);
  RawTensor b = MakeTensor("b", "F32", {4096}, 22);
  WriteSharded(src.path(), "model.safetensors.index.json",
               {{"model-00001-of-00002.safetensors", {a}}, {"model-00002-of-00002.safetensors", {b}}});
  ServedStore store;
  ASSERT_OK(store);
  std::string commit = store.AddRepo("org/corrupt-last", src.path());
  // Flip one data byte of the last shard's blob in the store: the server sends
  // bytes whose sha256 is not the etag it announces.
  std::string shard2 = SafetensorsBytes({b});
  std::string etag = hubload::testing::Sha256Hex(shard2.data(), shard2.size());
  fs::path blob;
  for (auto& e : fs::recursive_directory_iterator(fs::path(store.server().root())))
    if (e.path().filename() == etag) blob = e.path();
  ASSERT_FALSE(blob.empty());
  fs::permissions(blob, fs::perms::owner_all, fs::perm_options::add);
  std::string corrupt = shard2;
  corrupt[corrupt.size() - 3] ^= 0x40;
  WriteText(blob, corrupt);
  HubClient client = MakeClient(store.url(), cache.str());
  PretrainedRequest req;
  req.repo_id = "org/corrupt-last";
  std::vector<std::string> delivered;
  PretrainedCallbacks cb;
  cb.on_tensor = [&](const std::string& name, at::Tensor) {
    delivered.push_back(name);
    return Status::Ok();
  };
  auto r = FetchAndLoad(client, req, cb);
  // The same failure has the same code and reason on every path (callback,
  // state dict, module, device with the fake backend).
  std::vector<Outcome> outcomes = LoadEveryWay(client, "org/corrupt-last", /*hub=*/true);
  outcomes.insert(outcomes.begin(), Outcome{"callback", r.ok() ? Status::Ok() : r.status(), {}});
  for (const Outcome& o : outcomes) {
    SCOPED_TRACE(o.path);
    ASSERT_FALSE(o.status.ok());
    EXPECT_EQ(o.status.code(), Code::kCorruptDownload) << o.status.ToString();
    EXPECT_EQ(o.status.reason(), reason::kHashMismatch) << o.status.ToString();
    EXPECT_NE(o.status.ToString().find("model-00002-of-00002.safetensors"), std::string::npos) << o.status.ToString();
  }
  RepoCache rc(cache.str(), "org/corrupt-last", RepoType::kModel);
  EXPECT_FALSE(fs::exists(rc.BlobPath(etag)));
  EXPECT_FALSE(fs::exists(rc.PointerPath(commit, "model-00002-of-00002.safetensors")));
  for (auto& e : fs::directory_iterator(fs::path(rc.repo_dir()) / "blobs")) {
    const std::string name = e.path().filename().string();
    if (name.size() != 64) continue;  // partials, git-sha1 blobs
    auto bytes = hubload::testing::ReadFileBytes(e.path());
    EXPECT_EQ(hubload::testing::Sha256Hex(bytes.data(), bytes.size()), name);
  }
}


/// Events of one load in the order they happened (a sequence, not times).
struct EventLog {
  std::mutex mu;
  std::vector<std::string> events;
  void Add(std::string e) {
    std::lock_guard<std::mutex> l(mu);
    events.push_back(std::move(e));
  }
  long Index(const std::string& e) {
    std::lock_guard<std::mutex> l(mu);
    for (size_t i = 0; i < events.size(); ++i)
      if (events[i] == e) return static_cast<long>(i);
    return -1;
  }
};

// A client that fetches files of 2 MiB and more in 1 MiB ranges (the
// smallest), so that several connections work on one shard.
HubClient SmallRangesClient(const std::string& url, const std::string& cache, int connections) {
  ClientOptions co = MakeClient(url, cache).options();
  co.range_threshold_bytes = 2 << 20;
  co.range_chunk_bytes = 1 << 20;
  co.connections = connections;
  return HubClient(co);
}

// On one link shared by every connection, shards complete in load order and
// shard k is loaded before shard k+1 completes (downloads scheduled in load order).
TEST(Streaming, ShardsCompleteInLoadOrderOnASharedLink) {
  TempDir src, cache;
  std::map<std::string, std::vector<RawTensor>> shards;
  for (int k = 1; k <= 4; ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-00004.safetensors", k);
    shards[name] = {MakeTensor("l" + std::to_string(k) + ".a", "F32", {512, 1024}, 30 + k),
                    MakeTensor("l" + std::to_string(k) + ".b", "F32", {512, 1024}, 40 + k)};
  }
  WriteSharded(src.path(), "model.safetensors.index.json", shards);
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/ordered", src.path());
  store.server().faults().SetTotalBandwidthBytesPerSec(8'000'000);  // 4 x 4 MiB: about 2 s
  // Two connections for four ranges per shard: a scheduler that fetched files
  // side by side would finish shards k and k+1 together; fetching the earliest
  // file's ranges first leaves shard k+1 at least two range times behind.
  HubClient client = SmallRangesClient(store.url(), cache.str(), 2);
  PretrainedRequest req;
  req.repo_id = "org/ordered";
  EventLog log;
  PretrainedCallbacks cb;
  cb.on_tensor = [&](const std::string& name, at::Tensor) {
    log.Add("tensor " + name);
    return Status::Ok();
  };
  cb.on_file_downloaded = [&](const std::string& f) { log.Add("downloaded " + f); };
  cb.on_shard = [&](const std::string& f, uint64_t) { log.Add("loaded " + f); };
  auto r = FetchAndLoad(client, req, cb);
  ASSERT_OK(r);
  std::vector<std::string> names;
  for (const auto& [name, ts] : shards) names.push_back(name);
  std::vector<std::string> loaded = r->load_order;
  std::sort(loaded.begin(), loaded.end());
  EXPECT_EQ(loaded, names);
  // The link carries the earliest shard first: shard k is downloaded and
  // loaded before shard k+1 is complete.
  for (size_t k = 0; k + 1 < names.size(); ++k) {
    SCOPED_TRACE(names[k]);
    EXPECT_LT(log.Index("downloaded " + names[k]), log.Index("downloaded " + names[k + 1]))
        << ::testing::PrintToString(log.events);
    EXPECT_LT(log.Index("loaded " + names[k]), log.Index("downloaded " + names[k + 1]))
        << ::testing::PrintToString(log.events);
  }
}

// Each tensor is handed over as soon as its bytes are in the partial file,
// before its shard is complete (zero-copy and converting loads).
// Serves `repo_id` on `store`: one model.safetensors of 8 BF16 tensors t0..t7
// of `rows` x 1024 (values from seed..seed+7) on a link of `bytes_per_s` in
// total (the defaults: 4 MiB in about 1 s); returns the tensors as written.
std::vector<RawTensor> ServeSlowSingleFile(ServedStore& store, const std::string& repo_id, int seed,
                                           uint64_t rows = 256, uint64_t bytes_per_s = 4'000'000) {
  TempDir src;
  std::vector<RawTensor> ts;
  for (int i = 0; i < 8; ++i) ts.push_back(MakeTensor("t" + std::to_string(i), "BF16", {rows, 1024}, seed + i));
  WriteText(src.path() / "model.safetensors", SafetensorsBytes(ts));
  store.AddRepo(repo_id, src.path());
  store.server().faults().SetTotalBandwidthBytesPerSec(bytes_per_s);
  return ts;
}

TEST(Streaming, TensorsArriveBeforeTheirShardEnds) {
  ServedStore store;
  ASSERT_OK(store);
  const std::vector<RawTensor> ts = ServeSlowSingleFile(store, "org/stream", 50);
  for (TargetDtype dtype : {TargetDtype::kAuto, TargetDtype::kF32}) {
    SCOPED_TRACE(TargetDtypeName(dtype));
    TempDir cache;
    HubClient client = MakeClient(store.url(), cache.str());
    PretrainedRequest req;
    req.repo_id = "org/stream";
    req.load.dtype = dtype;
    EventLog log;
    std::map<std::string, std::string> got;
    PretrainedCallbacks cb;
    cb.on_tensor = [&](const std::string& name, at::Tensor t) {
      log.Add("tensor " + name);
      got[name] = Bytes(dtype == TargetDtype::kAuto ? t : t.to(at::kBFloat16));
      return Status::Ok();
    };
    cb.on_file_downloaded = [&](const std::string& f) { log.Add("downloaded " + f); };
    auto r = FetchAndLoad(client, req, cb);
    ASSERT_OK(r);
    const long done = log.Index("downloaded model.safetensors");
    ASSERT_GE(done, 0);
    EXPECT_LT(log.Index("tensor t0"), done) << ::testing::PrintToString(log.events);
    EXPECT_LT(log.Index("tensor t3"), done) << ::testing::PrintToString(log.events);
    // The provisional tensors hold the bytes that were verified afterwards.
    for (const auto& t : ts) EXPECT_TRUE(got[t.name] == t.bytes) << t.name;
  }
}

// The nice value of every thread of this process, read from
// /proc/self/task/<tid>/stat (field 19, counted after the command name's ')').
std::vector<int> NiceOfEveryThread() {
  std::vector<int> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(e.path() / "stat");
    std::string line;
    if (!std::getline(in, line)) continue;  // the thread ended meanwhile
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(line.substr(close + 1));
    std::string f;
    for (int field = 3; field <= 19 && fields >> f; ++field)
      if (field == 19) out.push_back(std::stoi(f));
  }
  return out;
}

// While a shard is downloading its conversions (tensors of 2 MiB: two
// chunks) run on threads of the load whose nice value is 10 above the
// caller's, so the download threads get the CPU
// (PretrainedRequest::yield_cpu_to_downloads); the loader thread itself keeps
// its priority, and the option off lowers no thread. The tensors are the
// served bytes either way.
TEST(Streaming, ConversionsWhileTheShardDownloadsYieldTheCpu) {
  ServedStore store;
  ASSERT_OK(store);
  const std::vector<RawTensor> ts = ServeSlowSingleFile(store, "org/yield", 70, 1024, 16'000'000);  // 16 MiB, ~1 s
  errno = 0;
  const int caller_nice = ::getpriority(PRIO_PROCESS, 0);
  ASSERT_EQ(errno, 0);
  const int lowered = std::min(19, caller_nice + 10);
  if (lowered == caller_nice) GTEST_SKIP() << "the test process already runs at nice 19: nothing can be lowered";
  for (const bool yield : {true, false}) {
    SCOPED_TRACE(yield ? "yield_cpu_to_downloads" : "option off");
    TempDir cache;
    HubClient client = MakeClient(store.url(), cache.str());
    PretrainedRequest req;
    req.repo_id = "org/yield";
    req.load.dtype = TargetDtype::kF32;
    req.yield_cpu_to_downloads = yield;
    std::atomic<bool> downloaded{false};
    int during = 0, lowered_threads = 0, loader_nice = caller_nice;
    std::map<std::string, std::string> got;
    PretrainedCallbacks cb;
    cb.on_tensor = [&](const std::string& name, at::Tensor t) {
      got[name] = Bytes(t.to(at::kBFloat16));
      if (!downloaded) {
        ++during;
        const std::vector<int> nice = NiceOfEveryThread();
        lowered_threads = std::max<int>(lowered_threads, static_cast<int>(std::count(nice.begin(), nice.end(), lowered)));
        errno = 0;
        loader_nice = ::getpriority(PRIO_PROCESS, 0);
      }
      return Status::Ok();
    };
    cb.on_file_downloaded = [&](const std::string&) { downloaded = true; };
    auto r = FetchAndLoad(client, req, cb);
    ASSERT_OK(r);
    ASSERT_GE(during, 1) << "no tensor was converted while the shard downloaded";
    if (yield) EXPECT_GE(lowered_threads, 1);
    else EXPECT_EQ(lowered_threads, 0);
    EXPECT_EQ(loader_nice, caller_nice);
    for (const auto& t : ts) EXPECT_TRUE(got[t.name] == t.bytes) << t.name;
  }
  // The load's threads are gone with it (a joined thread may linger in
  // /proc/self/task for a moment).
  long left = 0;
  for (int i = 0; i < 200; ++i) {
    const std::vector<int> after = NiceOfEveryThread();
    left = std::count(after.begin(), after.end(), lowered);
    if (left == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(left, 0);
}

// A ranged partial kept from an earlier run whose header bytes are corrupt
// (the journal says every chunk is in) does not decide the load: the loader
// waits for the verified file, the partial fails its sha256 check and is
// fetched again, and the load succeeds with the served bytes. Before, the
// provisional header failed the load with InvalidFormat on every run.
TEST(Streaming, ACorruptKeptPartialIsFetchedAgainNotAFormatError) {
  TempDir src;
  std::vector<RawTensor> ts;
  for (int i = 0; i < 4; ++i) ts.push_back(MakeTensor("w" + std::to_string(i), "F32", {256, 1024}, 90 + i));
  const std::string good = SafetensorsBytes(ts);  // 4 MiB
  WriteText(src.path() / "model.safetensors", good);
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/kept", src.path());
  const std::string etag = hubload::testing::Sha256Hex(good.data(), good.size());
  for (const bool length_field : {true, false}) {
    SCOPED_TRACE(length_field ? "header length + 16" : "a data_offsets digit changed");
    TempDir cache_k;
    std::string bad = good;
    if (length_field) {
      bad[0] = static_cast<char>(static_cast<unsigned char>(bad[0]) + 16);
    } else {
      const size_t at = bad.find("\"data_offsets\":[0,");
      ASSERT_NE(at, std::string::npos);
      bad[at + std::string("\"data_offsets\":[0,").size()] = '9';
    }
    {
      RepoCache repo(cache_k.str(), "org/kept", RepoType::kModel);
      RangedBlobWriter::Options o;
      o.size = bad.size();
      o.chunk_bytes = 1 << 20;  // SmallRangesClient's ranges: the journal is resumed
      auto w = RangedBlobWriter::Open(repo, etag, o);
      ASSERT_OK(w);
      for (size_t k = 0; k < (*w)->num_chunks(); ++k)
        ASSERT_OK((*w)->Append(k, bad.data() + (*w)->chunk_begin(k), (*w)->chunk_end(k) - (*w)->chunk_begin(k)));
    }
    HubClient client = SmallRangesClient(store.url(), cache_k.str(), 2);
    for (TargetDtype dtype : {TargetDtype::kAuto, TargetDtype::kF32}) {
      PretrainedRequest req;
      req.repo_id = "org/kept";
      req.load.dtype = dtype;
      std::map<std::string, std::string> got;
      PretrainedCallbacks cb;
      cb.on_tensor = [&](const std::string& name, at::Tensor t) {
        got[name] = Bytes(t);
        return Status::Ok();
      };
      auto r = FetchAndLoad(client, req, cb);
      ASSERT_OK(r) << TargetDtypeName(dtype);
      for (const auto& t : ts) EXPECT_TRUE(got[t.name] == t.bytes) << t.name;  // F32 either way
    }
    RepoCache rc(cache_k.str(), "org/kept", RepoType::kModel);
    auto blob = hubload::testing::ReadFileBytes(rc.BlobPath(etag));
    EXPECT_EQ(hubload::testing::Sha256Hex(blob.data(), blob.size()), etag);
  }
}

// The lenient index's warning names each shard once, also when a ranged
// partial kept from an earlier run holds a header that parses but differs
// from the one planned before downloading (device path: that provisional
// header is set aside, the partial fails its sha256 check, and the verified
// file's header is read again). Before, the set-aside header had already
// added the warning, so the shard was named twice.
TEST(Streaming, ALenientIndexWarnsOncePerShardWhenAKeptPartialsHeaderDiffers) {
  TempDir src;
  const std::string s1 = "model-00001-of-00002.safetensors", s2 = "model-00002-of-00002.safetensors";
  std::vector<RawTensor> t1;
  for (int i = 0; i < 3; ++i) t1.push_back(MakeTensor("w" + std::to_string(i), "F32", {256, 1024}, 60 + i));
  t1.push_back(MakeTensor("old.weight", "F32", {2}, 64));  // in s1, not in the index
  const RawTensor head = MakeTensor("lm_head.weight", "F32", {4}, 65);
  const std::string good = SafetensorsBytes(t1);  // 3 MiB: ranged with SmallRangesClient
  WriteText(src.path() / s1, good);
  WriteText(src.path() / s2, SafetensorsBytes({head}));
  WriteIndex(src.path(), {{"w0", s1}, {"w1", s1}, {"w2", s1}, {"lm_head.weight", s2}}, nlohmann::json::object());
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/lenient-kept", src.path());
  const std::string etag = hubload::testing::Sha256Hex(good.data(), good.size());
  TempDir cache;
  {  // A kept partial of s1, every chunk journaled, one dtype changed (F32 -> I32: same size, still parses).
    std::string bad = good;
    const size_t at = bad.find("\"F32\"");
    ASSERT_NE(at, std::string::npos);
    bad[at + 1] = 'I';
    RepoCache repo(cache.str(), "org/lenient-kept", RepoType::kModel);
    RangedBlobWriter::Options o;
    o.size = bad.size();
    o.chunk_bytes = 1 << 20;
    auto w = RangedBlobWriter::Open(repo, etag, o);
    ASSERT_OK(w);
    for (size_t k = 0; k < (*w)->num_chunks(); ++k)
      ASSERT_OK((*w)->Append(k, bad.data() + (*w)->chunk_begin(k), (*w)->chunk_end(k) - (*w)->chunk_begin(k)));
  }
  HubClient client = SmallRangesClient(store.url(), cache.str(), 2);
  PretrainedRequest req;
  req.repo_id = "org/lenient-kept";
  req.lenient_index = true;
  req.digests = true;
  auto r = FetchAndLoadToDevice(client, req, OneFakeGpu());
  ASSERT_OK(r);
  std::map<std::string, std::string> sha;
  for (const auto& t : r->info.tensors) sha[t.name] = t.sha256;
  std::map<std::string, std::string> want;
  for (int i = 0; i < 3; ++i) want[t1[i].name] = hubload::testing::Sha256Hex(t1[i].bytes.data(), t1[i].bytes.size());
  want[head.name] = hubload::testing::Sha256Hex(head.bytes.data(), head.bytes.size());
  EXPECT_EQ(sha, want);
  std::vector<std::string> skipped;
  for (const auto& w : r->info.warnings)
    if (w.find("the index does not map to this shard") != std::string::npos) skipped.push_back(w);
  ASSERT_EQ(skipped.size(), 1u) << ::testing::PrintToString(r->info.warnings);
  EXPECT_NE(skipped[0].find(s1), std::string::npos) << skipped[0];
  EXPECT_NE(skipped[0].find("old.weight"), std::string::npos) << skipped[0];
}

// A shard whose ranges arrive but whose sha256 is wrong is downloaded again on
// one connection into a new partial file while the loader is still handing
// over tensors it checked in the first one (a slow on_tensor keeps it behind).
// Every tensor is read from the file its bytes were checked in: no read of the
// new, still empty file (a zero-copy view of it faulted with SIGBUS), the load
// fails with HashMismatch naming the file, and the views handed over stay
// readable after the partial files are gone.
TEST(Streaming, ARestartedDownloadNeverHandsOverBytesOfTheNewPartial) {
  TempDir src;
  std::vector<RawTensor> ts;
  for (int i = 0; i < 16; ++i) ts.push_back(MakeTensor("t" + std::to_string(i), "BF16", {128, 1024}, 70 + i));
  const std::string good = SafetensorsBytes(ts);  // 4 MiB
  WriteText(src.path() / "model.safetensors", good);
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/restart", src.path());
  const std::string etag = hubload::testing::Sha256Hex(good.data(), good.size());
  fs::path blob;
  for (auto& e : fs::recursive_directory_iterator(fs::path(store.server().root())))
    if (e.path().filename() == etag) blob = e.path();
  ASSERT_FALSE(blob.empty());
  std::string served = good;
  served[served.size() - 5] ^= 0x01;  // in the last tensor
  fs::permissions(blob, fs::perms::owner_all, fs::perm_options::add);
  WriteText(blob, served);
  // A download: about 0.5 s, so most tensors are handed over before the
  // second one ends (also on a loaded machine) and the last ones after it began.
  store.server().faults().SetTotalBandwidthBytesPerSec(8'000'000);
  // The served bytes of each tensor, from the file's own header (what any
  // partial file holds where it is written).
  uint64_t header_len = 0;
  for (int b = 7; b >= 0; --b) header_len = header_len << 8 | static_cast<unsigned char>(good[b]);
  const auto header = nlohmann::json::parse(good.substr(8, header_len));
  auto served_bytes = [&](const std::string& name) {
    const uint64_t begin = header[name]["data_offsets"][0].get<uint64_t>();
    const uint64_t end = header[name]["data_offsets"][1].get<uint64_t>();
    return served.substr(8 + header_len + begin, end - begin);
  };
  for (TargetDtype dtype : {TargetDtype::kAuto, TargetDtype::kF32}) {
    SCOPED_TRACE(TargetDtypeName(dtype));
    TempDir cache;
    HubClient client = SmallRangesClient(store.url(), cache.str(), 2);
    PretrainedRequest req;
    req.repo_id = "org/restart";
    req.load.dtype = dtype;
    std::map<std::string, std::string> got;
    std::map<std::string, at::Tensor> kept;
    PretrainedCallbacks cb;
    cb.on_tensor = [&](const std::string& name, at::Tensor t) {
      got[name] = Bytes(dtype == TargetDtype::kAuto ? t : t.to(at::kBFloat16));
      kept[name] = t;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // 16 tensors: ~0.8 s, behind the download
      return Status::Ok();
    };
    auto r = FetchAndLoad(client, req, cb);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kCorruptDownload) << r.status().ToString();
    EXPECT_EQ(r.status().reason(), reason::kHashMismatch) << r.status().ToString();
    EXPECT_NE(r.status().ToString().find("model.safetensors"), std::string::npos) << r.status().ToString();
    EXPECT_GE(got.size(), 8u);  // most tensors were handed over before the second sha256 check
    for (const auto& t : ts) {
      if (!got.count(t.name)) continue;
      const std::string want = served_bytes(t.name);
      EXPECT_TRUE(got[t.name] == want) << t.name;
      EXPECT_TRUE(Bytes(dtype == TargetDtype::kAuto ? kept[t.name] : kept[t.name].to(at::kBFloat16)) == want)
          << t.name << " after the load";
    }
    RepoCache rc(cache.str(), "org/restart", RepoType::kModel);
    EXPECT_FALSE(fs::exists(rc.BlobPath(etag)));
  }
}

}  // namespace
}  // namespace hubload::pipeline_test

namespace hubload::pipeline_test {
namespace {

// Issue 14: model_index.json with every field set to every JSON type: an
// entry that is no longer ["library", "ClassName"] strings is skipped (as
// diffusers reads only those), every other component is still listed; a
// document that is not an object is InvalidModelIndex naming the file; never
// a throw. Expected lists are worked out here from the mutation.
TEST(ModelIndex, EveryFieldOfEveryType) {
  using json = nlohmann::json;
  const json doc = {{"_class_name", "MochiPipeline"},
                    {"_diffusers_version", "0.31.0"},
                    {"scheduler", json::array({"diffusers", "FlowMatchEulerDiscreteScheduler"})},
                    {"transformer", json::array({"diffusers", "MochiTransformer3DModel"})},
                    {"vae", json::array({"diffusers", "AutoencoderKLMochi"})},
                    {"force_zeros_for_empty_prompt", false}};
  const std::string label = "org/pipe/model_index.json";
  auto names = [](const std::vector<PipelineComponent>& v) {
    std::vector<std::string> out;
    for (auto& c : v) out.push_back(c.name + "=" + c.library + "." + c.class_name);
    return out;
  };
  std::map<std::string, std::pair<std::string, std::string>> base = {
      {"scheduler", {"diffusers", "FlowMatchEulerDiscreteScheduler"}},
      {"transformer", {"diffusers", "MochiTransformer3DModel"}},
      {"vae", {"diffusers", "AutoencoderKLMochi"}}};
  auto listed = [](const std::map<std::string, std::pair<std::string, std::string>>& m) {
    std::vector<std::string> out;
    for (auto& [k, v] : m) out.push_back(k + "=" + v.first + "." + v.second);
    return out;
  };
  auto ok = ParseModelIndex(doc.dump(), label);
  ASSERT_OK(ok);
  EXPECT_EQ(names(*ok), listed(base));
  int runs = 0;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const bool component = base.count(it.key()) > 0;
    for (const json& t : hubload::testing::EveryJsonType()) {
      // The whole entry replaced.
      json m = doc;
      m[it.key()] = t;
      Result<std::vector<PipelineComponent>> r = Status(Code::kInternal, "unset");
      EXPECT_NO_THROW(r = ParseModelIndex(m.dump(), label));
      ASSERT_OK(r) << it.key() << " = " << t.dump() << ": " << r.status().ToString();
      auto want = base;
      if (component) want.erase(it.key());  // no value of EveryJsonType is a 2-string array
      EXPECT_EQ(names(*r), listed(want)) << it.key() << " = " << t.dump();
      ++runs;
      if (!component) continue;
      // One element of the pair replaced.
      for (int i : {0, 1}) {
        json e = doc;
        e[it.key()][i] = t;
        EXPECT_NO_THROW(r = ParseModelIndex(e.dump(), label));
        ASSERT_OK(r) << it.key() << "[" << i << "] = " << t.dump();
        auto w = base;
        if (t.is_string()) (i == 0 ? w[it.key()].first : w[it.key()].second) = t.get<std::string>();
        else w.erase(it.key());
        EXPECT_EQ(names(*r), listed(w)) << it.key() << "[" << i << "] = " << t.dump();
        ++runs;
      }
    }
  }
  EXPECT_GT(runs, 100);
  for (const json& t : hubload::testing::EveryJsonType()) {
    auto r = ParseModelIndex(t.dump(), label);
    if (t.is_object()) {
      ASSERT_OK(r) << t.dump();
      EXPECT_TRUE(r->empty()) << t.dump();
    } else {
      EXPECT_EQ(r.status().code(), Code::kInvalidFormat) << t.dump();
      EXPECT_EQ(r.status().reason(), "InvalidModelIndex") << t.dump();
      EXPECT_NE(r.status().message().find(label), std::string::npos) << r.status().message();
    }
  }
  EXPECT_EQ(ParseModelIndex("{not json", label).status().reason(), "InvalidModelIndex");
}

}  // namespace
}  // namespace hubload::pipeline_test
