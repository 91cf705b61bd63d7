// Start-up of the torch-free `hubload` (tools/hubload/main.cc, cli.h): which
// shared objects its process maps (the dynamic loader's own list, LD_DEBUG=files,
// which also shows dlopen()ed objects, and ldd), its peak RSS (wait4's
// ru_maxrss), the hand-over of LibTorch commands to hubload-torch, and usage errors.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "testing/hub_server.h"
#include "testing/util.h"

namespace {
namespace fs = std::filesystem;
using hubload::testing::HubloadBin;
using hubload::testing::RunCommand;
using hubload::testing::TempDir;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

std::string Q(const std::string& s) { return "'" + s + "'"; }

// Shared objects the dynamic loader opened for `args` (LD_DEBUG=files lines "file=NAME [0];  needed by ...").
std::vector<std::string> LoadedObjects(const std::string& args) {
  std::string out, err;
  RunCommand("LD_DEBUG=files " + Q(HubloadBin()) + " " + args + " >/dev/null", &out, &err);
  std::vector<std::string> objs;
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);) {
    auto p = line.find("file=");
    if (p == std::string::npos) continue;
    auto e = line.find_first_of(" \t[", p + 5);
    objs.push_back(line.substr(p + 5, e == std::string::npos ? std::string::npos : e - p - 5));
  }
  return objs;
}

bool MentionsTorch(const std::string& s) {
  return s.find("libtorch") != std::string::npos || s.find("libc10") != std::string::npos;
}

// Peak resident set of `argv` in KiB (getrusage of the waited child), and its exit status.
long PeakRssKiB(const std::vector<std::string>& argv, int* status) {
  std::vector<char*> a;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execv(a[0], a.data());
    _exit(127);
  }
  struct rusage ru {};
  if (wait4(pid, status, 0, &ru) != pid) return -1;
  return ru.ru_maxrss;
}

TEST(Startup, VersionAndDownloadHelpMapNoLibTorch) {
  for (const std::string args : {"--version", "download --help", "cache --help", "--help"}) {
    SCOPED_TRACE(args);
    auto objs = LoadedObjects(args);
    ASSERT_FALSE(objs.empty()) << "LD_DEBUG=files printed no file= lines";
    // libc is always there: the listing is real.
    bool libc = false;
    for (const auto& o : objs) {
      EXPECT_FALSE(MentionsTorch(o)) << o;
      libc = libc || o.find("libc.so") != std::string::npos;
    }
    EXPECT_TRUE(libc);
  }
  std::string out, err;
  ASSERT_EQ(RunCommand("ldd " + Q(HubloadBin()), &out, &err), 0) << err;
  EXPECT_FALSE(MentionsTorch(out)) << out;
}

TEST(Startup, PeakRssOfVersionAndDownloadHelpAtMost30MiB) {
  if (kSanitized) GTEST_SKIP() << "ASan shadow memory inflates the RSS; measured in the plain build";
  for (const std::vector<std::string>& argv :
       {std::vector<std::string>{HubloadBin(), "--version"}, {HubloadBin(), "download", "--help"}}) {
    int status = -1;
    long kib = PeakRssKiB(argv, &status);
    ASSERT_TRUE(WIFEXITED(status)) << status;
    EXPECT_EQ(WEXITSTATUS(status), 0);
    EXPECT_GT(kib, 0);
    EXPECT_LE(kib, 30 * 1024) << argv[1] << ": peak RSS " << kib << " KiB";
  }
}

TEST(Startup, TorchCommandsAreHandedOverWithTheSameArguments) {
  std::string out, err;
  ASSERT_EQ(RunCommand(Q(HubloadBin()) + " load --help", &out, &err), 0) << err;
  // Options only the real `load` has (the light binary's stub has none).
  EXPECT_NE(out.find("--max-shards-in-flight"), std::string::npos) << out;
  EXPECT_NE(out.find("--device-map"), std::string::npos) << out;
  // The hand-over process maps LibTorch: hubload-torch really ran.
  bool torch = false;
  for (const auto& o : LoadedObjects("load --help")) torch = torch || MentionsTorch(o);
  EXPECT_TRUE(torch);
  // Global options before the command travel with it.
  ASSERT_EQ(RunCommand(Q(HubloadBin()) + " --cache-dir /nonexistent-hubload-zz reshard --help", &out, &err), 0) << err;
  EXPECT_NE(out.find("--max-shard-size"), std::string::npos) << out;
  ASSERT_EQ(RunCommand(Q(HubloadBin()) + " load org/m --distributed --help", &out, &err), 0) << err;
  EXPECT_NE(out.find("--world-size"), std::string::npos) << out;
}

// Sub-command name -> help text, from the "Subcommands:" section of `--help`.
std::map<std::string, std::string> Subcommands(const std::string& help) {
  std::map<std::string, std::string> r;
  auto p = help.find("Subcommands:");
  if (p == std::string::npos) return r;
  std::istringstream in(help.substr(p));
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    if (line.size() < 3 || line[0] != ' ' || line[2] == ' ') continue;
    std::istringstream l(line);
    std::string name, word, text;
    l >> name;
    while (l >> word) text += (text.empty() ? "" : " ") + word;
    r[name] = text;
  }
  return r;
}

TEST(Startup, HelpListsEveryCommandOfHubloadTorch) {
  const std::string torch_bin = (fs::path(HubloadBin()).parent_path() / "hubload-torch").string();
  if (!fs::exists(torch_bin)) GTEST_SKIP() << "no hubload-torch next to " << HubloadBin();
  std::string light, full, err;
  ASSERT_EQ(RunCommand(Q(HubloadBin()) + " --help", &light, &err), 0) << err;
  ASSERT_EQ(RunCommand(Q(torch_bin) + " --help", &full, &err), 0) << err;
  auto l = Subcommands(light), f = Subcommands(full);
  ASSERT_GE(f.size(), 8u) << full;
  for (const char* must : {"load", "reshard", "download", "cache", "serve"}) EXPECT_TRUE(f.count(must)) << must;
  EXPECT_EQ(l, f);
}

TEST(Startup, MissingHubloadTorchIsNamed) {
  TempDir d;
  const fs::path copy = d.path() / "hubload";
  std::error_code ec;
  fs::create_hard_link(HubloadBin(), copy, ec);
  if (ec) fs::copy_file(HubloadBin(), copy, ec);
  ASSERT_FALSE(ec) << ec.message();
  std::string out, err;
  int rc = RunCommand(Q(copy.string()) + " load org/m", &out, &err);
  EXPECT_EQ(rc, 1) << err;
  EXPECT_NE(err.find("'load' needs hubload-torch"), std::string::npos) << err;
  EXPECT_NE(err.find((d.path() / "hubload-torch").string()), std::string::npos) << err;
  EXPECT_NE(err.find("libexec/hubload/hubload-torch"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  // Torch-free commands still work from that copy.
  EXPECT_EQ(RunCommand(Q(copy.string()) + " --version", &out, &err), 0) << err;
}

// ---- usage errors: exit 2, the offending option and value named ----------

TEST(UsageErrors, UnknownCommandIsNamed) {
  std::string out, err;
  EXPECT_EQ(RunCommand(Q(HubloadBin()) + " bogus", &out, &err), 2);
  EXPECT_NE(err.find("unknown command 'bogus'; see hubload --help"), std::string::npos) << err;
  EXPECT_EQ(RunCommand(Q(HubloadBin()) + " --endpoint http://127.0.0.1:9 frobnicate x", &out, &err), 2);
  EXPECT_NE(err.find("unknown command 'frobnicate'"), std::string::npos) << err;
}

TEST(UsageErrors, BadOptionValuesExit2NamingOptionAndValue) {
  TempDir d;
  const std::string src = d.str();
  struct Case {
    std::string args, option, value;
  } cases[] = {
      {"load org/m --dtype fp8", "--dtype", "fp8"},
      {"load org/m --repo-type foo", "--repo-type", "foo"},
      {"load org/m --max-shards-in-flight 0", "--max-shards-in-flight", "0"},
      {"load org/m --max-shards-in-flight -3", "--max-shards-in-flight", "-3"},
      {"load org/m --fake-gpus -1", "--fake-gpus", "-1"},
      {"load org/m --fake-gpu-memory -1GB", "--fake-gpu-memory", "-1GB"},
      {"reshard " + src + " " + src + "/out --max-shard-size -5", "--max-shard-size", "-5"},
      {"reshard " + src + " " + src + "/out --dtype int3", "--dtype", "int3"},
      {"load-distributed org/m --chunk-bytes -5", "--chunk-bytes", "-5"},
      {"download-distributed org/m --world-size 0", "--world-size", "0"},
      {"download-distributed org/m --master-port 70000", "--master-port", "70000"},
      {"download-distributed org/m --timeout 0", "--timeout", "0"},
      {"demo-model " + src + "/demo --size-mb 0", "--size-mb", "0"},
      {"push " + src + " org/m --workers 0", "--workers", "0"},
      {"download org/m --max-workers 0", "--max-workers", "0"},
      {"download org/m --repo-type foo", "--repo-type", "foo"},
      {"cache delete org/m --repo-type foo", "--repo-type", "foo"},
      {"download org/m --revision ''", "--revision", "''"},
      {"upload org/m " + src + " --revision ''", "--revision", "''"},
      {"load-distributed org/m --tensors '('", "--tensors", "'('"},
      {"download-distributed org/m --chunk-bytes 1", "--chunk-bytes", "'1'"},
      // The server's numbers and sizes (a refused value never starts it: `timeout` below).
      {"serve " + src + " --threads 0", "--threads", "0"},
      {"serve " + src + " --tree-page-size -5", "--tree-page-size", "-5"},
      {"serve " + src + " --signed-url-ttl -1", "--signed-url-ttl", "-1"},
      {"serve " + src + " --fault-latency-ms -5", "--fault-latency-ms", "-5"},
      {"serve " + src + " --fault-url-ttl -2", "--fault-url-ttl", "-2"},
      {"serve " + src + " --port 70000", "--port", "70000"},
      {"serve " + src + " --lfs-threshold 10Mb", "--lfs-threshold", "10Mb"},
      {"serve " + src + " --multipart-chunk-size 0", "--multipart-chunk-size", "0"},
      {"serve " + src + " --fault-bandwidth fast", "--fault-bandwidth", "fast"},
      {"serve " + src + " --fault-total-bandwidth 0.5", "--fault-total-bandwidth", "0.5"},
      {"serve " + src + " --fault-url-bytes 1e6", "--fault-url-bytes", "1e6"},
      {"serve " + src + " --fault-status x:y", "--fault-status", "x:y"},
      {"serve " + src + " --path-prefix pre", "--path-prefix", "pre"},
      {"store add " + src + "/st org/m " + src + " --lfs-threshold 1Gb", "--lfs-threshold", "1Gb"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    std::string out, err;
    EXPECT_EQ(RunCommand("timeout 60 " + Q(HubloadBin()) + " " + c.args, &out, &err), 2) << err;
    EXPECT_NE(err.find(c.option), std::string::npos) << err;
    EXPECT_NE(err.find(c.value), std::string::npos) << err;
  }
  EXPECT_FALSE(fs::exists(d.path() / "demo"));
  EXPECT_FALSE(fs::exists(d.path() / "out"));
  EXPECT_FALSE(fs::exists(d.path() / "st"));
}

TEST(UsageErrors, UnknownSubcommandsAndLeadingOptionsAreNamed) {
  TempDir d;
  struct Case {
    std::string args;
    std::vector<std::string> mentions;
  } cases[] = {
      {"cache lss", {"unknown command 'cache lss'", "ls", "prune"}},
      {"repo brnch create org/m x", {"unknown command 'repo brnch'", "branch", "tag"}},
      {"repo branch crate org/m x", {"unknown command 'repo branch crate'", "create", "delete"}},
      {"--cache-dir " + d.str() + " cache --json lss", {"unknown command 'cache lss'"}},
      {"store ad " + d.str() + " org/m " + d.str(), {"unknown command 'store ad'"}},
      // A mistyped global option is named, not its value taken for the command.
      {"--endpont http://127.0.0.1:9 download org/m", {"unknown option '--endpont'"}},
      {"--cache-dir " + d.str() + " --tokn hf_x download org/m", {"unknown option '--tokn'"}},
      {"--endpont=http://127.0.0.1:9 download org/m", {"unknown option '--endpont'"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    std::string out, err;
    EXPECT_EQ(RunCommand(Q(HubloadBin()) + " " + c.args, &out, &err), 2) << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
    for (const auto& m : c.mentions) EXPECT_NE(err.find(m), std::string::npos) << m << " not in: " << err;
  }
  // The right words and forms still work.
  std::string out, err;
  EXPECT_EQ(RunCommand(Q(HubloadBin()) + " --cache-dir=" + d.str() + " cache ls --json", &out, &err), 0) << err;
  EXPECT_EQ(RunCommand(Q(HubloadBin()) + " repo branch --help", &out, &err), 0) << err;
  EXPECT_EQ(RunCommand(Q(HubloadBin()) + " --cache-dir " + d.str() + " cache ls --json", &out, &err), 0) << err;
}

// A bad HUBLOAD_LOCK_MODE (or HF_HUB_*_TIMEOUT) is a usage error for a command that locks the cache or talks
// to a Hub, not for --version, --help or a command that does neither.
TEST(UsageErrors, EnvironmentErrorsOnlyForCommandsThatUseIt) {
  TempDir d, src;
  hubload::testing::WriteFileBytes(src.path() / "a.txt", "a");
  const std::string env = "HUBLOAD_LOCK_MODE=nfs ";
  std::string out, err;
  EXPECT_EQ(RunCommand(env + Q(HubloadBin()) + " --version", &out, &err), 0) << err;
  EXPECT_EQ(out.rfind("hubload ", 0), 0u) << out;
  EXPECT_EQ(RunCommand(env + Q(HubloadBin()) + " --help", &out, &err), 0) << err;
  EXPECT_EQ(RunCommand(env + Q(HubloadBin()) + " download --help", &out, &err), 0) << err;
  EXPECT_EQ(RunCommand(env + Q(HubloadBin()) + " store add " + d.str() + "/st org/m " + src.str(), &out, &err), 0) << err;
  EXPECT_EQ(RunCommand(env + Q(HubloadBin()) + " --cache-dir " + d.str() + " download org/m --offline", &out, &err), 2);
  EXPECT_NE(err.find("HUBLOAD_LOCK_MODE='nfs'"), std::string::npos) << err;
  EXPECT_EQ(RunCommand("HF_HUB_ETAG_TIMEOUT=-1 " + Q(HubloadBin()) + " --version", &out, &err), 0) << err;
}

TEST(UsageErrors, UnknownLockModeIsRefused) {
  std::string out, err;
  EXPECT_EQ(RunCommand("HUBLOAD_LOCK_MODE=nfs " + Q(HubloadBin()) + " cache scan", &out, &err), 2);
  EXPECT_NE(err.find("HUBLOAD_LOCK_MODE='nfs'"), std::string::npos) << err;
}

TEST(UsageErrors, GlobalOptionsBeforeOrAfterTheCommandMeanTheSame) {
  TempDir d;
  const std::string cache = (d.path() / "my-cache").string();
  std::string before, after, out;
  // Offline: the error names the cache folder the option chose (no network).
  int rc1 = RunCommand(Q(HubloadBin()) + " --cache-dir " + cache + " download org/m --offline", &out, &before);
  int rc2 = RunCommand(Q(HubloadBin()) + " download org/m --offline --cache-dir " + cache, &out, &after);
  EXPECT_EQ(rc1, 1) << before;
  EXPECT_EQ(rc2, 1) << after;
  EXPECT_NE(before.find(cache), std::string::npos) << before;
  EXPECT_EQ(before, after);
  // --endpoint and --token after the command: the download from a `hubload serve` lands in the same
  // snapshot folder either way (stdout), under the --cache-dir given after the command.
  auto hub = hubload::testing::StartTestHub();
  ASSERT_TRUE(hub);
  const std::string commit = hub->AddRepo("org/m", {{"config.json", "{\"a\": 1}"}});
  const std::string expected = cache + "/models--org--m/snapshots/" + commit + "\n";
  std::string err;
  rc1 = RunCommand(Q(HubloadBin()) + " --endpoint " + hub->url() + " --token hf_tok --cache-dir " + cache +
                       " download org/m",
                   &before, &err);
  EXPECT_EQ(rc1, 0) << err;
  EXPECT_EQ(before, expected);
  TempDir d2;
  const std::string cache2 = (d2.path() / "c").string();
  rc2 = RunCommand(Q(HubloadBin()) + " download org/m --endpoint " + hub->url() + " --token hf_tok --cache-dir " +
                       cache2,
                   &after, &err);
  EXPECT_EQ(rc2, 0) << err;
  EXPECT_EQ(after, cache2 + "/models--org--m/snapshots/" + commit + "\n");
  EXPECT_EQ(hubload::testing::ReadFileBytes(cache2 + "/models--org--m/snapshots/" + commit + "/config.json").size(),
            8u);
  // --token after the command is accepted and never printed.
  rc2 = RunCommand(Q(HubloadBin()) + " download org/m --offline --token hf_secret_zz --cache-dir " + cache + "-empty", &out,
                   &after);
  EXPECT_EQ(rc2, 1) << after;
  EXPECT_EQ(after.find("hf_secret_zz"), std::string::npos) << after;
  // After a torch command too (handed over with the same argv).
  rc2 = RunCommand(Q(HubloadBin()) + " load org/m --offline-zz --cache-dir " + cache, &out, &after);
  EXPECT_EQ(rc2, 2) << after;  // --offline-zz is unknown to load and to the globals
  EXPECT_NE(after.find("--offline-zz"), std::string::npos) << after;
}

}  // namespace
