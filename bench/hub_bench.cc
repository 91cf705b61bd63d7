// hub_bench: the Hub client benchmarks of issue #5 and performance.md S1, S2,
// S8, S9, each a ratio to a baseline measured in the same run against the same
// `hubload serve` process (a separate process on 127.0.0.1, resolve → 302 →
// CDN listener). Not a test: it prints a table and exits 0 (1 when a measured
// run failed, 2 when the setup failed).
//
//   hub_bench [--quick] [--reps N] [--dir D] [--only 1,2,3,4,5] [--buffer-kib K]
//
// --buffer-kib sets TransportOptions::buffer_bytes (the receive buffer, hence
// the write size) of every hubload client; default: the library default.
//
//  1. Cold snapshot of 4 × 512 MiB and 16 × 128 MiB (--quick: 4 × 32 MiB,
//     16 × 16 MiB): HubClient::Snapshot (in-process, max_workers 8, default
//     ClientOptions) into a fresh cache vs `curl -s -f -L -Z --parallel-max P`
//     writing the same files (P = min(files, 8), the resolve URLs, redirect
//     followed) vs @huggingface/hub snapshotDownload (tests/js/bench_snapshot.mjs,
//     Xet off; its own timer around the call, so node start-up is excluded).
//  2. S2: one 2 GiB file (--quick: 128 MiB), HubClient::Download with
//     range_threshold_bytes = 0 (one stream) and with ranges (threshold 1 MiB,
//     16 MiB chunks, 4 and 8 ranges) vs a single `curl -o`. The number of GETs
//     carrying Range in the access log shows whether ranges were used.
//  3. Warm revalidation of a cached 100-file repo (4 KiB files) at "main":
//     Snapshot, DownloadFiles, and 100 × Download (one HEAD each), each with a
//     fresh HubClient, vs `curl -s -I URL1 ... URL100` (100 HEADs, one
//     connection). Body bytes of file requests come from the access log.
//  4. Offline (ClientOptions::config.offline) and pinned-commit (40-hex
//     revision) Snapshot and Download of that cached repo: ms per call and
//     requests in the access log during the calls.
//  5. S9: server restarted with --fault-ignore-range; Download of the S2 file
//     with ranges enabled into a fresh cache: bytes the server sent for the file
//     (access log, 2xx GETs) / file size; time vs a single `curl -o`.
//  6. Snapshot of 4 × 64 MiB (--quick: 4 × 16 MiB), uncapped and on a server
//     restarted with --fault-total-bandwidth 150 MB/s (one link shared by all
//     connections): Snapshot with default ClientOptions (download_order kAuto,
//     which is kThroughput for a Snapshot), with download_order kLoadOrder
//     (the order the streaming loaders use), and "parallel files" (the
//     behaviour before the scheduler: one GET per file, 8 files at once:
//     range_threshold 256 MiB, connections pinned to 8) vs curl -Z
//     --parallel-max 8; plus when the first file was complete (on_file_done)
//     and whether files completed in order.
//
// Cold runs (1, 2, 5) start with `sync; echo 3 > /proc/sys/vm/drop_caches`
// (skipped with a note when not permitted); that also drops the server's store
// pages, so both sides read cold. Medians of N reps (default 3); clients are
// interleaved and their order rotated per rep. CPU is user+sys of the client
// (wait4 for curl/node, getrusage(SELF) for the in-process hubload client; the
// server is a separate process and not counted).
//
// Data: random bytes (xoshiro256**), generated once per scratch dir and added
// with `hubload store add`. --dir D keeps the store in D and reuses it on the
// next run; without it a temporary folder is used and removed. The CLI is
// $HUBLOAD_BIN, else ../tools/hubload/hubload next to this binary's folder; the
// JS script is $HUBLOAD_SOURCE_DIR/tests/js/bench_snapshot.mjs (default: the
// source tree this file was compiled from); JS is skipped when node or
// tests/js/node_modules/@huggingface/hub is missing (tools/js-deps.sh).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hubload/hub.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

constexpr uint64_t kMiB = 1ull << 20;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double CpuSelf() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string Fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string LoadAverage() { return Trim(ReadFile("/proc/loadavg")); }

// ---------------------------------------------------------------------------
// Child processes.
// ---------------------------------------------------------------------------

struct ProcResult {
  int exit_code = -1;  // -1: not started or killed by a signal
  double wall_s = 0;
  double cpu_s = 0;    // user + sys of the child (wait4)
  std::string out;     // stdout
  std::string err;     // stderr (last 2000 bytes)
};

pid_t SpawnTo(const std::vector<std::string>& args, const std::string& out_path, const std::string& err_path) {
  std::vector<std::string> a = args;
  std::vector<char*> argv;
  for (auto& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  if (posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// Runs `args` (argv[0] looked up in PATH), stdout captured unless discarded.
ProcResult Run(const std::vector<std::string>& args, const fs::path& scratch, bool keep_stdout = true) {
  ProcResult r;
  const std::string out = keep_stdout ? (scratch / "proc.out").string() : "/dev/null";
  const std::string err = (scratch / "proc.err").string();
  auto t0 = Clock::now();
  pid_t pid = SpawnTo(args, out, err);
  if (pid < 0) {
    r.err = "cannot start " + args[0];
    return r;
  }
  int st = 0;
  rusage ru{};
  while (::wait4(pid, &st, 0, &ru) < 0 && errno == EINTR) {
  }
  r.wall_s = Since(t0);
  r.cpu_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
            static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (keep_stdout) r.out = ReadFile(out);
  r.err = ReadFile(err);
  if (r.err.size() > 2000) r.err = r.err.substr(r.err.size() - 2000);
  return r;
}

bool OnPath(const std::string& prog) {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::stringstream ss(path);
  for (std::string d; std::getline(ss, d, ':');)
    if (!d.empty() && ::access((fs::path(d) / prog).c_str(), X_OK) == 0) return true;
  return false;
}

// `hubload serve ROOT --port 0 --access-log LOG [extra...]` as a child process.
class ServeProcess {
 public:
  ServeProcess() = default;
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;
  ~ServeProcess() { Stop(); }

  // Returns an error message, empty on success; url() is then the endpoint.
  std::string Start(const std::string& cli, const fs::path& root, const fs::path& log, const fs::path& scratch,
                    const std::vector<std::string>& extra) {
    std::vector<std::string> args = {cli, "serve", root.string(), "--port", "0", "--threads", "4",
                                     "--access-log", log.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    // stdout goes to a file (never a pipe that could be closed under it).
    fs::path out = scratch / "serve.out", err = scratch / "serve.err";
    pid_ = SpawnTo(args, out.string(), err.string());
    if (pid_ < 0) return "cannot start " + cli;
    for (int i = 0; i < 300; ++i) {
      std::string s = ReadFile(out);
      auto p = s.find("listening on ");
      auto nl = p == std::string::npos ? std::string::npos : s.find('\n', p);
      if (nl != std::string::npos) {
        url_ = s.substr(p + 13, nl - p - 13);
        return "";
      }
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return "hubload serve exited: " + ReadFile(err);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    Stop();
    return "hubload serve did not print 'listening on' within 30 s";
  }
  void Stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int st = 0;
      ::waitpid(pid_, &st, 0);
      pid_ = -1;
    }
  }
  const std::string& url() const { return url_; }

 private:
  pid_t pid_ = -1;
  std::string url_;
};

// ---------------------------------------------------------------------------
// Access log (one JSON line per request: method, path, status, range, bytes,
// listener "cdn" for the CDN listener).
// ---------------------------------------------------------------------------

struct LogStats {
  int requests = 0, heads = 0, gets = 0, range_gets = 0;
  uint64_t bytes = 0;                // every body byte sent (API JSON included)
  uint64_t file_bytes = 0;           // body bytes of /resolve/ and CDN requests
  uint64_t file_get_2xx_bytes = 0;   // same, 2xx GETs only
};

uint64_t LogMark(const fs::path& log) {
  std::error_code ec;
  auto n = fs::file_size(log, ec);
  return ec ? 0 : n;
}

// Requests logged from byte `from` on. Waits 100 ms first: the server writes
// the line after the response, so the client may be done before it.
LogStats LogSince(const fs::path& log, uint64_t from) {
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  LogStats s;
  std::ifstream in(log);
  in.seekg(static_cast<std::streamoff>(from));
  for (std::string line; std::getline(in, line);) {
    auto j = json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    std::string method = j.value("method", "");
    std::string path = j.value("path", "");
    int status = j.value("status", 0);
    uint64_t bytes = j.value("bytes", uint64_t{0});
    bool file = path.find("/resolve/") != std::string::npos || j.value("listener", "") == "cdn";
    s.requests++;
    s.bytes += bytes;
    if (method == "HEAD") s.heads++;
    if (method == "GET") {
      s.gets++;
      if (j.contains("range") && j["range"].is_string()) s.range_gets++;
    }
    if (file) {
      s.file_bytes += bytes;
      if (method == "GET" && status >= 200 && status < 300) s.file_get_2xx_bytes += bytes;
    }
  }
  return s;
}

// ---------------------------------------------------------------------------
// Data.
// ---------------------------------------------------------------------------

// xoshiro256** (Blackman & Vigna), seeded with splitmix64.
struct Xoshiro {
  uint64_t s[4];
  explicit Xoshiro(uint64_t seed) {
    for (auto& x : s) {
      seed += 0x9e3779b97f4a7c15ull;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      x = z ^ (z >> 31);
    }
  }
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t Next() {
    uint64_t r = Rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = Rotl(s[3], 45);
    return r;
  }
};

bool WriteRandomFile(const fs::path& p, uint64_t size, uint64_t seed) {
  fs::create_directories(p.parent_path());
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return false;
  Xoshiro rng(seed);
  std::vector<uint64_t> buf(4 * kMiB / 8);
  bool ok = true;
  for (uint64_t done = 0; done < size && ok;) {
    for (auto& x : buf) x = rng.Next();
    size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size() * 8, size - done));
    const char* d = reinterpret_cast<const char*>(buf.data());
    for (size_t w = 0; w < n;) {
      ssize_t k = ::write(fd, d + w, n - w);
      if (k <= 0) {
        ok = false;
        break;
      }
      w += static_cast<size_t>(k);
    }
    done += n;
  }
  return ::close(fd) == 0 && ok;
}

struct RepoSpec {
  std::string id;
  std::vector<std::pair<std::string, uint64_t>> files;  // path in repo, bytes
  std::string commit;
  uint64_t total() const {
    uint64_t t = 0;
    for (auto& f : files) t += f.second;
    return t;
  }
};

// Creates (or reuses, when the marker matches) repo `spec.id` in `store`.
std::string EnsureRepo(RepoSpec& spec, const std::string& cli, const fs::path& work) {
  fs::path store = work / "store";
  fs::path marker = work / "markers" / (std::string(spec.id).replace(spec.id.find('/'), 1, "--") + ".json");
  json want = json::array();
  for (auto& f : spec.files) want.push_back({f.first, f.second});
  if (fs::exists(marker)) {
    auto j = json::parse(ReadFile(marker), nullptr, false);
    if (!j.is_discarded() && j.value("files", json()) == want) {
      spec.commit = j.value("commit", "");
      std::fprintf(stderr, "hub_bench: reusing %s (%s)\n", spec.id.c_str(), spec.commit.c_str());
      return "";
    }
  }
  std::fprintf(stderr, "hub_bench: generating %s (%.0f MiB)\n", spec.id.c_str(),
               static_cast<double>(spec.total()) / kMiB);
  fs::path src = work / "src";
  fs::remove_all(src);
  uint64_t seed = std::hash<std::string>{}(spec.id);
  for (auto& f : spec.files)
    if (!WriteRandomFile(src / f.first, f.second, seed++)) return "cannot write " + (src / f.first).string();
  fs::create_directories(store);
  auto r = Run({cli, "store", "add", store.string(), spec.id, src.string()}, work);
  fs::remove_all(src);
  spec.commit = Trim(r.out);
  if (r.exit_code != 0 || spec.commit.size() != 40) return "hubload store add " + spec.id + " failed: " + r.err;
  fs::create_directories(marker.parent_path());
  std::ofstream(marker) << json{{"commit", spec.commit}, {"files", want}}.dump() << "\n";
  return "";
}

// ---------------------------------------------------------------------------
// Results.
// ---------------------------------------------------------------------------

struct Row {
  std::string scenario, run;
  std::string time;   // median (and spread)
  std::string cpu;
  std::string ratio;
  std::string notes;
};

struct Samples {
  std::vector<double> wall, cpu;
  std::string error;  // first failure, empty when every run succeeded
  void Add(double w, double c) {
    wall.push_back(w);
    cpu.push_back(c);
  }
  bool ok() const { return error.empty() && !wall.empty(); }
  double median() const { return Median(wall); }
  std::string TimeS() const {
    if (!ok()) return "failed";
    auto [mn, mx] = std::minmax_element(wall.begin(), wall.end());
    return Fmt("%.3f s", median()) + " (" + Fmt("%.3f", *mn) + "–" + Fmt("%.3f", *mx) + ")";
  }
  std::string TimeMs() const {
    if (!ok()) return "failed";
    auto [mn, mx] = std::minmax_element(wall.begin(), wall.end());
    return Fmt("%.1f ms", median() * 1e3) + " (" + Fmt("%.1f", *mn * 1e3) + "–" + Fmt("%.1f", *mx * 1e3) + ")";
  }
  std::string Cpu() const { return ok() ? Fmt("%.2f s", Median(cpu)) : "—"; }
  std::string CpuMs() const { return ok() ? Fmt("%.1f ms", Median(cpu) * 1e3) : "—"; }
};

std::string Ratio(const Samples& a, const Samples& base) {
  if (!a.ok() || !base.ok() || base.median() <= 0) return "—";
  return Fmt("%.2fx", a.median() / base.median());
}

// Ratios that the bimodal medians of a few reps do not swing: the median of
// the per-rep ratios (rep k of `a` against rep k of `base`, run interleaved)
// and fastest against fastest.
std::string PairedRatios(const Samples& a, const Samples& base) {
  if (!a.ok() || !base.ok() || a.wall.size() != base.wall.size()) return "per rep —";
  std::vector<double> r;
  for (size_t k = 0; k < a.wall.size(); ++k) r.push_back(a.wall[k] / std::max(1e-9, base.wall[k]));
  const double fastest = *std::min_element(a.wall.begin(), a.wall.end()) /
                         std::max(1e-9, *std::min_element(base.wall.begin(), base.wall.end()));
  return Fmt("per rep median %.2fx", Median(r)) + Fmt(", fastest/fastest %.2fx", fastest);
}

struct Bench {
  std::string cli, node_script;
  bool quick = false, js = false, drop_ok = true, drop_tried = false;
  int reps = 3;
  size_t buffer_bytes = 0;  // --buffer-kib; 0 = TransportOptions default
  fs::path work, scratch, log;
  std::string endpoint;
  std::vector<Row> rows;
  std::vector<std::string> notes;
  bool failed = false;

  // sync; echo 3 > /proc/sys/vm/drop_caches (once refused, only sync).
  void ColdPrepare() {
    ::sync();
    if (!drop_ok) return;
    int fd = ::open("/proc/sys/vm/drop_caches", O_WRONLY);
    bool ok = fd >= 0 && ::write(fd, "3", 1) == 1;
    int err = errno;
    if (fd >= 0) ::close(fd);
    if (!ok) {
      drop_ok = false;
      notes.push_back("drop_caches not permitted (" + std::string(std::strerror(err)) +
                      "): cold runs start from an empty cache folder but a warm page cache");
    }
    drop_tried = true;
  }

  void Fail(Samples& s, const std::string& what) {
    std::fprintf(stderr, "hub_bench: FAILED %s\n", what.c_str());
    if (s.error.empty()) s.error = what;
    failed = true;
  }

  fs::path FreshDir(const std::string& name) {
    fs::path d = scratch / name;
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }

  std::string ResolveUrl(const RepoSpec& r, const std::string& path, const std::string& rev = "main") const {
    return endpoint + "/" + r.id + "/resolve/" + hubload::EncodeRevision(rev) + "/" + hubload::EncodePath(path);
  }

  hubload::ClientOptions Options(const fs::path& cache) const {
    hubload::ClientOptions o;
    o.config.endpoint = endpoint;
    o.config.cache_dir = cache.string();
    o.max_workers = 8;
    if (buffer_bytes > 0) o.transport_options.buffer_bytes = buffer_bytes;
    return o;
  }

  // Sizes of the files of `r` under `folder` equal the spec.
  static std::string CheckFolder(const RepoSpec& r, const fs::path& folder) {
    for (auto& f : r.files) {
      std::error_code ec;
      auto n = fs::file_size(folder / f.first, ec);
      if (ec || n != f.second) return (folder / f.first).string() + ": wrong or missing";
    }
    return "";
  }

  // ---- 1. cold snapshot ----
  void ColdSnapshot(const RepoSpec& r, const std::string& label) {
    const int parallel = static_cast<int>(std::min<size_t>(r.files.size(), 8));
    Samples hl, curl, jsr;
    int hl_range_gets = 0, hl_gets = 0;
    enum Client { kCurl, kHubload, kJs };
    std::vector<Client> order = {kCurl, kHubload};
    if (js) order.push_back(kJs);
    for (int rep = 0; rep < reps; ++rep) {
      if (rep > 0) std::rotate(order.begin(), order.begin() + 1, order.end());
      for (Client c : order) {
        fs::path out = FreshDir("cold");
        ColdPrepare();
        if (c == kCurl) {
          std::vector<std::string> args = {"curl", "-s", "-f", "-L", "-Z", "--parallel-max", std::to_string(parallel)};
          for (auto& f : r.files) {
            fs::path dst = out / f.first;
            fs::create_directories(dst.parent_path());
            args.insert(args.end(), {"-o", dst.string(), ResolveUrl(r, f.first)});
          }
          auto p = Run(args, scratch);
          std::string bad = p.exit_code == 0 ? CheckFolder(r, out) : "curl exit " + std::to_string(p.exit_code);
          if (bad.empty()) curl.Add(p.wall_s, p.cpu_s);
          else Fail(curl, label + " curl: " + bad + " " + p.err);
        } else if (c == kHubload) {
          hubload::HubClient client(Options(out));
          hubload::SnapshotRequest req;
          req.repo_id = r.id;
          req.max_workers = 8;
          uint64_t mark = LogMark(log);
          double cpu0 = CpuSelf();
          auto t0 = Clock::now();
          auto res = client.Snapshot(req);
          double wall = Since(t0), cpu = CpuSelf() - cpu0;
          std::string bad = res.ok() ? CheckFolder(r, *res) : res.status().ToString();
          if (bad.empty()) {
            hl.Add(wall, cpu);
            auto st = LogSince(log, mark);
            hl_range_gets = st.range_gets;
            hl_gets = st.gets;
          } else {
            Fail(hl, label + " hubload: " + bad);
          }
        } else {
          auto p = Run({"node", node_script, endpoint, r.id, out.string()}, scratch);
          auto j = json::parse(p.out, nullptr, false);
          std::string bad = p.exit_code != 0 || j.is_discarded() ? "node exit " + std::to_string(p.exit_code)
                                                                 : CheckFolder(r, j.value("folder", ""));
          if (bad.empty()) jsr.Add(j.value("seconds", 0.0), p.cpu_s);
          else Fail(jsr, label + " JS: " + bad + " " + p.err);
        }
        fs::remove_all(out);
      }
    }
    std::string sc = "1 cold snapshot " + label;
    double gb = static_cast<double>(r.total()) / 1e9;
    auto rate = [&](const Samples& s) { return s.ok() ? Fmt("%.0f MB/s", gb * 1e3 / s.median()) : ""; };
    rows.push_back({sc, "curl -Z --parallel-max " + std::to_string(parallel) + " (baseline)", curl.TimeS(), curl.Cpu(),
                    "1", rate(curl)});
    rows.push_back({sc, "hubload Snapshot, 8 workers", hl.TimeS(), hl.Cpu(),
                    Ratio(hl, curl) + " of curl" + (js ? ", " + Ratio(hl, jsr) + " of JS" : ""),
                    rate(hl) + "; " + std::to_string(hl_gets) + " GETs, " + std::to_string(hl_range_gets) +
                        " with Range (last rep)"});
    if (js)
      rows.push_back({sc, "JS snapshotDownload (Xet off)", jsr.TimeS(), jsr.Cpu(), Ratio(jsr, curl) + " of curl",
                      rate(jsr) + "; CPU includes node start-up"});
  }

  // One cold Download of r.files[0] with `o`; bytes and ranges from the log.
  void ColdDownload(const RepoSpec& r, const std::function<void(hubload::ClientOptions&)>& tune, Samples* s,
                    LogStats* st, const std::string& label) {
    fs::path out = FreshDir("cold");
    ColdPrepare();
    auto o = Options(out);
    tune(o);
    hubload::HubClient client(o);
    hubload::FileRequest req;
    req.repo_id = r.id;
    req.filename = r.files[0].first;
    uint64_t mark = LogMark(log);
    double cpu0 = CpuSelf();
    auto t0 = Clock::now();
    auto res = client.Download(req);
    double wall = Since(t0), cpu = CpuSelf() - cpu0;
    std::error_code ec;
    std::string bad = !res.ok() ? res.status().ToString()
                      : fs::file_size(*res, ec) != r.files[0].second ? "wrong size"
                                                                     : "";
    if (bad.empty()) {
      s->Add(wall, cpu);
      *st = LogSince(log, mark);
    } else {
      Fail(*s, label + ": " + bad);
    }
    fs::remove_all(out);
  }

  Samples CurlOne(const RepoSpec& r, const std::string& label) {
    Samples s;
    fs::path out = FreshDir("cold");
    ColdPrepare();
    auto p = Run({"curl", "-s", "-f", "-L", "-o", (out / "file").string(), ResolveUrl(r, r.files[0].first)}, scratch);
    std::error_code ec;
    if (p.exit_code == 0 && fs::file_size(out / "file", ec) == r.files[0].second) s.Add(p.wall_s, p.cpu_s);
    else Fail(s, label + " curl exit " + std::to_string(p.exit_code) + " " + p.err);
    fs::remove_all(out);
    return s;
  }

  static void Merge(Samples& into, const Samples& s) {
    into.wall.insert(into.wall.end(), s.wall.begin(), s.wall.end());
    into.cpu.insert(into.cpu.end(), s.cpu.begin(), s.cpu.end());
    if (into.error.empty()) into.error = s.error;
  }

  // ---- 2. S2: one large file, ranges vs one stream ----
  void LargeFile(const RepoSpec& r) {
    struct Variant {
      std::string name;
      uint64_t threshold;
      int ranges;
      Samples s;
      LogStats st;
    };
    std::vector<Variant> v = {{"hubload Download, one stream (range_threshold_bytes 0)", 0, 1, {}, {}},
                              {"hubload Download, 4 ranges × 16 MiB", kMiB, 4, {}, {}},
                              {"hubload Download, 8 ranges × 16 MiB", kMiB, 8, {}, {}}};
    Samples curl;
    for (int rep = 0; rep < reps; ++rep) {
      // Rotate curl among the variants.
      size_t n = v.size() + 1, first = static_cast<size_t>(rep) % n;
      for (size_t k = 0; k < n; ++k) {
        size_t i = (first + k) % n;
        if (i == v.size()) {
          Merge(curl, CurlOne(r, "S2"));
          continue;
        }
        ColdDownload(
            r,
            [&](hubload::ClientOptions& o) {
              o.range_threshold_bytes = v[i].threshold;
              o.max_ranges_per_file = v[i].ranges;
              o.range_chunk_bytes = 16 * kMiB;
            },
            &v[i].s, &v[i].st, "S2 " + v[i].name);
      }
    }
    std::string sc = "2 S2 one " + std::to_string(r.files[0].second / kMiB) + " MiB file";
    double gb = static_cast<double>(r.files[0].second) / 1e9;
    auto rate = [&](const Samples& s) { return s.ok() ? Fmt("%.0f MB/s", gb * 1e3 / s.median()) : ""; };
    rows.push_back({sc, "curl -o (one stream, baseline)", curl.TimeS(), curl.Cpu(), "1", rate(curl)});
    for (auto& x : v) {
      std::string thr = x.s.ok() && curl.ok() ? Fmt("%.2fx", curl.median() / x.s.median()) : "—";
      rows.push_back({sc, x.name, x.s.TimeS(), x.s.Cpu(), thr + " curl's throughput",
                      rate(x.s) + "; " + std::to_string(x.st.gets) + " GETs, " + std::to_string(x.st.range_gets) +
                          " with Range (last rep)"});
    }
  }

  // ---- 3. warm revalidation, 4. offline / pinned ----
  void Warm(const RepoSpec& r, bool revalidate, bool lookups) {
    fs::path cache = FreshDir("warm");
    {
      hubload::HubClient client(Options(cache));
      hubload::SnapshotRequest req;
      req.repo_id = r.id;
      auto res = client.Snapshot(req);
      if (!res.ok()) {
        Samples s;
        Fail(s, "warm-up snapshot: " + res.status().ToString());
        return;
      }
    }
    std::vector<std::string> paths;
    for (auto& f : r.files) paths.push_back(f.first);
    const int warm_reps = std::max(reps, 11);
    if (revalidate) {
      Samples curl, snap, files, each;
      LogStats curl_st, snap_st, files_st, each_st;
      for (int rep = 0; rep < warm_reps; ++rep) {
        for (int k = 0; k < 4; ++k) {
          int which = (rep + k) % 4;
          uint64_t mark = LogMark(log);
          if (which == 0) {
            std::vector<std::string> args = {"curl", "-s", "-f", "-I"};
            for (auto& p : paths) args.push_back(ResolveUrl(r, p));
            auto pr = Run(args, scratch, /*keep_stdout=*/false);
            if (pr.exit_code == 0) curl.Add(pr.wall_s, pr.cpu_s);
            else Fail(curl, "curl HEADs exit " + std::to_string(pr.exit_code) + " " + pr.err);
            curl_st = LogSince(log, mark);
            continue;
          }
          hubload::HubClient client(Options(cache));
          double cpu0 = CpuSelf();
          auto t0 = Clock::now();
          std::string bad;
          if (which == 1) {
            hubload::SnapshotRequest req;
            req.repo_id = r.id;
            auto res = client.Snapshot(req);
            if (!res.ok()) bad = res.status().ToString();
          } else if (which == 2) {
            auto st = client.DownloadFiles(r.id, "main", hubload::RepoType::kModel, paths, {});
            if (!st.ok()) bad = st.ToString();
          } else {
            for (auto& p : paths) {
              hubload::FileRequest req;
              req.repo_id = r.id;
              req.filename = p;
              auto res = client.Download(req);
              if (!res.ok()) {
                bad = res.status().ToString();
                break;
              }
            }
          }
          double wall = Since(t0), cpu = CpuSelf() - cpu0;
          Samples& s = which == 1 ? snap : which == 2 ? files : each;
          LogStats& st = which == 1 ? snap_st : which == 2 ? files_st : each_st;
          if (bad.empty()) s.Add(wall, cpu);
          else Fail(s, "warm revalidation: " + bad);
          st = LogSince(log, mark);
        }
      }
      auto req_note = [](const LogStats& st) {
        return std::to_string(st.requests) + " requests (" + std::to_string(st.heads) + " HEAD), file body bytes " +
               std::to_string(st.file_bytes) + ", API JSON bytes " + std::to_string(st.bytes - st.file_bytes);
      };
      std::string sc = "3 warm revalidation, " + std::to_string(r.files.size()) + " files at main";
      rows.push_back({sc, "curl -I × " + std::to_string(paths.size()) + ", one connection (baseline)", curl.TimeMs(),
                      curl.CpuMs(), "1", req_note(curl_st) + "; includes curl start-up"});
      rows.push_back({sc, "hubload Snapshot", snap.TimeMs(), snap.CpuMs(), Ratio(snap, curl), req_note(snap_st)});
      rows.push_back({sc, "hubload DownloadFiles", files.TimeMs(), files.CpuMs(), Ratio(files, curl), req_note(files_st)});
      rows.push_back({sc, "hubload Download × " + std::to_string(paths.size()) + " (hf_hub_download style)",
                      each.TimeMs(), each.CpuMs(), Ratio(each, curl), req_note(each_st)});
    }
    if (lookups) {
      const int calls = 200;
      auto measure = [&](bool offline, const std::string& revision, bool snapshot, const std::string& name) {
        auto o = Options(cache);
        o.config.offline = offline;
        hubload::HubClient client(o);
        Samples s;
        uint64_t mark = LogMark(log);
        for (int i = 0; i < calls; ++i) {
          double cpu0 = CpuSelf();
          auto t0 = Clock::now();
          std::string bad;
          if (snapshot) {
            hubload::SnapshotRequest req;
            req.repo_id = r.id;
            req.revision = revision;
            auto res = client.Snapshot(req);
            if (!res.ok()) bad = res.status().ToString();
          } else {
            hubload::FileRequest req;
            req.repo_id = r.id;
            req.revision = revision;
            req.filename = paths[static_cast<size_t>(i) % paths.size()];
            auto res = client.Download(req);
            if (!res.ok()) bad = res.status().ToString();
          }
          double wall = Since(t0), cpu = CpuSelf() - cpu0;
          if (!bad.empty()) {
            Fail(s, name + ": " + bad);
            break;
          }
          s.Add(wall, cpu);
        }
        auto st = LogSince(log, mark);
        std::string mx = s.ok() ? Fmt("%.2f ms", *std::max_element(s.wall.begin(), s.wall.end()) * 1e3) : "—";
        rows.push_back({"4 lookups, cached " + std::to_string(r.files.size()) + "-file repo", name,
                        s.ok() ? Fmt("%.3f ms", s.median() * 1e3) + " per call" : "failed",
                        s.ok() ? Fmt("%.3f ms", Median(s.cpu) * 1e3) : "—", "—",
                        std::to_string(st.requests) + " requests in " + std::to_string(calls) + " calls; max " + mx});
      };
      measure(true, "main", true, "offline Snapshot(main)");
      measure(false, r.commit, true, "pinned-commit Snapshot(<40-hex>)");
      measure(true, "main", false, "offline Download(main, one file)");
      measure(false, r.commit, false, "pinned-commit Download(<40-hex>, one file)");
    }
    fs::remove_all(cache);
  }

  // ---- 6. snapshot: download orders ----
  void SnapshotOrders(const RepoSpec& r, const std::string& label) {
    struct Variant {
      std::string name;
      bool today;  // previous behaviour: parallel whole files
      bool load_order;
    };
    // The baseline, parallel files, is the last one.
    const std::vector<Variant> variants = {
        {"hubload Snapshot, default (download_order auto = throughput)", false, false},
        {"hubload Snapshot, download_order load order", false, true},
        {"hubload Snapshot, parallel files (previous behaviour)", true, false}};
    const size_t base = variants.size() - 1;
    Samples curl;
    std::vector<Samples> hl(variants.size());
    std::vector<double> first_done(variants.size()), in_order(variants.size());
    for (int rep = 0; rep < reps; ++rep) {
      for (size_t v = 0; v <= variants.size(); ++v) {
        size_t which = (v + static_cast<size_t>(rep)) % (variants.size() + 1);
        fs::path out = FreshDir("order");
        ColdPrepare();
        if (which == variants.size()) {
          std::vector<std::string> args = {"curl", "-s", "-f", "-L", "-Z", "--parallel-max", "8"};
          for (auto& f : r.files) args.insert(args.end(), {"-o", (out / f.first).string(), ResolveUrl(r, f.first)});
          auto p = Run(args, scratch);
          std::string bad = p.exit_code == 0 ? CheckFolder(r, out) : "curl exit " + std::to_string(p.exit_code);
          if (bad.empty()) curl.Add(p.wall_s, p.cpu_s);
          else Fail(curl, label + " curl: " + bad);
        } else {
          auto o = Options(out);
          if (variants[which].load_order) o.download_order = hubload::ClientOptions::DownloadOrder::kLoadOrder;
          if (variants[which].today) {
            o.range_threshold_bytes = 256 * kMiB;
            o.max_ranges_per_file = 4;
            o.connections = 8;
          }
          hubload::HubClient client(o);
          hubload::SnapshotRequest req;
          req.repo_id = r.id;
          std::mutex mu;
          std::vector<std::pair<std::string, double>> done;
          auto t0 = Clock::now();
          req.callbacks.on_file_done = [&](const std::string& p, const std::string&) {
            std::lock_guard<std::mutex> l(mu);
            done.emplace_back(p, Since(t0));
          };
          double cpu0 = CpuSelf();
          auto res = client.Snapshot(req);
          double wall = Since(t0), cpu = CpuSelf() - cpu0;
          std::string bad = res.ok() ? CheckFolder(r, *res) : res.status().ToString();
          if (!bad.empty() || done.size() != r.files.size()) {
            Fail(hl[which], label + " " + variants[which].name + ": " + bad);
          } else {
            hl[which].Add(wall, cpu);
            first_done[which] = done.front().second;
            bool ordered = true;
            for (size_t i = 0; i < done.size(); ++i) ordered = ordered && done[i].first == r.files[i].first;
            in_order[which] += ordered ? 1 : 0;
          }
        }
        fs::remove_all(out);
      }
    }
    std::string sc = "6 snapshot " + label;
    rows.push_back({sc, "curl -Z --parallel-max 8 (baseline)", curl.TimeS(), curl.Cpu(), "1", ""});
    for (size_t v = 0; v < variants.size(); ++v) {
      std::string ratio = Ratio(hl[v], curl) + " of curl";
      if (v != base) ratio += ", " + Ratio(hl[v], hl[base]) + " of parallel files (" + PairedRatios(hl[v], hl[base]) + ")";
      rows.push_back({sc, variants[v].name, hl[v].TimeS(), hl[v].Cpu(), ratio,
                      Fmt("first file done at %.2f s", first_done[v]) + " (last rep); in order in " +
                          std::to_string(static_cast<int>(in_order[v])) + "/" + std::to_string(reps) + " reps"});
    }
  }

  // ---- 5. S9: server ignoring Range ----
  void IgnoreRange(const RepoSpec& r) {
    Samples hl, curl;
    LogStats st;
    double worst = 0;
    for (int rep = 0; rep < reps; ++rep) {
      auto run_hl = [&] {
        LogStats one;
        size_t before = hl.wall.size();
        ColdDownload(
            r,
            [](hubload::ClientOptions& o) {
              o.range_threshold_bytes = kMiB;
              o.max_ranges_per_file = 4;
              o.range_chunk_bytes = 16 * kMiB;
            },
            &hl, &one, "S9 hubload");
        if (hl.wall.size() > before) {
          st = one;
          worst = std::max(worst, static_cast<double>(one.file_get_2xx_bytes) / static_cast<double>(r.files[0].second));
        }
      };
      if (rep % 2 == 0) {
        run_hl();
        Merge(curl, CurlOne(r, "S9"));
      } else {
        Merge(curl, CurlOne(r, "S9"));
        run_hl();
      }
    }
    std::string sc = "5 S9 server ignores Range, " + std::to_string(r.files[0].second / kMiB) + " MiB file";
    rows.push_back({sc, "curl -o (baseline)", curl.TimeS(), curl.Cpu(), "1", ""});
    rows.push_back({sc, "hubload Download, ranges on (4 × 16 MiB)", hl.TimeS(), hl.Cpu(),
                    Ratio(hl, curl) + " time; bytes " + Fmt("%.4fx", worst) + " file size (worst rep)",
                    std::to_string(st.file_get_2xx_bytes) + " bytes sent for " + std::to_string(r.files[0].second) +
                        "; " + std::to_string(st.gets) + " GETs, " + std::to_string(st.range_gets) +
                        " with Range (last rep)"});
  }
};

void PrintTable(const Bench& b) {
  std::printf("\n| scenario | run | median time (min–max) | CPU (median) | ratio | notes |\n|---|---|---|---|---|---|\n");
  for (auto& r : b.rows)
    std::printf("| %s | %s | %s | %s | %s | %s |\n", r.scenario.c_str(), r.run.c_str(), r.time.c_str(), r.cpu.c_str(),
                r.ratio.c_str(), r.notes.c_str());
  for (auto& n : b.notes) std::printf("\nnote: %s\n", n.c_str());
}

int Usage() {
  std::fprintf(stderr, "usage: hub_bench [--quick] [--reps N] [--dir D] [--only 1,2,3,4,5,6] [--buffer-kib K]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Bench b;
  std::string dir;
  std::set<int> only = {1, 2, 3, 4, 5, 6};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") {
      b.quick = true;
    } else if (a == "--reps" && i + 1 < argc) {
      b.reps = std::atoi(argv[++i]);
      if (b.reps < 1) return Usage();
    } else if (a == "--buffer-kib" && i + 1 < argc) {
      b.buffer_bytes = static_cast<size_t>(std::atol(argv[++i])) * 1024;
      if (b.buffer_bytes == 0) return Usage();
    } else if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else if (a == "--only" && i + 1 < argc) {
      only.clear();
      std::stringstream ss(argv[++i]);
      for (std::string t; std::getline(ss, t, ',');) only.insert(std::atoi(t.c_str()));
    } else {
      return Usage();
    }
  }
  if (const char* e = std::getenv("HUBLOAD_BIN")) {
    b.cli = e;
  } else {
    b.cli = (fs::canonical("/proc/self/exe").parent_path().parent_path() / "tools" / "hubload" / "hubload").string();
  }
  if (!fs::exists(b.cli)) {
    std::fprintf(stderr, "hub_bench: hubload CLI not found at %s (set HUBLOAD_BIN)\n", b.cli.c_str());
    return 2;
  }
  if (!OnPath("curl")) {
    std::fprintf(stderr, "hub_bench: curl is not on PATH (it is the baseline)\n");
    return 2;
  }
  fs::path src_dir = std::getenv("HUBLOAD_SOURCE_DIR") ? fs::path(std::getenv("HUBLOAD_SOURCE_DIR"))
                                                       : fs::path(__FILE__).parent_path().parent_path();
  b.node_script = (src_dir / "tests" / "js" / "bench_snapshot.mjs").string();
  b.js = OnPath("node") && fs::exists(b.node_script) &&
         fs::exists(src_dir / "tests" / "js" / "node_modules" / "@huggingface" / "hub");
  if (!b.js)
    b.notes.push_back("JS baseline skipped: needs node on PATH, " + b.node_script +
                      " and tests/js/node_modules (tools/js-deps.sh)");

  bool temp = dir.empty();
  if (temp) {
    std::string t = (fs::temp_directory_path() / "hubload-hubbench-XXXXXX").string();
    if (::mkdtemp(t.data()) == nullptr) return 2;
    b.work = t;
  } else {
    b.work = fs::absolute(dir);
    fs::create_directories(b.work);
  }
  b.scratch = b.work / "run";
  fs::create_directories(b.scratch);
  b.log = b.work / "access.log";
  std::fprintf(stderr, "hub_bench: work dir %s, load average %s\n", b.work.c_str(), LoadAverage().c_str());
  const std::string load_start = LoadAverage();
  auto t_start = Clock::now();

  // Repos.
  auto shards = [](const std::string& id, int n, uint64_t mib) {
    RepoSpec r;
    r.id = id;
    char name[64];
    for (int i = 1; i <= n; ++i) {
      std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", i, n);
      r.files.emplace_back(name, mib * kMiB);
    }
    return r;
  };
  const uint64_t big_mib = b.quick ? 32 : 512, small_mib = b.quick ? 16 : 128, one_mib = b.quick ? 128 : 2048;
  RepoSpec s1a = shards("bench/cold-4x" + std::to_string(big_mib) + "m", 4, big_mib);
  RepoSpec s1b = shards("bench/cold-16x" + std::to_string(small_mib) + "m", 16, small_mib);
  RepoSpec s2 = shards("bench/one-" + std::to_string(one_mib) + "m", 1, one_mib);
  s2.files[0].first = "model.safetensors";
  RepoSpec s3;
  s3.id = "bench/small-100";
  for (int i = 0; i < 100; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "part%d/file-%03d.json", i / 25, i);
    s3.files.emplace_back(name, 4096);
  }
  const uint64_t order_mib = b.quick ? 16 : 64;
  RepoSpec s6 = shards("bench/order-4x" + std::to_string(order_mib) + "m", 4, order_mib);
  std::vector<RepoSpec*> needed;
  if (only.count(6)) needed.push_back(&s6);
  if (only.count(1)) needed.insert(needed.end(), {&s1a, &s1b});
  if (only.count(2) || only.count(5)) needed.push_back(&s2);
  if (only.count(3) || only.count(4)) needed.push_back(&s3);
  for (RepoSpec* r : needed) {
    std::string err = EnsureRepo(*r, b.cli, b.work);
    if (!err.empty()) {
      std::fprintf(stderr, "hub_bench: %s\n", err.c_str());
      return 2;
    }
  }

  {
    ServeProcess server;
    if (only.count(1) || only.count(2) || only.count(3) || only.count(4) || only.count(6)) {
      std::string err = server.Start(b.cli, b.work / "store", b.log, b.scratch, {});
      if (!err.empty()) {
        std::fprintf(stderr, "hub_bench: %s\n", err.c_str());
        return 2;
      }
      b.endpoint = server.url();
      std::fprintf(stderr, "hub_bench: server %s\n", b.endpoint.c_str());
    }
    if (only.count(1)) {
      std::fprintf(stderr, "hub_bench: 1. cold snapshot %s\n", s1a.id.c_str());
      b.ColdSnapshot(s1a, "4 × " + std::to_string(big_mib) + " MiB");
      std::fprintf(stderr, "hub_bench: 1. cold snapshot %s\n", s1b.id.c_str());
      b.ColdSnapshot(s1b, "16 × " + std::to_string(small_mib) + " MiB");
    }
    if (only.count(2)) {
      std::fprintf(stderr, "hub_bench: 2. S2 %s\n", s2.id.c_str());
      b.LargeFile(s2);
    }
    if (only.count(3) || only.count(4)) {
      std::fprintf(stderr, "hub_bench: 3/4. warm %s\n", s3.id.c_str());
      b.Warm(s3, only.count(3) > 0, only.count(4) > 0);
    }
    if (only.count(6)) {
      std::fprintf(stderr, "hub_bench: 6. snapshot %s, uncapped\n", s6.id.c_str());
      b.SnapshotOrders(s6, "4 × " + std::to_string(order_mib) + " MiB, uncapped");
    }
    server.Stop();
    if (only.count(6)) {
      std::fprintf(stderr, "hub_bench: 6. snapshot %s, total cap 150 MB/s\n", s6.id.c_str());
      std::string err = server.Start(b.cli, b.work / "store", b.log, b.scratch, {"--fault-total-bandwidth", "150000000"});
      if (!err.empty()) {
        std::fprintf(stderr, "hub_bench: %s\n", err.c_str());
        return 2;
      }
      b.endpoint = server.url();
      b.SnapshotOrders(s6, "4 × " + std::to_string(order_mib) + " MiB, one link of 150 MB/s");
      server.Stop();
    }
    if (only.count(5)) {
      std::fprintf(stderr, "hub_bench: 5. S9 --fault-ignore-range %s\n", s2.id.c_str());
      std::string err = server.Start(b.cli, b.work / "store", b.log, b.scratch, {"--fault-ignore-range"});
      if (!err.empty()) {
        std::fprintf(stderr, "hub_bench: %s\n", err.c_str());
        return 2;
      }
      b.endpoint = server.url();
      b.IgnoreRange(s2);
      server.Stop();
    }
  }
  if (!b.drop_tried && (only.count(1) || only.count(2) || only.count(5))) b.notes.push_back("drop_caches never ran");
  if (b.drop_tried && b.drop_ok)
    b.notes.push_back("cold runs: sync + drop_caches before each (guest page cache only; the host may still cache "
                      "the virtual disk)");
  b.notes.push_back("load average at start " + load_start + ", at end " + LoadAverage() + "; total " +
                    Fmt("%.0f s", Since(t_start)) + ", reps " + std::to_string(b.reps) + (b.quick ? " (--quick)" : "") +
                    (b.buffer_bytes ? ", --buffer-kib " + std::to_string(b.buffer_bytes / 1024) : ""));
  PrintTable(b);
  fs::remove_all(b.scratch);
  if (temp) fs::remove_all(b.work);
  return b.failed ? 1 : 0;
}
