// distributed_bench: 4 ranks prefetching one repo as a job (hubload
// download-distributed, 4 simulated nodes with their own caches) versus 4
// independent `hubload download` processes of the same repo, in the same run,
// against one local `hubload serve`. Prints job time and bytes fetched from
// the server for both, and their ratios. Not a test.
//
//   distributed_bench [SIZE_MIB=1024] [PATH_TO_HUBLOAD_CLI]
// The CLI defaults to $HUBLOAD_BIN, else ../tools/hubload/hubload next to
// this binary's folder (the build tree layout).
#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "hubload/server.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;

uint16_t FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

pid_t Spawn(const std::vector<std::string>& args, const std::vector<std::string>& extra_env, const std::string& log) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<std::string> a = args;
  std::vector<char*> cargv, cenv;
  for (auto& s : a) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  for (auto& s : env) cenv.push_back(s.data());
  cenv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  if (posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), cenv.data()) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// Waits for every process; false when one failed.
bool WaitAll(const std::vector<pid_t>& pids) {
  bool ok = true;
  for (pid_t p : pids) {
    int st = 0;
    if (p < 0 || ::waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0) ok = false;
  }
  return ok;
}

// Body bytes of 2xx GET answers in the access log from byte `from` on.
uint64_t BytesSent(const std::string& log, size_t from) {
  std::ifstream in(log);
  in.seekg(static_cast<std::streamoff>(from));
  uint64_t total = 0;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || j.value("method", "") != "GET") continue;
    int s = j.value("status", 0);
    if (s >= 200 && s < 300) total += j.value("bytes", uint64_t{0});
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t size_mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024;
  std::string cli;
  if (argc > 2) {
    cli = argv[2];
  } else if (const char* b = std::getenv("HUBLOAD_BIN")) {
    cli = b;
  } else {
    cli = (fs::canonical("/proc/self/exe").parent_path().parent_path() / "tools" / "hubload" / "hubload").string();
  }
  if (!fs::exists(cli)) {
    std::fprintf(stderr, "distributed_bench: hubload CLI not found at %s (pass it as the 2nd argument)\n", cli.c_str());
    return 2;
  }
  std::string tmpl = (fs::temp_directory_path() / "hubload-distbench-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) return 2;
  fs::path tmp = tmpl;
  // 8 shards of SIZE/8 pseudo-random bytes (incompressible; content is irrelevant to the transfer).
  fs::create_directories(tmp / "src");
  fs::create_directories(tmp / "store");
  const int shards = 8;
  const uint64_t shard_bytes = (size_mib << 20) / shards;
  std::mt19937_64 rng(42);
  std::vector<uint64_t> buf(1 << 17);
  for (int s = 0; s < shards; ++s) {
    std::ofstream out(tmp / "src" / ("model-0000" + std::to_string(s + 1) + "-of-00008.safetensors"), std::ios::binary);
    for (uint64_t w = 0; w < shard_bytes;) {
      for (auto& x : buf) x = rng();
      uint64_t n = std::min<uint64_t>(buf.size() * 8, shard_bytes - w);
      out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(n));
      w += n;
    }
  }
  auto commit = hubload::server::CreateRepoFromFolder((tmp / "store").string(), "bench/model", (tmp / "src").string());
  if (!commit.ok()) {
    std::fprintf(stderr, "distributed_bench: %s\n", commit.status().ToString().c_str());
    return 2;
  }
  fs::remove_all(tmp / "src");
  hubload::server::ServerOptions so;
  so.root = (tmp / "store").string();
  so.access_log = (tmp / "access.log").string();
  so.threads = 4;
  auto server = hubload::server::Server::Start(so);
  if (!server.ok()) {
    std::fprintf(stderr, "distributed_bench: %s\n", server.status().ToString().c_str());
    return 2;
  }
  const std::string endpoint = (*server)->url();
  const int ranks = 4;
  auto log_size = [&] { return static_cast<size_t>(fs::file_size(tmp / "access.log")); };

  // Baseline: 4 independent downloads at once, each into its own cache.
  size_t from = log_size();
  auto t0 = std::chrono::steady_clock::now();
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r)
    pids.push_back(Spawn({cli, "--endpoint", endpoint, "--cache-dir", (tmp / ("indep" + std::to_string(r))).string(),
                          "download", "bench/model", "--quiet"},
                         {}, (tmp / ("indep" + std::to_string(r) + ".err")).string()));
  bool ok_base = WaitAll(pids);
  double t_base = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  uint64_t b_base = BytesSent(so.access_log, from);

  // The job: 4 ranks on 4 simulated nodes, each its own cache.
  from = log_size();
  uint16_t port = FreePort();
  t0 = std::chrono::steady_clock::now();
  pids.clear();
  for (int r = 0; r < ranks; ++r)
    pids.push_back(Spawn({cli, "--endpoint", endpoint, "--cache-dir", (tmp / ("node" + std::to_string(r))).string(),
                          "download-distributed", "bench/model", "--quiet"},
                         {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port), "RANK=" + std::to_string(r),
                          "WORLD_SIZE=4", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1", "GROUP_RANK=" + std::to_string(r)},
                         (tmp / ("job" + std::to_string(r) + ".err")).string()));
  bool ok_job = WaitAll(pids);
  double t_job = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  uint64_t b_job = BytesSent(so.access_log, from);
  (*server)->Stop();

  std::printf("repo: %d shards, %.1f MiB; %d ranks\n", shards, static_cast<double>(shard_bytes * shards) / (1 << 20),
              ranks);
  std::printf("4 independent downloads : %7.2f s, %10.1f MiB from server%s\n", t_base,
              static_cast<double>(b_base) / (1 << 20), ok_base ? "" : "  (A PROCESS FAILED)");
  std::printf("download-distributed x4 : %7.2f s, %10.1f MiB from server%s\n", t_job,
              static_cast<double>(b_job) / (1 << 20), ok_job ? "" : "  (A RANK FAILED)");
  if (t_base > 0 && b_base > 0)
    std::printf("ratio job/independent   : time %.3f, bytes %.3f\n", t_job / t_base,
                static_cast<double>(b_job) / static_cast<double>(b_base));
  std::error_code ec;
  fs::remove_all(tmp, ec);
  return ok_base && ok_job ? 0 : 1;
}
