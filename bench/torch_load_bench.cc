// Loader benchmark: a ~2 GiB BF16 checkpoint from a warm page cache.
//   zero-copy path (LoadTensors, auto dtype) and a full read of the views;
//   conversion path (bf16 -> fp32);
// as GB/s and as a ratio to a memcpy of the same size measured in the same run,
// plus peak RSS growth over the checkpoint size. Not a test: prints figures only.
//
// Usage: torch_load_bench [GiB=2] [dir=$TMPDIR]
#include <ATen/ATen.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
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

}  // namespace

int main(int argc, char** argv) {
  double gib = argc > 1 ? std::atof(argv[1]) : 2.0;
  std::string dir = argc > 2 ? argv[2] : std::filesystem::temp_directory_path().string();
  const uint64_t total = static_cast<uint64_t>(gib * (1ull << 30));
  const uint64_t per = 128ull << 20;  // 128 MiB tensors
  const int n = static_cast<int>(total / per);
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
  const double bytes = static_cast<double>(n) * per;
  // Warm the page cache.
  {
    std::ifstream in(path, std::ios::binary);
    std::vector<char> buf(1 << 20);
    while (in.read(buf.data(), buf.size()) || in.gcount() > 0) {
    }
  }
  // Baseline: memcpy of the same size between touched buffers.
  double memcpy_s;
  {
    std::vector<char> a(static_cast<size_t>(bytes), 1), b(static_cast<size_t>(bytes), 0);
    auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), a.size());
    memcpy_s = Seconds(t0, Clock::now());
    if (b[b.size() / 2] != 1) return 2;
  }
  std::printf("checkpoint %.2f GiB (%d BF16 tensors), memcpy baseline %.3f s = %.2f GB/s\n", bytes / (1 << 30), n,
              memcpy_s, bytes / memcpy_s / 1e9);

  long rss0 = VmKb("VmRSS:");
  ResetPeak();
  {
    auto t0 = Clock::now();
    auto file = hubload::safetensors::SafetensorsFile::Open(path);
    if (!file.ok()) return 3;
    auto sd = hubload::LoadTensors(*file, {});
    if (!sd.ok()) return 4;
    auto t1 = Clock::now();
    // Touch every page of the views once (page-table cost a consumer pays on first use).
    uint64_t acc = 0;
    for (auto& [name, t] : *sd) {
      const uint8_t* p = static_cast<const uint8_t*>(t.data_ptr());
      for (int64_t i = 0; i < t.numel() * 2; i += 4096) acc += p[i];
    }
    auto t2 = Clock::now();
    std::printf("zero-copy: setup %.4f s (%.2f ms/GiB); setup + first touch of every page %.3f s = %.2f GB/s = "
                "%.2fx memcpy (acc %llu)\n",
                Seconds(t0, t1), Seconds(t0, t1) * 1e3 / (bytes / (1 << 30)), Seconds(t0, t2),
                bytes / Seconds(t0, t2) / 1e9, memcpy_s / Seconds(t0, t2), static_cast<unsigned long long>(acc % 7));
    std::printf("zero-copy: peak RSS growth %.2f x checkpoint size\n", (VmKb("VmHWM:") - rss0) * 1024.0 / bytes);
  }
  rss0 = VmKb("VmRSS:");
  ResetPeak();
  {
    auto t0 = Clock::now();
    auto file = hubload::safetensors::SafetensorsFile::Open(path);
    if (!file.ok()) return 3;
    hubload::LoadOptions o;
    o.dtype = hubload::TargetDtype::kF32;
    auto sd = hubload::LoadTensors(*file, o);
    if (!sd.ok()) return 4;
    double s = Seconds(t0, Clock::now());
    std::printf("bf16->fp32: %.3f s = %.2f GB/s of checkpoint = %.2fx memcpy; output %.2f GiB\n", s, bytes / s / 1e9,
                memcpy_s / s, bytes * 2 / (1 << 30));
    std::printf("bf16->fp32: peak RSS growth %.2f x checkpoint size (output alone is 2.0x)\n",
                (VmKb("VmHWM:") - rss0) * 1024.0 / bytes);
  }
  std::filesystem::remove(path);
  return 0;
}
