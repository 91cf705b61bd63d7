// The load-ordered download scheduler (hub/scheduler.h) and the bytes
// announced as they land (DownloadCallbacks::on_file_bytes), against the
// in-process `hubload serve` and its access log. Expected bytes and hashes
// come from the test's own data (OpenSSL); bytes on the wire from the
// server's access log; inode numbers from stat(2). No timing assertions.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include "access_log.h"
#include "first_piece_transport.h"
#include "hubload/hub.h"
#include "hubload/reasons.h"
#include "testing/hub_server.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace fs = std::filesystem;
using hubload::Code;
using hubload::testing::PatternBytes;
using hubload::testing::Gets;
using hubload::testing::ParseRange;
using hubload::testing::SumBytes;
using hubload::testing::TempDir;
using hubload::testing::TestHub;

namespace {

constexpr uint64_t kMiB = 1 << 20;

std::string Sha(const std::string& s) { return hubload::testing::Sha256Hex(s.data(), s.size()); }

// A repo of LFS files (sha256 etags, bytes from the CDN listener) and a server
// writing an access log.
struct Repo {
  TempDir log_dir;
  std::string log = log_dir.str() + "/access.jsonl";
  std::unique_ptr<TestHub> hub;
  std::map<std::string, std::string> files;
  std::string commit;
  /// `total_bytes_per_s` > 0: every connection shares that link (one uplink).
  explicit Repo(std::map<std::string, std::string> f, uint64_t total_bytes_per_s = 0) : files(std::move(f)) {
    hubload::server::ServerOptions so;
    so.access_log = log;
    so.threads = 4;
    hub = hubload::testing::StartTestHub(so);
    hubload::server::CreateRepoOptions ro;
    ro.lfs_threshold_bytes = 1024;
    if (hub) commit = hub->AddRepo("org/m", files, ro);
    if (hub && total_bytes_per_s > 0) hub->faults().SetTotalBandwidthBytesPerSec(total_bytes_per_s);
  }
};

hubload::ClientOptions Opts(const TestHub& hub, const std::string& cache) {
  hubload::ClientOptions o;
  o.config.endpoint = hub.url();
  o.config.cache_dir = cache;
  o.retry.initial_backoff_s = 0.01;
  o.retry.max_backoff_s = 0.05;
  o.retry.jitter_fraction = 0;
  o.retry.max_total_s = 20;
  o.range_threshold_bytes = kMiB;
  o.range_chunk_bytes = kMiB;
  return o;
}

// Files of 8 MiB named in `order`, file i holding PatternBytes(seed + i).
std::map<std::string, std::string> EightMiBFiles(const std::vector<std::string>& order, uint32_t seed) {
  std::map<std::string, std::string> files;
  for (size_t i = 0; i < order.size(); ++i) files[order[i]] = PatternBytes(8 * kMiB, seed + static_cast<uint32_t>(i));
  return files;
}

// Checks that the GETs of one blob tile [0, size) exactly once.
void ExpectTiled(const std::vector<hubload::testing::LogLine>& gets, uint64_t size, const std::string& what) {
  std::vector<std::pair<int64_t, int64_t>> r;
  for (auto& g : gets) {
    if (g.status == 200) {
      r.push_back({0, static_cast<int64_t>(size) - 1});
      continue;
    }
    EXPECT_EQ(g.status, 206) << what << " " << g.range;
    r.push_back(ParseRange(g.range));
  }
  std::sort(r.begin(), r.end());
  int64_t next = 0;
  for (auto& [a, b] : r) {
    EXPECT_EQ(a, next) << what << ": ranges overlap or leave a gap";
    next = b + 1;
  }
  EXPECT_EQ(next, static_cast<int64_t>(size)) << what;
  EXPECT_EQ(SumBytes(gets), size) << what << ": bytes on the wire";
}

struct Announcement {
  uint64_t generation, contiguous, size;
  ino_t ino;
  bool blob_existed;
  std::string prefix_sha;  // sha256 of [0, contiguous) read through the fd
};

std::string ReadFd(int fd, uint64_t n) {
  std::string s(n, '\0');
  uint64_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, s.data() + got, n - got, static_cast<off_t>(got));
    if (r <= 0) break;
    got += static_cast<uint64_t>(r);
  }
  s.resize(got);
  return s;
}

// Records every on_file_bytes call, keeping a dup of each generation's fd.
struct Recorder {
  std::string blob_dir;
  std::mutex mu;
  std::map<std::string, std::vector<Announcement>> calls;
  std::map<std::pair<std::string, uint64_t>, int> fds;  // (path, generation) -> dup
  std::map<std::pair<std::string, uint64_t>, std::string> seen;  // bytes seen at the last call
  std::map<std::string, std::string> etags;
  ~Recorder() {
    for (auto& [k, fd] : fds) ::close(fd);
  }
  void Install(hubload::DownloadCallbacks* cb) {
    cb->on_file_bytes = [this](const hubload::FileBytes& fb) {
      struct stat st;
      ASSERT_EQ(::fstat(fb.fd, &st), 0);
      EXPECT_EQ(::fcntl(fb.fd, F_GETFL) & O_ACCMODE, O_RDONLY) << "the descriptor is read-only";
      // The partial's path names the very file behind the descriptor, in blobs/.
      struct stat ps;
      EXPECT_EQ(::stat(fb.partial_path.c_str(), &ps), 0) << fb.partial_path;
      EXPECT_EQ(ps.st_ino, st.st_ino) << fb.partial_path;
      EXPECT_EQ(fs::path(fb.partial_path).parent_path(), fs::path(blob_dir)) << fb.partial_path;
      EXPECT_TRUE(fb.partial_path.ends_with(".incomplete")) << fb.partial_path;
      std::string bytes = ReadFd(fb.fd, fb.contiguous_bytes);
      std::lock_guard<std::mutex> l(mu);
      bool blob = fs::exists(blob_dir + "/" + etags[fb.path_in_repo]);
      calls[fb.path_in_repo].push_back({fb.generation, fb.contiguous_bytes, fb.size, st.st_ino, blob, Sha(bytes)});
      auto key = std::make_pair(fb.path_in_repo, fb.generation);
      if (!fds.count(key)) fds[key] = ::dup(fb.fd);
      seen[key] = bytes;
    };
  }
};

}  // namespace

TEST(Schedule, FilesCompleteInLoadOrderOnALinkSharedByAllConnections) {
  // Four 8 MiB files on a server whose connections share 16 MiB/s in total
  // (one uplink): given in an order that is neither sorted nor the tree's.
  const std::vector<std::string> order = {"c.safetensors", "a.safetensors", "d.safetensors", "b.safetensors"};
  Repo r(EightMiBFiles(order, 10), 16 * kMiB);  // a link of 16 MiB/s shared by all connections
  ASSERT_TRUE(r.hub);
  const auto& files = r.files;
  TempDir cache;
  auto o = Opts(*r.hub, cache.str());
  o.download_order = hubload::ClientOptions::DownloadOrder::kLoadOrder;  // no on_file_bytes: auto would not
  hubload::HubClient client(o);
  std::mutex mu;
  std::vector<std::string> done;
  hubload::DownloadCallbacks cb;
  cb.on_file_done = [&](const std::string& p, const std::string& local) {
    std::lock_guard<std::mutex> l(mu);
    done.push_back(p);
  };
  auto st = client.DownloadFiles("org/m", "main", hubload::RepoType::kModel, order, cb);
  ASSERT_OK(st);
  EXPECT_EQ(done, order) << "file k completes before file k+1";
  for (auto& [p, data] : files) {
    std::string blob = (cache.path() / "models--org--m/blobs" / Sha(data)).string();
    auto b = hubload::testing::ReadFileBytes(blob);
    EXPECT_EQ(Sha(std::string(b.begin(), b.end())), Sha(data)) << p;
    ExpectTiled(Gets(r.log, Sha(data)), data.size(), p);
  }
}

// On a link capped in total, the earliest unfinished file has the whole link
// until its last byte is in: when file k's last byte is in, the server has
// started sending at most one chunk of any later file (its counters count a
// request's planned body bytes when it starts). Files of 8 chunks on the
// adaptive connection count, given out of name order.
TEST(Schedule, NoLaterFileSharesTheLinkBeforeTheEarliestIsIn) {
  const std::vector<std::string> order = {"d.safetensors", "b.safetensors", "c.safetensors", "a.safetensors"};
  Repo r(EightMiBFiles(order, 40), 16 * kMiB);  // a link of 16 MiB/s shared by all connections
  ASSERT_TRUE(r.hub);
  const auto& files = r.files;
  std::map<std::string, std::string> cdn_path;  // file -> its path on the CDN listener
  for (auto& [p, data] : files) cdn_path[p] = "/models--org--m/" + Sha(data);
  TempDir cache;
  hubload::HubClient client(Opts(*r.hub, cache.str()));
  std::mutex mu;
  std::map<std::string, uint64_t> later_bytes;  // file -> bytes of later files started when its last byte was in
  hubload::DownloadCallbacks cb;
  cb.on_file_bytes = [&](const hubload::FileBytes& fb) {
    if (fb.size <= 0 || fb.contiguous_bytes != static_cast<uint64_t>(fb.size)) return;
    auto stats = r.hub->server->stats();
    std::lock_guard<std::mutex> l(mu);
    if (later_bytes.count(fb.path_in_repo)) return;
    uint64_t n = 0;
    auto pos = std::find(order.begin(), order.end(), fb.path_in_repo);
    for (auto it = pos + 1; it < order.end(); ++it) n += stats.body_bytes_per_path[cdn_path[*it]];
    later_bytes[fb.path_in_repo] = n;
  };
  auto st = client.DownloadFiles("org/m", "main", hubload::RepoType::kModel, order, cb);
  ASSERT_OK(st);
  ASSERT_EQ(later_bytes.size(), order.size());
  for (const auto& p : order) EXPECT_LE(later_bytes[p], kMiB) << "bytes of files after " << p;
  for (auto& [p, data] : files) ExpectTiled(Gets(r.log, Sha(data)), data.size(), p);
}

// Without a consumer of bytes as they land (no on_file_bytes), the default
// order is throughput: every file gets a connection at once (parallel files,
// each file's ranges in order on one connection), so when the first file is
// done every other one is well under way; with kLoadOrder, or with an
// on_file_bytes consumer, none is (see the test above).
TEST(Schedule, WithoutAConsumerEveryFileGetsAConnectionAtOnce) {
  const std::vector<std::string> order = {"b.safetensors", "d.safetensors", "a.safetensors", "c.safetensors"};
  Repo r(EightMiBFiles(order, 60), 16 * kMiB);  // a link of 16 MiB/s shared by all connections
  ASSERT_TRUE(r.hub);
  const auto& files = r.files;
  std::map<std::string, std::string> cdn_path;
  for (auto& [p, data] : files) cdn_path[p] = "/models--org--m/" + Sha(data);
  for (bool load_order : {false, true}) {
    SCOPED_TRACE(load_order ? "with on_file_bytes (auto: load order)" : "default (auto: throughput)");
    TempDir cache;
    auto o = Opts(*r.hub, cache.str());
    o.connections = 4;
    hubload::HubClient client(o);
    auto before = r.hub->server->stats();
    std::mutex mu;
    std::string first;
    std::map<std::string, uint64_t> at_first_done;  // file -> body bytes started when the first file was done
    hubload::DownloadCallbacks cb;
    cb.on_file_done = [&](const std::string& path, const std::string&) {
      auto stats = r.hub->server->stats();
      std::lock_guard<std::mutex> l(mu);
      if (!first.empty()) return;
      first = path;
      for (auto& [p, c] : cdn_path) at_first_done[p] = stats.body_bytes_per_path[c] - before.body_bytes_per_path[c];
    };
    if (load_order) cb.on_file_bytes = [](const hubload::FileBytes&) {};
    ASSERT_OK(client.DownloadFiles("org/m", "main", hubload::RepoType::kModel, order, cb));
    ASSERT_EQ(at_first_done.size(), files.size());
    if (load_order) {
      // The earliest file first; the next one may have started its chunks, no later one has.
      EXPECT_EQ(first, order[0]);
      for (size_t i = 2; i < order.size(); ++i) EXPECT_LE(at_first_done[order[i]], kMiB) << order[i];
    } else {
      for (auto& p : order) {
        if (p != first) {
          EXPECT_GE(at_first_done[p], 4 * kMiB) << p << " when " << first << " was done";
        }
      }
    }
    for (auto& [p, data] : files) {
      auto b = hubload::testing::ReadFileBytes(cache.path() / "models--org--m/blobs" / Sha(data));
      EXPECT_EQ(Sha(std::string(b.begin(), b.end())), Sha(data)) << p;
      // Throughput order, as many files as connections: each file is one
      // request for all of its bytes (a run of its 8 chunks), as one GET per
      // file would be; load order asks for one chunk per request.
      auto gets = Gets(r.log, Sha(data));
      std::vector<hubload::testing::LogLine> mine(gets.end() - static_cast<std::ptrdiff_t>(load_order ? 8 : 1),
                                                  gets.end());
      if (!load_order) {
        ASSERT_EQ(mine.size(), 1u) << p;
        EXPECT_EQ(ParseRange(mine[0].range), std::make_pair(int64_t{0}, static_cast<int64_t>(data.size()) - 1)) << p;
      }
      for (auto& g : mine) EXPECT_EQ(g.status, 206) << p;
    }
  }
}

TEST(Schedule, ServerIgnoringRangeMovesExactlyEachFilesBytes) {
  std::map<std::string, std::string> files = {{"x.safetensors", PatternBytes(5 * kMiB + 7, 1)},
                                              {"y.safetensors", PatternBytes(3 * kMiB, 2)},
                                              {"z.bin", PatternBytes(300000, 3)}};
  Repo r(files);
  ASSERT_TRUE(r.hub);
  r.hub->faults().SetIgnoreRange(true);
  TempDir cache;
  hubload::HubClient client(Opts(*r.hub, cache.str()));
  auto st = client.DownloadFiles("org/m", "main", hubload::RepoType::kModel,
                                 {"y.safetensors", "x.safetensors", "z.bin"}, {});
  ASSERT_OK(st);
  for (auto& [p, data] : files) {
    auto gets = Gets(r.log, Sha(data));
    ASSERT_EQ(gets.size(), 1u) << p;
    EXPECT_EQ(gets[0].status, 200) << p;
    EXPECT_EQ(gets[0].bytes, data.size()) << p;
    auto b = hubload::testing::ReadFileBytes(cache.path() / "models--org--m/snapshots" / r.commit / p);
    EXPECT_EQ(Sha(std::string(b.begin(), b.end())), Sha(data)) << p;
  }
}

TEST(Schedule, DroppedRangeOfALaterFileIsResumedInsideItsChunk) {
  std::map<std::string, std::string> files = {{"a.safetensors", PatternBytes(4 * kMiB, 4)},
                                              {"b.safetensors", PatternBytes(6 * kMiB, 5)}};
  Repo r(files);
  ASSERT_TRUE(r.hub);
  const std::string sha_b = Sha(files["b.safetensors"]);
  using Order = hubload::ClientOptions::DownloadOrder;
  for (Order order : {Order::kLoadOrder, Order::kThroughput}) {
    SCOPED_TRACE(order == Order::kLoadOrder ? "load order" : "throughput");
    r.hub->faults().SetDropAfterBytes(sha_b, kMiB / 2, 1);  // first body of b breaks after 512 KiB
    TempDir cache;
    auto o = Opts(*r.hub, cache.str());
    o.download_order = order;
    auto before = Gets(r.log, sha_b).size();
    hubload::HubClient client(o);
    auto st = client.DownloadFiles("org/m", "main", hubload::RepoType::kModel, {"a.safetensors", "b.safetensors"}, {});
    ASSERT_OK(st);
    auto all = Gets(r.log, sha_b);
    std::vector<hubload::testing::LogLine> gets(all.begin() + static_cast<std::ptrdiff_t>(before), all.end());
    if (order == Order::kLoadOrder) {
      ASSERT_EQ(gets.size(), 7u);  // 6 chunks + 1 continuation
    }
    int inside = 0;
    for (auto& g : gets)
      if (ParseRange(g.range).first % static_cast<int64_t>(kMiB) != 0) ++inside;
    EXPECT_EQ(inside, 1);
    EXPECT_GE(SumBytes(gets), files["b.safetensors"].size());
    EXPECT_LE(SumBytes(gets), files["b.safetensors"].size() + kMiB / 2);
    auto b = hubload::testing::ReadFileBytes(cache.path() / "models--org--m/blobs" / sha_b);
    EXPECT_EQ(Sha(std::string(b.begin(), b.end())), sha_b);
  }
}

TEST(Schedule, ThrottlingServerStillDeliversEveryFile) {
  std::map<std::string, std::string> files;
  std::vector<std::string> order;
  for (int i = 0; i < 6; ++i) {
    std::string p = "s" + std::to_string(i) + ".safetensors";
    files[p] = PatternBytes(3 * kMiB, 20 + static_cast<uint32_t>(i));
    order.push_back(p);
  }
  Repo r(files);
  ASSERT_TRUE(r.hub);
  r.hub->faults().SetStatusForNext("models--org--m", 429, 8, 0);  // the first 8 CDN requests: Retry-After 0
  TempDir cache;
  auto o = Opts(*r.hub, cache.str());
  o.retry.max_retries = 10;
  hubload::HubClient client(o);
  auto st = client.DownloadFiles("org/m", "main", hubload::RepoType::kModel, order, {});
  ASSERT_OK(st);
  for (auto& [p, data] : files) {
    auto b = hubload::testing::ReadFileBytes(cache.path() / "models--org--m/blobs" / Sha(data));
    EXPECT_EQ(Sha(std::string(b.begin(), b.end())), Sha(data)) << p;
  }
}

TEST(FileBytes, PrefixGrowsAndEndsWithTheSizeBeforeTheRenameIntoTheSameInode) {
  // One ranged file (5 chunks) and one single-stream file (below a chunk).
  std::map<std::string, std::string> files = {{"big.safetensors", PatternBytes(5 * kMiB - 3, 6)},
                                              {"small.bin", PatternBytes(700000, 7)}};
  Repo r(files);
  ASSERT_TRUE(r.hub);
  TempDir cache;
  Recorder rec;
  rec.blob_dir = cache.str() + "/models--org--m/blobs";
  for (auto& [p, d] : files) rec.etags[p] = Sha(d);
  hubload::DownloadCallbacks cb;
  rec.Install(&cb);
  auto o = Opts(*r.hub, cache.str());
  o.connections = 1;  // chunks land in order: the prefix grows chunk by chunk (several calls)
  hubload::HubClient client(o);
  auto st = client.DownloadFiles("org/m", "main", hubload::RepoType::kModel, {"big.safetensors", "small.bin"}, cb);
  ASSERT_OK(st);
  for (auto& [p, data] : files) {
    auto& calls = rec.calls[p];
    ASSERT_FALSE(calls.empty()) << p;
    uint64_t last = 0;
    for (auto& c : calls) {
      EXPECT_EQ(c.generation, 1u) << p;
      EXPECT_EQ(c.size, data.size()) << p;
      EXPECT_GE(c.contiguous, last) << p << ": the prefix never shrinks";
      EXPECT_EQ(c.prefix_sha, Sha(data.substr(0, c.contiguous))) << p << ": the announced prefix is the file's";
      EXPECT_FALSE(c.blob_existed) << p << ": announced before the rename";
      last = c.contiguous;
    }
    EXPECT_EQ(calls.back().contiguous, data.size()) << p;
    EXPECT_EQ(std::count_if(calls.begin(), calls.end(), [&](auto& c) { return c.contiguous == data.size(); }), 1)
        << p << ": once with the whole size";
    if (p == "big.safetensors") {
      EXPECT_GE(calls.size(), 3u) << "announced as it lands, not only at the end";
    }
    struct stat blob;
    ASSERT_EQ(::stat((rec.blob_dir + "/" + Sha(data)).c_str(), &blob), 0);
    EXPECT_EQ(calls.back().ino, blob.st_ino) << p << ": the blob is the partial, renamed";
    int fd = rec.fds[{p, 1}];
    EXPECT_EQ(Sha(ReadFd(fd, data.size() + 10)), Sha(data)) << p << ": the old descriptor reads the final blob";
  }
  // Cached files are never announced.
  Recorder again;
  hubload::DownloadCallbacks cb2;
  again.Install(&cb2);
  int done = 0;
  cb2.on_file_done = [&](const std::string&, const std::string&) { ++done; };
  ASSERT_OK(client.DownloadFiles("org/m", r.commit, hubload::RepoType::kModel, {"big.safetensors", "small.bin"}, cb2)
                  );
  EXPECT_EQ(done, 2);
  EXPECT_TRUE(again.calls.empty());
}

TEST(FileBytes, RestartAfterAHashMismatchUsesANewInodeAndNeverRewritesTheOldOne) {
  // A partial of unknown provenance (B02) holds 1 MiB of wrong bytes: the
  // stream resumes after it, the hash check fails, and the download starts
  // over in a new partial. What a reader saw of the first one never changes.
  const std::string data = PatternBytes(3 * kMiB, 8);
  Repo r({{"w.bin", data}});
  ASSERT_TRUE(r.hub);
  TempDir cache;
  const std::string blobs = cache.str() + "/models--org--m/blobs";
  fs::create_directories(blobs);
  const std::string wrong(kMiB, '\xAA');
  hubload::testing::WriteFileBytes(blobs + "/" + Sha(data) + ".incomplete", wrong);
  Recorder rec;
  rec.blob_dir = blobs;
  rec.etags["w.bin"] = Sha(data);
  hubload::DownloadCallbacks cb;
  rec.Install(&cb);
  hubload::HubClient client(Opts(*r.hub, cache.str()));
  auto st = client.DownloadFiles("org/m", "main", hubload::RepoType::kModel, {"w.bin"}, cb);
  ASSERT_OK(st);
  auto& calls = rec.calls["w.bin"];
  ASSERT_GE(calls.size(), 2u);
  EXPECT_EQ(calls.front().generation, 1u);
  EXPECT_EQ(calls.back().generation, 2u);
  EXPECT_EQ(calls.back().contiguous, data.size());
  ino_t first_ino = calls.front().ino, last_ino = calls.back().ino;
  EXPECT_NE(first_ino, last_ino) << "the restart is a new file";
  // Generation 1 carried the wrong prefix and the right rest; its bytes are
  // still exactly what was announced (never truncated or rewritten).
  auto g1 = std::make_pair(std::string("w.bin"), uint64_t{1});
  std::string then = rec.seen[g1];
  EXPECT_EQ(then.substr(0, kMiB), wrong);
  EXPECT_EQ(ReadFd(rec.fds[g1], then.size() + 10), then);
  uint64_t prev = 0, gen = 1;
  for (auto& c : calls) {
    if (c.generation != gen) {
      EXPECT_EQ(c.generation, gen + 1);
      gen = c.generation;
      prev = 0;
    }
    EXPECT_GE(c.contiguous, prev);
    prev = c.contiguous;
  }
  struct stat blob;
  ASSERT_EQ(::stat((blobs + "/" + Sha(data)).c_str(), &blob), 0);
  EXPECT_EQ(blob.st_ino, last_ino);
  EXPECT_EQ(Sha(ReadFd(rec.fds[{"w.bin", 2}], data.size())), Sha(data));
}

TEST(FileBytes, RangedRestartAfterAHashMismatchUsesANewInode) {
  // A ranged partial from an earlier run whose journal says chunk 0 is
  // complete, with wrong bytes in it: the other chunks are fetched, the hash
  // check fails, and the file is fetched again as one stream in a new file.
  const std::string data = PatternBytes(4 * kMiB, 9);
  Repo r({{"w.safetensors", data}});
  ASSERT_TRUE(r.hub);
  TempDir cache;
  const std::string blobs = cache.str() + "/models--org--m/blobs";
  {
    hubload::RepoCache rc(cache.str(), "org/m", hubload::RepoType::kModel);
    hubload::RangedBlobWriter::Options wo;
    wo.size = data.size();
    wo.chunk_bytes = kMiB;
    auto w = hubload::RangedBlobWriter::Open(rc, Sha(data), wo);
    ASSERT_OK(w);
    std::string wrong(kMiB, '\x55');
    ASSERT_OK((*w)->Append(0, wrong.data(), wrong.size()));
    ASSERT_OK((*w)->FlushChunk(0));
  }  // destroyed: partial + journal stay
  Recorder rec;
  rec.blob_dir = blobs;
  rec.etags["w.safetensors"] = Sha(data);
  hubload::DownloadCallbacks cb;
  rec.Install(&cb);
  hubload::HubClient client(Opts(*r.hub, cache.str()));
  auto st = client.DownloadFiles("org/m", "main", hubload::RepoType::kModel, {"w.safetensors"}, cb);
  ASSERT_OK(st);
  auto& calls = rec.calls["w.safetensors"];
  ASSERT_GE(calls.size(), 2u);
  EXPECT_EQ(calls.front().generation, 1u);
  EXPECT_EQ(calls.back().generation, 2u);
  EXPECT_NE(calls.front().ino, calls.back().ino);
  auto g1 = std::make_pair(std::string("w.safetensors"), uint64_t{1});
  EXPECT_EQ(ReadFd(rec.fds[g1], rec.seen[g1].size()), rec.seen[g1]);
  EXPECT_EQ(rec.seen[g1].substr(0, kMiB), std::string(kMiB, '\x55'));
  struct stat blob;
  ASSERT_EQ(::stat((blobs + "/" + Sha(data)).c_str(), &blob), 0);
  EXPECT_EQ(blob.st_ino, calls.back().ino);
  auto b = hubload::testing::ReadFileBytes(blobs + "/" + Sha(data));
  EXPECT_EQ(Sha(std::string(b.begin(), b.end())), Sha(data));
}

TEST(Verify, RegularFileWithWrongBytesIsRefusedByItsGitBlobSha1) {
  // Regular (non-LFS) files are named by their git blob sha1: the downloaded
  // bytes are checked against it before the rename, as LFS files are by sha256.
  const std::string config = "{\"hidden_size\": 4096, \"layers\": 32}";
  Repo r({{"config.json", config}});
  ASSERT_TRUE(r.hub);
  TempDir cache;
  auto o = Opts(*r.hub, cache.str());
  // One byte of config.json's body flipped (a mirror or proxy that corrupts
  // bytes without changing the length).
  o.transport = std::make_shared<hubload::testing::FirstPieceTransport>(
      hubload::MakeCurlTransport(),
      [](const hubload::HttpRequest& req) { return req.url.find("/config.json") != std::string::npos; },
      [](const char* d, size_t n, hubload::BodySink* out) {
        std::string copy(d, n);
        copy[0] ^= 0x20;
        return out->OnData(copy.data(), copy.size());
      });
  o.max_resume_attempts = 1;
  hubload::FileRequest fr;
  fr.repo_id = "org/m";
  fr.filename = "config.json";
  auto bad = hubload::HubClient(o).Download(fr);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kCorruptDownload) << bad.status().ToString();
  EXPECT_TRUE(bad.status().Is(hubload::reason::kHashMismatch)) << bad.status().ToString();
  const fs::path repo = cache.path() / "models--org--m";
  EXPECT_FALSE(fs::exists(repo / "snapshots" / r.commit / "config.json"));
  if (fs::exists(repo / "blobs"))
    for (auto& e : fs::directory_iterator(repo / "blobs")) ADD_FAILURE() << "left in blobs/: " << e.path();
  // The same file through an honest transport lands, under its git blob id.
  auto good = hubload::HubClient(Opts(*r.hub, cache.str())).Download(fr);
  ASSERT_OK(good);
  auto b = hubload::testing::ReadFileBytes(*good);
  EXPECT_EQ(std::string(b.begin(), b.end()), config);
}

// on_file_done may block (the loaders hold a later shard back until the
// driver has taken the earlier ones) without holding back the call for
// another file: a later file's callback that waits for the earlier file's
// callback sees it arrive. A scheduler that serialised the calls would keep
// the earlier file's call waiting behind it, a deadlock the 10 s bound of
// the wait below turns into a failure.
TEST(Schedule, ABlockingFileDoneCallbackDoesNotHoldBackOtherFiles) {
  // "late" is small and done at once; "early" (listed first) takes ~1 s on the shared link.
  Repo r({{"early.bin", PatternBytes(2 * kMiB, 71)}, {"late.bin", PatternBytes(2000, 72)}}, 2 * kMiB);
  ASSERT_TRUE(r.hub);
  TempDir cache;
  hubload::HubClient client(Opts(*r.hub, cache.str()));
  std::mutex mu;
  std::condition_variable cv;
  bool early_done = false, late_saw_early = false, late_called = false;
  hubload::DownloadCallbacks cb;
  cb.on_file_done = [&](const std::string& p, const std::string&) {
    std::unique_lock<std::mutex> l(mu);
    if (p == "early.bin") {
      early_done = true;
      cv.notify_all();
      return;
    }
    late_called = true;
    late_saw_early = cv.wait_for(l, std::chrono::seconds(10), [&] { return early_done; });
  };
  ASSERT_OK(client.DownloadFiles("org/m", "main", hubload::RepoType::kModel, {"early.bin", "late.bin"}, cb));
  EXPECT_TRUE(late_called);
  EXPECT_TRUE(late_saw_early) << "the callback for early.bin was held back while late.bin's call waited";
}
