// `hubload serve ROOT`: the Hub-compatible server (see include/hubload/server.h).
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "hubload/server.h"
#include "tools/hubload/cli.h"

namespace {

std::vector<std::string> SplitColon(const std::string& s, size_t max_parts) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (parts.size() + 1 < max_parts) {
    size_t c = s.find(':', start);
    if (c == std::string::npos) break;
    parts.push_back(s.substr(start, c - start));
    start = c + 1;
  }
  parts.push_back(s.substr(start));
  return parts;
}

bool ToInt(const std::string& s, long long* v) {
  try {
    size_t used = 0;
    *v = std::stoll(s, &used);
    return used == s.size();
  } catch (...) {
    return false;
  }
}

struct ServeArgs {
  std::string root;
  hubload::server::ServerOptions opt;
  std::vector<std::string> tokens;
  std::vector<std::string> fault_status, fault_drop, fault_stall, fault_replace;
  int latency_ms = 0;
  uint64_t bandwidth = 0;
  uint64_t total_bandwidth = 0;
  bool ignore_range = false, strip_length = false;
};

int RunServe(const ServeArgs& a) {
  using namespace hubload::server;
  ServerOptions opt = a.opt;
  opt.root = a.root;
  opt.tokens = a.tokens;
  for (auto& f : a.fault_status) {
    auto p = SplitColon(f, 4);
    long long status = 0, count = 0, retry = -1;
    if (p.size() < 3 || !ToInt(p[1], &status) || !ToInt(p[2], &count) || (p.size() == 4 && !ToInt(p[3], &retry)))
      return hubload::cli::Fail("serve", "--fault-status wants PATH_SUBSTRING:STATUS:COUNT[:RETRY_AFTER_S], got '" + f + "'");
    opt.faults.SetStatusForNext(p[0], static_cast<int>(status), static_cast<int>(count), static_cast<int>(retry));
  }
  for (auto& f : a.fault_drop) {
    auto p = SplitColon(f, 3);
    long long bytes = 0, count = 0;
    if (p.size() != 3 || !ToInt(p[1], &bytes) || !ToInt(p[2], &count) || bytes < 0)
      return hubload::cli::Fail("serve", "--fault-drop wants PATH_SUBSTRING:BYTES:COUNT, got '" + f + "'");
    opt.faults.SetDropAfterBytes(p[0], static_cast<uint64_t>(bytes), static_cast<int>(count));
  }
  for (auto& f : a.fault_stall) {
    auto p = SplitColon(f, 4);
    long long bytes = 0, ms = 0, count = 0;
    if (p.size() != 4 || !ToInt(p[1], &bytes) || !ToInt(p[2], &ms) || !ToInt(p[3], &count) || bytes < 0 || ms < 0 ||
        ms > 86400000)
      return hubload::cli::Fail("serve", "--fault-stall wants PATH_SUBSTRING:BYTES:MS:COUNT, got '" + f + "'");
    opt.faults.SetStallAfterBytes(p[0], static_cast<uint64_t>(bytes), static_cast<int>(ms), static_cast<int>(count));
  }
  for (auto& f : a.fault_replace) {
    // REPO_ID:PATH_IN_REPO:LOCAL_FILE:AFTER_N (the PATH_SUBSTRING is PATH_IN_REPO).
    auto p = SplitColon(f, 4);
    long long n = 0;
    if (p.size() != 4 || !ToInt(p[3], &n))
      return hubload::cli::Fail("serve", "--fault-replace wants REPO_ID:PATH_IN_REPO:LOCAL_FILE:AFTER_N, got '" + f + "'");
    std::ifstream in(p[2], std::ios::binary);
    if (!in) return hubload::cli::Fail("serve", "--fault-replace: cannot read " + p[2]);
    std::ostringstream ss;
    ss << in.rdbuf();
    opt.faults.ReplaceFileAfter(p[1], static_cast<int>(n), p[0], p[1], ss.str());
  }
  opt.faults.SetLatencyMs(a.latency_ms);
  opt.faults.SetBandwidthBytesPerSec(a.bandwidth);
  opt.faults.SetTotalBandwidthBytesPerSec(a.total_bandwidth);
  opt.faults.SetIgnoreRange(a.ignore_range);
  opt.faults.SetStripContentLength(a.strip_length);

  // Block the stop signals in every thread; the main thread waits for them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  auto server = Server::Start(opt);
  if (!server.ok()) return hubload::cli::Fail("serve", server.status().ToString());
  std::printf("listening on %s\n", (*server)->url().c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "hubload serve: store %s, CDN listener %s%s\n", (*server)->root().c_str(),
               (*server)->cdn_url().c_str(), opt.read_only ? ", read-only mirror" : "");
  int sig = 0;
  sigwait(&set, &sig);
  (*server)->Stop();
  return 0;
}

hubload::cli::Command reg{"serve", [](CLI::App& app, hubload::cli::Global&) {
  auto a = std::make_shared<ServeArgs>();
  auto* sub = app.add_subcommand("serve", "Serve a store (Hugging Face cache layout) as a Hub-compatible HTTP server");
  sub->add_option("root", a->root, "store root folder (cache layout: models--org--name/...)")->required();
  sub->add_option("--host", a->opt.host, "listen address and URL host")->capture_default_str();
  sub->add_option("--port", a->opt.port, "hub port (0 = any free port)")->capture_default_str();
  sub->add_option("--cdn-host", a->opt.cdn_host, "host name of the CDN listener used in LFS redirects")
      ->capture_default_str();
  sub->add_option("--token", a->tokens, "accepted bearer token (repeatable; none = any token accepted)");
  sub->add_flag("--read-only", a->opt.read_only, "mirror mode: refuse every write");
  sub->add_option("--access-log", a->opt.access_log, "append one JSON line per request to FILE");
  sub->add_option("--threads", a->opt.threads, "accept threads")->capture_default_str();
  sub->add_option("--lfs-threshold", a->opt.lfs_threshold_bytes, "size (bytes) from which uploads are LFS")
      ->capture_default_str();
  sub->add_option("--multipart-chunk-size", a->opt.multipart_chunk_size,
                  "LFS objects larger than this (bytes) upload in parts of this size")
      ->capture_default_str();
  sub->add_option("--tree-page-size", a->opt.tree_page_size, "tree API entries per page")->capture_default_str();
  sub->add_option("--signed-url-ttl", a->opt.signed_url_ttl_s, "lifetime of signed CDN/upload URLs (s)")
      ->capture_default_str();
  sub->add_option("--fault-status", a->fault_status,
                  "PATH_SUBSTRING:STATUS:COUNT[:RETRY_AFTER_S] answer the next COUNT matching requests with STATUS");
  sub->add_option("--fault-drop", a->fault_drop,
                  "PATH_SUBSTRING:BYTES:COUNT close the connection after BYTES body bytes, next COUNT responses");
  sub->add_option("--fault-stall", a->fault_stall,
                  "PATH_SUBSTRING:BYTES:MS:COUNT after BYTES body bytes send nothing for MS ms (connection kept "
                  "open), next COUNT responses");
  sub->add_option("--fault-latency-ms", a->latency_ms, "sleep before answering every request");
  sub->add_option("--fault-bandwidth", a->bandwidth, "per-connection body throughput cap (bytes/s)");
  sub->add_option("--fault-total-bandwidth", a->total_bandwidth,
                  "cap on the sum of all connections' body throughput (bytes/s): one shared link");
  sub->add_flag("--fault-ignore-range", a->ignore_range, "ignore Range (200 with the full body)");
  sub->add_flag("--fault-strip-length", a->strip_length,
                "send neither Content-Length nor Content-Range (close-delimited bodies)");
  sub->add_option("--fault-replace", a->fault_replace,
                  "REPO_ID:PATH_IN_REPO:LOCAL_FILE:AFTER_N commit LOCAL_FILE as PATH_IN_REPO after N requests to it");
  return [a]() { return RunServe(*a); };
}};

}  // namespace
