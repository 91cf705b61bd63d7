// safetensors format core benchmark. Prints ratios to baselines measured in the
// same run (not a test; timing never decides pass/fail).
//  1. Parse + validate a 20,000-tensor header vs nlohmann::json::parse alone of
//     the same JSON text.
//  2. Open a 1 GiB file and reach the first tensor's view (mmap) vs read()ing
//     the same bytes. The file is created in $TMPDIR (default /tmp) and deleted.
// Usage: safetensors_bench [header_iterations=20]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hubload/safetensors.h"

namespace st = hubload::safetensors;
using Clock = std::chrono::steady_clock;

namespace {

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Best (minimum) time of `reps` runs of f.
template <typename F>
double Best(int reps, F&& f) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    f();
    best = std::min(best, Seconds(t0, Clock::now()));
  }
  return best;
}

void DropCaches(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

int HeaderBench(int iters) {
  constexpr int kTensors = 20000;
  static uint8_t dummy[1];
  std::vector<st::TensorToWrite> ts;
  ts.reserve(kTensors);
  uint64_t total = 0;
  for (int i = 0; i < kTensors; ++i) {
    uint64_t rows = 64 + (i % 7) * 32;
    ts.push_back({"model.layers." + std::to_string(i / 10) + ".block." + std::to_string(i % 10) + ".weight",
                  i % 3 == 0 ? st::Dtype::F32 : st::Dtype::BF16, {rows, 128}, dummy,
                  rows * 128 * (i % 3 == 0 ? 4 : 2)});
    total += ts.back().nbytes;
  }
  auto prefix = st::SerializeHeader(&ts, {{"format", "pt"}});
  if (!prefix.ok()) {
    std::fprintf(stderr, "SerializeHeader: %s\n", prefix.status().ToString().c_str());
    return 1;
  }
  const std::string& p = *prefix;
  std::string json_text = p.substr(8);
  uint64_t file_size = p.size() + total;
  size_t sink = 0;
  double t_nlohmann = Best(iters, [&] {
    auto j = nlohmann::json::parse(json_text, nullptr, false);
    sink += j.size();
  });
  double t_parse = Best(iters, [&] {
    auto h = st::ParseHeader(reinterpret_cast<const uint8_t*>(p.data()), p.size(), file_size, "bench");
    if (!h.ok()) std::abort();
    sink += h->tensors.size();
  });
  std::printf("header: %d tensors, %zu bytes of JSON, best of %d\n", kTensors, json_text.size(), iters);
  std::printf("  nlohmann::json::parse alone (baseline): %8.3f ms\n", t_nlohmann * 1e3);
  std::printf("  ParseHeader (parse + validate):         %8.3f ms  ratio %.2fx baseline\n", t_parse * 1e3,
              t_parse / t_nlohmann);
  return sink == 0;
}

int OpenBench() {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string path = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/hubload_bench_1gib.safetensors";
  constexpr uint64_t kTensorBytes = 64ull << 20;  // 16 x 64 MiB = 1 GiB of data
  std::vector<uint8_t> buf(kTensorBytes);
  for (size_t i = 0; i < buf.size(); i += 4096) buf[i] = static_cast<uint8_t>(i >> 12);
  std::vector<st::TensorToWrite> ts;
  for (int i = 0; i < 16; ++i) {
    ts.push_back({"layer." + std::to_string(i) + ".weight", st::Dtype::F32, {kTensorBytes / 4}, buf.data(), kTensorBytes});
  }
  auto w = st::WriteFile(path, ts);
  if (!w.ok()) {
    std::fprintf(stderr, "WriteFile: %s\n", w.ToString().c_str());
    return 1;
  }
  buf.clear();
  buf.shrink_to_fit();
  uint64_t sink = 0;
  auto header = st::ReadMetadata(path);
  if (!header.ok()) return 1;
  const st::TensorInfo first = header->tensors.front();
  uint64_t first_end = header->data_start + first.end;
  uint64_t file_size = header->file_size;

  auto read_bytes = [&](uint64_t n) {
    int fd = ::open(path.c_str(), O_RDONLY);
    std::vector<uint8_t> b(n);
    uint64_t got = 0;
    while (got < n) {
      ssize_t r = ::read(fd, b.data() + got, std::min<uint64_t>(n - got, 1 << 24));
      if (r <= 0) break;
      got += static_cast<uint64_t>(r);
    }
    ::close(fd);
    sink += b[n - 1];
  };
  auto mmap_view = [&](bool touch) {
    auto f = st::SafetensorsFile::Open(path);
    if (!f.ok()) std::abort();
    auto span = f->data(f->header().tensors.front());
    if (touch) {
      for (size_t i = 0; i < span.size(); i += 4096) sink += span[i];
    }
    sink += span.size();
  };
  constexpr int kReps = 3;
  std::printf("open: 1 GiB file (16 tensors of 64 MiB), first tensor view, best of %d\n", kReps);
  for (bool cold : {false, true}) {
    auto prep = [&] {
      if (cold) DropCaches(path);
    };
    double t_read_all = 1e30, t_read_first = 1e30, t_view = 1e30, t_view_touch = 1e30;
    for (int i = 0; i < kReps; ++i) {
      prep();
      t_read_all = std::min(t_read_all, Best(1, [&] { read_bytes(file_size); }));
      prep();
      t_read_first = std::min(t_read_first, Best(1, [&] { read_bytes(first_end); }));
      prep();
      t_view = std::min(t_view, Best(1, [&] { mmap_view(false); }));
      prep();
      t_view_touch = std::min(t_view_touch, Best(1, [&] { mmap_view(true); }));
    }
    std::printf(" %s page cache (%s):\n", cold ? "cold" : "warm",
                cold ? "posix_fadvise DONTNEED before each run; best effort" : "file just written");
    std::printf("  read() whole file (baseline):             %9.3f ms\n", t_read_all * 1e3);
    std::printf("  read() header + first tensor:             %9.3f ms  ratio %.4f\n", t_read_first * 1e3,
                t_read_first / t_read_all);
    std::printf("  SafetensorsFile::Open + first view:       %9.3f ms  ratio %.4f\n", t_view * 1e3,
                t_view / t_read_all);
    std::printf("  ... + touching every page of that tensor: %9.3f ms  ratio %.4f\n", t_view_touch * 1e3,
                t_view_touch / t_read_all);
  }
  ::unlink(path.c_str());
  return sink == 0;
}

}  // namespace

int main(int argc, char** argv) {
  int iters = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  int rc = HeaderBench(iters);
  rc |= OpenBench();
  return rc;
}
