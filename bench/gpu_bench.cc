// gpu_bench: host-to-device loading against baselines measured in the same run
// (performance.md S13). GPU only: without a usable CUDA backend it prints one
// "skipped" line and exits 0.
//
//   gpu_bench [--mib M] [--shards N] [--runs R]     (defaults 1536, 4, 3)
//   gpu_bench --fake-backend ...   testing aid: every step on FakeDeviceBackend
//                                  (host memory; the figures mean nothing)
//
// Setup: N shards of M/N MiB of BF16 data (64 MiB tensors of random bits)
// written with WriteFile to $TMPDIR, then read once so the page cache is warm.
//  (a) Baseline: plain pinned copies of the same bytes: one shard-sized pinned
//      buffer, one cudaMemcpyAsync per shard on one stream (DeviceBackend
//      calls), waited for at the end. Bandwidth B_pinned.
//  (b) Load phase, warm cache file: StagingLoader::LoadShard over every
//      shard, reader = pread of the shard file into the staging buffer;
//      default ring (8 x 16 MiB, 2 streams) and 4 x 64 MiB. Ratio to B_pinned
//      (goal >= 0.8).
//  (b') The same with a reader that splits each piece over 4 pread threads
//      (what reading, not the ring, costs), and with a no-op reader (the
//      ring and streams alone: staging overhead).
//  (b'') The load phase converting BF16 -> F32 on the GPU (target_dtype).
//  (c) End-to-end through the `hubload` CLI (needs the CLI, hence LibTorch,
//      in the same build: ../tools/hubload/hubload or $HUBLOAD_BIN), from an
//      in-process `hubload serve` on 127.0.0.1 into a fresh cache:
//      `load --device cuda:0` vs the CPU-only `load` plus the pinned copy
//      time of the last shard (goal: GPU <= 1.10 x that).
// Best of R runs (b, a) / median (c). Timing only: nothing here is a test.
// Correctness is checked once: every tensor of one load is copied back and
// compared with the file bytes.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "hubload/device.h"
#include "loader/device/fake_backend.h"
#include "hubload/safetensors.h"
#include "hubload/server.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using hubload::Device;
using hubload::DeviceBackend;
using hubload::Status;
using hubload::safetensors::Dtype;

namespace {

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double Best(const std::vector<double>& v) { return v.empty() ? 0 : *std::min_element(v.begin(), v.end()); }

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "gpu_bench: %s\n", what.c_str());
  std::exit(1);
}

void Check(const Status& st, const char* what) {
  if (!st.ok()) Die(std::string(what) + ": " + st.ToString());
}

struct ShardFile {
  std::string name;  // basename
  std::string path;
  hubload::safetensors::Header header;
};

std::vector<ShardFile> WriteCheckpoint(const fs::path& dir, int shards, uint64_t shard_bytes) {
  fs::create_directories(dir);
  const uint64_t tensor_bytes = std::min<uint64_t>(64ull << 20, shard_bytes);
  std::mt19937_64 rng(42);
  std::vector<uint8_t> buf(tensor_bytes);
  nlohmann::json wm = nlohmann::json::object();
  std::vector<ShardFile> out;
  uint64_t total = 0;
  for (int s = 0; s < shards; ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, shards);
    std::vector<std::vector<uint8_t>> data;
    std::vector<hubload::safetensors::TensorToWrite> tw;
    for (uint64_t off = 0, t = 0; off < shard_bytes; off += tensor_bytes, ++t) {
      const uint64_t n = std::min(tensor_bytes, shard_bytes - off) / 2 * 2;
      if (n == 0) break;
      for (uint64_t i = 0; i + 8 <= n; i += 8) {
        uint64_t x = rng();
        std::memcpy(buf.data() + i, &x, 8);
      }
      data.emplace_back(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
      std::string tn = "layers." + std::to_string(s) + "." + std::to_string(t) + ".weight";
      tw.push_back({tn, Dtype::BF16, {n / 2}, data.back().data(), n});
      wm[tn] = name;
      total += n;
    }
    Check(hubload::safetensors::WriteFile((dir / name).string(), std::move(tw)), "writing the checkpoint");
    auto h = hubload::safetensors::ReadMetadata((dir / name).string());
    if (!h.ok()) Die(h.status().ToString());
    out.push_back({name, (dir / name).string(), std::move(*h)});
  }
  nlohmann::json idx;
  idx["metadata"] = {{"total_size", total}};
  idx["weight_map"] = wm;
  std::ofstream(dir / "model.safetensors.index.json") << idx.dump(2);
  return out;
}

Status PreadAll(int fd, uint64_t off, void* dst, uint64_t n) {
  uint64_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, static_cast<char*>(dst) + done, n - done, static_cast<off_t>(off + done));
    if (r <= 0) return Status(hubload::Code::kIOError, std::string("pread: ") + std::strerror(errno));
    done += static_cast<uint64_t>(r);
  }
  return Status::Ok();
}

void WarmPageCache(const std::vector<ShardFile>& shards) {
  std::vector<char> buf(16 << 20);
  for (const auto& s : shards) {
    int fd = ::open(s.path.c_str(), O_RDONLY);
    if (fd < 0) Die("open " + s.path);
    while (::read(fd, buf.data(), buf.size()) > 0) {
    }
    ::close(fd);
  }
}

enum class ReaderKind { kPread, kParallelPread, kNoop };

struct LoadRun {
  double seconds = 0;
  hubload::StagingStats stats;
  bool verified = false;
};

LoadRun LoadAll(const std::shared_ptr<DeviceBackend>& backend, const std::vector<ShardFile>& shards,
                hubload::StagingOptions opt, ReaderKind kind, bool verify) {
  auto loader = hubload::StagingLoader::Create(backend, opt);
  if (!loader.ok()) Die(loader.status().ToString());
  hubload::DeviceStateDict dict(backend);
  LoadRun run;
  const auto t0 = Clock::now();
  for (const auto& s : shards) {
    int fd = ::open(s.path.c_str(), O_RDONLY);
    if (fd < 0) Die("open " + s.path);
    hubload::ShardReader reader;
    if (kind == ReaderKind::kPread) {
      reader = [fd](uint64_t off, void* dst, uint64_t n) { return PreadAll(fd, off, dst, n); };
    } else if (kind == ReaderKind::kParallelPread) {
      reader = [fd](uint64_t off, void* dst, uint64_t n) {
        constexpr int kParts = 4;
        const uint64_t part = (n + kParts - 1) / kParts;
        std::vector<Status> st(kParts);
        std::vector<std::thread> th;
        for (int k = 0; k < kParts; ++k) {
          const uint64_t b = k * part, e = std::min(n, b + part);
          if (b >= e) break;
          th.emplace_back([&, k, b, e] { st[k] = PreadAll(fd, off + b, static_cast<char*>(dst) + b, e - b); });
        }
        for (auto& t : th) t.join();
        for (auto& x : st)
          if (!x.ok()) return x;
        return Status::Ok();
      };
    } else {
      reader = [](uint64_t, void*, uint64_t) { return Status::Ok(); };
    }
    Status st = (*loader)->LoadShard(s.name, s.header, reader,
                                     [](const std::string&) { return Device{Device::Kind::kCuda, 0}; }, &dict);
    ::close(fd);
    Check(st, "LoadShard");
  }
  run.seconds = Since(t0);
  run.stats = (*loader)->stats();
  if (verify) {
    std::vector<char> want;
    for (const auto& s : shards) {
      int fd = ::open(s.path.c_str(), O_RDONLY);
      for (const auto& info : s.header.tensors) {
        const hubload::DeviceTensor* t = dict.Find(info.name);
        if (!t) Die("tensor " + info.name + " missing after the load");
        auto back = dict.CopyToHost(*t);
        if (!back.ok()) Die(back.status().ToString());
        want.resize(info.nbytes());
        Check(PreadAll(fd, s.header.data_start + info.begin, want.data(), want.size()), "pread");
        if (back->size() != want.size() || std::memcmp(back->data(), want.data(), want.size()) != 0)
          Die("tensor " + info.name + ": bytes on the GPU differ from the file");
      }
      ::close(fd);
    }
    run.verified = true;
  }
  return run;
}

double PinnedBaseline(const std::shared_ptr<DeviceBackend>& b, const std::vector<ShardFile>& shards) {
  uint64_t biggest = 0, total = 0;
  for (const auto& s : shards) {
    biggest = std::max(biggest, s.header.data_size());
    total += s.header.data_size();
  }
  auto pinned = b->alloc_pinned(biggest);
  auto dev = b->alloc_device(0, total);
  if (!pinned.ok() || !dev.ok()) Die("baseline allocation failed");
  std::memset(*pinned, 0x5A, biggest);
  auto stream = b->create_stream(0);
  if (!stream.ok()) Die(stream.status().ToString());
  const auto t0 = Clock::now();
  uint64_t off = 0;
  for (const auto& s : shards) {
    Check(b->copy_to_device_async(static_cast<char*>(*dev) + off, *pinned, s.header.data_size(), *stream), "copy");
    off += s.header.data_size();
  }
  auto ev = b->record_event(*stream);
  if (!ev.ok()) Die(ev.status().ToString());
  Check(b->wait_event(*ev), "wait");
  const double secs = Since(t0);
  b->destroy_event(*ev);
  b->destroy_stream(*stream);
  b->free_device(0, *dev);
  b->free_pinned(*pinned);
  return secs;
}

std::string SelfDir() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : p.parent_path().string();
}

// Runs the CLI, returns timings.total_s of its --json report (or < 0).
double CliTotal(const std::string& cmd) {
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return -1;
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  int rc = ::pclose(f);
  if (rc != 0) {
    std::fprintf(stderr, "gpu_bench: command failed (%d): %s\n", rc, cmd.c_str());
    return -1;
  }
  auto j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_discarded() || !j.contains("timings")) return -1;
  return j["timings"].value("total_s", -1.0);
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t mib = 1536;
  int shards = 4, runs = 3;
  bool fake = false;
  for (int i = 1; i < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--fake-backend") {
      fake = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) Die("missing value after " + a);
    if (a == "--mib") mib = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--shards") shards = std::atoi(argv[i + 1]);
    else if (a == "--runs") runs = std::atoi(argv[i + 1]);
    else Die("unknown option " + a + " (use --mib M --shards N --runs R)");
  }
  if (mib < 1 || shards < 1 || runs < 1) Die("bad arguments");

  auto cuda = fake ? hubload::Result<std::shared_ptr<DeviceBackend>>(std::make_shared<hubload::FakeDeviceBackend>(
                         hubload::FakeDeviceOptions{1, 4 * (mib << 20) + (1ull << 30), 0}))
                   : hubload::MakeCudaBackend();
  if (!cuda.ok()) {
    std::printf("gpu_bench: skipped: %s\n", cuda.status().ToString().c_str());
    return 0;
  }
  std::shared_ptr<DeviceBackend> backend = *cuda;
  const uint64_t shard_bytes = (mib << 20) / static_cast<uint64_t>(shards);
  auto free0 = backend->free_memory(0);
  if (!free0.ok()) Die(free0.status().ToString());
  if (*free0 < 3 * (mib << 20) + (1ull << 30)) Die("not enough free GPU memory for --mib " + std::to_string(mib));

  fs::path work = fs::temp_directory_path() / ("hubload-gpu-bench-" + std::to_string(::getpid()));
  std::printf("gpu_bench: %d devices (%s), cuda:0 free %.1f GiB; checkpoint %d shards x %.0f MiB BF16 in %s\n",
              backend->device_count(), backend->name().c_str(), static_cast<double>(*free0) / (1ull << 30), shards,
              static_cast<double>(shard_bytes) / (1 << 20), work.c_str());
  auto t_write = Clock::now();
  auto files = WriteCheckpoint(work / "model", shards, shard_bytes);
  WarmPageCache(files);
  uint64_t total = 0;
  for (const auto& f : files) total += f.header.data_size();
  std::printf("  checkpoint written and read back in %.1f s (%.2f GiB of tensor data)\n", Since(t_write),
              static_cast<double>(total) / (1ull << 30));
  auto gbps = [&](double s) { return s > 0 ? static_cast<double>(total) / s / 1e9 : 0.0; };

  // (a) baseline.
  std::vector<double> base;
  PinnedBaseline(backend, files);  // warm-up (context, first-touch of the device pages)
  for (int r = 0; r < runs; ++r) base.push_back(PinnedBaseline(backend, files));
  const double t_base = Best(base);
  const double b_pinned = static_cast<double>(total) / t_base;  // bytes/s
  std::printf("\n(a) plain pinned H2D copy of the same bytes: %.3f s = %.2f GB/s (best of %d)\n", t_base,
              gbps(t_base), runs);

  struct Variant {
    const char* what;
    uint64_t buffer;
    int buffers;
    ReaderKind reader;
    hubload::TargetDtype target;
  };
  const Variant variants[] = {
      {"(b)   pread, ring 8 x 16 MiB (default)", 16ull << 20, 8, ReaderKind::kPread, hubload::TargetDtype::kAuto},
      {"(b)   pread, ring 4 x 64 MiB", 64ull << 20, 4, ReaderKind::kPread, hubload::TargetDtype::kAuto},
      {"(b')  4-thread pread per piece, 8 x 16 MiB", 16ull << 20, 8, ReaderKind::kParallelPread, hubload::TargetDtype::kAuto},
      {"(b')  no-op reader (ring + streams only)", 16ull << 20, 8, ReaderKind::kNoop, hubload::TargetDtype::kAuto},
      {"(b'') pread + BF16->F32 on the GPU", 16ull << 20, 8, ReaderKind::kPread, hubload::TargetDtype::kF32},
  };
  std::printf("\n%-46s %9s %9s %8s %8s %8s %7s\n", "load phase from the warm page cache", "time s", "GB/s",
              "x pinned", "read s", "wait s", "waits");
  bool verified = false;
  for (const Variant& v : variants) {
    hubload::StagingOptions opt;
    opt.buffer_bytes = v.buffer;
    opt.num_buffers = v.buffers;
    opt.num_streams = 2;
    opt.target_dtype = v.target;
    std::vector<double> times;
    LoadRun best;
    for (int r = 0; r < runs + 1; ++r) {  // first run: warm-up
      const bool verify = !verified && v.reader == ReaderKind::kPread && v.target == hubload::TargetDtype::kAuto && r == 0;
      LoadRun run = LoadAll(backend, files, opt, v.reader, verify);
      verified = verified || run.verified;
      if (r == 0) continue;
      times.push_back(run.seconds);
      if (best.seconds == 0 || run.seconds < best.seconds) best = run;
    }
    std::printf("%-46s %9.3f %9.2f %8.2f %8.3f %8.3f %7llu\n", v.what, best.seconds, gbps(best.seconds),
                t_base / best.seconds, best.stats.read_s, best.stats.wait_s,
                static_cast<unsigned long long>(best.stats.buffer_waits));
  }
  std::printf("  correctness: %s\n", verified ? "every tensor copied back equals the file bytes" : "NOT CHECKED");

  // (c) end-to-end through the CLI.
  std::string cli = std::getenv("HUBLOAD_BIN") ? std::getenv("HUBLOAD_BIN") : SelfDir() + "/../tools/hubload/hubload";
  std::printf("\n(c) end-to-end fetch-and-load from hubload serve (127.0.0.1)\n");
  if (!fs::exists(cli)) {
    std::printf("  skipped: no hubload CLI at %s (it needs LibTorch in the same build; set HUBLOAD_BIN)\n",
                cli.c_str());
  } else {
    fs::create_directories(work / "store");
    auto commit = hubload::server::CreateRepoFromFolder((work / "store").string(), "bench/model",
                                                        (work / "model").string());
    if (!commit.ok()) Die(commit.status().ToString());
    hubload::server::ServerOptions so;
    so.root = (work / "store").string();
    so.threads = 4;
    auto server = hubload::server::Server::Start(so);
    if (!server.ok()) Die(server.status().ToString());
    std::vector<double> gpu_s, cpu_s;
    int n = 0;
    for (int r = 0; r < runs; ++r) {
      for (bool gpu : {true, false}) {
        fs::path cache = work / ("cache-" + std::to_string(n++));
        std::string cmd = "'" + cli + "' --endpoint " + (*server)->url() + " --cache-dir '" + cache.string() +
                          "' load bench/model --hub --json" + (gpu ? " --device cuda:0" : "") +
                          (gpu && fake ? " --device-backend fake --fake-gpu-memory " +
                                             std::to_string(4 * (mib << 20) + (1ull << 30))
                                       : "") +
                          " 2>/dev/null";
        double t = CliTotal(cmd);
        std::error_code ec;
        fs::remove_all(cache, ec);
        if (t < 0) {
          std::printf("  %s run failed: %s\n", gpu ? "GPU" : "CPU", cmd.c_str());
          continue;
        }
        (gpu ? gpu_s : cpu_s).push_back(t);
      }
    }
    if (!gpu_s.empty() && !cpu_s.empty()) {
      const double last = static_cast<double>(files.back().header.data_size()) / b_pinned;
      const double t_gpu = Median(gpu_s), t_cpu = Median(cpu_s);
      std::printf("  GPU (load --device cuda:0):            %.3f s (median of %zu)\n", t_gpu, gpu_s.size());
      std::printf("  CPU-only pipeline (load):              %.3f s (median of %zu)\n", t_cpu, cpu_s.size());
      std::printf("  pinned copy of the last shard:         %.3f s\n", last);
      std::printf("  GPU / (CPU + last-shard copy):         %.2f (goal <= 1.10)\n", t_gpu / (t_cpu + last));
    }
  }
  std::error_code ec;
  fs::remove_all(work, ec);
  return 0;
}
