// pipeline_bench: fetch-and-load overlap, time to first tensor, and end-to-end
// time against baselines measured in the same run (performance.md S4, S5, S6).
//
//   pipeline_bench [--shards N] [--shard-mb MB] [--runs R]   (defaults 4, 64, 3)
//
// Setup: N shards of MB MiB of F32 data (real safetensors + index) in a
// `hubload serve` store on 127.0.0.1. Loading converts every tensor to BF16
// (LoadOptions::dtype), so the load phase does real CPU work per byte.
//  1. L_local: load the shards from a local folder (the same pipeline, no network).
//  2. Bandwidth cap per connection chosen so that downloading the N shards in
//     parallel takes about L_local (download and load comparable), at most
//     100 MB/s per connection so that the cap, not the CPU, bounds the download.
//  3. Capped, fresh cache each run: sequential mode (download all, then load)
//     T_seq with D = its download_s and L = T_seq - D; overlapped mode T_ovl.
//     Overlap efficiency E = (T_seq - T_ovl) / min(D, L) (performance.md S5, goal >= 0.8).
//  4. Capped: download of the first shard alone (HubClient::Download, fresh
//     cache) vs time to first tensor of the overlapped run (S4, goal <= 1.05x).
//  5. Uncapped: network floor = N parallel GETs into memory (discarded) with the
//     same transport; end-to-end overlapped load into tensors (S6, goal <= 2x).
// Medians over R runs. Timing only: nothing here is a pass/fail test.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "hubload/hub.h"
#include "hubload/pipeline.h"
#include "hubload/safetensors.h"
#include "hubload/server.h"
#include "hubload/transport.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "pipeline_bench: %s\n", what.c_str());
  std::exit(1);
}

void MakeRepo(const fs::path& dir, int shards, uint64_t shard_mb) {
  fs::create_directories(dir);
  nlohmann::json wm = nlohmann::json::object();
  uint64_t total = 0;
  const uint64_t tensors_per_shard = 8;
  const uint64_t floats = (shard_mb << 20) / 4 / tensors_per_shard;
  std::vector<float> buf(floats);
  uint32_t x = 12345;
  for (int s = 0; s < shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, shards);
    std::vector<std::vector<float>> data;
    std::vector<hubload::safetensors::TensorToWrite> tw;
    for (uint64_t t = 0; t < tensors_per_shard; ++t) {
      for (auto& f : buf) {
        x = x * 1664525u + 1013904223u;
        f = static_cast<float>(static_cast<int32_t>(x >> 8) - (1 << 23)) / static_cast<float>(1 << 23);
      }
      data.push_back(buf);
      std::string tn = "layers." + std::to_string(s) + "." + std::to_string(t) + ".weight";
      tw.push_back({tn, hubload::safetensors::Dtype::F32, {floats}, data.back().data(), floats * 4});
      wm[tn] = name;
      total += floats * 4;
    }
    auto st = hubload::safetensors::WriteFile((dir / name).string(), std::move(tw));
    if (!st.ok()) Die(st.ToString());
  }
  nlohmann::json idx;
  idx["metadata"] = {{"total_size", total}};
  idx["weight_map"] = wm;
  std::ofstream(dir / "model.safetensors.index.json") << idx.dump(2);
}

hubload::HubClient Client(const std::string& url, const std::string& cache) {
  hubload::ClientOptions o;
  o.config.endpoint = url;
  o.config.cache_dir = cache;
  o.config.token = "";
  o.range_threshold_bytes = 0;  // one stream per file, as the per-connection cap assumes
  return hubload::HubClient(o);
}

class Discard : public hubload::BodySink {
 public:
  bool OnData(const char*, size_t n) override {
    bytes += n;
    return true;
  }
  uint64_t bytes = 0;
};

}  // namespace

int main(int argc, char** argv) {
  int shards = 4, runs = 3;
  uint64_t shard_mb = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--shards") shards = std::atoi(argv[i + 1]);
    else if (a == "--shard-mb") shard_mb = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--runs") runs = std::atoi(argv[i + 1]);
    else Die("unknown option " + a);
  }
  if (shards < 1 || shard_mb < 1 || runs < 1) Die("bad arguments");
  fs::path work = fs::temp_directory_path() / ("hubload-pipeline-bench-" + std::to_string(::getpid()));
  fs::create_directories(work);
  MakeRepo(work / "model", shards, shard_mb);
  fs::create_directories(work / "store");
  auto commit = hubload::server::CreateRepoFromFolder((work / "store").string(), "bench/model", (work / "model").string());
  if (!commit.ok()) Die(commit.status().ToString());
  hubload::server::ServerOptions so;
  so.root = (work / "store").string();
  so.threads = 2;
  auto server = hubload::server::Server::Start(so);
  if (!server.ok()) Die(server.status().ToString());
  auto& srv = **server;
  const uint64_t total_bytes = static_cast<uint64_t>(shards) * (shard_mb << 20);
  std::printf("pipeline_bench: %d shards x %llu MiB (F32), %d runs, server %s\n", shards,
              static_cast<unsigned long long>(shard_mb), runs, srv.url().c_str());

  hubload::PretrainedRequest req;
  req.repo_id = "bench/model";
  req.source = hubload::PretrainedRequest::Source::kHub;
  req.load.dtype = hubload::TargetDtype::kBF16;  // F32 -> BF16 conversion: real CPU work per byte
  req.max_shards_in_flight = shards;
  int cache_n = 0;
  auto fresh_cache = [&]() {
    fs::path c = work / ("cache-" + std::to_string(cache_n++));
    return c.string();
  };
  auto drop_cache = [&](const std::string& c) {
    std::error_code ec;
    fs::remove_all(c, ec);
  };
  auto run_load = [&](bool overlap) {
    std::string c = fresh_cache();
    hubload::PretrainedRequest r = req;
    r.overlap = overlap;
    uint64_t n = 0;
    const bool verbose = std::getenv("PIPELINE_BENCH_VERBOSE") != nullptr;
    const auto t0 = Clock::now();
    hubload::PretrainedCallbacks cb;
    cb.on_tensor = [&](const std::string&, at::Tensor t) {
      n += static_cast<uint64_t>(t.numel());
      return hubload::Status::Ok();
    };
    if (verbose) {
      cb.on_file_downloaded = [&](const std::string& f) {
        std::fprintf(stderr, "  [%s] %.3f s downloaded %s\n", overlap ? "ovl" : "seq", Since(t0), f.c_str());
      };
      cb.on_shard = [&](const std::string& f, uint64_t) {
        std::fprintf(stderr, "  [%s] %.3f s loaded %s\n", overlap ? "ovl" : "seq", Since(t0), f.c_str());
      };
    }
    auto info = hubload::FetchAndLoad(Client(srv.url(), c), r, cb);
    if (!info.ok()) Die(info.status().ToString());
    drop_cache(c);
    return *info;
  };

  // 1. local load time.
  std::vector<double> l_local;
  for (int i = 0; i < runs; ++i) {
    hubload::PretrainedRequest lr = req;
    lr.repo_id = (work / "model").string();
    lr.source = hubload::PretrainedRequest::Source::kLocal;
    lr.overlap = false;
    hubload::PretrainedCallbacks cb;
    cb.on_tensor = [](const std::string&, at::Tensor) { return hubload::Status::Ok(); };
    auto t0 = Clock::now();
    auto info = hubload::FetchAndLoad(Client(srv.url(), fresh_cache()), lr, cb);
    if (!info.ok()) Die(info.status().ToString());
    l_local.push_back(Since(t0));
  }
  const double L_local = Median(l_local);

  // 5 first (uncapped): network floor and end-to-end.
  std::vector<double> floor_s, e2e_s;
  auto transport = hubload::MakeCurlTransport();
  for (int i = 0; i < runs; ++i) {
    auto t0 = Clock::now();
    std::vector<std::thread> th;
    for (int s = 0; s < shards; ++s)
      th.emplace_back([&, s] {
        char name[64];
        std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, shards);
        hubload::HttpRequest hr;
        hr.url = srv.url() + "/bench/model/resolve/" + *commit + "/" + name;
        Discard d;
        auto resp = transport->Send(hr, &d);
        if (!resp.ok() || resp->status != 200) Die(std::string("floor GET failed for ") + name);
      });
    for (auto& t : th) t.join();
    floor_s.push_back(Since(t0));
    e2e_s.push_back(run_load(true).timings.total_s);
  }
  const double floor_t = Median(floor_s), e2e_t = Median(e2e_s);

  // 2. cap so that the parallel download takes about L_local.
  // Never above 100 MB/s per connection, so that the cap (not the loaded CPU) sets the download time.
  const uint64_t cap = std::clamp<uint64_t>(static_cast<uint64_t>(total_bytes / shards / std::max(L_local, 0.05)),
                                            1 << 20, 100'000'000);
  srv.faults().SetBandwidthBytesPerSec(cap);

  // 3. sequential vs overlapped.
  std::vector<double> tseq, tovl, dseq, lseq, ttft;
  for (int i = 0; i < runs; ++i) {
    auto s = run_load(false);
    tseq.push_back(s.timings.total_s);
    dseq.push_back(s.timings.download_s);
    lseq.push_back(s.timings.total_s - s.timings.download_s);
    auto o = run_load(true);
    tovl.push_back(o.timings.total_s);
    ttft.push_back(o.timings.time_to_first_tensor_s);
  }
  // 4. first shard alone.
  std::vector<double> first_alone;
  for (int i = 0; i < runs; ++i) {
    std::string c = fresh_cache();
    hubload::FileRequest fr;
    fr.repo_id = "bench/model";
    char first[64];
    std::snprintf(first, sizeof first, "model-%05d-of-%05d.safetensors", 1, shards);
    fr.filename = first;
    fr.revision = *commit;
    auto t0 = Clock::now();
    auto p = Client(srv.url(), c).Download(fr);
    if (!p.ok()) Die(p.status().ToString());
    first_alone.push_back(Since(t0));
    drop_cache(c);
  }
  srv.faults().SetBandwidthBytesPerSec(0);
  const double T_seq = Median(tseq), T_ovl = Median(tovl), D = Median(dseq), L = Median(lseq);
  const double E = (T_seq - T_ovl) / std::max(1e-9, std::min(D, L));
  const double TTFT = Median(ttft), T1 = Median(first_alone);

  std::printf("\n## pipeline (medians of %d runs; %.0f MB total)\n", runs, total_bytes / 1e6);
  std::printf("local load (F32->BF16), L_local        : %.3f s (%.0f MB/s)\n", L_local, total_bytes / L_local / 1e6);
  std::printf("per-connection cap                      : %.1f MB/s\n", cap / 1e6);
  std::printf("S5 sequential T_seq (D=%.3f, L=%.3f)   : %.3f s\n", D, L, T_seq);
  std::printf("S5 overlapped T_ovl                     : %.3f s\n", T_ovl);
  std::printf("S5 overlap efficiency E                 : %.2f  (goal >= 0.8)\n", E);
  std::printf("S4 first shard alone T1                 : %.3f s\n", T1);
  std::printf("S4 time to first tensor TTFT            : %.3f s  ratio TTFT/T1 = %.2f (goal <= 1.05)\n", TTFT,
              TTFT / T1);
  std::printf("S6 uncapped network floor (GET->memory) : %.3f s (%.0f MB/s)\n", floor_t, total_bytes / floor_t / 1e6);
  std::printf("S6 uncapped end-to-end into tensors     : %.3f s  ratio = %.2f x floor (goal <= 2.0)\n", e2e_t,
              e2e_t / floor_t);
  srv.Stop();
  std::error_code ec;
  fs::remove_all(work, ec);
  return 0;
}
