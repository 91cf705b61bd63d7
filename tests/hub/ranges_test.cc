// Parallel byte ranges of one large file (ClientOptions range_*) and
// HubClient::ReadRange, against the in-process `hubload serve` with its access
// log. Expected bytes and hashes come from the test's own data (OpenSSL); byte
// counts on the wire come from the server's access log.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "access_log.h"
#include "first_piece_transport.h"
#include "hubload/hub.h"
#include "hubload/reasons.h"
#include "testing/hub_server.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace fs = std::filesystem;
using hubload::Code;
using hubload::testing::TempDir;
using hubload::testing::TestHub;
using hubload::testing::PatternBytes;
using hubload::testing::Gets;
using hubload::testing::ParseRange;
using hubload::testing::SumBytes;

namespace {

constexpr uint64_t kMiB = 1 << 20;

// Bytes a ranged partial's journal records (hubload/cache.h RangedBlobWriter:
// at offset `size`, 32 bytes of magic, size and chunk size, then each chunk's
// written length as 8 little-endian bytes), read from the file's own bytes.
uint64_t JournalBytes(const std::string& partial, uint64_t size, uint64_t chunk) {
  std::ifstream in(partial, std::ios::binary);
  const uint64_t n = (size + chunk - 1) / chunk;
  in.seekg(static_cast<std::streamoff>(size + 32));
  std::vector<unsigned char> t(8 * n);
  if (!in.read(reinterpret_cast<char*>(t.data()), static_cast<std::streamsize>(t.size()))) return 0;
  uint64_t total = 0;
  for (uint64_t k = 0; k < n; ++k) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | t[8 * k + static_cast<uint64_t>(i)];
    total += v;
  }
  return total;
}

std::string Sha(const std::string& s) { return hubload::testing::Sha256Hex(s.data(), s.size()); }
std::string ReadAll(const fs::path& p) {
  auto b = hubload::testing::ReadFileBytes(p);
  return std::string(b.begin(), b.end());
}

struct Fixture {
  TempDir log_dir;
  std::string log = log_dir.str() + "/access.jsonl";
  std::unique_ptr<TestHub> hub;
  std::string data;
  std::string etag;
  std::string commit;
  Fixture(size_t size, uint32_t seed) {
    hubload::server::ServerOptions so;
    so.access_log = log;
    so.threads = 4;
    hub = hubload::testing::StartTestHub(so);
    data = PatternBytes(size, seed);
    etag = Sha(data);
    hubload::server::CreateRepoOptions ro;
    ro.lfs_threshold_bytes = 1024;  // LFS: sha256 etag, bytes from the CDN listener
    if (hub) commit = hub->AddRepo("org/big", {{"model.safetensors", data}, {"config.json", "{}"}}, ro);
  }
};

hubload::ClientOptions Ranged(const TestHub& hub, const std::string& cache, int ranges = 4) {
  hubload::ClientOptions o;
  o.config.endpoint = hub.url();
  o.config.cache_dir = cache;
  o.config.token = "";
  o.config.offline = false;
  o.retry.initial_backoff_s = 0.01;
  o.retry.max_backoff_s = 0.05;
  o.retry.jitter_fraction = 0;
  o.retry.max_total_s = 10;
  o.range_threshold_bytes = 4 * kMiB;
  o.range_chunk_bytes = 4 * kMiB;
  o.max_ranges_per_file = ranges;
  return o;
}

hubload::FileRequest Req(const std::string& file, const std::string& rev = "main") {
  hubload::FileRequest r;
  r.repo_id = "org/big";
  r.filename = file;
  r.revision = rev;
  return r;
}

using Order = hubload::ClientOptions::DownloadOrder;
constexpr Order kBothOrders[] = {Order::kLoadOrder, Order::kThroughput};
const char* OrderName(Order o) { return o == Order::kLoadOrder ? "load order" : "throughput"; }

// Ranged() with ClientOptions::download_order = `order` and `connections` pinned (0: adaptive).
hubload::ClientOptions RangedIn(Order order, const TestHub& hub, const std::string& cache, int connections = 0) {
  auto o = Ranged(hub, cache);
  o.download_order = order;
  o.connections = connections;
  return o;
}

// Downloads the fixture's model.safetensors with `o` into `*path`; returns
// the GET lines of its blob that this call added to the access log.
std::vector<hubload::testing::LogLine> DownloadLogged(const Fixture& f, const hubload::ClientOptions& o,
                                                      hubload::Result<std::string>* path) {
  auto before = Gets(f.log, f.etag).size();
  hubload::HubClient client(o);
  *path = client.Download(Req("model.safetensors"));
  auto all = Gets(f.log, f.etag);
  return std::vector<hubload::testing::LogLine>(all.begin() + static_cast<std::ptrdiff_t>(std::min(before, all.size())),
                                                all.end());
}

}  // namespace

TEST(Ranges, LargeFileComesInParallelRangesThatTileItExactly) {
  Fixture f(26 * kMiB + 333, 1);  // 7 chunks of 4 MiB, the last one short
  ASSERT_TRUE(f.hub);
  for (Order order : kBothOrders) {
    SCOPED_TRACE(OrderName(order));
    TempDir cache;
    auto o = RangedIn(order, *f.hub, cache.str(), 4);
    hubload::Result<std::string> p = std::string();
    auto gets = DownloadLogged(f, o, &p);
    ASSERT_OK(p);
    EXPECT_EQ(Sha(ReadAll(*p)), f.etag);
    EXPECT_TRUE(fs::is_symlink(*p));
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (auto& g : gets) {
      EXPECT_EQ(g.status, 206) << g.range;
      ranges.push_back(ParseRange(g.range));
    }
    std::sort(ranges.begin(), ranges.end());
    // One request per chunk in both orders: in throughput order one file
    // shares the 4 connections, so no request covers more than one chunk (the
    // first one included: the others wait for its answer).
    std::vector<std::pair<int64_t, int64_t>> want;
    for (uint64_t b = 0; b < f.data.size(); b += 4 * kMiB)
      want.push_back({static_cast<int64_t>(b), static_cast<int64_t>(std::min<uint64_t>(b + 4 * kMiB, f.data.size()) - 1)});
    EXPECT_EQ(ranges, want);
    EXPECT_EQ(SumBytes(gets), f.data.size());  // exactly the file on the wire
    std::string blobs = cache.str() + "/models--org--big/blobs";
    for (auto& e : fs::directory_iterator(blobs))
      EXPECT_EQ(e.path().filename().string().find(".incomplete"), std::string::npos) << e.path();
  }
}

// A range answered with more bytes than asked for never writes past the
// range (into bytes of another request): ranges are unusable, and the file is
// fetched again as one stream (no Range: the transport passes it through
// whole), with the exact bytes. In load order (one chunk per request) and in
// throughput order with one connection, whose first request is a run of 16
// chunks that ends before the file does (17 chunks).
TEST(Ranges, AnOverlongRangeAnswerFallsBackToOneStream) {
  Fixture f(66 * kMiB, 9);  // 16 chunks of 4 MiB + 2 MiB
  ASSERT_TRUE(f.hub);
  for (Order order : kBothOrders) {
    SCOPED_TRACE(OrderName(order));
    TempDir cache;
    auto o = RangedIn(order, *f.hub, cache.str(), 1);
    // Answers to ranged GETs carry their first piece twice: a 206 body longer
    // than the range asked for (a broken proxy or server).
    o.transport = std::make_shared<hubload::testing::FirstPieceTransport>(
        hubload::MakeCurlTransport(o.transport_options),
        [](const hubload::HttpRequest& req) {
          for (auto& [k, v] : req.headers)
            if (k == "Range") return true;
          return false;
        },
        [](const char* d, size_t n, hubload::BodySink* out) { return out->OnData(d, n) && out->OnData(d, n); });
    hubload::Result<std::string> p = std::string();
    auto gets = DownloadLogged(f, o, &p);
    ASSERT_OK(p);
    EXPECT_EQ(Sha(ReadAll(*p)), f.etag);
    ASSERT_FALSE(gets.empty());
    EXPECT_EQ(gets.back().status, 200) << "the last GET is the whole file on one stream";
    EXPECT_EQ(gets.back().bytes, f.data.size());
    for (auto& e : fs::directory_iterator(cache.str() + "/models--org--big/blobs"))
      EXPECT_EQ(e.path().filename().string().find(".incomplete"), std::string::npos) << e.path();
  }
}

TEST(Ranges, ServerIgnoringRangeCostsExactlyTheFileOnOneConnection) {
  // performance.md S9: detect 200 on the first range and stream the whole file from it.
  Fixture f(18 * kMiB + 5, 2);
  ASSERT_TRUE(f.hub);
  f.hub->faults().SetIgnoreRange(true);
  TempDir cache;
  hubload::HubClient client(Ranged(*f.hub, cache.str(), 8));
  auto p = client.Download(Req("model.safetensors"));
  ASSERT_OK(p);
  EXPECT_EQ(Sha(ReadAll(*p)), f.etag);
  auto gets = Gets(f.log, f.etag);
  ASSERT_EQ(gets.size(), 1u);
  EXPECT_EQ(gets[0].status, 200);
  EXPECT_EQ(gets[0].bytes, f.data.size());
}

TEST(Ranges, DroppedRangeIsResumedWithinItsChunk) {
  Fixture f(16 * kMiB, 3);
  ASSERT_TRUE(f.hub);
  for (Order order : kBothOrders) {
    SCOPED_TRACE(OrderName(order));
    // The first body response to the CDN path breaks after 1.5 MiB.
    f.hub->faults().SetDropAfterBytes("models--org--big", 3 * kMiB / 2, 1);
    TempDir cache;
    auto o = RangedIn(order, *f.hub, cache.str());
    hubload::Result<std::string> p = std::string();
    auto gets = DownloadLogged(f, o, &p);
    ASSERT_OK(p);
    EXPECT_EQ(Sha(ReadAll(*p)), f.etag);
    if (order == Order::kLoadOrder) {
      ASSERT_EQ(gets.size(), 5u);  // 4 chunks + 1 continuation
    }
    // The continuation starts inside a chunk, after whole MiBs already
    // written, and ends where the broken request was to end (a chunk end).
    int inside = 0;
    for (auto& g : gets) {
      auto [a, b] = ParseRange(g.range);
      if (a % static_cast<int64_t>(4 * kMiB) != 0) {
        ++inside;
        EXPECT_EQ((b + 1) % static_cast<int64_t>(4 * kMiB), 0) << g.range;
      }
    }
    EXPECT_EQ(inside, 1);
    EXPECT_GE(SumBytes(gets), f.data.size());
    EXPECT_LE(SumBytes(gets), f.data.size() + 3 * kMiB / 2);
  }
}

TEST(Ranges, CancelledDownloadResumesFromTheJournalOnTheNextRun) {
  Fixture f(32 * kMiB, 4);
  ASSERT_TRUE(f.hub);
  f.hub->faults().SetBandwidthBytesPerSec(16 * kMiB);  // slow enough to stop half-way
  TempDir cache;
  hubload::HubClient client(Ranged(*f.hub, cache.str(), 2));
  std::atomic<bool> stop{false};
  hubload::DownloadCallbacks cb;
  cb.cancel_flag = &stop;
  cb.on_progress = [&](uint64_t done, uint64_t total) {
    if (done >= total / 2) stop = true;
  };
  auto st = client.DownloadFiles("org/big", "main", hubload::RepoType::kModel, {"model.safetensors"}, cb);
  ASSERT_EQ(st.code(), Code::kCancelled) << st.ToString();
  std::string partial = cache.str() + "/models--org--big/blobs/" + f.etag + ".ranges.incomplete";
  ASSERT_TRUE(fs::exists(partial));
  EXPECT_FALSE(fs::exists(cache.str() + "/models--org--big/blobs/" + f.etag));
  uint64_t first_run = SumBytes(Gets(f.log, f.etag));
  f.hub->faults().SetBandwidthBytesPerSec(0);
  auto p = client.Download(Req("model.safetensors"));
  ASSERT_OK(p);
  EXPECT_EQ(Sha(ReadAll(*p)), f.etag);
  uint64_t second_run = SumBytes(Gets(f.log, f.etag)) - first_run;
  // At least half was kept (minus the 1 MiB write buffers of the 2 ranges in flight).
  EXPECT_LE(second_run, f.data.size() / 2 + 2 * kMiB) << "first run sent " << first_run;
  EXPECT_FALSE(fs::exists(partial));
}

// A download that fails before later files got a byte leaves no empty
// partial of theirs behind: not the sparse ranged partial with a journal of
// zeros, not the 0-byte single-stream <etag>.incomplete of the file refused.
// `cache ls` reported them as stray partials and `download --dry-run` as
// partial. The file sizes and etags come from the test's own data.
TEST(Ranges, AFailedDownloadLeavesNoPartialOfFilesThatGotNoByte) {
  Fixture f(12 * kMiB, 11);
  ASSERT_TRUE(f.hub);
  const std::string b = PatternBytes(12 * kMiB, 12), c = PatternBytes(12 * kMiB, 13);
  hubload::server::CreateRepoOptions ro;
  ro.lfs_threshold_bytes = 1024;
  ASSERT_FALSE(f.hub->AddRepo("org/three", {{"a.safetensors", f.data}, {"b.safetensors", b}, {"c.safetensors", c}}, ro)
                   .empty());
  // Every answer waits 100 ms, so b and c are prepared (their partials
  // created) while a's first range is on its way; a's bytes are refused.
  f.hub->faults().SetLatencyMs(100);
  for (int mode = 0; mode < 3; ++mode) {
    const bool ranges = mode < 2;
    SCOPED_TRACE(mode == 0 ? "ranges, load order" : mode == 1 ? "ranges, throughput" : "one stream per file");
    f.hub->faults().SetStatusForNext(f.etag, 404, 100);
    TempDir cache;
    auto o = Ranged(*f.hub, cache.str());
    if (!ranges) o.range_threshold_bytes = 0;
    o.download_order = mode == 0 ? Order::kLoadOrder : Order::kThroughput;
    hubload::HubClient client(o);
    auto st = client.DownloadFiles("org/three", "main", hubload::RepoType::kModel,
                                   {"a.safetensors", "b.safetensors", "c.safetensors"}, {});
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.ToString().find("a.safetensors"), std::string::npos) << st.ToString();
    const std::string blobs = cache.str() + "/models--org--three/blobs";
    if (mode == 0) {
      // b and c are prepared but wait for a: none of them got a byte.
      for (const std::string& etag : {f.etag, Sha(b), Sha(c)}) {
        EXPECT_FALSE(fs::exists(blobs + "/" + etag + ".ranges.incomplete")) << etag;
        EXPECT_FALSE(fs::exists(blobs + "/" + etag)) << etag;
      }
    } else if (mode == 1) {
      // b and c start beside a: a ranged partial left holds bytes in its journal.
      EXPECT_FALSE(fs::exists(blobs + "/" + f.etag + ".ranges.incomplete"));
      for (const std::string& etag : {Sha(b), Sha(c)}) {
        EXPECT_FALSE(fs::exists(blobs + "/" + etag)) << etag;
        std::string partial = blobs + "/" + etag + ".ranges.incomplete";
        if (fs::exists(partial)) {
          EXPECT_GT(JournalBytes(partial, 12 * kMiB, 4 * kMiB), 0u) << etag;
        }
      }
    } else {
      // b and c stream beside a (one stream per file): what they received
      // stays resumable; a's partial got no byte and is gone.
      EXPECT_FALSE(fs::exists(blobs + "/" + f.etag + ".incomplete"));
      EXPECT_FALSE(fs::exists(blobs + "/" + f.etag));
      for (const auto& e : fs::directory_iterator(blobs)) {
        if (e.path().extension() != ".incomplete") continue;
        EXPECT_GT(e.file_size(), 0u) << e.path();
      }
    }
  }
}

// A ranged partial whose journal holds every chunk (a run killed between its
// last byte and the rename) is verified and renamed without a GET of the
// file; one whose bytes do not hash to the etag is fetched again as one
// stream. The bytes come from the test's own data.
TEST(Ranges, AJournaledPartialHoldingEveryChunkIsVerifiedWithoutAGet) {
  Fixture f(12 * kMiB, 8);
  ASSERT_TRUE(f.hub);
  for (bool corrupt : {false, true}) {
    SCOPED_TRACE(corrupt ? "a flipped byte" : "intact");
    TempDir cache;
    const uint64_t before = Gets(f.log, f.etag).size();
    {
      hubload::RepoCache repo(cache.str(), "org/big", hubload::RepoType::kModel);
      hubload::RangedBlobWriter::Options o;
      o.size = f.data.size();
      o.chunk_bytes = 4 * kMiB;
      auto w = hubload::RangedBlobWriter::Open(repo, f.etag, o);
      ASSERT_OK(w);
      std::string bytes = f.data;
      if (corrupt) bytes[5 * kMiB + 3] ^= 0x20;
      for (size_t k = 0; k < (*w)->num_chunks(); ++k)
        ASSERT_OK((*w)->Append(k, bytes.data() + (*w)->chunk_begin(k), (*w)->chunk_end(k) - (*w)->chunk_begin(k)));
    }  // closed without Commit: the journal keeps every chunk
    const std::string partial = cache.str() + "/models--org--big/blobs/" + f.etag + ".ranges.incomplete";
    ASSERT_TRUE(fs::exists(partial));
    hubload::HubClient client(Ranged(*f.hub, cache.str()));
    auto p = client.Download(Req("model.safetensors"));
    ASSERT_OK(p);
    EXPECT_EQ(Sha(ReadAll(*p)), f.etag);
    EXPECT_FALSE(fs::exists(partial));
    auto gets = Gets(f.log, f.etag);
    gets.erase(gets.begin(), gets.begin() + static_cast<long>(before));
    if (!corrupt) {
      EXPECT_TRUE(gets.empty()) << gets.size() << " GETs of the file";
    } else {
      ASSERT_EQ(gets.size(), 1u);  // the whole file again, in one stream
      EXPECT_EQ(gets[0].range, "");
      EXPECT_EQ(gets[0].bytes, f.data.size());
    }
  }
}

// A file the server keeps sending with a wrong byte (its bytes never hash to
// the etag) is downloaded twice, not again and again: ranges, then one stream
// (or one stream twice with ranges off); then the load fails with
// HashMismatch naming the file, and no blob is left under its name.
TEST(Ranges, APersistentlyCorruptFileIsFetchedTwiceThenReported) {
  Fixture f(12 * kMiB, 9);
  ASSERT_TRUE(f.hub);
  fs::path blob;
  for (auto& e : fs::recursive_directory_iterator(f.hub->root.path()))
    if (e.path().filename() == f.etag) blob = e.path();
  ASSERT_FALSE(blob.empty());
  std::string served = f.data;
  served[7 * kMiB + 1] ^= 0x10;
  fs::permissions(blob, fs::perms::owner_all, fs::perm_options::add);
  hubload::testing::WriteFileBytes(blob, served);
  for (bool ranges : {true, false}) {
    SCOPED_TRACE(ranges ? "ranges" : "one stream");
    TempDir cache;
    auto o = Ranged(*f.hub, cache.str());
    if (!ranges) o.range_threshold_bytes = 0;
    hubload::HubClient client(o);
    const size_t before = Gets(f.log, f.etag).size();
    auto p = client.Download(Req("model.safetensors"));
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), Code::kCorruptDownload) << p.status().ToString();
    EXPECT_TRUE(p.status().Is(hubload::reason::kHashMismatch)) << p.status().ToString();
    EXPECT_NE(p.status().ToString().find("model.safetensors"), std::string::npos) << p.status().ToString();
    EXPECT_EQ(p.status().context().file, "model.safetensors");  // the repo path, not the discarded partial
    auto gets = Gets(f.log, f.etag);
    gets.erase(gets.begin(), gets.begin() + static_cast<long>(before));
    EXPECT_EQ(SumBytes(gets), 2 * f.data.size()) << gets.size() << " GETs";
    EXPECT_FALSE(fs::exists(cache.str() + "/models--org--big/blobs/" + f.etag));
  }
}

TEST(Ranges, ASingleStreamPartialIsResumedAsItIs) {
  // A partial left by huggingface_hub (<etag>.incomplete, contiguous prefix) is continued, not re-fetched in ranges.
  Fixture f(12 * kMiB, 5);
  ASSERT_TRUE(f.hub);
  TempDir cache;
  std::string blobs = cache.str() + "/models--org--big/blobs";
  fs::create_directories(blobs);
  std::ofstream(blobs + "/" + f.etag + ".incomplete", std::ios::binary) << f.data.substr(0, 5 * kMiB);
  hubload::HubClient client(Ranged(*f.hub, cache.str()));
  auto p = client.Download(Req("model.safetensors"));
  ASSERT_OK(p);
  EXPECT_EQ(Sha(ReadAll(*p)), f.etag);
  auto gets = Gets(f.log, f.etag);
  ASSERT_EQ(gets.size(), 1u);
  EXPECT_EQ(gets[0].range, "bytes=" + std::to_string(5 * kMiB) + "-");
  EXPECT_EQ(gets[0].bytes, 7 * kMiB);
}

TEST(Ranges, SmallFilesAndDisabledRangesUseOneStream) {
  Fixture f(6 * kMiB, 6);
  ASSERT_TRUE(f.hub);
  TempDir cache;
  auto o = Ranged(*f.hub, cache.str());
  o.range_threshold_bytes = 0;  // disabled
  hubload::HubClient client(o);
  auto p = client.Download(Req("model.safetensors"));
  ASSERT_OK(p);
  auto gets = Gets(f.log, f.etag);
  ASSERT_EQ(gets.size(), 1u);
  EXPECT_EQ(gets[0].range, "");
}

TEST(ReadRange, ReadsTheWantedBytesWithoutCachingTheFile) {
  Fixture f(5 * kMiB, 7);
  ASSERT_TRUE(f.hub);
  TempDir cache;
  hubload::HubClient client(Ranged(*f.hub, cache.str()));
  auto head = client.ReadRange(Req("model.safetensors"), 0, 8);
  ASSERT_OK(head);
  EXPECT_EQ(*head, f.data.substr(0, 8));
  auto mid = client.ReadRange(Req("model.safetensors"), 3 * kMiB + 1, 1000);
  ASSERT_OK(mid);
  EXPECT_EQ(*mid, f.data.substr(3 * kMiB + 1, 1000));
  auto tail = client.ReadRange(Req("model.safetensors"), f.data.size() - 10, 100);  // past the end
  ASSERT_OK(tail);
  EXPECT_EQ(*tail, f.data.substr(f.data.size() - 10));
  EXPECT_FALSE(fs::exists(cache.str() + "/models--org--big/blobs/" + f.etag));
  auto gets = Gets(f.log, f.etag);
  ASSERT_EQ(gets.size(), 3u);
  EXPECT_EQ(gets[0].range, "bytes=0-7");
  EXPECT_LE(SumBytes(gets), 8u + 1000u + 10u);
  auto missing = client.ReadRange(Req("nope.safetensors"), 0, 8);
  EXPECT_EQ(missing.status().code(), Code::kEntryNotFound) << missing.status().ToString();
}

TEST(ReadRange, RangeIgnoredIsCutAndCachedCommitCostsNoRequest) {
  Fixture f(3 * kMiB, 8);
  ASSERT_TRUE(f.hub);
  f.hub->faults().SetIgnoreRange(true);
  TempDir cache;
  hubload::HubClient client(Ranged(*f.hub, cache.str()));
  auto mid = client.ReadRange(Req("model.safetensors"), kMiB, 4096);
  ASSERT_OK(mid);
  EXPECT_EQ(*mid, f.data.substr(kMiB, 4096));
  f.hub->faults().SetIgnoreRange(false);
  ASSERT_OK(client.Download(Req("model.safetensors", f.commit)));
  Gets(f.log, "");  // let the server finish logging
  uint64_t before = f.hub->server->stats().requests;
  auto cached = client.ReadRange(Req("model.safetensors", f.commit), 100, 50);
  ASSERT_OK(cached);
  EXPECT_EQ(*cached, f.data.substr(100, 50));
  Gets(f.log, "");
  EXPECT_EQ(f.hub->server->stats().requests, before);
}

TEST(ReadRange, ServerSurvivesClientsHangingUpMidBody) {
  // Each ReadRange below closes its connection after 16 bytes of a 32 MiB body
  // that the server is still sending (Range ignored): the in-process server must
  // get EPIPE, not a SIGPIPE that kills this process.
  Fixture f(32 * kMiB, 9);
  ASSERT_TRUE(f.hub);
  f.hub->faults().SetIgnoreRange(true);
  TempDir cache;
  hubload::HubClient client(Ranged(*f.hub, cache.str()));
  for (int i = 0; i < 8; ++i) {
    auto r = client.ReadRange(Req("model.safetensors"), 1000 * static_cast<uint64_t>(i), 16);
    ASSERT_OK(r);
    EXPECT_EQ(*r, f.data.substr(1000 * static_cast<size_t>(i), 16));
  }
  auto p = client.Download(Req("model.safetensors"));
  ASSERT_OK(p);
  EXPECT_EQ(Sha(ReadAll(*p)), f.etag);
}
