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
  std::vector<std::string> fault_status, fault_drop, fault_stall, fault_replace, fault_rate, fault_redirect;
  int latency_ms = 0;
  int url_ttl_s = 0;
  uint64_t url_bytes = 0;
  std::string path_prefix;
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
      return hubload::cli::UsageError("serve", "--fault-status wants PATH_SUBSTRING:STATUS:COUNT[:RETRY_AFTER_S], got '" + f + "'");
    opt.faults.SetStatusForNext(p[0], static_cast<int>(status), static_cast<int>(count), static_cast<int>(retry));
  }
  for (auto& f : a.fault_drop) {
    auto p = SplitColon(f, 3);
    long long bytes = 0, count = 0;
    if (p.size() != 3 || !ToInt(p[1], &bytes) || !ToInt(p[2], &count) || bytes < 0)
      return hubload::cli::UsageError("serve", "--fault-drop wants PATH_SUBSTRING:BYTES:COUNT, got '" + f + "'");
    opt.faults.SetDropAfterBytes(p[0], static_cast<uint64_t>(bytes), static_cast<int>(count));
  }
  for (auto& f : a.fault_stall) {
    auto p = SplitColon(f, 4);
    long long bytes = 0, ms = 0, count = 0;
    if (p.size() != 4 || !ToInt(p[1], &bytes) || !ToInt(p[2], &ms) || !ToInt(p[3], &count) || bytes < 0 || ms < 0 ||
        ms > 86400000)
      return hubload::cli::UsageError("serve", "--fault-stall wants PATH_SUBSTRING:BYTES:MS:COUNT, got '" + f + "'");
    opt.faults.SetStallAfterBytes(p[0], static_cast<uint64_t>(bytes), static_cast<int>(ms), static_cast<int>(count));
  }
  for (auto& f : a.fault_replace) {
    // REPO_ID:PATH_IN_REPO:LOCAL_FILE:AFTER_N (the PATH_SUBSTRING is PATH_IN_REPO).
    auto p = SplitColon(f, 4);
    long long n = 0;
    if (p.size() != 4 || !ToInt(p[3], &n))
      return hubload::cli::UsageError("serve", "--fault-replace wants REPO_ID:PATH_IN_REPO:LOCAL_FILE:AFTER_N, got '" + f + "'");
    std::ifstream in(p[2], std::ios::binary);
    if (!in) return hubload::cli::Fail("serve", "--fault-replace: cannot read " + p[2]);
    std::ostringstream ss;
    ss << in.rdbuf();
    opt.faults.ReplaceFileAfter(p[1], static_cast<int>(n), p[0], p[1], ss.str());
  }
  for (auto& f : a.fault_rate) {
    // GROUP:QUOTA:WINDOW_S[:HINTS], HINTS a comma list of ratelimit, retry-after, retry-after-date, none.
    auto p = SplitColon(f, 4);
    long long quota = 0, window = 0;
    unsigned hints = Faults::kRateLimitHeaders;
    bool ok = p.size() >= 3 && ToInt(p[1], &quota) && ToInt(p[2], &window) && quota >= 0 && window > 0;
    if (ok && p.size() == 4) {
      hints = 0;
      size_t start = 0;
      while (ok && start <= p[3].size()) {
        size_t c = p[3].find(',', start);
        if (c == std::string::npos) c = p[3].size();
        std::string h = p[3].substr(start, c - start);
        if (h == "ratelimit") hints |= Faults::kRateLimitHeaders;
        else if (h == "retry-after") hints |= Faults::kRetryAfterSeconds;
        else if (h == "retry-after-date") hints |= Faults::kRetryAfterDate;
        else if (h != "none") ok = false;
        start = c + 1;
      }
    }
    if (!ok || (p[0] != "resolvers" && p[0] != "api" && p[0] != "cdn"))
      return hubload::cli::UsageError("serve", "--fault-rate-limit wants resolvers|api|cdn:QUOTA:WINDOW_S[:HINTS] with HINTS "
                                         "from ratelimit,retry-after,retry-after-date,none, got '" + f + "'");
    opt.faults.SetRateLimit(p[0], static_cast<int>(quota), static_cast<int>(window), hints);
  }
  for (auto& f : a.fault_redirect) {
    // FROM:TO[:STATUS[:FORM[:COUNT]]]
    auto p = SplitColon(f, 5);
    long long status = 307, count = -1;
    Faults::RedirectForm form = Faults::RedirectForm::kPathOnly;
    bool ok = p.size() >= 2 && !p[0].empty() && p[0][0] == '/' && !p[1].empty() && p[1][0] == '/';
    if (ok && p.size() >= 3) ok = ToInt(p[2], &status) && (status == 301 || status == 302 || status == 303 ||
                                                           status == 307 || status == 308);
    if (ok && p.size() >= 4) {
      if (p[3] == "path") form = Faults::RedirectForm::kPathOnly;
      else if (p[3] == "relative") form = Faults::RedirectForm::kRelative;
      else if (p[3] == "absolute") form = Faults::RedirectForm::kAbsolute;
      else if (p[3] == "protocol-relative") form = Faults::RedirectForm::kProtocolRelative;
      else ok = false;
    }
    if (ok && p.size() == 5) ok = ToInt(p[4], &count);
    if (!ok)
      return hubload::cli::UsageError("serve", "--fault-redirect wants /FROM:/TO[:STATUS[:path|relative|absolute|"
                                         "protocol-relative[:COUNT]]], got '" + f + "'");
    opt.faults.SetRedirect(p[0], p[1], static_cast<int>(status), form, static_cast<int>(count));
  }
  if (a.url_ttl_s < 0) return hubload::cli::UsageError("serve", "--fault-url-ttl must be >= 0");
  opt.faults.SetSignedUrlTtl(a.url_ttl_s);
  opt.faults.SetSignedUrlByteBudget(a.url_bytes);
  if (!a.path_prefix.empty() && a.path_prefix[0] != '/')
    return hubload::cli::UsageError("serve", "--path-prefix must start with '/', got '" + a.path_prefix + "'");
  opt.faults.SetPathPrefix(a.path_prefix);
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
  std::fprintf(stderr, "hubload serve: store %s, CDN listener %s%s%s\n", (*server)->root().c_str(),
               (*server)->cdn_url().c_str(), opt.read_only ? ", read-only mirror" : "",
               opt.upstream.empty() ? "" : (", pulling missing files from " + opt.upstream).c_str());
  int sig = 0;
  sigwait(&set, &sig);
  (*server)->Stop();
  return 0;
}

hubload::cli::Command reg{"serve", [](CLI::App& app, hubload::cli::Global&) {
  auto a = std::make_shared<ServeArgs>();
  auto* sub = app.add_subcommand("serve", "Serve a store (Hugging Face cache layout) as a Hub-compatible HTTP server");
  sub->add_option("root", a->root, "store root folder (cache layout: models--org--name/...)")->required();
  sub->add_option("--host", a->opt.host, "listen address of both listeners (e.g. 0.0.0.0)")->capture_default_str();
  sub->add_option("--port", a->opt.port, "hub port (0 = any free port)")
      ->capture_default_str()
      ->check(hubload::cli::NonNegativeCheck())
      ->check(CLI::Range(0, 65535));
  sub->add_option("--public-url", a->opt.public_url,
                  "base of the URLs handed out (behind a proxy or Service); default: the Host the client used");
  sub->add_option("--cdn-host", a->opt.cdn_host,
                  "host name in LFS redirects to the CDN listener (default: the host the client used)");
  sub->add_option("--upstream", a->opt.upstream,
                  "pull-through mirror: fetch files a snapshot listing names but the store lacks from this Hub");
  sub->add_option("--upstream-token", a->opt.upstream_token, "bearer token for --upstream (never printed)");
  sub->add_option("--path-prefix", a->path_prefix,
                  "serve the Hub API only under this path (e.g. /artifactory/api/huggingfaceml/x); 404 elsewhere");
  sub->add_option("--token", a->tokens, "accepted bearer token (repeatable; none = any token accepted)");
  sub->add_flag("--read-only", a->opt.read_only, "mirror mode: refuse every write");
  sub->add_option("--access-log", a->opt.access_log, "append one JSON line per request to FILE");
  // Sizes and bandwidths in the one size grammar (hubload/size.h: 10MB = 10^7, 10MiB = 10*2^20, plain bytes).
  using hubload::cli::NonNegativeCheck;
  using hubload::cli::PositiveCheck;
  using hubload::cli::SizeToBytes;
  sub->add_option("--threads", a->opt.threads, "accept threads (>= 1)")->capture_default_str()->check(PositiveCheck());
  sub->add_option("--lfs-threshold", a->opt.lfs_threshold_bytes, "size from which uploads are LFS (e.g. 10MB)")
      ->capture_default_str()
      ->transform(SizeToBytes());
  sub->add_option("--multipart-chunk-size", a->opt.multipart_chunk_size,
                  "LFS objects larger than this size upload in parts of this size (e.g. 8MiB; >= 1 byte)")
      ->capture_default_str()
      ->transform(SizeToBytes())
      ->check(PositiveCheck());
  sub->add_option("--tree-page-size", a->opt.tree_page_size, "tree API entries per page (>= 1)")
      ->capture_default_str()
      ->check(PositiveCheck());
  sub->add_option("--signed-url-ttl", a->opt.signed_url_ttl_s, "lifetime of signed CDN/upload URLs (s, >= 1)")
      ->capture_default_str()
      ->check(PositiveCheck());
  sub->add_option("--fault-status", a->fault_status,
                  "PATH_SUBSTRING:STATUS:COUNT[:RETRY_AFTER_S] answer the next COUNT matching requests with STATUS");
  sub->add_option("--fault-drop", a->fault_drop,
                  "PATH_SUBSTRING:BYTES:COUNT close the connection after BYTES body bytes, next COUNT responses");
  sub->add_option("--fault-stall", a->fault_stall,
                  "PATH_SUBSTRING:BYTES:MS:COUNT after BYTES body bytes send nothing for MS ms (connection kept "
                  "open), next COUNT responses");
  sub->add_option("--fault-latency-ms", a->latency_ms, "sleep before answering every request (ms, >= 0)")
      ->check(NonNegativeCheck());
  sub->add_option("--fault-bandwidth", a->bandwidth,
                  "per-connection body throughput cap in bytes per second, e.g. 150MB (0 = none)")
      ->transform(SizeToBytes());
  sub->add_option("--fault-total-bandwidth", a->total_bandwidth,
                  "cap on the sum of all connections' body throughput in bytes per second, e.g. 1GB (0 = none): one "
                  "shared link")
      ->transform(SizeToBytes());
  sub->add_flag("--fault-ignore-range", a->ignore_range, "ignore Range (200 with the full body)");
  sub->add_flag("--fault-strip-length", a->strip_length,
                "send neither Content-Length nor Content-Range (close-delimited bodies)");
  sub->add_option("--fault-rate-limit", a->fault_rate,
                  "GROUP:QUOTA:WINDOW_S[:HINTS] fixed-window quota per endpoint group (resolvers|api|cdn); over it 429 "
                  "with HINTS from ratelimit,retry-after,retry-after-date,none (default ratelimit)");
  sub->add_option("--fault-redirect", a->fault_redirect,
                  "/FROM:/TO[:STATUS[:FORM[:COUNT]]] redirect paths starting with /FROM to /TO (STATUS 307; FORM "
                  "path|relative|absolute|protocol-relative)");
  sub->add_option("--fault-url-ttl", a->url_ttl_s, "signed CDN/upload URLs expire after SECONDS (0 = --signed-url-ttl)")
      ->check(NonNegativeCheck());
  sub->add_option("--fault-url-bytes", a->url_bytes,
                  "each signed CDN URL serves at most SIZE in all (e.g. 1MiB; 0 = no limit), then answers 403 "
                  "'Request has expired'")
      ->transform(SizeToBytes());
  sub->add_option("--fault-replace", a->fault_replace,
                  "REPO_ID:PATH_IN_REPO:LOCAL_FILE:AFTER_N commit LOCAL_FILE as PATH_IN_REPO after N requests to it");
  return [a]() { return RunServe(*a); };
}};

}  // namespace
