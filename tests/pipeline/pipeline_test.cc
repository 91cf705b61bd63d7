// Fetch-and-load by repo id against an in-process `hubload serve` (issue 6).
// Expected values come from the bytes the fixtures wrote (fixtures.h), from the
// original files of ../shared/data/real, or from hand-written layouts.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <mutex>
#include <set>

#include "hubload/pipeline.h"
#include "hubload/reasons.h"
#include "hubload/torch_loader.h"
#include "tests/pipeline/fixtures.h"
#include "testing/status_matchers.h"

namespace hubload::pipeline_test {
namespace {

using hubload::testing::ReadFileBytes;
using hubload::testing::Sha256Hex;
using hubload::testing::SharedDataDir;
using hubload::testing::TempDir;

std::string Bytes(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  const size_t n = static_cast<size_t>(c.numel()) * c.element_size();
  return std::string(static_cast<const char*>(c.data_ptr()), n);
}

std::string DtypeOf(const at::Tensor& t) {
  auto d = SafetensorsDtype(t.scalar_type());
  return d.ok() ? safetensors::DtypeName(*d) : "?";
}

std::vector<int64_t> Shape(const std::vector<uint64_t>& s) { return std::vector<int64_t>(s.begin(), s.end()); }

void ExpectStateDictEquals(const StateDict& got, const std::vector<RawTensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(got[i].first, want[i].name);
    EXPECT_EQ(DtypeOf(got[i].second), want[i].dtype);
    EXPECT_EQ(got[i].second.sizes().vec(), Shape(want[i].shape));
    EXPECT_TRUE(Bytes(got[i].second) == want[i].bytes);
  }
}

void ExpectSameStateDict(const StateDict& a, const StateDict& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(a[i].first);
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.scalar_type(), b[i].second.scalar_type());
    EXPECT_EQ(a[i].second.sizes().vec(), b[i].second.sizes().vec());
    EXPECT_TRUE(Bytes(a[i].second) == Bytes(b[i].second));
  }
}

/// A 3-shard transformers-style checkpoint with F32, BF16, F16 and I64 tensors.
/// Returns the tensors in expected state-dict order (shards sorted, file order).
std::vector<RawTensor> WriteThreeShards(const fs::path& dir) {
  std::vector<RawTensor> s1 = {MakeTensor("embed.weight", "F32", {64, 16}, 1),
                               MakeTensor("embed.position_ids", "I64", {1, 32}, 2)};
  std::vector<RawTensor> s2 = {MakeTensor("layers.0.attn.weight", "BF16", {32, 16}, 3),
                               MakeTensor("layers.0.norm.weight", "F32", {16}, 4),
                               MakeTensor("layers.0.mlp.weight", "F16", {16, 48}, 5)};
  std::vector<RawTensor> s3 = {MakeTensor("lm_head.weight", "F32", {128, 16}, 6), MakeTensor("scale", "F32", {}, 7)};
  WriteSharded(dir, "model.safetensors.index.json",
               {{"model-00001-of-00003.safetensors", s1},
                {"model-00002-of-00003.safetensors", s2},
                {"model-00003-of-00003.safetensors", s3}});
  std::vector<RawTensor> all = s1;
  all.insert(all.end(), s2.begin(), s2.end());
  all.insert(all.end(), s3.begin(), s3.end());
  return all;
}

PretrainedRequest HubRequest(const std::string& repo_id) {
  PretrainedRequest r;
  r.repo_id = repo_id;
  r.source = PretrainedRequest::Source::kHub;
  return r;
}

TEST(PipelineTest, ShardedByRepoIdIsBitIdenticalToWrittenBytesAndLocalLoad) {
  TempDir src, cache;
  auto want = WriteThreeShards(src.path());
  ServedStore store;
  ASSERT_OK(store);
  std::string commit = store.AddRepo("org/sharded", src.path());
  HubClient client = MakeClient(store.url(), cache.str());

  auto hub = LoadStateDict(client, HubRequest("org/sharded"));
  ASSERT_OK(hub);
  ExpectStateDictEquals(hub->tensors, want);
  EXPECT_EQ(hub->info.source, "hub");
  EXPECT_EQ(hub->info.commit, commit);
  EXPECT_EQ(hub->info.index_file, "model.safetensors.index.json");
  EXPECT_EQ(hub->info.files, (std::vector<std::string>{"model-00001-of-00003.safetensors",
                                                       "model-00002-of-00003.safetensors",
                                                       "model-00003-of-00003.safetensors"}));
  EXPECT_EQ(hub->info.load_order.size(), 3u);
  EXPECT_EQ(hub->info.num_tensors, want.size());
  // The snapshot holds exactly the bytes that were served.
  ASSERT_EQ(hub->info.local_files.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    auto a = ReadFileBytes(hub->info.local_files[i]);
    auto b = ReadFileBytes(src.path() / hub->info.files[i]);
    EXPECT_EQ(Sha256Hex(a.data(), a.size()), Sha256Hex(b.data(), b.size()));
  }
  EXPECT_GT(hub->info.timings.total_s, 0);
  EXPECT_GE(hub->info.timings.total_s, hub->info.timings.time_to_first_tensor_s);

  // Same pipeline from the local folder, and the torch loader's own local load.
  PretrainedRequest lr;
  lr.repo_id = src.str();
  auto local = LoadStateDict(client, lr);
  ASSERT_OK(local);
  EXPECT_EQ(local->info.source, "local");
  ExpectSameStateDict(hub->tensors, local->tensors);
  auto ckpt = LoadCheckpoint(src.str(), {}, {});
  ASSERT_OK(ckpt);
  ExpectSameStateDict(hub->tensors, ckpt->tensors);

  // Sequential mode (download everything, then load) gives the same tensors.
  PretrainedRequest seq = HubRequest("org/sharded");
  seq.overlap = false;
  auto again = LoadStateDict(client, seq);
  ASSERT_OK(again);
  ExpectSameStateDict(hub->tensors, again->tensors);
}

TEST(PipelineTest, CallbackFormDeliversEveryTensorAndShard) {
  TempDir src, cache;
  auto want = WriteThreeShards(src.path());
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/cb", src.path());
  HubClient client = MakeClient(store.url(), cache.str());
  std::map<std::string, std::string> got;  // name -> bytes
  std::map<std::string, uint64_t> shards;
  std::set<std::string> downloaded;
  uint64_t last_done = 0, last_total = 0;
  std::mutex mu;
  PretrainedCallbacks cb;
  cb.on_tensor = [&](const std::string& n, at::Tensor t) {
    got[n] = Bytes(t);
    return Status::Ok();
  };
  cb.on_shard = [&](const std::string& f, uint64_t n) { shards[f] = n; };
  cb.on_file_downloaded = [&](const std::string& f) {
    std::lock_guard<std::mutex> l(mu);
    downloaded.insert(f);
  };
  cb.on_progress = [&](uint64_t d, uint64_t t) {
    std::lock_guard<std::mutex> l(mu);
    last_done = d;
    last_total = t;
  };
  auto info = FetchAndLoad(client, HubRequest("org/cb"), cb);
  ASSERT_OK(info);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& t : want) EXPECT_TRUE(got[t.name] == t.bytes) << t.name;
  EXPECT_EQ(shards, (std::map<std::string, uint64_t>{{"model-00001-of-00003.safetensors", 2},
                                                      {"model-00002-of-00003.safetensors", 3},
                                                      {"model-00003-of-00003.safetensors", 2}}));
  EXPECT_EQ(downloaded.size(), 3u);
  uint64_t total = 0;
  for (const auto& f : info->files) total += fs::file_size(src.path() / f);
  EXPECT_EQ(info->weights_bytes, total);
  EXPECT_EQ(last_total, total);
  EXPECT_EQ(last_done, total);

  // A sink error stops the load and comes back with the tensor name.
  PretrainedCallbacks bad;
  bad.on_tensor = [](const std::string& n, at::Tensor) {
    return Status(Code::kInvalidArgument, "sink refuses " + n, "SinkRefused");
  };
  auto r = FetchAndLoad(client, HubRequest("org/cb"), bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(r.status().reason(), "SinkRefused");
  EXPECT_EQ(r.status().context().repo_id, "org/cb");
}

TEST(PipelineTest, SingleFileByRepoId) {
  TempDir src, cache;
  std::vector<RawTensor> want = {MakeTensor("a", "F16", {3, 5}, 11), MakeTensor("b", "I64", {4}, 12),
                                 MakeTensor("c", "BF16", {7}, 13)};
  WriteText(src.path() / "model.safetensors", SafetensorsBytes(want));
  WriteText(src.path() / "config.json", "{}");
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/single", src.path());
  HubClient client = MakeClient(store.url(), cache.str());
  auto r = LoadStateDict(client, HubRequest("org/single"));
  ASSERT_OK(r);
  ExpectStateDictEquals(r->tensors, want);
  EXPECT_EQ(r->info.files, std::vector<std::string>{"model.safetensors"});
  EXPECT_EQ(r->info.index_file, "");
  EXPECT_EQ(r->info.resolved.kind, ResolvedWeights::kSingleFile);
  // config.json was never downloaded: only the weights are fetched.
  EXPECT_EQ(store.server().RequestCount("config.json"), 0u);
}

TEST(PipelineTest, DtypeConversionAppliesOnTheHubPath) {
  TempDir src, cache;
  std::vector<RawTensor> t = {MakeTensor("x.weight", "F32", {8}, 21), MakeTensor("norm.weight", "F32", {8}, 22),
                              MakeTensor("ids", "I64", {3}, 23)};
  WriteText(src.path() / "model.safetensors", SafetensorsBytes(t));
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/conv", src.path());
  HubClient client = MakeClient(store.url(), cache.str());
  PretrainedRequest req = HubRequest("org/conv");
  req.load.dtype = TargetDtype::kBF16;
  req.load.keep_in_fp32 = {"norm"};
  auto r = LoadStateDict(client, req);
  ASSERT_OK(r);
  ASSERT_EQ(r->tensors.size(), 3u);
  EXPECT_EQ(r->tensors[0].second.scalar_type(), at::kBFloat16);
  EXPECT_EQ(r->tensors[1].second.scalar_type(), at::kFloat);  // kept in fp32
  EXPECT_EQ(r->tensors[2].second.scalar_type(), at::kLong);   // integers never converted
  // The fixture's F32 values are multiples of 1/64 in [-2, 2): exact in bf16.
  std::string back = Bytes(r->tensors[0].second.to(at::kFloat));
  EXPECT_TRUE(back == t[0].bytes);
}

/// B25 layout: a transformer with a single-file fp16 variant beside non-variant shards.
void WriteB25Repo(const fs::path& dir, std::vector<RawTensor>* fp16, std::vector<RawTensor>* fp32) {
  *fp16 = {MakeTensor("proj.weight", "F16", {4, 4}, 31), MakeTensor("proj.bias", "F16", {4}, 32)};
  *fp32 = {MakeTensor("proj.weight", "F32", {4, 4}, 33), MakeTensor("proj.bias", "F32", {4}, 34)};
  WriteText(dir / "transformer/diffusion_pytorch_model.fp16.safetensors", SafetensorsBytes(*fp16));
  WriteSharded(dir / "transformer", "diffusion_pytorch_model.safetensors.index.json",
               {{"diffusion_pytorch_model-00001-of-00002.safetensors", {(*fp32)[0]}},
                {"diffusion_pytorch_model-00002-of-00002.safetensors", {(*fp32)[1]}}});
  WriteText(dir / "transformer/config.json", "{}");
  WriteText(dir / "vae/diffusion_pytorch_model.safetensors", SafetensorsBytes({MakeTensor("v", "F32", {2}, 35)}));
}

TEST(PipelineTest, VariantLoadsOnlyVariantFilesB25) {
  TempDir src, cache;
  std::vector<RawTensor> fp16, fp32;
  WriteB25Repo(src.path(), &fp16, &fp32);
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/b25", src.path());
  HubClient client = MakeClient(store.url(), cache.str());

  PretrainedRequest req = HubRequest("org/b25");
  req.subfolder = "transformer";
  req.variant = "fp16";
  auto r = LoadStateDict(client, req);
  ASSERT_OK(r);
  // Single file order in the file = the order the fixture wrote them.
  ExpectStateDictEquals(r->tensors, fp16);
  EXPECT_EQ(r->info.files, std::vector<std::string>{"transformer/diffusion_pytorch_model.fp16.safetensors"});
  EXPECT_EQ(store.server().RequestCount("diffusion_pytorch_model-0000"), 0u);
  EXPECT_EQ(store.server().RequestCount("index.json"), 0u);

  // Non-variant: the shards only, never the fp16 file.
  store.server().ResetStats();
  PretrainedRequest plain = HubRequest("org/b25");
  plain.subfolder = "transformer";
  auto p = LoadStateDict(client, plain);
  ASSERT_OK(p);
  ExpectStateDictEquals(p->tensors, fp32);
  EXPECT_EQ(store.server().RequestCount("fp16"), 0u);
}

TEST(PipelineTest, MissingVariantListsVariantsOrFallsBackWithWarning) {
  TempDir src, cache;
  std::vector<RawTensor> fp16, fp32;
  WriteB25Repo(src.path(), &fp16, &fp32);
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/b25v", src.path());
  HubClient client = MakeClient(store.url(), cache.str());

  PretrainedRequest req = HubRequest("org/b25v");
  req.subfolder = "transformer";
  req.variant = "bf16";
  auto r = LoadStateDict(client, req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_EQ(r.status().reason(), "VariantNotFound");
  EXPECT_NE(r.status().message().find("fp16"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("org/b25v"), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().context().repo_id, "org/b25v");
  EXPECT_EQ(store.server().RequestCount(".safetensors"), 0u);

  req.allow_variant_fallback = true;
  auto f = LoadStateDict(client, req);
  ASSERT_OK(f);
  ExpectStateDictEquals(f->tensors, fp32);
  EXPECT_FALSE(f->info.warnings.empty());
  EXPECT_EQ(f->info.resolved.variant_used, "");
  EXPECT_EQ(store.server().RequestCount("fp16"), 0u);  // never mixed
}

TEST(PipelineTest, MissingShardIsReportedBeforeAnyDownloadB23) {
  TempDir src, cache;
  WriteSharded(src.path(), "model.safetensors.index.json",
               {{"model-00001-of-00002.safetensors", {MakeTensor("a.weight", "F32", {4}, 41)}},
                {"model-00002-of-00002.safetensors", {MakeTensor("b.weight", "F32", {4}, 42)}}});
  fs::remove(src.path() / "model-00002-of-00002.safetensors");
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/b23", src.path());
  HubClient client = MakeClient(store.url(), cache.str());
  auto r = LoadStateDict(client, HubRequest("org/b23"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_EQ(r.status().reason(), "MissingShards");
  EXPECT_NE(r.status().message().find("model-00002-of-00002.safetensors"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(r.status().context().repo_id, "org/b23");
  // No shard was requested, not even the present one.
  EXPECT_EQ(store.server().RequestCount("model-0000"), 0u);
}

TEST(PipelineTest, FirstTensorArrivesBeforeTheLastShardFinishes) {
  TempDir src, cache;
  // Shard 3 is large; its GET is held back until the first tensor reached the sink.
  WriteSharded(src.path(), "model.safetensors.index.json",
               {{"model-00001-of-00003.safetensors", {MakeTensor("a", "F32", {16}, 51)}},
                {"model-00002-of-00003.safetensors", {MakeTensor("b", "F32", {16}, 52)}},
                {"model-00003-of-00003.safetensors", {MakeTensor("c", "F32", {1024, 1024}, 53)}}});
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/ttft", src.path());
  store.server().faults().SetBandwidthBytesPerSec(16ull << 20);
  auto stall = std::make_shared<StallTransport>(MakeCurlTransport(), "model-00003-of-00003", std::chrono::seconds(30));
  HubClient client = MakeClient(store.url(), cache.str(), stall);
  std::mutex mu;
  std::vector<std::string> events;
  PretrainedCallbacks cb;
  cb.on_tensor = [&](const std::string& n, at::Tensor) {
    {
      std::lock_guard<std::mutex> l(mu);
      events.push_back("tensor " + n);
    }
    stall->Release();
    return Status::Ok();
  };
  cb.on_file_downloaded = [&](const std::string& f) {
    std::lock_guard<std::mutex> l(mu);
    events.push_back("downloaded " + f);
  };
  auto r = FetchAndLoad(client, HubRequest("org/ttft"), cb);
  ASSERT_OK(r);
  EXPECT_FALSE(stall->timed_out()) << "the large shard was only requested after 30 s: no overlap";
  auto pos = [&](const std::string& e) { return std::find(events.begin(), events.end(), e) - events.begin(); };
  ASSERT_EQ(events.size(), 6u);
  EXPECT_LT(std::min(pos("tensor a"), pos("tensor b")), pos("downloaded model-00003-of-00003.safetensors"));
  EXPECT_EQ(r->load_order.back(), "model-00003-of-00003.safetensors");
  EXPECT_LE(r->timings.time_to_first_tensor_s, r->timings.download_s);
}

TEST(PipelineTest, CorruptShardCancelsTheOtherDownloads) {
  TempDir src, cache;
  WriteSharded(src.path(), "model.safetensors.index.json",
               {{"model-00001-of-00002.safetensors", {MakeTensor("a", "F32", {4}, 61)}},
                {"model-00002-of-00002.safetensors", {MakeTensor("big", "F32", {2048, 1024}, 62)}}});
  // Shard 1 is served as is (its sha256 matches) but its header is not JSON.
  std::string bad(8, '\0');
  bad[0] = 16;
  bad += "{not json at all";
  bad += std::string(16, '\0');
  WriteText(src.path() / "model-00001-of-00002.safetensors", bad);
  ServedStore store;
  ASSERT_OK(store);
  std::string commit = store.AddRepo("org/corrupt", src.path());
  // 8 MiB at 512 KiB/s = 16 s unless cancelled.
  store.server().faults().SetBandwidthBytesPerSec(512 * 1024);
  HubClient client = MakeClient(store.url(), cache.str());
  auto r = LoadStateDict(client, HubRequest("org/corrupt"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidFormat) << r.status().ToString();
  EXPECT_EQ(r.status().context().repo_id, "org/corrupt");
  EXPECT_EQ(r.status().context().file, "model-00001-of-00002.safetensors");
  EXPECT_NE(r.status().message().find("model-00001-of-00002.safetensors"), std::string::npos);
  // The large shard was cancelled: it never appeared in the snapshot, and
  // nothing visible in the cache is half-written (every blob matches its name).
  RepoCache rc(cache.str(), "org/corrupt", RepoType::kModel);
  EXPECT_FALSE(fs::exists(rc.PointerPath(commit, "model-00002-of-00002.safetensors")));
  std::error_code ec;
  for (auto it = fs::directory_iterator(fs::path(rc.repo_dir()) / "blobs", ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.size() != 64) continue;  // partials (.incomplete) and git-sha1 blobs
    auto bytes = ReadFileBytes(it->path());
    EXPECT_EQ(Sha256Hex(bytes.data(), bytes.size()), name);
  }
}

TEST(PipelineTest, OfflineReloadFromTheCacheGivesTheSameTensors) {
  TempDir src, cache;
  auto want = WriteThreeShards(src.path());
  std::string url;
  {
    ServedStore store;
    ASSERT_OK(store);
    store.AddRepo("org/offline", src.path());
    auto r = LoadStateDict(MakeClient(store.url(), cache.str()), HubRequest("org/offline"));
    ASSERT_OK(r);
    url = store.url();
  }  // server stopped
  auto r = LoadStateDict(MakeClient(url, cache.str(), nullptr, /*offline=*/true), HubRequest("org/offline"));
  ASSERT_OK(r);
  ExpectStateDictEquals(r->tensors, want);
  // A repo never fetched is an offline miss, not a network attempt.
  auto miss = LoadStateDict(MakeClient(url, cache.str(), nullptr, true), HubRequest("org/never"));
  ASSERT_FALSE(miss.ok());
  EXPECT_EQ(miss.status().code(), Code::kOfflineMiss) << miss.status().ToString();
}

// require_safetensors (transformers use_safetensors=True): pickle weights are refused
// by name before any weights byte is requested.
TEST(PipelineTest, RequireSafetensorsRefusesPickleWithoutDownload) {
  TempDir src, cache;
  WriteText(src.path() / "pytorch_model.bin", hubload::testing::PatternBytes(1000, 7));
  WriteText(src.path() / "config.json", "{}");
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/pickle", src.path());
  PretrainedRequest req = HubRequest("org/pickle");
  req.require_safetensors = true;
  auto r = LoadStateDict(MakeClient(store.url(), cache.str()), req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnsupported);
  EXPECT_EQ(r.status().reason(), "PickleUnsupported");
  EXPECT_NE(r.status().message().find("pytorch_model.bin"), std::string::npos);
  EXPECT_NE(r.status().message().find("safetensors"), std::string::npos);
  EXPECT_EQ(store.server().RequestCount("pytorch_model.bin"), 0u);
}

// Without it, a `.bin` that is not a torch checkpoint (random bytes) is downloaded,
// then refused as a format error naming the file; the error is not a crash.
TEST(PipelineTest, GarbagePickleIsInvalidFormatNamingTheFile) {
  TempDir src, cache;
  WriteText(src.path() / "pytorch_model.bin", hubload::testing::PatternBytes(1000, 7));
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/pickle", src.path());
  auto r = LoadStateDict(MakeClient(store.url(), cache.str()), HubRequest("org/pickle"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidFormat) << r.status().ToString();
  EXPECT_EQ(r.status().reason(), "NotTorchCheckpoint");
  EXPECT_NE(r.status().message().find("pytorch_model.bin"), std::string::npos) << r.status().ToString();
}

TEST(PipelineTest, BadRequestsFailClearly) {
  HubClient client = MakeClient("http://127.0.0.1:9", "/nonexistent-cache");
  PretrainedRequest req = HubRequest("org/x");
  req.device = "cuda:0";
  auto r = LoadStateDict(client, req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnsupported);
  EXPECT_EQ(r.status().reason(), "UnsupportedDevice");
  EXPECT_NE(r.status().message().find("cuda:0"), std::string::npos);

  req.device = "cpu";
  req.max_shards_in_flight = 0;
  EXPECT_EQ(LoadStateDict(client, req).status().code(), Code::kInvalidArgument);

  PretrainedRequest empty;
  EXPECT_EQ(LoadStateDict(client, empty).status().code(), Code::kInvalidArgument);

  // A subfolder that leaves the repo is refused before any request, naming it
  // and the rule (it was "no weights found in '../../'").
  for (const std::string sub : {"../..", "unet/../..", "/../x", "a//b", ".git"}) {
    PretrainedRequest bad = HubRequest("org/x");
    bad.subfolder = sub;
    auto b = LoadStateDict(client, bad);
    ASSERT_FALSE(b.ok()) << sub;
    EXPECT_EQ(b.status().code(), Code::kInvalidArgument) << b.status().ToString();
    EXPECT_NE(b.status().message().find("subfolder"), std::string::npos) << b.status().ToString();
    EXPECT_NE(b.status().message().find(sub.substr(sub[0] == '/' ? 1 : 0)), std::string::npos)
        << b.status().ToString();
    EXPECT_EQ(b.status().reason(), std::string(sub == ".git" ? reason::kForbiddenFolder : reason::kUnsafePath))
        << b.status().ToString();
  }

  TempDir cache;
  ServedStore store;
  ASSERT_OK(store);
  auto nf = LoadStateDict(MakeClient(store.url(), cache.str()), HubRequest("org/does-not-exist"));
  ASSERT_FALSE(nf.ok());
  EXPECT_EQ(nf.status().code(), Code::kRepoNotFound) << nf.status().ToString();
  EXPECT_EQ(nf.status().context().repo_id, "org/does-not-exist");
}

TEST(PipelineTest, DiffusersPipelineComponentsByName) {
  TempDir src, cache;
  WriteText(src.path() / "model_index.json",
            R"({"_class_name": "DemoPipeline", "_diffusers_version": "0.32.0",
                "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"],
                "text_encoder": ["transformers", "T5EncoderModel"],
                "safety_checker": [null, null],
                "transformer": ["diffusers", "DemoTransformer"]})");
  WriteText(src.path() / "scheduler/scheduler_config.json", "{}");
  std::vector<RawTensor> te = {MakeTensor("shared.weight", "BF16", {10, 4}, 71)};
  WriteText(src.path() / "text_encoder/model.safetensors", SafetensorsBytes(te));
  std::vector<RawTensor> tr = {MakeTensor("x", "F32", {3}, 72)};
  WriteText(src.path() / "transformer/diffusion_pytorch_model.safetensors", SafetensorsBytes(tr));
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/pipe", src.path());
  HubClient client = MakeClient(store.url(), cache.str());
  PretrainedRequest req = HubRequest("org/pipe");

  auto comps = ListComponents(client, req);
  ASSERT_OK(comps);
  ASSERT_EQ(comps->size(), 3u);
  EXPECT_EQ((*comps)[0].name, "scheduler");
  EXPECT_EQ((*comps)[1].name, "text_encoder");
  EXPECT_EQ((*comps)[1].library, "transformers");
  EXPECT_EQ((*comps)[1].class_name, "T5EncoderModel");
  EXPECT_EQ((*comps)[2].name, "transformer");

  auto t = LoadComponent(client, req, "text_encoder");
  ASSERT_OK(t);
  ExpectStateDictEquals(t->tensors, te);
  auto x = LoadComponent(client, req, "transformer");
  ASSERT_OK(x);
  ExpectStateDictEquals(x->tensors, tr);

  auto missing = LoadComponent(client, req, "vae");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().reason(), "ComponentNotFound");
  EXPECT_NE(missing.status().message().find("text_encoder"), std::string::npos);
  auto sched = LoadComponent(client, req, "scheduler");
  ASSERT_FALSE(sched.ok());
  EXPECT_EQ(sched.status().reason(), "WeightsNotFound") << sched.status().ToString();

  // The same from the local folder.
  PretrainedRequest lr;
  lr.repo_id = src.str();
  auto lc = ListComponents(client, lr);
  ASSERT_OK(lc);
  EXPECT_EQ(lc->size(), 3u);
  auto lt = LoadComponent(client, lr, "text_encoder");
  ASSERT_OK(lt);
  ExpectStateDictEquals(lt->tensors, te);

  // A repo without model_index.json is not a pipeline.
  TempDir plain;
  WriteText(plain.path() / "model.safetensors", SafetensorsBytes(tr));
  store.AddRepo("org/notpipe", plain.path());
  auto np = ListComponents(client, HubRequest("org/notpipe"));
  ASSERT_FALSE(np.ok());
  EXPECT_EQ(np.status().reason(), "NotAPipeline") << np.status().ToString();
}

TEST(PipelineTest, WholePipelineVariantUsesOnlyVariantFilesAndWarnsB25) {
  // The field-failures.md B25 tree, with variant bf16.
  TempDir src, cache;
  WriteText(src.path() / "model_index.json",
            R"({"_class_name": "P", "scheduler": ["diffusers", "S"], "text_encoder": ["transformers", "T"],
                "transformer": ["diffusers", "X"], "vae": ["diffusers", "V"]})");
  WriteText(src.path() / "scheduler/scheduler_config.json", "{}");
  std::vector<RawTensor> tr16 = {MakeTensor("t", "BF16", {4}, 101)};
  WriteText(src.path() / "transformer/diffusion_pytorch_model.bf16.safetensors", SafetensorsBytes(tr16));
  WriteSharded(src.path() / "transformer", "diffusion_pytorch_model.safetensors.index.json",
               {{"diffusion_pytorch_model-00001-of-00002.safetensors", {MakeTensor("t", "F32", {4}, 102)}},
                {"diffusion_pytorch_model-00002-of-00002.safetensors", {MakeTensor("u", "F32", {4}, 103)}}});
  std::vector<RawTensor> te1 = {MakeTensor("e1", "BF16", {2}, 104)}, te2 = {MakeTensor("e2", "BF16", {2}, 105)};
  WriteSharded(src.path() / "text_encoder", "model.safetensors.index.bf16.json",
               {{"model.bf16-00001-of-00002.safetensors", te1}, {"model.bf16-00002-of-00002.safetensors", te2}});
  WriteText(src.path() / "text_encoder/model.safetensors", SafetensorsBytes({MakeTensor("e1", "F32", {2}, 106)}));
  std::vector<RawTensor> vae = {MakeTensor("v", "F32", {3}, 107)};
  WriteText(src.path() / "vae/diffusion_pytorch_model.safetensors", SafetensorsBytes(vae));
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("org/b25full", src.path());
  HubClient client = MakeClient(store.url(), cache.str());
  PretrainedRequest req = HubRequest("org/b25full");
  req.variant = "bf16";

  // Strict: vae has no bf16 weights -> error naming it, before any weights download.
  auto strict = LoadPipeline(client, req);
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.status().reason(), "VariantNotFound");
  EXPECT_NE(strict.status().message().find("vae"), std::string::npos) << strict.status().message();
  EXPECT_EQ(store.server().RequestCount(".safetensors"), 0u);

  store.server().ResetStats();
  req.allow_variant_fallback = true;
  auto p = LoadPipeline(client, req);
  ASSERT_OK(p);
  EXPECT_EQ(p->skipped, std::vector<std::string>{"scheduler"});
  ASSERT_EQ(p->loaded.size(), 3u);
  ExpectStateDictEquals(p->loaded.at("transformer").tensors, tr16);
  ExpectStateDictEquals(p->loaded.at("text_encoder").tensors, {te1[0], te2[0]});
  ExpectStateDictEquals(p->loaded.at("vae").tensors, vae);
  int fallback_warnings = 0;
  for (const auto& w : p->warnings)
    if (w.find("variant") != std::string::npos && w.find("non-variant") != std::string::npos) {
      ++fallback_warnings;
      EXPECT_NE(w.find("vae"), std::string::npos) << w;
    }
  EXPECT_EQ(fallback_warnings, 1);
  // The GET set is exactly the bf16 files, the bf16 index and the vae file (+ model_index.json).
  std::set<std::string> fetched;
  for (const auto& [path, n] : store.server().stats().requests_per_path) {
    auto pos = path.find("/resolve/");
    if (pos == std::string::npos) continue;
    std::string rest = path.substr(pos + 9);
    fetched.insert(rest.substr(rest.find('/') + 1));
  }
  EXPECT_EQ(fetched, (std::set<std::string>{"model_index.json", "transformer/diffusion_pytorch_model.bf16.safetensors",
                                            "text_encoder/model.safetensors.index.bf16.json",
                                            "text_encoder/model.bf16-00001-of-00002.safetensors",
                                            "text_encoder/model.bf16-00002-of-00002.safetensors",
                                            "vae/diffusion_pytorch_model.safetensors"}));

  // No component has the variant at all -> error.
  req.variant = "fp8";
  auto none = LoadPipeline(client, req);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().reason(), "VariantNotFound");
}

// ---------------------------------------------------------------------------
// Real files and layouts of ../shared/data/real, served through `hubload serve`.

TEST(PipelineRealDataTest, RealSafetensorsByRepoIdMatchLocalLoad) {
  fs::path data = SharedDataDir();
  if (data.empty()) GTEST_SKIP() << "../shared/data/real not present";
  TempDir cache;
  ServedStore store;
  ASSERT_OK(store);
  HubClient client = MakeClient(store.url(), cache.str());
  int n = 0;
  for (const auto& e : fs::directory_iterator(data / "safetensors")) {
    if (e.path().extension() != ".safetensors") continue;
    SCOPED_TRACE(e.path().filename().string());
    TempDir repo;
    fs::copy_file(e.path(), repo.path() / "model.safetensors");  // into a temp folder, at test time
    std::string repo_id = "real/file-" + std::to_string(n++);
    store.AddRepo(repo_id, repo.path());
    auto hub = LoadStateDict(client, HubRequest(repo_id));
    auto file = safetensors::SafetensorsFile::Open(e.path().string());
    ASSERT_OK(file);
    auto local = LoadTensors(*file, {});
    if (!local.ok()) {  // a dtype LibTorch lacks: the same error by repo id
      ASSERT_FALSE(hub.ok());
      EXPECT_EQ(hub.status().code(), local.status().code());
      continue;
    }
    ASSERT_OK(hub);
    ExpectSameStateDict(hub->tensors, *local);
    // The cached file is the original, byte for byte.
    auto a = ReadFileBytes(hub->info.local_files.at(0));
    auto b = ReadFileBytes(e.path());
    EXPECT_EQ(Sha256Hex(a.data(), a.size()), Sha256Hex(b.data(), b.size()));
  }
  EXPECT_GE(n, 10);
}

TEST(PipelineRealDataTest, RealTransformersRepoLayout) {
  fs::path data = SharedDataDir();
  if (data.empty()) GTEST_SKIP() << "../shared/data/real not present";
  fs::path layout = data / "layouts/BogoAI-tiny-transformers-repo";
  TempDir cache;
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("Hugodonotexit/BogoAI", layout);
  HubClient client = MakeClient(store.url(), cache.str());
  auto hub = LoadStateDict(client, HubRequest("Hugodonotexit/BogoAI"));
  ASSERT_OK(hub);
  ASSERT_EQ(hub->tensors.size(), 1u);  // MANIFEST: one F32 tensor "dummy_param"
  EXPECT_EQ(hub->tensors[0].first, "dummy_param");
  EXPECT_EQ(hub->tensors[0].second.scalar_type(), at::kFloat);
  auto local = LoadCheckpoint(layout.string(), {}, {});
  ASSERT_OK(local);
  ExpectSameStateDict(hub->tensors, local->tensors);
}

TEST(PipelineRealDataTest, RealMochiPipelineLayoutMissingShardsAndComponents) {
  fs::path data = SharedDataDir();
  if (data.empty()) GTEST_SKIP() << "../shared/data/real not present";
  fs::path layout = data / "layouts/Mochi-diffusers-pipeline";
  TempDir cache, copy;
  // The layout's json files only (its weights are LFS-only upstream); the derived
  // pointer list is ours, not part of the repo.
  for (const auto& e : fs::recursive_directory_iterator(layout)) {
    if (!e.is_regular_file() || e.path().filename() == "lfs_pointers.derived.json") continue;
    fs::path rel = fs::relative(e.path(), layout);
    fs::create_directories((copy.path() / rel).parent_path());
    fs::copy_file(e.path(), copy.path() / rel);
  }
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("Tixell/Mochi", copy.path());
  HubClient client = MakeClient(store.url(), cache.str());
  PretrainedRequest req = HubRequest("Tixell/Mochi");

  auto comps = ListComponents(client, req);
  ASSERT_OK(comps);
  std::vector<std::string> names;
  for (const auto& c : *comps) names.push_back(c.name + ":" + c.class_name);
  EXPECT_EQ(names, (std::vector<std::string>{"scheduler:FlowMatchEulerDiscreteScheduler", "text_encoder:T5EncoderModel",
                                             "tokenizer:T5Tokenizer", "transformer:MochiTransformer3DModel",
                                             "vae:AutoencoderKLMochi"}));

  // MANIFEST: the default transformer index names 5 shards, the bf16 one 3; none is in the repo.
  auto r = LoadComponent(client, req, "transformer");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), "MissingShards") << r.status().ToString();
  for (int i = 1; i <= 5; ++i)
    EXPECT_NE(r.status().message().find("diffusion_pytorch_model-0000" + std::to_string(i) + "-of-00005.safetensors"),
              std::string::npos)
        << r.status().message();
  req.variant = "bf16";
  auto b = LoadComponent(client, req, "transformer");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().reason(), "MissingShards") << b.status().ToString();
  EXPECT_NE(b.status().message().find("-of-00003"), std::string::npos) << b.status().message();
  EXPECT_EQ(store.server().RequestCount("/resolve/"), store.server().RequestCount(".json"));  // only json fetched
}

TEST(PipelineRealDataTest, RealIndexWithGeneratedShardsLoadsByRepoId) {
  fs::path data = SharedDataDir();
  if (data.empty()) GTEST_SKIP() << "../shared/data/real not present";
  fs::path index_path = data / "layouts/Mochi-diffusers-pipeline/text_encoder/model.safetensors.index.json";
  std::ifstream in(index_path);
  nlohmann::json idx = nlohmann::json::parse(in);
  // Small tensors under the real weight_map (names and shard assignment kept).
  std::map<std::string, std::vector<RawTensor>> shards;
  uint32_t seed = 100;
  for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it)
    shards[it.value().get<std::string>()].push_back(MakeTensor(it.key(), "BF16", {2, 3}, seed++));
  TempDir src, cache;
  WriteSharded(src.path() / "text_encoder", "model.safetensors.index.json", shards);
  ServedStore store;
  ASSERT_OK(store);
  store.AddRepo("real/t5-shape", src.path());
  PretrainedRequest req = HubRequest("real/t5-shape");
  req.subfolder = "text_encoder";
  auto r = LoadStateDict(MakeClient(store.url(), cache.str()), req);
  ASSERT_OK(r);
  EXPECT_EQ(r->tensors.size(), idx["weight_map"].size());  // MANIFEST: 219
  EXPECT_EQ(r->tensors.size(), 219u);
  std::map<std::string, std::string> want;
  for (const auto& [f, ts] : shards)
    for (const auto& t : ts) want[t.name] = t.bytes;
  for (const auto& [n, t] : r->tensors) EXPECT_TRUE(want.at(n) == Bytes(t)) << n;
  EXPECT_EQ(r->info.files.size(), 2u);
}

}  // namespace
}  // namespace hubload::pipeline_test
