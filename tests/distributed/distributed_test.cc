// Cluster prefetch and multi-rank load (issue 9), on one machine: jobs of 4
// `hubload` processes on loopback — two simulated nodes with two ranks each,
// each node its own cache folder — against an in-process `hubload serve`
// whose JSON-lines access log counts the body bytes sent per file.
//
// Expected values come from the bytes the test itself generated (sha256 by
// OpenSSL through testing::Sha256Hex, safetensors bytes written by hand here),
// never from hubload's own code.
#include <gtest/gtest.h>

#include "testing/report.h"
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hubload/distributed.h"
#include "hubload/server.h"
#include "loader/distributed/plan.h"
#include "testing/hub_server.h"
#include "testing/util.h"
#include "tests/hub/endpoints.h"
#include "testing/status_matchers.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using hubload::testing::Sha256Hex;
using hubload::testing::TempDir;
using json = nlohmann::json;

// The CLI: $HUBLOAD_BIN, else the path CMake compiled in (hubload_add_test's
// ENVIRONMENT currently passes only its first variable to ctest).
std::string HubloadBin() {
  std::string b = hubload::testing::HubloadBin();
  if (b != "hubload") return b;
#ifdef HUBLOAD_DIST_TEST_CLI
  return HUBLOAD_DIST_TEST_CLI;
#else
  return b;
#endif
}

constexpr const char* kRepo = "org/model";
constexpr const char* kRepoFolder = "models--org--model";

// ---- a multi-shard safetensors repo, bytes written by hand ----------------

struct RawTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

std::string Safetensors(const std::vector<RawTensor>& ts) {
  json h = json::object();
  uint64_t off = 0;
  for (const auto& t : ts) {
    h[t.name] = json{{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
  }
  std::string hdr = h.dump();
  while (hdr.size() % 8 != 0) hdr.push_back(' ');
  std::string out(8, '\0');
  uint64_t n = hdr.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += hdr;
  for (const auto& t : ts) out += t.bytes;
  return out;
}

std::string Pseudo(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    s[i] = static_cast<char>(x & 0x7f);  // small positive bytes: finite floats
  }
  return s;
}

struct Repo {
  std::map<std::string, std::string> files;              // path -> bytes
  std::map<std::string, std::string> tensor_sha256;      // tensor -> sha256 of its raw bytes
  std::map<std::string, std::string> tensor_dtype;
  std::map<std::string, std::vector<int64_t>> tensor_shape;
};

// 4 shards of 3 tensors (F32 matrix, BF16 vector, I64 vector) + index + config.
Repo MakeRepo(int64_t rows = 256) {
  Repo r;
  json weight_map = json::object();
  uint64_t total = 0;
  for (int s = 1; s <= 4; ++s) {
    std::string shard = "model-0000" + std::to_string(s) + "-of-00004.safetensors";
    std::vector<RawTensor> ts;
    std::string p = "layers." + std::to_string(s - 1) + ".";
    ts.push_back({p + "weight", "F32", {rows, 384}, Pseudo(static_cast<size_t>(rows) * 384 * 4, 10 + s)});
    ts.push_back({p + "bias", "BF16", {384}, Pseudo(384 * 2, 20 + s)});
    ts.push_back({p + "step", "I64", {4}, Pseudo(4 * 8, 30 + s)});
    for (const auto& t : ts) {
      weight_map[t.name] = shard;
      total += t.bytes.size();
      r.tensor_sha256[t.name] = Sha256Hex(t.bytes.data(), t.bytes.size());
      r.tensor_dtype[t.name] = t.dtype;
      r.tensor_shape[t.name] = t.shape;
    }
    r.files[shard] = Safetensors(ts);
  }
  r.files["model.safetensors.index.json"] =
      json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2);
  r.files["config.json"] = R"({"model_type": "toy", "hidden_size": 384})";
  return r;
}

// ---- processes --------------------------------------------------------------

uint16_t FreePort() { return hubload::testing::FreeLoopbackPort(); }

struct RankResult {
  int exit_code = -1;   // exit status, or -1 when killed by a signal
  int signal = 0;       // terminating signal, 0 when exited
  std::string out, err;
};

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs one `hubload` process per rank (two nodes of world / 2 ranks; 4 ranks
// unless `world` says otherwise) and waits for all of them, at most
// `deadline_s` seconds (then kills the leftovers and reports them as killed
// by SIGKILL).
std::vector<RankResult> RunJob(const std::vector<std::string>& args, const std::string& endpoint,
                               const std::vector<std::string>& node_caches, const fs::path& logdir,
                               const std::map<int, std::map<std::string, std::string>>& extra_env = {},
                               double deadline_s = 180, const std::set<int>& hung = {}, int world = 4) {
  const int per_node = world / 2;
  const uint16_t port = FreePort();
  std::vector<pid_t> pids(world, -1);
  static const std::set<std::string> drop = {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                                             "LOCAL_WORLD_SIZE", "GROUP_RANK", "SLURM_PROCID", "SLURM_NTASKS",
                                             "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS_PER_NODE",
                                             "JOB_COMPLETION_INDEX", "HF_HUB_OFFLINE", "HF_TOKEN",
                                             "HUBLOAD_DIST_FAULT_KILL_AFTER_CHUNKS", "HUBLOAD_DIST_FAULT_SIGNAL",
                                             "GLOO_SOCKET_IFNAME"};
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string kv = *e;
      if (!drop.count(kv.substr(0, kv.find('=')))) env.push_back(kv);
    }
    int node = r / per_node;
    env.push_back("MASTER_ADDR=127.0.0.1");
    env.push_back("MASTER_PORT=" + std::to_string(port));
    env.push_back("RANK=" + std::to_string(r));
    env.push_back("WORLD_SIZE=" + std::to_string(world));
    env.push_back("LOCAL_RANK=" + std::to_string(r % per_node));
    env.push_back("LOCAL_WORLD_SIZE=" + std::to_string(per_node));
    env.push_back("GROUP_RANK=" + std::to_string(node));
    auto it = extra_env.find(r);
    if (it != extra_env.end())
      for (const auto& [k, v] : it->second) env.push_back(k + "=" + v);
    std::vector<std::string> argv{HubloadBin(), "--endpoint", endpoint, "--cache-dir", node_caches[node]};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv, cenv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    for (auto& e : env) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    std::string o = (logdir / ("rank" + std::to_string(r) + ".out")).string();
    std::string e = (logdir / ("rank" + std::to_string(r) + ".err")).string();
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, o.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, e.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), cenv.data());
    posix_spawn_file_actions_destroy(&fa);
    EXPECT_EQ(rc, 0) << "cannot start " << argv[0];
    pids[r] = rc == 0 ? pid : -1;
  }
  std::vector<RankResult> res(world);
  std::vector<bool> done(world, false);
  auto t0 = std::chrono::steady_clock::now();
  for (int left = world; left > 0;) {
    for (int r = 0; r < world; ++r) {
      if (done[r]) continue;
      if (pids[r] < 0) {
        done[r] = true;
        --left;
        continue;
      }
      int st = 0;
      if (::waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        done[r] = true;
        --left;
        if (WIFEXITED(st)) res[r].exit_code = WEXITSTATUS(st);
        if (WIFSIGNALED(st)) res[r].signal = WTERMSIG(st);
      }
    }
    if (left == 0) break;
    // Ranks expected to hang (stopped by fault injection) are killed once
    // every other rank has exited by itself.
    if (!hung.empty() && left == static_cast<int>(hung.size())) {
      bool only_hung = true;
      for (int r = 0; r < world; ++r) only_hung = only_hung && (done[r] || hung.count(r));
      if (only_hung) {
        for (int r : hung) {
          if (done[r]) continue;
          ::kill(pids[r], SIGKILL);
          int st = 0;
          ::waitpid(pids[r], &st, 0);
          res[r].signal = SIGKILL;
          done[r] = true;
        }
        break;
      }
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > deadline_s) {
      for (int r = 0; r < world; ++r) {
        if (done[r]) continue;
        ADD_FAILURE() << "rank " << r << " did not stop within " << deadline_s << " s; killed";
        ::kill(pids[r], SIGKILL);
        int st = 0;
        ::waitpid(pids[r], &st, 0);
        res[r].signal = SIGKILL;
        done[r] = true;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (int r = 0; r < world; ++r) {
    res[r].out = Slurp(logdir / ("rank" + std::to_string(r) + ".out"));
    res[r].err = Slurp(logdir / ("rank" + std::to_string(r) + ".err"));
  }
  return res;
}

// ---- access log --------------------------------------------------------------

struct LogLine {
  std::string method, path;
  int status = 0;
  uint64_t bytes = 0;
};

std::vector<LogLine> ReadLog(const fs::path& p, size_t from_byte = 0) {
  std::string all = Slurp(p);
  std::vector<LogLine> out;
  std::istringstream in(all.substr(std::min(from_byte, all.size())));
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) {
      ADD_FAILURE() << "access log line is not JSON: " << line;
      continue;
    }
    out.push_back({j.value("method", ""), j.value("path", ""), j.value("status", 0), j.value("bytes", uint64_t{0})});
  }
  return out;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Content bytes the server sent for each repo file (2xx GET answers): LFS
// files come from the CDN listener as /<repo folder>/<sha256>, regular files
// from /<repo>/resolve/<revision>/<path>.
std::map<std::string, uint64_t> BytesPerFile(const std::vector<LogLine>& log, const Repo& repo) {
  std::map<std::string, uint64_t> out;
  for (const auto& [path, bytes] : repo.files) {
    std::string cdn = std::string("/") + kRepoFolder + "/" + Sha256Hex(bytes.data(), bytes.size());
    for (const auto& l : log) {
      if (l.method != "GET" || l.status < 200 || l.status >= 300) continue;
      bool match = l.path == cdn || (l.path.find(std::string("/") + kRepo + "/resolve/") == 0 && EndsWith(l.path, "/" + path));
      if (match) out[path] += l.bytes;
    }
  }
  return out;
}

// ---- cache checks -------------------------------------------------------------

std::string FileSha(const fs::path& p) {
  std::string b = Slurp(p);
  return Sha256Hex(b.data(), b.size());
}

// Every file of `repo` is in the snapshot of `commit` with the right bytes,
// refs/main names the commit, and no partial is left.
void ExpectCompleteCache(const std::string& cache, const Repo& repo, const std::string& commit) {
  fs::path rd = fs::path(cache) / kRepoFolder;
  EXPECT_EQ(Slurp(rd / "refs" / "main"), commit) << cache;
  for (const auto& [path, bytes] : repo.files) {
    fs::path p = rd / "snapshots" / commit / path;
    ASSERT_TRUE(fs::exists(p)) << p;
    EXPECT_EQ(FileSha(p), Sha256Hex(bytes.data(), bytes.size())) << p;
  }
  std::error_code ec;
  for (auto& e : fs::directory_iterator(rd / "blobs", ec)) EXPECT_NE(e.path().extension(), ".incomplete") << e.path();
}

// No blob under a final name has wrong content: a 64-hex blob's name is the
// sha256 of its bytes (LFS), a 40-hex blob's name is the git blob sha1 (checked
// through the repo's known files).
void ExpectNoBadFinalBlobs(const std::string& cache, const Repo& repo) {
  std::map<std::string, std::string> sha_to_path;
  for (const auto& [path, bytes] : repo.files) sha_to_path[Sha256Hex(bytes.data(), bytes.size())] = path;
  fs::path blobs = fs::path(cache) / kRepoFolder / "blobs";
  std::error_code ec;
  for (auto& e : fs::directory_iterator(blobs, ec)) {
    std::string name = e.path().filename().string();
    if (e.path().extension() == ".incomplete") continue;
    std::string sha = FileSha(e.path());
    if (name.size() == 64) {
      EXPECT_EQ(sha, name) << "blob " << e.path() << " holds other bytes than its name says";
    } else {
      EXPECT_TRUE(sha_to_path.count(sha)) << "blob " << e.path() << " matches no file of the repo";
    }
  }
}

class DistributedJob : public ::testing::Test {
 protected:
  void SetUp() override {
    if (HubloadBin() == "hubload" || !fs::exists(HubloadBin())) GTEST_SKIP() << "the hubload CLI is not built (HUBLOAD_BIN unset)";
    repo_ = MakeRepo();
    hubload::server::ServerOptions so;
    so.access_log = (tmp_.path() / "access.log").string();
    hub_ = hubload::testing::StartTestHub(so);
    ASSERT_TRUE(hub_);
    commit_ = hub_->AddRepo(kRepo, repo_.files);
    ASSERT_EQ(commit_.size(), 40u);
    for (int n = 0; n < 2; ++n) {
      caches_.push_back((tmp_.path() / ("node" + std::to_string(n))).string());
      fs::create_directories(caches_.back());
    }
    fs::create_directories(tmp_.path() / "logs");
  }
  void TearDown() override {
    if (hub_ && hub_->server) hub_->server->Stop();
  }

  std::string Dump(const std::vector<RankResult>& rs) {
    std::string s;
    for (size_t r = 0; r < rs.size(); ++r)
      s += "--- rank " + std::to_string(r) + " exit " + std::to_string(rs[r].exit_code) + " signal " +
           std::to_string(rs[r].signal) + "\nstdout: " + rs[r].out + "stderr: " + rs[r].err + "\n";
    return s;
  }

  // Jobs expected to succeed get a generous heartbeat timeout (a starved
  // process on a loaded CI machine must not count as dead); failure tests a
  // short one so that they end quickly.
  std::vector<std::string> DownloadArgs(const char* heartbeat_s = "20") {
    return {"download-distributed", kRepo, "--chunk-bytes", "65536", "--timeout", "90", "--heartbeat-timeout",
            heartbeat_s};
  }

  TempDir tmp_;
  Repo repo_;
  std::string commit_;
  std::unique_ptr<hubload::testing::TestHub> hub_;
  std::vector<std::string> caches_;
};

TEST_F(DistributedJob, PrefetchSendsEachFileOncePerJobAndFillsEveryNodeCache) {
  auto rs = RunJob(DownloadArgs(), hub_->server->url(), caches_, tmp_.path() / "logs");
  for (int r = 0; r < 4; ++r) ASSERT_EQ(rs[r].exit_code, 0) << Dump(rs);
  // Each rank prints its node's snapshot folder.
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(rs[r].out, (fs::path(caches_[r / 2]) / kRepoFolder / "snapshots" / commit_).string() + "\n");
  // The server sent each file's bytes exactly once for the whole job.
  auto log = ReadLog(tmp_.path() / "access.log");
  auto sent = BytesPerFile(log, repo_);
  for (const auto& [path, bytes] : repo_.files) EXPECT_EQ(sent[path], bytes.size()) << path << " bytes sent";
  // Both node caches complete and byte-identical to the repo (hence to each other).
  for (const auto& c : caches_) ExpectCompleteCache(c, repo_, commit_);

  // A rerun finds every file in every cache: no file byte leaves the server.
  size_t log_size = fs::file_size(tmp_.path() / "access.log");
  auto rs2 = RunJob(DownloadArgs(), hub_->server->url(), caches_, tmp_.path() / "logs");
  for (int r = 0; r < 4; ++r) ASSERT_EQ(rs2[r].exit_code, 0) << Dump(rs2);
  auto sent2 = BytesPerFile(ReadLog(tmp_.path() / "access.log", log_size), repo_);
  for (const auto& [path, bytes] : repo_.files) EXPECT_EQ(sent2[path], 0u) << path << " re-sent on a cached rerun";
}

TEST_F(DistributedJob, PrefetchIncludePatternSelectsFiles) {
  auto args = DownloadArgs();
  args.push_back("--include");
  args.push_back("*.json");
  auto rs = RunJob(args, hub_->server->url(), caches_, tmp_.path() / "logs");
  for (int r = 0; r < 4; ++r) ASSERT_EQ(rs[r].exit_code, 0) << Dump(rs);
  auto sent = BytesPerFile(ReadLog(tmp_.path() / "access.log"), repo_);
  for (const auto& [path, bytes] : repo_.files) {
    bool json_file = EndsWith(path, ".json");
    EXPECT_EQ(sent[path], json_file ? bytes.size() : 0u) << path;
    for (const auto& c : caches_) {
      fs::path p = fs::path(c) / kRepoFolder / "snapshots" / commit_ / path;
      EXPECT_EQ(fs::exists(p), json_file) << p;
      if (json_file) {
        EXPECT_EQ(Slurp(p), bytes);
      }
    }
  }
}

TEST_F(DistributedJob, KilledRankFailsEveryRankNamingItAndRerunCompletes) {
  // Rank 2 (node 1's leader) dies after 3 broadcast chunks of 64 KiB: in the
  // middle of the first shard's broadcast (each shard is ~390 KiB).
  auto rs = RunJob(DownloadArgs("6"), hub_->server->url(), caches_, tmp_.path() / "logs",
                   {{2, {{"HUBLOAD_DIST_FAULT_KILL_AFTER_CHUNKS", "3"}}}}, 120);
  EXPECT_EQ(rs[2].signal, SIGKILL) << Dump(rs);
  std::cout << "errors reported by the surviving ranks:\n" << rs[0].err << rs[1].err << rs[3].err;
  std::set<std::string> names;
  for (const auto& [path, bytes] : repo_.files) names.insert(path);
  for (int r : {0, 1, 3}) {
    EXPECT_EQ(rs[r].exit_code, 1) << Dump(rs);
    EXPECT_NE(rs[r].err.find("rank 2 "), std::string::npos) << "rank " << r << " does not name rank 2:\n" << rs[r].err;
    bool names_file = false;
    for (const auto& n : names) names_file = names_file || rs[r].err.find(n) != std::string::npos;
    EXPECT_TRUE(names_file) << "rank " << r << " does not name the file:\n" << rs[r].err;
  }
  // Nothing half-written under a final name in either cache.
  for (const auto& c : caches_) ExpectNoBadFinalBlobs(c, repo_);

  // The rerun completes, and files node caches already held are not fetched again.
  std::set<std::string> held_everywhere;
  for (const auto& [path, bytes] : repo_.files) {
    bool all = true;
    for (const auto& c : caches_)
      all = all && fs::exists(fs::path(c) / kRepoFolder / "blobs" / Sha256Hex(bytes.data(), bytes.size()));
    if (all) held_everywhere.insert(path);
  }
  size_t log_size = fs::file_size(tmp_.path() / "access.log");
  auto rs2 = RunJob(DownloadArgs(), hub_->server->url(), caches_, tmp_.path() / "logs");
  for (int r = 0; r < 4; ++r) ASSERT_EQ(rs2[r].exit_code, 0) << Dump(rs2);
  for (const auto& c : caches_) ExpectCompleteCache(c, repo_, commit_);
  auto sent2 = BytesPerFile(ReadLog(tmp_.path() / "access.log", log_size), repo_);
  for (const auto& p : held_everywhere) EXPECT_EQ(sent2[p], 0u) << p << " was fetched again though every node held it";
  for (const auto& [path, bytes] : repo_.files) EXPECT_LE(sent2[path], bytes.size()) << path;
}

TEST_F(DistributedJob, HungRankMidBroadcastFailsEveryOtherRankNamingIt) {
  // Rank 2 stops (SIGSTOP: alive, sockets open, silent) after 3 chunks; the
  // others must give up by themselves, name it and the file, and leave no
  // bad blob behind. The test kills the stopped rank afterwards.
  auto rs = RunJob(DownloadArgs("6"), hub_->server->url(), caches_, tmp_.path() / "logs",
                   {{2, {{"HUBLOAD_DIST_FAULT_KILL_AFTER_CHUNKS", "3"}, {"HUBLOAD_DIST_FAULT_SIGNAL", "STOP"}}}}, 120,
                   {2});
  for (int r : {0, 1, 3}) {
    EXPECT_EQ(rs[r].exit_code, 1) << Dump(rs);
    EXPECT_NE(rs[r].err.find("rank 2 "), std::string::npos) << "rank " << r << ":\n" << rs[r].err;
    EXPECT_NE(rs[r].err.find(".safetensors"), std::string::npos) << "rank " << r << ":\n" << rs[r].err;
  }
  for (const auto& c : caches_) ExpectNoBadFinalBlobs(c, repo_);
}

TEST_F(DistributedJob, MissingRepoFailsEveryRankWithRepoNotFound) {
  auto rs = RunJob({"download-distributed", "org/absent", "--timeout", "90", "--heartbeat-timeout", "20"},
                   hub_->server->url(), caches_, tmp_.path() / "logs");
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(rs[r].exit_code, 1) << Dump(rs);
    EXPECT_NE(rs[r].err.find("org/absent"), std::string::npos) << rs[r].err;
    EXPECT_NE(rs[r].err.find("RepoNotFound"), std::string::npos) << rs[r].err;
  }
}

TEST_F(DistributedJob, LoadGivesEveryRankTheCheckpointTensors) {
  std::string out = (tmp_.path() / "logs" / "load-{rank}.json").string();
  // Rank 3 takes only layers 2 and 3 (a pipeline stage).
  std::vector<std::string> args{"load-distributed", kRepo, "--json", out, "--chunk-bytes", "65536",
                                "--timeout", "90", "--heartbeat-timeout", "20"};
  auto rs = RunJob(args, hub_->server->url(), caches_, tmp_.path() / "logs");
  for (int r = 0; r < 4; ++r) ASSERT_EQ(rs[r].exit_code, 0) << Dump(rs);
  auto sent = BytesPerFile(ReadLog(tmp_.path() / "access.log"), repo_);
  for (const auto& [path, bytes] : repo_.files) {
    if (path == "config.json") continue;  // not a weights file: never fetched by a load
    EXPECT_EQ(sent[path], bytes.size()) << path << " bytes sent";
  }
  EXPECT_EQ(sent["config.json"], 0u);
  // The single-process load (`hubload load --json`) of node 1's snapshot,
  // copied to a plain folder (symlinks followed): ListLocalFiles currently
  // mis-lists a snapshot folder of relative symlinks (fs::relative resolves
  // them into ../../blobs/...), which is not what this test is about.
  std::string single_out, single_err;
  fs::path snap = tmp_.path() / "single";
  fs::create_directories(snap);
  for (auto& e : fs::directory_iterator(fs::path(caches_[1]) / kRepoFolder / "snapshots" / commit_))
    fs::copy_file(e.path(), snap / e.path().filename());
  ASSERT_EQ(hubload::testing::RunCommand("'" + HubloadBin() + "' load '" + snap.string() + "' --json", &single_out,
                                         &single_err),
            0)
      << single_err;
  json single = json::parse(single_out, nullptr, false);
  ASSERT_FALSE(single.is_discarded()) << single_out;
  ASSERT_EQ(single["tensors"].size(), repo_.tensor_sha256.size());
  const json single_by_name = hubload::testing::TensorsByName(single);
  for (int r = 0; r < 4; ++r) {
    json j = json::parse(Slurp(tmp_.path() / "logs" / ("load-" + std::to_string(r) + ".json")), nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "rank " << r;
    EXPECT_EQ(j["schema"], single["schema"]);  // one report schema for every path
    EXPECT_EQ(j["distributed"]["rank"], r);
    EXPECT_EQ(j["distributed"]["world_size"], 4);
    EXPECT_EQ(j["commit"], commit_);
    ASSERT_EQ(j["tensors"].size(), repo_.tensor_sha256.size()) << "rank " << r;
    const json by_name = hubload::testing::TensorsByName(j);
    for (const auto& [name, sha] : repo_.tensor_sha256) {
      ASSERT_TRUE(by_name.contains(name)) << name;
      EXPECT_EQ(by_name[name]["sha256"], sha) << "rank " << r << " " << name;
      EXPECT_EQ(by_name[name]["sha256"], single_by_name[name]["sha256"]) << "rank " << r << " " << name;
      EXPECT_EQ(by_name[name]["dtype"], repo_.tensor_dtype[name]) << name;
      EXPECT_EQ(by_name[name]["shape"].get<std::vector<int64_t>>(), repo_.tensor_shape[name]) << name;
    }
  }
}

TEST_F(DistributedJob, LoadFilterGivesARankOnlyItsTensors) {
  std::string out = (tmp_.path() / "logs" / "stage-{rank}.json").string();
  std::vector<std::string> args{"load-distributed", kRepo, "--json", out, "--tensors", "^layers\\.[23]\\.",
                                "--timeout", "90", "--heartbeat-timeout", "20"};
  auto rs = RunJob(args, hub_->server->url(), caches_, tmp_.path() / "logs");
  for (int r = 0; r < 4; ++r) ASSERT_EQ(rs[r].exit_code, 0) << Dump(rs);
  for (int r = 0; r < 4; ++r) {
    json j = json::parse(Slurp(tmp_.path() / "logs" / ("stage-" + std::to_string(r) + ".json")), nullptr, false);
    ASSERT_FALSE(j.is_discarded());
    std::set<std::string> got;
    for (const auto& t : j["tensors"]) {
      const std::string name = t["name"];
      got.insert(name);
      EXPECT_EQ(t["sha256"], repo_.tensor_sha256[name]) << name;
    }
    std::set<std::string> want;
    for (const auto& [name, sha] : repo_.tensor_sha256)
      if (name.rfind("layers.2.", 0) == 0 || name.rfind("layers.3.", 0) == 0) want.insert(name);
    EXPECT_EQ(got, want) << "rank " << r;
  }
}

// The behaviours shared with the single-process paths (tests/pipeline/paths_test.cc):
// alias restoration and the unnamed-shard warning in the one report, and the
// same reason for an index that disagrees with its shards, on every rank.
TEST_F(DistributedJob, LoadSharesTheDriversChecksAndReport) {
  std::vector<RawTensor> s1{{"embed.weight", "F32", {4}, Pseudo(16, 41)}};
  std::vector<RawTensor> s2{{"layer.weight", "F32", {2}, Pseudo(8, 42)}};
  std::map<std::string, std::string> good{
      {"model-00001-of-00002.safetensors", Safetensors(s1)},
      {"model-00002-of-00002.safetensors", Safetensors(s2)},
      {"model-00003-of-00003.safetensors", Safetensors(s2)},  // not named by the index
      {"model.safetensors.index.json",
       json{{"metadata", {{"total_size", 24}, {"lm_head.weight", "embed.weight"}}},
            {"weight_map",
             {{"embed.weight", "model-00001-of-00002.safetensors"}, {"layer.weight", "model-00002-of-00002.safetensors"}}}}
           .dump()}};
  // The index puts layer.weight in shard 1, which lacks it; shard 2 agrees with the index.
  auto bad = good;
  bad["model-00002-of-00002.safetensors"] = Safetensors({{"z", "F32", {2}, Pseudo(8, 43)}});
  bad["model.safetensors.index.json"] =
      json{{"weight_map",
            {{"embed.weight", "model-00001-of-00002.safetensors"}, {"layer.weight", "model-00001-of-00002.safetensors"},
             {"z", "model-00002-of-00002.safetensors"}}}}
          .dump();
  const std::string store = hub_->root.str();
  ASSERT_OK(hubload::server::CreateRepoFromFiles(store, "org/drift", good));
  ASSERT_OK(hubload::server::CreateRepoFromFiles(store, "org/drift-bad", bad));

  std::string out = (tmp_.path() / "logs" / "drift-{rank}.json").string();
  auto rs = RunJob({"load-distributed", "org/drift", "--json", out, "--timeout", "90", "--heartbeat-timeout", "20"},
                   hub_->server->url(), caches_, tmp_.path() / "logs");
  for (int r = 0; r < 4; ++r) ASSERT_EQ(rs[r].exit_code, 0) << Dump(rs);
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    json j = json::parse(Slurp(tmp_.path() / "logs" / ("drift-" + std::to_string(r) + ".json")), nullptr, false);
    ASSERT_FALSE(j.is_discarded());
    EXPECT_EQ(j["schema"], "hubload.load/1");
    EXPECT_EQ(j["aliases"]["lm_head.weight"], "embed.weight");
    int named = 0;
    for (const auto& w : j["warnings"]) named += w.get<std::string>().find("model-00003-of-00003") != std::string::npos;
    EXPECT_EQ(named, 1) << j["warnings"].dump();
    ASSERT_EQ(j["tensors"].size(), 2u);
    EXPECT_EQ(j["tensors"][0]["sha256"], Sha256Hex(s1[0].bytes.data(), s1[0].bytes.size()));
  }

  rs = RunJob({"load-distributed", "org/drift-bad", "--timeout", "60", "--heartbeat-timeout", "10"}, hub_->server->url(),
              caches_, tmp_.path() / "logs");
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_NE(rs[r].exit_code, 0) << Dump(rs);
    EXPECT_NE(rs[r].err.find("IndexTensorMissing"), std::string::npos) << rs[r].err;
    EXPECT_NE(rs[r].err.find("layer.weight"), std::string::npos) << rs[r].err;
  }
}

// Tensors are handed over as their bytes land on every rank of the node that
// downloads the shard (issue 13 item 3), not once the node holds it complete:
// the leader publishes how far its partial file is written, and the other
// rank reads it from that file. One 8 MiB shard over a 4 MB/s link: on the
// downloading node the first tensor comes well before the shard is complete
// (without streaming it can only come after); every rank gets the bytes.
TEST_F(DistributedJob, LoadHandsOverTensorsWhileTheShardArrives) {
  std::vector<RawTensor> ts;
  for (int i = 0; i < 8; ++i) ts.push_back({"t" + std::to_string(i), "F32", {256, 1024}, Pseudo(1 << 20, 60 + i)});
  const std::string store = hub_->root.str();
  ASSERT_OK(hubload::server::CreateRepoFromFiles(store, "org/stream", {{"model.safetensors", Safetensors(ts)}}));
  hub_->server->faults().SetTotalBandwidthBytesPerSec(4'000'000);
  std::string out = (tmp_.path() / "logs" / "stream-{rank}.json").string();
  auto rs = RunJob({"load-distributed", "org/stream", "--json", out, "--timeout", "90", "--heartbeat-timeout", "20"},
                   hub_->server->url(), caches_, tmp_.path() / "logs");
  hub_->server->faults().SetTotalBandwidthBytesPerSec(0);
  for (int r = 0; r < 4; ++r) ASSERT_EQ(rs[r].exit_code, 0) << Dump(rs);
  std::vector<json> reports;
  int downloading_node = -1;
  for (int r = 0; r < 4; ++r) {
    json j = json::parse(Slurp(tmp_.path() / "logs" / ("stream-" + std::to_string(r) + ".json")), nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "rank " << r;
    if (j["distributed"]["bytes_downloaded"].get<uint64_t>() > 0) {
      EXPECT_EQ(downloading_node, -1) << "two ranks downloaded";
      downloading_node = r / 2;
    }
    reports.push_back(std::move(j));
  }
  ASSERT_GE(downloading_node, 0);
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    const json& j = reports[r];
    ASSERT_EQ(j["tensors"].size(), ts.size());
    const json by_name = hubload::testing::TensorsByName(j);
    for (const auto& t : ts) EXPECT_EQ(by_name[t.name]["sha256"], Sha256Hex(t.bytes.data(), t.bytes.size())) << t.name;
    if (r / 2 != downloading_node) continue;
    // The shard's download takes ~2.1 s; the first tensor needs its first MiB.
    const double first = j["timings"]["time_to_first_tensor_s"].get<double>();
    const double complete = j["timings"]["download_s"].get<double>();
    EXPECT_LT(first + 0.5, complete) << j["timings"].dump();
  }
}

// The Hub down with both node caches warm (issue 13 item 4): a 2-rank load
// (two nodes, one rank each) uses the cached snapshot. Rank 0 lists the repo
// once: one warning naming the commit in every rank's report and once on
// rank 0's stderr; a refused connection is not retried.
class DistributedHubDown : public DistributedJob {
 protected:
  void Warm() {
    auto rs = RunJob(Args("warm"), hub_->server->url(), caches_, tmp_.path() / "logs", {}, 180, {}, /*world=*/2);
    for (int r = 0; r < 2; ++r) ASSERT_EQ(rs[r].exit_code, 0) << Dump(rs);
    hub_->server->Stop();
    hub_->server.reset();
  }
  std::vector<std::string> Args(const std::string& tag) {
    return {"load-distributed", kRepo, "--json", (tmp_.path() / "logs" / (tag + "-{rank}.json")).string(),
            "--timeout", "90", "--heartbeat-timeout", "20"};
  }
  static int Count(const std::string& text, const std::string& needle) {
    int n = 0;
    for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
    return n;
  }
  void ExpectCachedLoad(const std::string& endpoint, const std::map<std::string, std::string>& env) {
    auto rs = RunJob(Args("down"), endpoint, caches_, tmp_.path() / "logs", {{0, env}, {1, env}}, 180, {}, 2);
    for (int r = 0; r < 2; ++r) ASSERT_EQ(rs[r].exit_code, 0) << Dump(rs);
    for (int r = 0; r < 2; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      json j = json::parse(Slurp(tmp_.path() / "logs" / ("down-" + std::to_string(r) + ".json")), nullptr, false);
      ASSERT_FALSE(j.is_discarded());
      EXPECT_EQ(j["commit"], commit_);
      const json by_name = hubload::testing::TensorsByName(j);
      ASSERT_EQ(by_name.size(), repo_.tensor_sha256.size());
      for (const auto& [name, sha] : repo_.tensor_sha256) {
        ASSERT_TRUE(by_name.contains(name)) << name;
        EXPECT_EQ(by_name[name]["sha256"], sha) << name;
      }
      int unreachable = 0;
      for (const auto& w : j["warnings"]) {
        const std::string text = w.get<std::string>();
        if (text.find("could not be reached") == std::string::npos) continue;
        ++unreachable;
        EXPECT_NE(text.find(commit_), std::string::npos) << text;
        EXPECT_NE(text.find("'main'"), std::string::npos) << text;
      }
      EXPECT_EQ(unreachable, 1) << j["warnings"].dump();
      EXPECT_EQ(rs[r].err.find("retrying"), std::string::npos) << rs[r].err;
    }
    EXPECT_EQ(Count(rs[0].err, "could not be reached"), 1) << rs[0].err;
    EXPECT_EQ(Count(rs[1].err, "could not be reached"), 0) << rs[1].err;
  }
};

TEST_F(DistributedHubDown, RefusedHubLoadsTheCachedSnapshotWithOneWarning) {
  Warm();
  ExpectCachedLoad(hubload::testing::RefusedUrl(), {});
}

TEST_F(DistributedHubDown, SilentHubLoadsTheCachedSnapshotWithOneWarning) {
  Warm();
  hubload::testing::SilentServer silent;
  ExpectCachedLoad(silent.url(), {{"HF_HUB_ETAG_TIMEOUT", "1"}});
}

// ---- field failure B54: rank-0 prefetch details (two nodes of one rank) -------

// (a) one cache shared by both nodes: each file leaves the server once, both
// ranks name the same snapshot, the cache is complete. (e) the job's
// collective timeout (--timeout 5) is shorter than the throttled download
// (~1.6 MB at 200 kB/s): waiting ranks wait on the owner, not on a collective.
TEST_F(DistributedJob, B54SharedCacheSlowDownloadOneGetPerFileNoTimeout) {
  const std::string shared = caches_[0];
  hub_->server->faults().SetTotalBandwidthBytesPerSec(200000);
  std::vector<std::string> args{"download-distributed", kRepo, "--chunk-bytes", "65536", "--timeout", "5",
                                "--heartbeat-timeout", "20"};
  auto rs = RunJob(args, hub_->server->url(), {shared, shared}, tmp_.path() / "logs", {}, 180, {}, /*world=*/2);
  for (int r = 0; r < 2; ++r) ASSERT_EQ(rs[r].exit_code, 0) << Dump(rs);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(rs[r].out, (fs::path(shared) / kRepoFolder / "snapshots" / commit_).string() + "\n");
  auto sent = BytesPerFile(ReadLog(tmp_.path() / "access.log"), repo_);
  for (const auto& [path, bytes] : repo_.files) EXPECT_EQ(sent[path], bytes.size()) << path << " bytes sent";
  ExpectCompleteCache(shared, repo_, commit_);
  ExpectNoBadFinalBlobs(shared, repo_);
}

// (d) a shard the Hub answers 500 for, persistently: every rank fails naming
// the shard (not a collective timeout), nothing half-written is left.
TEST_F(DistributedJob, B54PersistentServerErrorOnAShardFailsEveryRankNamingIt) {
  const std::string shard = "model-00002-of-00004.safetensors";
  hub_->server->faults().SetStatusForNext(shard, 500, -1);
  auto rs = RunJob({"download-distributed", kRepo, "--timeout", "90", "--heartbeat-timeout", "10"}, hub_->server->url(),
                   caches_, tmp_.path() / "logs", {}, 150, {}, /*world=*/2);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(rs[r].exit_code, 1) << Dump(rs);
    EXPECT_NE(rs[r].err.find(shard), std::string::npos) << "rank " << r << ":\n" << rs[r].err;
    EXPECT_EQ(rs[r].err.find("timed out"), std::string::npos) << "rank " << r << ":\n" << rs[r].err;
  }
  for (const auto& c : caches_) ExpectNoBadFinalBlobs(c, repo_);
}

// (f) node caches seeded with a snapshot that lacks a shard the index names:
// the load fetches that shard (and only it) before any rank loads, and every
// rank gets every tensor.
TEST_F(DistributedJob, B54SnapshotMissingAShardIsCompletedBeforeTheLoad) {
  const std::string missing = "model-00003-of-00004.safetensors";
  auto seed = RunJob({"download-distributed", kRepo, "--exclude", "*00003-of-*", "--timeout", "90",
                      "--heartbeat-timeout", "20"},
                     hub_->server->url(), caches_, tmp_.path() / "logs", {}, 180, {}, /*world=*/2);
  for (int r = 0; r < 2; ++r) ASSERT_EQ(seed[r].exit_code, 0) << Dump(seed);
  for (const auto& c : caches_)
    ASSERT_FALSE(fs::exists(fs::path(c) / kRepoFolder / "snapshots" / commit_ / missing)) << c;
  const size_t log_size = fs::file_size(tmp_.path() / "access.log");
  std::string out = (tmp_.path() / "logs" / "seeded-{rank}.json").string();
  auto rs = RunJob({"load-distributed", kRepo, "--json", out, "--timeout", "90", "--heartbeat-timeout", "20"},
                   hub_->server->url(), caches_, tmp_.path() / "logs", {}, 180, {}, /*world=*/2);
  for (int r = 0; r < 2; ++r) ASSERT_EQ(rs[r].exit_code, 0) << Dump(rs);
  auto sent = BytesPerFile(ReadLog(tmp_.path() / "access.log", log_size), repo_);
  for (const auto& [path, bytes] : repo_.files)
    EXPECT_EQ(sent[path], path == missing ? bytes.size() : 0u) << path << " bytes sent by the load";
  for (int r = 0; r < 2; ++r) {
    json j = json::parse(Slurp(tmp_.path() / "logs" / ("seeded-" + std::to_string(r) + ".json")), nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "rank " << r;
    const json by_name = hubload::testing::TensorsByName(j);
    ASSERT_EQ(by_name.size(), repo_.tensor_sha256.size()) << "rank " << r;
    for (const auto& [name, sha] : repo_.tensor_sha256) EXPECT_EQ(by_name[name]["sha256"], sha) << name;
  }
}

// ---- torch-free parts ---------------------------------------------------------

class EnvGuard {
 public:
  explicit EnvGuard(std::map<std::string, std::string> vars) {
    for (const char* k : {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                          "GROUP_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID",
                          "SLURM_NTASKS_PER_NODE", "JOB_COMPLETION_INDEX"}) {
      const char* v = std::getenv(k);
      if (v) saved_[k] = v;
      ::unsetenv(k);
    }
    for (const auto& [k, v] : vars) ::setenv(k.c_str(), v.c_str(), 1);
    set_ = std::move(vars);
  }
  ~EnvGuard() {
    for (const auto& [k, v] : set_) ::unsetenv(k.c_str());
    for (const auto& [k, v] : saved_) ::setenv(k.c_str(), v.c_str(), 1);
  }

 private:
  std::map<std::string, std::string> saved_, set_;
};

TEST(DistEnv, TorchrunVariables) {
  EnvGuard g({{"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}, {"RANK", "5"}, {"WORLD_SIZE", "8"},
              {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"}});
  auto e = hubload::distributed::EnvFromEnvironment();
  ASSERT_OK(e);
  EXPECT_EQ(e->master_addr, "10.0.0.1");
  EXPECT_EQ(e->master_port, 29500);
  EXPECT_EQ(e->rank, 5);
  EXPECT_EQ(e->world_size, 8);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->local_world_size, 4);
  EXPECT_EQ(e->Node(), 1);  // 5 / 4
}

TEST(DistEnv, SlurmAndKubernetesFallbacks) {
  {
    EnvGuard g({{"MASTER_ADDR", "node001"}, {"MASTER_PORT", "29400"}, {"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"},
                {"SLURM_LOCALID", "1"}, {"SLURM_NTASKS_PER_NODE", "2(x2)"}, {"SLURM_NODEID", "1"}});
    auto e = hubload::distributed::EnvFromEnvironment();
    ASSERT_OK(e);
    EXPECT_EQ(e->rank, 3);
    EXPECT_EQ(e->world_size, 4);
    EXPECT_EQ(e->local_rank, 1);
    EXPECT_EQ(e->local_world_size, 2);
    EXPECT_EQ(e->Node(), 1);
  }
  {
    EnvGuard g({{"MASTER_ADDR", "job-0.svc"}, {"MASTER_PORT", "29500"}, {"JOB_COMPLETION_INDEX", "2"},
                {"WORLD_SIZE", "3"}});
    auto e = hubload::distributed::EnvFromEnvironment();
    ASSERT_OK(e);
    EXPECT_EQ(e->rank, 2);
    EXPECT_EQ(e->local_rank, 0);
    EXPECT_EQ(e->local_world_size, 1);
    EXPECT_EQ(e->Node(), 2);
  }
}

// A subfolder that leaves the repo is refused as on every other path, before
// any rendezvous (it was "no weights found" after the job had started).
TEST(DistributedLoad, ASubfolderThatLeavesTheRepoIsRefusedBeforeTheJobStarts) {
  hubload::testing::TempDir cache;
  hubload::ClientOptions o;
  o.config.endpoint = "http://127.0.0.1:9";
  o.config.cache_dir = cache.str();
  hubload::HubClient client(o);
  hubload::distributed::LoadRequest req;
  req.repo_id = "org/x";
  req.resolve.subfolder = "../..";
  hubload::distributed::DistOptions opt;
  opt.timeout_s = 2;
  auto r = hubload::distributed::Load(client, req, opt, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), hubload::Code::kInvalidArgument) << r.status().ToString();
  EXPECT_NE(r.status().message().find("subfolder"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("../.."), std::string::npos) << r.status().ToString();
}

TEST(DistEnv, BadEnvironmentIsNamed) {
  {
    EnvGuard g({{"MASTER_PORT", "29500"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}});
    auto e = hubload::distributed::EnvFromEnvironment();
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.status().code(), hubload::Code::kInvalidArgument);
    EXPECT_NE(e.status().message().find("MASTER_ADDR"), std::string::npos);
  }
  {
    EnvGuard g({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"}, {"RANK", "2"}, {"WORLD_SIZE", "2"}});
    auto e = hubload::distributed::EnvFromEnvironment();
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.status().message().find("RANK=2"), std::string::npos) << e.status().message();
  }
  {
    EnvGuard g({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "http"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}});
    auto e = hubload::distributed::EnvFromEnvironment();
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.status().message().find("MASTER_PORT='http'"), std::string::npos) << e.status().message();
  }
}

TEST(AssignOwners, BySizeBalancesBytesAndPrefersHolders) {
  using hubload::distributed::DistOptions;
  using hubload::distributed::internal::AssignOwners;
  using hubload::distributed::internal::PlanInput;
  // Sizes 50, 40, 30, 20 on 2 leaders, nobody holds anything: largest first
  // to the least loaded: 50->0, 40->1, 30->1 (40<50), 20->0 (50<70).
  std::vector<PlanInput> f{{50, {false, false}}, {40, {false, false}}, {30, {false, false}}, {20, {false, false}}};
  EXPECT_EQ(AssignOwners(f, 2, DistOptions::Assignment::kBySize), (std::vector<int>{0, 1, 1, 0}));
  EXPECT_EQ(AssignOwners(f, 2, DistOptions::Assignment::kRoundRobin), (std::vector<int>{0, 1, 0, 1}));
  // A file every leader holds needs nobody (-1); a file one leader holds goes to it.
  std::vector<PlanInput> g{{10, {true, true}}, {10, {false, true}}, {10, {false, false}}};
  EXPECT_EQ(AssignOwners(g, 2, DistOptions::Assignment::kBySize), (std::vector<int>{-1, 1, 0}));
}

}  // namespace
