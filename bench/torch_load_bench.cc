// Loader benchmark: a BF16 checkpoint (default 1 GiB) from a warm page cache,
// with the physical baselines measured in the same run (performance.md 1a,
// 1d, 1e; S7):
//   memcpy into pre-faulted memory, mmap + memset first touch with 4 KiB pages
//   and with MADV_HUGEPAGE (one thread, as performance.md fault.cpp, and two);
//   bf16 -> fp32 conversion: the previous path (one thread, at::empty, source
//   kept mapped) and the current LoadTensors / LoadTensorFromFd paths;
//   the zero-copy path (setup, first touch of every page);
// each as the median of `reps` runs, with peak RSS growth per path.
// Not a test: prints figures only.
//
// Usage: torch_load_bench [GiB=1] [dir=$TMPDIR] [reps=3]
#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "hubload/torch_loader.h"

namespace {
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

long VmKb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + std::strlen(key));
  return -1;
}
void ResetPeak() {
  std::ofstream c("/proc/self/clear_refs");
  c << "5";
}

struct Figure {
  double median_s = 0, best_s = 0;
  double peak_growth_bytes = 0;  // largest VmHWM - VmRSS(before) over the runs
};

// Runs `fn` `reps` times; fn returns the seconds of its timed part.
Figure Measure(int reps, const std::function<double()>& fn) {
  std::vector<double> s;
  Figure f;
  for (int r = 0; r < reps; ++r) {
    const long rss0 = VmKb("VmRSS:");
    ResetPeak();
    s.push_back(fn());
    f.peak_growth_bytes = std::max(f.peak_growth_bytes, (VmKb("VmHWM:") - rss0) * 1024.0);
  }
  std::sort(s.begin(), s.end());
  f.median_s = s[s.size() / 2];
  f.best_s = s.front();
  return f;
}

// performance.md fault.cpp: mmap + (MADV_HUGEPAGE) + memset of `bytes`, on `threads` threads.
double FirstTouch(uint64_t bytes, bool huge, int threads) {
  auto t0 = Clock::now();
  char* p = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (p == MAP_FAILED) std::abort();
  if (huge) madvise(p, bytes, MADV_HUGEPAGE);
  const uint64_t chunk = 4ull << 20, chunks = (bytes + chunk - 1) / chunk;
  std::vector<std::thread> th;
  for (int t = 0; t < threads; ++t)
    th.emplace_back([&, t] {
      for (uint64_t c = t; c < chunks; c += threads) std::memset(p + c * chunk, 1, std::min(chunk, bytes - c * chunk));
    });
  for (auto& x : th) x.join();
  double s = Seconds(t0, Clock::now());
  munmap(p, bytes);
  return s;
}

void Row(const char* what, const Figure& f, double out_bytes, double base_s, const char* base_name) {
  std::printf("| %s | %.3f s (best %.3f) | %.2f GB/s | %.2fx %s | %.2f GiB |\n", what, f.median_s, f.best_s,
              out_bytes / f.median_s / 1e9, base_s / f.median_s, base_name, f.peak_growth_bytes / (1 << 30));
}

}  // namespace

int main(int argc, char** argv) {
  double gib = argc > 1 ? std::atof(argv[1]) : 1.0;
  std::string dir = argc > 2 ? argv[2] : std::filesystem::temp_directory_path().string();
  int reps = argc > 3 ? std::max(1, std::atoi(argv[3])) : 3;
  const uint64_t total = static_cast<uint64_t>(gib * (1ull << 30));
  const uint64_t per = 128ull << 20;  // 128 MiB tensors
  const int n = std::max(1, static_cast<int>(total / per));
  std::string path = dir + "/hubload_torch_load_bench.safetensors";
  {
    hubload::StateDict sd;
    for (int i = 0; i < n; ++i)
      sd.emplace_back("t" + std::to_string(i), at::rand({static_cast<int64_t>(per / 2)}).to(at::kBFloat16));
    std::vector<hubload::safetensors::TensorToWrite> tw;
    for (auto& [name, t] : sd)
      tw.push_back({name, hubload::safetensors::Dtype::BF16, {static_cast<uint64_t>(t.numel())}, t.data_ptr(),
                    static_cast<uint64_t>(t.numel()) * 2});
    auto st = hubload::safetensors::WriteFile(path, std::move(tw));
    if (!st.ok()) {
      std::fprintf(stderr, "write failed: %s\n", st.ToString().c_str());
      return 1;
    }
  }
  const double in_bytes = static_cast<double>(n) * per, out_bytes = 2 * in_bytes;
  {  // Warm the page cache.
    std::ifstream in(path, std::ios::binary);
    std::vector<char> buf(1 << 20);
    while (in.read(buf.data(), buf.size()) || in.gcount() > 0) {
    }
  }
  const uint64_t ob = static_cast<uint64_t>(out_bytes);
  std::printf("checkpoint %.2f GiB (%d BF16 tensors of 128 MiB), fp32 output %.2f GiB, %u hardware threads, "
              "median of %d runs\n\n",
              in_bytes / (1 << 30), n, out_bytes / (1 << 30), std::thread::hardware_concurrency(), reps);
  std::printf("| path | time | output rate | ratio | peak RSS growth |\n|---|---|---|---|---|\n");

  // ---- baselines (output-sized) ----
  Figure memcpy_f;
  {
    std::vector<char> a(ob, 1), b(ob, 0);
    memcpy_f = Measure(reps, [&] {
      auto t0 = Clock::now();
      std::memcpy(b.data(), a.data(), a.size());
      return Seconds(t0, Clock::now());
    });
    if (b[b.size() / 2] != 1) return 2;
  }
  Figure ft4k = Measure(reps, [&] { return FirstTouch(ob, false, 1); });
  Figure fthp = Measure(reps, [&] { return FirstTouch(ob, true, 1); });
  Figure fthp2 = Measure(reps, [&] { return FirstTouch(ob, true, 2); });
  const double thp_s = fthp.median_s;
  Row("memcpy, pre-faulted, 1 thread", memcpy_f, out_bytes, memcpy_f.median_s, "memcpy");
  Row("first touch mmap+memset, 4 KiB pages, 1 thread", ft4k, out_bytes, thp_s, "THP first touch");
  Row("first touch mmap+MADV_HUGEPAGE+memset, 1 thread (baseline)", fthp, out_bytes, thp_s, "THP first touch");
  Row("first touch mmap+MADV_HUGEPAGE+memset, 2 threads", fthp2, out_bytes, thp_s, "THP first touch");

  // ---- conversion bf16 -> fp32 ----
  hubload::LoadOptions f32;
  f32.dtype = hubload::TargetDtype::kF32;
  Figure old_path = Measure(reps, [&] {  // the previous LoadTensor: one thread, malloc'ed output, mapping kept
    auto t0 = Clock::now();
    auto file = hubload::safetensors::SafetensorsFile::Open(path);
    if (!file.ok()) std::abort();
    std::vector<at::Tensor> keep;
    for (const auto& info : file->header().tensors) {
      auto bytes = file->data(info);
      at::Tensor t = at::empty({static_cast<int64_t>(info.num_elements())}, at::kFloat);
      const uint8_t* s = bytes.data();
      uint32_t* d = static_cast<uint32_t*>(t.data_ptr());
      for (uint64_t i = 0; i < info.num_elements(); ++i) {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        d[i] = static_cast<uint32_t>(h) << 16;
      }
      keep.push_back(t);
    }
    return Seconds(t0, Clock::now());
  });
  Figure new_map = Measure(reps, [&] {
    auto t0 = Clock::now();
    auto file = hubload::safetensors::SafetensorsFile::Open(path);
    if (!file.ok()) std::abort();
    auto sd = hubload::LoadTensors(*file, f32);
    if (!sd.ok()) {
      std::fprintf(stderr, "%s\n", sd.status().ToString().c_str());
      std::abort();
    }
    return Seconds(t0, Clock::now());
  });
  Figure new_fd = Measure(reps, [&] {
    auto t0 = Clock::now();
    auto header = hubload::safetensors::ReadMetadata(path);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (!header.ok() || fd < 0) std::abort();
    std::vector<at::Tensor> keep;
    for (const auto& info : header->tensors) {
      auto t = hubload::LoadTensorFromFd(fd, header->data_start + info.begin, info, f32, path);
      if (!t.ok()) std::abort();
      keep.push_back(*t);
    }
    ::close(fd);
    return Seconds(t0, Clock::now());
  });
  Row("bf16->fp32, previous path (1 thread, malloc, mapping kept)", old_path, out_bytes, thp_s, "THP first touch");
  Row("bf16->fp32, LoadTensors (mapping, pages released)", new_map, out_bytes, thp_s, "THP first touch");
  Row("bf16->fp32, LoadTensorFromFd (pread 1 MiB chunks)", new_fd, out_bytes, thp_s, "THP first touch");

  // ---- zero copy ----
  double setup_s = 0;
  Figure zero = Measure(reps, [&] {
    auto t0 = Clock::now();
    auto file = hubload::safetensors::SafetensorsFile::Open(path);
    if (!file.ok()) std::abort();
    auto sd = hubload::LoadTensors(*file, {});
    if (!sd.ok()) std::abort();
    setup_s = Seconds(t0, Clock::now());
    uint64_t acc = 0;
    for (auto& [name, t] : *sd) {
      const uint8_t* p = static_cast<const uint8_t*>(t.data_ptr());
      for (int64_t i = 0; i < t.numel() * 2; i += 4096) acc += p[i];
    }
    if (acc == 1) std::printf(" ");
    return Seconds(t0, Clock::now());
  });
  Row("zero-copy LoadTensors + first touch of every page (input bytes)", zero, in_bytes, memcpy_f.median_s * 0.5,
      "memcpy");
  std::printf("\nzero-copy setup only: %.3f ms/GiB (last run)\n", setup_s * 1e3 / (in_bytes / (1 << 30)));
  std::printf("conversion goal: output rate >= 0.6x THP first touch (1 thread): LoadTensors %.2fx (best/best %.2fx), "
              "LoadTensorFromFd %.2fx (%.2fx), previous path %.2fx (%.2fx)\n",
              thp_s / new_map.median_s, fthp.best_s / new_map.best_s, thp_s / new_fd.median_s,
              fthp.best_s / new_fd.best_s, thp_s / old_path.median_s, fthp.best_s / old_path.best_s);
  std::printf("memory goal: peak RSS growth <= output + in-flight chunks + 64 MiB = %.2f GiB: LoadTensors %.2f GiB, "
              "LoadTensorFromFd %.2f GiB (previous path %.2f GiB)\n",
              (out_bytes + std::thread::hardware_concurrency() * (1 << 20) + (64 << 20)) / (1 << 30),
              new_map.peak_growth_bytes / (1 << 30), new_fd.peak_growth_bytes / (1 << 30),
              old_path.peak_growth_bytes / (1 << 30));
  std::filesystem::remove(path);
  return 0;
}
