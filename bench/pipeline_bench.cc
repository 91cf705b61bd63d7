// pipeline_bench: fetch-and-load overlap, time to first tensor, end-to-end
// time and memory against baselines measured in the same run (performance.md
// S4, S5, S6, S12; issue 13's goals).
//
//   pipeline_bench [--shards N] [--shard-mb MB] [--runs R] [--link-mbps M] [--rss-shards K]
//                  [--conversion-threads T] [--yield-cpu 0|1]
//   (defaults 4, 64, 3, 150, 20, 0, 1; T is LoadOptions::conversion_threads:
//   0 = every core, 1 = the loading thread alone; --yield-cpu is
//   PretrainedRequest::yield_cpu_to_downloads)
//
// Setup: N shards of MB MiB of BF16 data (real safetensors + index) in a
// `hubload serve` store on 127.0.0.1; loading converts every tensor to fp32
// (LoadOptions::dtype), so the load phase does real CPU work per byte.
// Two network shapes, each measured with the same client:
//  - total: one link of M MB/s shared by all connections (the server's
//    total-bandwidth fault: the sum over connections is capped), the case
//    users have (a home line, a node's uplink);
//  - per-connection: each connection capped at M MB/s.
// For each shape: sequential mode (download all, then load) T_seq with D =
// its download_s and L = T_seq - D; overlapped T_ovl; overlap efficiency
// E = (D + L - T_ovl) / min(D, L) (goal >= 0.9; from the medians, and the
// median of each run's own E with T_ovl - D per run); the first shard alone
// downloaded over the same link T1 vs the overlapped run's time to first
// tensor (goal <= 1.05x).
// Uncapped: network floor = N parallel GETs into memory with the same
// transport; end-to-end overlapped load into tensors (goal <= 1.5x), also with
// dtype auto (zero-copy views, no conversion); the CPU seconds of each, so
// the CPU-bound time (CPU / cores) shows what the cores allow.
// Memory: a K-shard model loaded in a child process; its peak RSS against
// tensor bytes + in-flight shards + 64 MiB.
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

#include <sys/resource.h>
#include <sys/wait.h>
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

// User + system CPU seconds of this process so far (every thread).
double CpuSeconds() {
  struct rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

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
  const uint64_t elems = (shard_mb << 20) / 2 / tensors_per_shard;
  std::vector<uint16_t> buf(elems);
  uint32_t x = 12345;
  for (int s = 0; s < shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, shards);
    std::vector<std::vector<uint16_t>> data;
    std::vector<hubload::safetensors::TensorToWrite> tw;
    for (uint64_t t = 0; t < tensors_per_shard; ++t) {
      for (auto& v : buf) {
        x = x * 1664525u + 1013904223u;
        v = static_cast<uint16_t>(0x3C00u | ((x >> 16) & 0x83FFu));  // finite bf16 values around +-1e-2..1
      }
      data.push_back(buf);
      std::string tn = "layers." + std::to_string(s) + "." + std::to_string(t) + ".weight";
      tw.push_back({tn, hubload::safetensors::Dtype::BF16, {elems}, data.back().data(), elems * 2});
      wm[tn] = name;
      total += elems * 2;
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

/// Peak resident set of this process, bytes (VmHWM).
uint64_t StatusKb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(key);
  while (std::getline(in, line))
    if (line.compare(0, n, key) == 0) return std::strtoull(line.c_str() + n, nullptr, 10) * 1024;
  return 0;
}
uint64_t PeakRss() { return StatusKb("VmHWM:"); }

struct Shape {
  const char* name;
  double t_seq = 0, t_ovl = 0, d = 0, l = 0, e = 0, ttft = 0, t1 = 0, d_ovl = 0;
  double e_paired = 0, over_d = 0;  // median of per-run E; median of T_ovl - D per run
};

}  // namespace

int main(int argc, char** argv) {
  int shards = 4, runs = 3, rss_shards = 20, conversion_threads = 0;
  bool yield_cpu = true;
  uint64_t shard_mb = 64;
  double link_mbps = 150;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--shards") shards = std::atoi(argv[i + 1]);
    else if (a == "--shard-mb") shard_mb = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--runs") runs = std::atoi(argv[i + 1]);
    else if (a == "--link-mbps") link_mbps = std::atof(argv[i + 1]);
    else if (a == "--rss-shards") rss_shards = std::atoi(argv[i + 1]);
    else if (a == "--conversion-threads") conversion_threads = std::atoi(argv[i + 1]);
    else if (a == "--yield-cpu") yield_cpu = std::atoi(argv[i + 1]) != 0;
    else Die("unknown option " + a);
  }
  if (shards < 1 || shard_mb < 1 || runs < 1 || link_mbps <= 0 || conversion_threads < 0) Die("bad arguments");
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
  const uint64_t link = static_cast<uint64_t>(link_mbps * 1e6);
  std::printf("pipeline_bench: %d shards x %llu MiB (BF16 -> fp32), %d runs, link %.0f MB/s, conversion threads %d%s, "
              "server %s\n",
              shards, static_cast<unsigned long long>(shard_mb), runs, link_mbps, conversion_threads,
              conversion_threads == 0 ? " (every core)" : "", srv.url().c_str());

  hubload::PretrainedRequest req;
  req.repo_id = "bench/model";
  req.source = hubload::PretrainedRequest::Source::kHub;
  req.load.dtype = hubload::TargetDtype::kF32;  // BF16 -> fp32: real CPU work per byte
  req.load.conversion_threads = static_cast<size_t>(conversion_threads);
  req.yield_cpu_to_downloads = yield_cpu;
  int cache_n = 0;
  auto fresh_cache = [&]() { return (work / ("cache-" + std::to_string(cache_n++))).string(); };
  auto drop_cache = [&](const std::string& c) {
    std::error_code ec;
    fs::remove_all(c, ec);
  };
  const bool verbose = std::getenv("PIPELINE_BENCH_VERBOSE") != nullptr;
  auto run_load = [&](bool overlap, hubload::TargetDtype dtype = hubload::TargetDtype::kF32) {
    std::string c = fresh_cache();
    hubload::PretrainedRequest r = req;
    r.overlap = overlap;
    r.load.dtype = dtype;
    const auto t0 = Clock::now();
    hubload::PretrainedCallbacks cb;
    cb.on_tensor = [&](const std::string&, at::Tensor) { return hubload::Status::Ok(); };
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
  auto first_alone = [&]() {
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
    double t = Since(t0);
    drop_cache(c);
    return t;
  };
  auto measure = [&](Shape* sh) {
    std::vector<double> tseq, tovl, dseq, lseq, ttft, t1, dovl, epair, over;
    for (int i = 0; i < runs; ++i) {
      auto s = run_load(false);
      tseq.push_back(s.timings.total_s);
      dseq.push_back(s.timings.download_s);
      lseq.push_back(s.timings.total_s - s.timings.download_s);
      auto o = run_load(true);
      tovl.push_back(o.timings.total_s);
      dovl.push_back(o.timings.download_s);
      ttft.push_back(o.timings.time_to_first_tensor_s);
      t1.push_back(first_alone());
      // The same formula on this run's own pair: D drifts between runs by as
      // much as L (tens of ms), so pairs cancel the drift medians keep.
      epair.push_back((dseq.back() + lseq.back() - tovl.back()) /
                      std::max(1e-9, std::min(dseq.back(), lseq.back())));
      over.push_back(tovl.back() - dseq.back());
    }
    sh->e_paired = Median(epair);
    sh->over_d = Median(over);
    sh->t_seq = Median(tseq);
    sh->t_ovl = Median(tovl);
    sh->d_ovl = Median(dovl);
    sh->d = Median(dseq);
    sh->l = Median(lseq);
    sh->e = (sh->d + sh->l - sh->t_ovl) / std::max(1e-9, std::min(sh->d, sh->l));
    sh->ttft = Median(ttft);
    sh->t1 = Median(t1);
  };

  // Uncapped: network floor and end-to-end, with the CPU time each takes
  // (getrusage of this process: client, loader and the in-process server).
  std::vector<double> floor_s, e2e_s, e2e_auto_s, floor_cpu, e2e_cpu, e2e_auto_cpu;
  auto transport = hubload::MakeCurlTransport();
  for (int i = 0; i < runs; ++i) {
    double c0 = CpuSeconds();
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
        if (!resp.ok() || resp->status >= 300) Die(std::string("floor GET failed for ") + name);
      });
    for (auto& t : th) t.join();
    floor_s.push_back(Since(t0));
    floor_cpu.push_back(CpuSeconds() - c0);
    c0 = CpuSeconds();
    e2e_s.push_back(run_load(true).timings.total_s);
    e2e_cpu.push_back(CpuSeconds() - c0);
    c0 = CpuSeconds();
    e2e_auto_s.push_back(run_load(true, hubload::TargetDtype::kAuto).timings.total_s);
    e2e_auto_cpu.push_back(CpuSeconds() - c0);
  }
  const double floor_t = Median(floor_s), e2e_t = Median(e2e_s), e2e_auto_t = Median(e2e_auto_s);
  const double cores = static_cast<double>(std::max(1u, std::thread::hardware_concurrency()));

  Shape total{"one link shared by all connections"}, per{"a cap per connection"};
  srv.faults().SetTotalBandwidthBytesPerSec(link);
  measure(&total);
  srv.faults().SetTotalBandwidthBytesPerSec(0);
  srv.faults().SetBandwidthBytesPerSec(link);
  measure(&per);
  srv.faults().SetBandwidthBytesPerSec(0);

  std::printf("\n## pipeline (medians of %d runs; %.0f MB of BF16 loaded as fp32)\n", runs, total_bytes / 1e6);
  for (const Shape* sh : {&total, &per}) {
    std::printf("%s, %.0f MB/s:\n", sh->name, link_mbps);
    std::printf("  sequential T_seq (D=%.3f, L=%.3f)   : %.3f s\n", sh->d, sh->l, sh->t_seq);
    std::printf("  overlapped T_ovl (its download %.3f) : %.3f s\n", sh->d_ovl, sh->t_ovl);
    std::printf("  overlap efficiency E                 : %.2f  (goal >= 0.9); median of per-run E %.2f\n", sh->e,
                sh->e_paired);
    std::printf("  overlapped minus download alone      : %+.3f s (median per run; L = %.3f s)\n", sh->over_d, sh->l);
    std::printf("  first shard alone T1                 : %.3f s\n", sh->t1);
    std::printf("  time to first tensor TTFT            : %.3f s  ratio TTFT/T1 = %.2f (goal <= 1.05)\n", sh->ttft,
                sh->ttft / sh->t1);
  }
  std::printf("uncapped network floor (GET->memory)   : %.3f s (%.0f MB/s)\n", floor_t, total_bytes / floor_t / 1e6);
  std::printf("uncapped end-to-end into tensors       : %.3f s  ratio = %.2f x floor (goal <= 1.5)\n", e2e_t,
              e2e_t / floor_t);
  std::printf("uncapped end-to-end, dtype auto (views): %.3f s  ratio = %.2f x floor\n", e2e_auto_t,
              e2e_auto_t / floor_t);
  std::printf("  CPU seconds (process, %.0f cores)      : floor %.3f, fp32 %.3f, auto %.3f; CPU-bound time\n"
              "  (CPU / cores) fp32 %.3f s = %.2f x floor, auto %.3f s = %.2f x floor\n",
              cores, Median(floor_cpu), Median(e2e_cpu), Median(e2e_auto_cpu), Median(e2e_cpu) / cores,
              Median(e2e_cpu) / cores / floor_t, Median(e2e_auto_cpu) / cores, Median(e2e_auto_cpu) / cores / floor_t);

  // Memory: a many-shard model loaded in a child (its own peak RSS).
  if (rss_shards > 0) {
    const uint64_t rss_mb = 8;
    MakeRepo(work / "many", rss_shards, rss_mb);
    auto c2 = hubload::server::CreateRepoFromFolder((work / "store").string(), "bench/many", (work / "many").string());
    if (!c2.ok()) Die(c2.status().ToString());
    int pipefd[2];
    if (::pipe(pipefd) != 0) Die("pipe");
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(pipefd[0]);
      hubload::PretrainedRequest r = req;
      r.repo_id = "bench/many";
      uint64_t kept = 0;
      // Peak from here on: what the load adds (the process and its libraries excluded).
      std::ofstream("/proc/self/clear_refs") << "5";
      const uint64_t before = StatusKb("VmRSS:");
      auto sd = hubload::LoadStateDict(Client(srv.url(), fresh_cache()), r);
      if (!sd.ok()) _exit(2);
      for (auto& [n, t] : sd->tensors) kept += static_cast<uint64_t>(t.numel()) * t.element_size();
      uint64_t out[2] = {PeakRss() - std::min(PeakRss(), before), kept};
      if (::write(pipefd[1], out, sizeof out) != sizeof out) _exit(3);
      _exit(0);
    }
    ::close(pipefd[1]);
    uint64_t got[2] = {0, 0};
    ssize_t n = ::read(pipefd[0], got, sizeof got);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (n == sizeof got) {
      const uint64_t inflight = static_cast<uint64_t>(req.max_shards_in_flight) * (rss_mb << 20);
      const double budget = static_cast<double>(got[1] + inflight + (64ull << 20));
      std::printf("%d-shard model (%llu MiB each): peak RSS growth %.0f MiB, tensors %.0f MiB, budget (tensors + %d "
                  "in-flight shards + 64 MiB) %.0f MiB: ratio %.2f (goal <= 1.0)\n",
                  rss_shards, static_cast<unsigned long long>(rss_mb), got[0] / 1048576.0, got[1] / 1048576.0,
                  req.max_shards_in_flight, budget / 1048576.0, got[0] / budget);
    } else {
      std::printf("%d-shard model: the child failed (status %d)\n", rss_shards, status);
    }
  }
  srv.Stop();
  std::error_code ec;
  fs::remove_all(work, ec);
  return 0;
}
