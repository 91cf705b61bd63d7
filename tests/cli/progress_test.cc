// Progress of the long commands (tools/hubload/progress_bar.h, issue 15 item 3):
// under a pseudo-terminal (script(1)) load (bandwidth-capped `hubload serve`:
// '%' and the shard count before the summary), download, upload,
// load-distributed (single rank), reshard and cache verify draw progress lines, ending with the
// real total (computed here from the files' bytes) at 100 %, before the
// command's final line; piped, and on a terminal with --quiet or
// HF_HUB_DISABLE_PROGRESS_BARS=1, there is no progress and stdout holds only
// the result. Single-file, --local-dir FILES and --force-download downloads
// count the files' real bytes and erase their bars before the path; on a
// narrow terminal (stty cols, else $COLUMNS) no progress line is wider than
// the terminal less one column, long names shortened in the middle.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
#include <cctype>

#include "testing/hub_server.h"
#include "testing/util.h"

namespace {
namespace fs = std::filesystem;
using hubload::testing::HubloadBin;
using hubload::testing::RunCommand;
using hubload::testing::TempDir;

constexpr const char* kToken = "hf_progress_token";
constexpr size_t kShard = 1536 * 1024;

// A safetensors file written by hand: one U8 tensor `name` of `n` bytes (value (i + seed) % 251).
std::string Shard(const std::string& name, size_t n, int seed = 0) {
  std::string header = "{\"" + name + "\":{\"dtype\":\"U8\",\"shape\":[" + std::to_string(n) +
                       "],\"data_offsets\":[0," + std::to_string(n) + "]}}";
  while (header.size() % 8) header += ' ';
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  out += header;
  for (size_t i = 0; i < n; ++i) out += static_cast<char>((i + seed) % 251);
  return out;
}

// "<bytes / 2^20 with one decimal> MiB": the documented unit of these sizes, by hand.
std::string MiB(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}
// The final progress line's numbers: "100% <total> / <total>".
std::string Complete(uint64_t total) { return "100% " + MiB(total) + " / " + MiB(total); }

bool HasProgress(const std::string& s) {
  return s.find("ETA") != std::string::npos || s.find('%') != std::string::npos ||
         s.find("\x1b[") != std::string::npos;
}

// `cmd` under a pseudo-terminal: its terminal output (stdout and stderr together).
int OnTerminal(const std::string& cmd, std::string* out) {
  std::string err;
  return RunCommand("script -qfec \"" + cmd + "\" /dev/null", out, &err);
}

// Expects progress ending in `complete` (and `suffix`) before `final_line` in terminal output `out`.
void ExpectProgressBefore(const std::string& out, const std::string& complete, const std::string& suffix,
                          const std::string& final_line) {
  const size_t last = out.rfind(final_line);
  ASSERT_NE(last, std::string::npos) << out;
  const size_t done = out.find(complete);
  ASSERT_NE(done, std::string::npos) << "no '" << complete << "' in: " << out;
  EXPECT_LT(done, last) << out;
  EXPECT_NE(out.find(suffix, done), std::string::npos) << out;
  EXPECT_NE(out.find("ETA"), std::string::npos) << out;
  EXPECT_NE(out.find("/s"), std::string::npos) << out;
}

// Runs `cmd` piped (expects stdout == want_stdout when given, else stdout without progress),
// then on a terminal with `quiet_flag` and with HF_HUB_DISABLE_PROGRESS_BARS=1 (no progress).
void ExpectSilentVariants(const std::string& cmd, const std::string& quiet_flag, const std::string& want_stdout,
                          const std::string& result_text) {
  std::string out, err;
  ASSERT_EQ(RunCommand(cmd, &out, &err), 0) << out << err;
  EXPECT_FALSE(HasProgress(err)) << err;
  EXPECT_FALSE(HasProgress(out)) << out;
  if (!want_stdout.empty()) {
    EXPECT_EQ(out, want_stdout) << err;
  }
  for (const std::string& c : {cmd + " " + quiet_flag, "HF_HUB_DISABLE_PROGRESS_BARS=1 " + cmd}) {
    SCOPED_TRACE(c);
    ASSERT_EQ(OnTerminal(c, &out), 0) << out;
    EXPECT_NE(out.find(result_text), std::string::npos) << out;
    EXPECT_FALSE(HasProgress(out)) << out;
  }
}

struct Repo {
  std::map<std::string, std::string> files;
  uint64_t Bytes() const {
    uint64_t n = 0;
    for (const auto& [path, bytes] : files) n += bytes.size();
    return n;
  }
};

// config.json, an index and two 1.5 MiB shards (LFS).
Repo Checkpoint() {
  Repo r;
  r.files["config.json"] = "{}";
  r.files["model.safetensors.index.json"] =
      "{\"metadata\":{\"total_size\":" + std::to_string(2 * kShard) +
      "},\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\",\"b\":\"model-00002-of-00002.safetensors\"}}";
  r.files["model-00001-of-00002.safetensors"] = Shard("a", kShard);
  r.files["model-00002-of-00002.safetensors"] = Shard("b", kShard, 7);
  return r;
}

std::unique_ptr<hubload::testing::TestHub> Serve(const Repo& repo, uint64_t bytes_per_s) {
  hubload::server::ServerOptions so;
  so.tokens = {kToken};
  auto hub = hubload::testing::StartTestHub(so);
  if (!hub) return nullptr;
  hubload::server::CreateRepoOptions o;
  o.lfs_threshold_bytes = 1024;
  hub->AddRepo("org/m", repo.files, o);
  if (bytes_per_s) hub->faults().SetTotalBandwidthBytesPerSec(bytes_per_s);
  return hub;
}

std::string Bin() { return "'" + HubloadBin() + "'"; }

TEST(Progress, LoadShowsProgressBeforeTheSummary) {
  auto hub = Serve(Checkpoint(), 2 * 1024 * 1024);  // ~1.5 s for 3 MiB
  ASSERT_TRUE(hub);
  TempDir cache;
  const std::string cmd = Bin() + " load org/m --endpoint " + hub->url() + " --cache-dir " + cache.str();
  std::string out;
  ASSERT_EQ(OnTerminal(cmd, &out), 0) << out;
  const size_t summary = out.find("2 tensors, " + std::to_string(2 * kShard) + " bytes, from 2 file(s)");
  ASSERT_NE(summary, std::string::npos) << out;
  const size_t pct = out.find('%');
  ASSERT_NE(pct, std::string::npos) << out;
  EXPECT_LT(pct, summary);
  const size_t shards = out.find("shards 0/2");
  ASSERT_NE(shards, std::string::npos) << out;
  EXPECT_LT(shards, summary);
  EXPECT_NE(out.find("ETA"), std::string::npos) << out;
  EXPECT_NE(out.find("/s"), std::string::npos) << out;
}

// A warning of the load (here the index's wrong metadata.total_size) is
// printed once on a terminal: on stderr, not again in the summary on stdout.
TEST(Progress, LoadPrintsEachWarningOnce) {
  Repo r = Checkpoint();
  r.files["model.safetensors.index.json"] =
      "{\"metadata\":{\"total_size\":" + std::to_string(2 * kShard + 1) +
      "},\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\",\"b\":\"model-00002-of-00002.safetensors\"}}";
  auto hub = Serve(r, 0);
  ASSERT_TRUE(hub);
  TempDir cache;
  const std::string cmd = Bin() + " load org/m --endpoint " + hub->url() + " --cache-dir " + cache.str();
  const std::string warning = "metadata.total_size is " + std::to_string(2 * kShard + 1) + " bytes";
  auto count = [&](const std::string& text) {
    size_t n = 0;
    for (size_t at = text.find(warning); at != std::string::npos; at = text.find(warning, at + 1)) ++n;
    return n;
  };
  std::string out, err;
  ASSERT_EQ(OnTerminal(cmd, &out), 0) << out;
  EXPECT_EQ(count(out), 1u) << out;
  EXPECT_NE(out.find("2 tensors"), std::string::npos) << out;
  // Piped: on stderr only; stdout is the summary.
  ASSERT_EQ(RunCommand(cmd, &out, &err), 0) << err;
  EXPECT_EQ(count(err), 1u) << err;
  EXPECT_EQ(count(out), 0u) << out;
}

TEST(Progress, LoadNothingWhenPipedQuietOrDisabled) {
  auto hub = Serve(Checkpoint(), 8 * 1024 * 1024);
  ASSERT_TRUE(hub);
  TempDir cache;
  const std::string cmd = Bin() + " load org/m --endpoint " + hub->url() + " --cache-dir " + cache.str();
  std::string out, err;
  // Piped: stdout is exactly the JSON report, stderr carries no progress.
  ASSERT_EQ(RunCommand(cmd + " --json", &out, &err), 0) << err;
  EXPECT_FALSE(HasProgress(err)) << err;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["files"].size(), 2u) << out;
  ExpectSilentVariants(cmd, "--quiet", "", "2 tensors");
}

TEST(Progress, Download) {
  const Repo repo = Checkpoint();
  auto hub = Serve(repo, 4 * 1024 * 1024);  // ~0.75 s for 3 MiB
  ASSERT_TRUE(hub);
  TempDir cache;
  const std::string cmd = Bin() + " download org/m --endpoint " + hub->url() + " --cache-dir " + cache.str();
  std::string out;
  ASSERT_EQ(OnTerminal(cmd, &out), 0) << out;
  const std::string snapshot = (cache.path() / "models--org--m" / "snapshots").string();
  // The total line reaches the real total (the completing update is always drawn).
  ExpectProgressBefore(out, Complete(repo.Bytes()), "total", snapshot);
  EXPECT_NE(out.find("done model-00002-of-00002.safetensors"), std::string::npos) << out;
  // Cached now: each variant still prints the snapshot folder alone on stdout.
  std::string path, err;
  ASSERT_EQ(RunCommand(cmd + " --quiet", &path, &err), 0) << err;
  ExpectSilentVariants(cmd, "--quiet", path, snapshot);
  ExpectSilentVariants(cmd, "-q", path, snapshot);  // the short form, as every other command takes it
}

// The screen a terminal shows after `out`: "\x1b[1A" moves up a line, "\x1b[2K"
// erases it, other escapes are dropped, "\r" returns to the line's start.
std::vector<std::string> Screen(const std::string& out) {
  std::vector<std::string> lines(1);
  size_t row = 0, col = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const char c = out[i];
    if (c == '\x1b' && i + 1 < out.size() && out[i + 1] == '[') {
      size_t j = i + 2;
      while (j < out.size() && !std::isalpha(static_cast<unsigned char>(out[j]))) ++j;
      if (j >= out.size()) break;
      if (out[j] == 'A' && row > 0) --row;
      if (out[j] == 'K') lines[row].clear();
      i = j;
      continue;
    }
    if (c == '\r') {
      col = 0;
    } else if (c == '\n') {
      ++row;
      col = 0;
      if (row >= lines.size()) lines.emplace_back();
    } else {
      std::string& l = lines[row];
      if (l.size() < col) l.resize(col, ' ');
      if (col < l.size()) l[col] = c;
      else l.push_back(c);
      ++col;
    }
  }
  return lines;
}

// A library warning printed while a bar is on screen (here: the Hub cannot be
// reached, the cached snapshot is used) stays on screen above the bars, and no
// stale bar line is left: the CLI's logger prints around the bar. Before, the
// next redraw erased the warning and left the old bar line behind.
TEST(Progress, AWarningPrintedDuringTheBarsStaysOnScreen) {
  const Repo repo = Checkpoint();
  auto hub = Serve(repo, 0);
  ASSERT_TRUE(hub);
  TempDir cache;
  const std::string cmd = Bin() + " download org/m --endpoint " + hub->url() + " --cache-dir " + cache.str();
  std::string path, err;
  ASSERT_EQ(RunCommand(cmd, &path, &err), 0) << err;  // warm
  hub->server->Stop();
  std::string out;
  ASSERT_EQ(OnTerminal(cmd, &out), 0) << out;
  const std::vector<std::string> screen = Screen(out);
  std::string shown;
  for (const auto& l : screen) shown += l + "\n";
  size_t warnings = 0;
  for (const auto& l : screen) {
    warnings += l.find("using the cached snapshot") != std::string::npos;
    EXPECT_EQ(l.find("ETA"), std::string::npos) << "a bar line left on screen:\n" << shown;
  }
  EXPECT_EQ(warnings, 1u) << shown;
  EXPECT_NE(shown.find(path.substr(0, path.size() - 1)), std::string::npos) << shown;
}

// The bars are erased ("\x1b[2K") after the last progress line and before `final_line`.
void ExpectErasedBefore(const std::string& out, const std::string& final_line) {
  const size_t last = out.rfind(final_line);
  const size_t eta = out.rfind("ETA");
  ASSERT_NE(last, std::string::npos) << out;
  ASSERT_NE(eta, std::string::npos) << out;
  const size_t erase = out.find("\x1b[2K", eta);
  EXPECT_LT(erase, last) << out;
}

TEST(Progress, SingleFileLocalDirAndForceDownloadCountRealBytes) {
  const Repo repo = Checkpoint();
  auto hub = Serve(repo, 4 * 1024 * 1024);  // ~0.4 s per shard
  ASSERT_TRUE(hub);
  TempDir cache, local;
  const std::string g = " --endpoint " + hub->url() + " --cache-dir " + cache.str();
  const std::string s1 = "model-00001-of-00002.safetensors", s2 = "model-00002-of-00002.safetensors";
  const uint64_t b1 = repo.files.at(s1).size(), b2 = repo.files.at(s2).size();
  std::string out;
  // One FILE (hf_hub_download): its bytes, not a bar frozen at 0 B / 0 B.
  ASSERT_EQ(OnTerminal(Bin() + " download org/m " + s1 + g, &out), 0) << out;
  const std::string in_cache = "/snapshots/";
  ExpectProgressBefore(out, Complete(b1), "total", in_cache);
  ExpectErasedBefore(out, in_cache);
  EXPECT_EQ(out.find("0 B / 0 B"), std::string::npos) << out;
  // --local-dir with two FILES: one total over both files.
  ASSERT_EQ(OnTerminal(Bin() + " download org/m " + s1 + " " + s2 + " --local-dir " + local.str() + g, &out), 0)
      << out;
  ExpectProgressBefore(out, Complete(b1 + b2), "files 2/2", local.str());
  ExpectErasedBefore(out, local.str());
  EXPECT_EQ(hubload::testing::ReadFileBytes(local.path() / s2).size(), b2);
  // --force-download of the cached shards picked by --include: every byte again.
  ASSERT_EQ(OnTerminal(Bin() + " download org/m --force-download --include 'model-0*'" + g, &out), 0) << out;
  ExpectProgressBefore(out, Complete(b1 + b2), "files 2/2", in_cache);
  ExpectErasedBefore(out, in_cache);
}

// Terminal lines of `out` that are progress lines (a total line or a file's bar), escapes removed.
std::vector<std::string> ProgressLines(const std::string& out) {
  std::vector<std::string> lines;
  std::string line;
  auto flush = [&] {
    if (line.find("ETA") != std::string::npos || line.rfind("[", 0) == 0) lines.push_back(line);
    line.clear();
  };
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == '\x1b') {  // CSI: ESC [ params letter
      size_t j = i + 2;
      while (j < out.size() && !std::isalpha(static_cast<unsigned char>(out[j]))) ++j;
      i = j;
    } else if (out[i] == '\n') {
      flush();
    } else if (out[i] != '\r') {
      line += out[i];
    }
  }
  flush();
  return lines;
}

TEST(Progress, LinesFitANarrowTerminal) {
  Repo repo;
  const std::string name = "transformer/diffusion_pytorch_model-00001-of-00002.safetensors";  // 62 characters
  repo.files[name] = Shard("a", kShard);
  auto hub = Serve(repo, 2 * 1024 * 1024);  // ~0.75 s
  ASSERT_TRUE(hub);
  for (const std::string size : {"stty cols 60", "stty cols 0; export COLUMNS=60"}) {  // TIOCGWINSZ, else $COLUMNS
    SCOPED_TRACE(size);
    TempDir cache;
    std::string out;
    ASSERT_EQ(OnTerminal(size + "; " + Bin() + " download org/m --endpoint " + hub->url() + " --cache-dir " +
                             cache.str(),
                         &out),
              0)
        << out;
    const auto lines = ProgressLines(out);
    ASSERT_FALSE(lines.empty()) << out;
    bool shortened = false;
    for (const auto& l : lines) {
      EXPECT_LE(l.size(), 59u) << l;  // 60 columns, the last one left free
      // A file line "<bar> <bytes>  <start>...<end>" whose name keeps the name's start and end.
      const size_t dots = l.rfind("...");  // the bar has dots too
      const size_t start = l.rfind("  ", dots);
      if (dots == std::string::npos || start == std::string::npos || l.rfind("[", 0) != 0) continue;
      const std::string head = l.substr(start + 2, dots - start - 2), tail = l.substr(dots + 3);
      if (!head.empty() && !tail.empty() && name.rfind(head, 0) == 0 &&
          name.compare(name.size() - tail.size(), tail.size(), tail) == 0)
        shortened = true;
    }
    EXPECT_TRUE(shortened) << out;
  }
}

TEST(Progress, Upload) {
  auto hub = Serve(Checkpoint(), 0);
  ASSERT_TRUE(hub);
  TempDir dir;
  const std::string a = Shard("a", kShard, 1), b = Shard("b", kShard, 2);
  hubload::testing::WriteFileBytes(dir.path() / "a.safetensors", a);
  hubload::testing::WriteFileBytes(dir.path() / "b.safetensors", b);
  const uint64_t total = a.size() + b.size();  // both are LFS files: hashed, then uploaded
  const std::string cmd = Bin() + " upload org/up '" + dir.str() + "' --endpoint " + hub->url() + " --token " + kToken;
  std::string out;
  ASSERT_EQ(OnTerminal(cmd + " --commit-message first", &out), 0) << out;
  const std::string url_line = hub->url() + "/org/up/commit/";
  ExpectProgressBefore(out, "hashing   [########################] " + Complete(total), "ETA", url_line);
  ExpectProgressBefore(out, "uploading [########################] " + Complete(total), "ETA", url_line);
  EXPECT_LT(out.find("hashing"), out.find("uploading")) << out;
  // Piped / quiet / disabled: a second and third commit of changed files; stdout is the commit id and URL.
  std::string o, err;
  hubload::testing::WriteFileBytes(dir.path() / "a.safetensors", Shard("a", kShard, 3));
  ASSERT_EQ(RunCommand(cmd, &o, &err), 0) << o << err;
  EXPECT_FALSE(HasProgress(err)) << err;
  ASSERT_EQ(o.size(), 41 + url_line.size() + 40 + 1) << o;  // "<40 hex>\n<url>/commit/<40 hex>\n"
  EXPECT_EQ(o.substr(41, url_line.size()), url_line) << o;
  for (const std::string& c : {cmd + " --quiet", "HF_HUB_DISABLE_PROGRESS_BARS=1 " + cmd}) {
    SCOPED_TRACE(c);
    ASSERT_EQ(OnTerminal(c + " --commit-message again", &o), 0) << o;
    EXPECT_NE(o.find(url_line), std::string::npos) << o;
    EXPECT_FALSE(HasProgress(o)) << o;
  }
}

TEST(Progress, CacheVerify) {
  const Repo repo = Checkpoint();
  auto hub = Serve(repo, 0);
  ASSERT_TRUE(hub);
  TempDir cache;
  const std::string g = " --endpoint " + hub->url() + " --cache-dir " + cache.str();
  std::string out, err;
  ASSERT_EQ(RunCommand(Bin() + " download org/m --quiet" + g, &out, &err), 0) << err;
  // The real total: every file the snapshot holds (the listing's files), read from disk.
  uint64_t total = 0;
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(cache.path() / "models--org--m" / "snapshots"))
    if (fs::is_regular_file(e.path())) {
      total += fs::file_size(e.path());
      ++files;
    }
  ASSERT_EQ(total, repo.Bytes());
  const std::string cmd = Bin() + " cache verify org/m" + g;
  ASSERT_EQ(OnTerminal(cmd, &out), 0) << out;
  const std::string n = std::to_string(files);
  ExpectProgressBefore(out, Complete(total), "files " + n + "/" + n, n + " verified, 0 mismatched");
  std::string piped;
  ASSERT_EQ(RunCommand(cmd + " --quiet", &piped, &err), 0) << err;
  ExpectSilentVariants(cmd, "--quiet", piped, n + " verified, 0 mismatched");
}

TEST(Progress, Reshard) {
  TempDir src, dst;
  // One file with two U8 tensors of 1 MiB (header by hand): at --max-shard-size 1MiB
  // each becomes a shard of its own.
  std::string header = "{\"a\":{\"dtype\":\"U8\",\"shape\":[1048576],\"data_offsets\":[0,1048576]},"
                       "\"b\":{\"dtype\":\"U8\",\"shape\":[1048576],\"data_offsets\":[1048576,2097152]}}";
  while (header.size() % 8) header += ' ';
  std::string model(8, '\0');
  for (int i = 0; i < 8; ++i) model[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  model += header;
  for (size_t i = 0; i < (2u << 20); ++i) model += static_cast<char>(i % 253);
  hubload::testing::WriteFileBytes(src.path() / "model.safetensors", model);
  const uint64_t tensor_bytes = model.size() - 8 - header.size();  // the bytes after the header
  ASSERT_EQ(tensor_bytes, 2u << 20);
  const std::string cmd = Bin() + " reshard '" + src.str() + "' '" + dst.str() + "' --max-shard-size 1MiB";
  std::string out;
  ASSERT_EQ(OnTerminal(cmd, &out), 0) << out;
  ExpectProgressBefore(out, Complete(tensor_bytes), "shards 2/2", "total_size 2097152 bytes in 2 file(s)");
  EXPECT_NE(out.find("model-00001-of-00002.safetensors"), std::string::npos) << out;
  std::string piped, err;
  ASSERT_EQ(RunCommand(cmd + " --quiet", &piped, &err), 0) << err;
  ExpectSilentVariants(cmd, "--quiet", piped, "total_size 2097152 bytes in 2 file(s)");
}


TEST(Progress, LoadDistributedSingleRank) {
  const Repo repo = Checkpoint();
  auto hub = Serve(repo, 4 * 1024 * 1024);
  ASSERT_TRUE(hub);
  // The job transfers both shards (rank 0 fetched the index for the plan before; config.json is not a weight).
  const uint64_t total = repo.files.at("model-00001-of-00002.safetensors").size() +
                         repo.files.at("model-00002-of-00002.safetensors").size();
  auto cmd = [&](const TempDir& cache) {
    return Bin() + " load-distributed org/m --endpoint " + hub->url() + " --cache-dir " + cache.str() +
           " --master-addr 127.0.0.1 --master-port " + std::to_string(hubload::testing::FreeLoopbackPort()) +
           " --rank 0 --world-size 1 --local-rank 0 --local-world-size 1 --timeout 60";
  };
  TempDir c1, c2, c3, c4;
  std::string out;
  ASSERT_EQ(OnTerminal(cmd(c1), &out), 0) << out;
  ExpectProgressBefore(out, Complete(total), "files 2/2  [rank 0]", "2 tensors from 2 files");
  std::string err;
  ASSERT_EQ(RunCommand(cmd(c2) + " --json -", &out, &err), 0) << err;
  EXPECT_FALSE(HasProgress(err)) << err;
  EXPECT_EQ(out.rfind("{", 0), 0u) << out;  // stdout: the JSON report only
  EXPECT_FALSE(HasProgress(out)) << out;
  for (const std::string& c : {cmd(c3) + " --quiet", "HF_HUB_DISABLE_PROGRESS_BARS=1 " + cmd(c4)}) {
    SCOPED_TRACE(c);
    ASSERT_EQ(OnTerminal(c, &out), 0) << out;
    EXPECT_NE(out.find("2 tensors from 2 files"), std::string::npos) << out;
    EXPECT_FALSE(HasProgress(out)) << out;
  }
}

}  // namespace
