// push_bench: UploadFolder of N GiB in 4 shards to an in-process `hubload
// serve` on loopback, reported as ratios to baselines measured in the same run:
//   - the sha256 speed of this machine (`openssl speed -evp sha256`, 16 KiB
//     blocks, 1 core): pushing reads every byte once for sha256, so this is a
//     ceiling for a single-file push;
//   - @huggingface/hub `uploadFiles` of the same folder to the same server
//     (tests/js/push_upload.mjs; skipped when node or the JS client is absent).
// Usage: push_bench [GIB=2] [SHARDS=4]. Needs ~3x the data size of free disk
// (local files + the server's store twice). Not a test: no pass/fail.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "hubload/server.h"
#include "hubload/hub.h"
#include "hubload/upload.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string Run(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) {
    *rc = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *rc = ::pclose(p);
  return out;
}

// bytes/s from the last "sha256" line of `openssl speed` (value in 1000s of bytes/s).
double OpensslSha256() {
  int rc = 0;
  std::string out = Run("openssl speed -elapsed -seconds 3 -bytes 16384 -evp sha256 2>/dev/null", &rc);
  size_t pos = out.rfind("sha256");
  if (rc != 0 || pos == std::string::npos) return 0;
  std::string line = out.substr(pos, out.find('\n', pos) - pos);
  size_t k = line.rfind(' ');
  std::string v = line.substr(k + 1);
  if (!v.empty() && v.back() == 'k') v.pop_back();
  return std::atof(v.c_str()) * 1000.0;
}

void WriteRandom(const fs::path& p, uint64_t bytes, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> block(1 << 17);  // 1 MiB
  std::ofstream out(p, std::ios::binary);
  for (uint64_t done = 0; done < bytes;) {
    for (auto& x : block) x = rng();
    uint64_t n = std::min<uint64_t>(bytes - done, block.size() * 8);
    out.write(reinterpret_cast<const char*>(block.data()), static_cast<std::streamsize>(n));
    done += n;
  }
}

}  // namespace

int main(int argc, char** argv) {
  double gib = argc > 1 ? std::atof(argv[1]) : 2.0;
  int shards = argc > 2 ? std::atoi(argv[2]) : 4;
  if (gib <= 0 || shards <= 0) {
    std::fprintf(stderr, "usage: push_bench [GIB=2] [SHARDS=4]\n");
    return 2;
  }
  uint64_t total = static_cast<uint64_t>(gib * (1ull << 30));
  uint64_t per = total / static_cast<uint64_t>(shards);
  fs::path tmp = fs::temp_directory_path() / ("hubload-push-bench-" + std::to_string(::getpid()));
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } cleanup{tmp};
  fs::path local = tmp / "local", store = tmp / "store";
  fs::create_directories(local);
  fs::create_directories(store);
  for (int i = 0; i < shards; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", i + 1, shards);
    WriteRandom(local / name, per, static_cast<uint32_t>(i + 1));
  }
  total = per * static_cast<uint64_t>(shards);
  std::printf("push_bench: %d shards x %.1f MiB = %.2f GiB\n", shards, per / 1048576.0, total / 1073741824.0);

  double sha = OpensslSha256();
  std::printf("baseline openssl speed -evp sha256 (16 KiB, 1 core): %.0f MB/s\n", sha / 1e6);

  hubload::server::ServerOptions so;
  so.root = store.string();
  so.tokens = {"hf_bench"};
  // One accept thread: works around the server naming part temp files after
  // socket addresses masked to 24 bits (collisions across malloc arenas).
  so.threads = 1;
  auto server = hubload::server::Server::Start(so);
  if (!server.ok()) {
    std::fprintf(stderr, "server: %s\n", server.status().ToString().c_str());
    return 1;
  }
  hubload::ClientOptions opt;
  opt.config.endpoint = (*server)->url();
  opt.config.token = "hf_bench";
  hubload::UploadFolderRequest req;
  req.repo_id = "bench/hubload";
  req.folder = local.string();
  req.create_repo = true;
  auto t0 = Clock::now();
  auto info = hubload::HubClient(opt).UploadFolder(req);
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!info.ok()) {
    std::fprintf(stderr, "hubload push failed: %s\n", info.status().ToString().c_str());
    return 1;
  }
  double rate = total / secs;
  std::printf("hubload UploadFolder: %.2f s = %.0f MB/s (%llu LFS bytes sent)\n", secs, rate / 1e6,
              static_cast<unsigned long long>(info->lfs_bytes_uploaded));
  if (sha > 0) std::printf("ratio hubload push / openssl sha256 speed: %.2f\n", rate / sha);

  // JS baseline: same folder, another repo on the same server.
  const char* src = std::getenv("HUBLOAD_SOURCE_DIR");
  fs::path js = fs::path(src && *src ? src : ".") / "tests" / "js";
  if (fs::exists(js / "node_modules" / "@huggingface" / "hub")) {
    auto c = hubload::HubClient(opt).CreateRepo("bench/js", hubload::RepoType::kModel, false);
    int rc = 0;
    auto j0 = Clock::now();
    std::string out = Run("node " + (js / "push_upload.mjs").string() + " " + (*server)->url() + " bench/js " +
                              local.string() + " hf_bench",
                          &rc);
    double js_secs = std::chrono::duration<double>(Clock::now() - j0).count();
    if (rc == 0 && c.ok()) {
      std::printf("@huggingface/hub uploadFiles: %.2f s wall (process) = %.0f MB/s; %s", js_secs,
                  total / js_secs / 1e6, out.c_str());
      std::printf("ratio hubload push / JS uploadFiles throughput: %.2f\n", rate / (total / js_secs));
    } else {
      std::printf("@huggingface/hub uploadFiles failed (rc %d): %s\n", rc, out.c_str());
    }
  } else {
    std::printf("JS baseline skipped: set HUBLOAD_SOURCE_DIR and run tools/js-deps.sh\n");
  }
  (*server)->Stop();
  return 0;
}
