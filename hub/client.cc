// HubClient: hf_hub_download / snapshot_download semantics over HttpTransport.
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "hub/repo_urls.h"
#include "hubload/hub.h"

namespace hubload {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
using hub_internal::ApiSegment;
using hub_internal::WebPrefix;


bool IsHex(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

std::optional<int64_t> ParseInt(const std::optional<std::string>& v) {
  if (!v || v->empty()) return std::nullopt;
  int64_t x = 0;
  for (char c : *v) {
    if (c < '0' || c > '9') return std::nullopt;
    x = x * 10 + (c - '0');
  }
  return x;
}

// "bytes a-b/total" → (a, total); total -1 for "*".
bool ParseContentRange(const std::string& v, int64_t* first, int64_t* total) {
  if (v.rfind("bytes ", 0) != 0) return false;
  std::string r = v.substr(6);
  size_t slash = r.find('/');
  if (slash == std::string::npos) return false;
  std::string range = r.substr(0, slash), tot = r.substr(slash + 1);
  *total = tot == "*" ? -1 : ParseInt(tot).value_or(-2);
  if (*total == -2) return false;
  if (range == "*") {
    *first = -1;
    return true;
  }
  size_t dash = range.find('-');
  if (dash == std::string::npos) return false;
  auto a = ParseInt(range.substr(0, dash));
  if (!a) return false;
  *first = *a;
  return true;
}

std::optional<std::string> NextLink(const HttpHeaders& h) {
  auto v = h.Get("Link");
  if (!v) return std::nullopt;
  size_t pos = 0;
  while (pos < v->size()) {
    size_t lt = v->find('<', pos);
    if (lt == std::string::npos) break;
    size_t gt = v->find('>', lt);
    if (gt == std::string::npos) break;
    size_t end = v->find(',', gt);
    std::string params = v->substr(gt + 1, end == std::string::npos ? std::string::npos : end - gt - 1);
    if (params.find("rel=\"next\"") != std::string::npos || params.find("rel=next") != std::string::npos)
      return v->substr(lt + 1, gt - lt - 1);
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return std::nullopt;
}

struct FileMeta {
  std::string commit;
  std::string raw_etag;  // header value as sent (for If-Range)
  std::string etag;      // normalised
  int64_t size = -1;
  std::string location;  // absolute redirect target, if any
};

// Cancellation shared by the workers of one call.
struct Cancel {
  const DownloadCallbacks* cb = nullptr;
  std::atomic<bool> stop{false};
  bool Cancelled() const {
    if (stop.load(std::memory_order_relaxed)) return true;
    if (cb && cb->cancel_flag && cb->cancel_flag->load()) return true;
    if (cb && cb->cancelled && cb->cancelled()) return true;
    return false;
  }
};

// Aggregate progress, rate-limited.
struct Progress {
  const DownloadCallbacks* cb = nullptr;
  std::atomic<uint64_t> done{0}, total{0};
  std::mutex mu;
  std::chrono::steady_clock::time_point last{};
  void Add(int64_t n) {
    if (n >= 0) done += static_cast<uint64_t>(n);
    else done -= static_cast<uint64_t>(-n);
    Report(false);
  }
  void Report(bool force) {
    if (!cb || !cb->on_progress) return;
    std::lock_guard<std::mutex> l(mu);
    auto now = std::chrono::steady_clock::now();
    if (!force && now - last < std::chrono::milliseconds(100)) return;
    last = now;
    cb->on_progress(done.load(), total.load());
  }
};

Status Cancelled(ErrorContext ctx) {
  return Status(Code::kCancelled, "download cancelled" + (ctx.file.empty() ? std::string() : " (" + ctx.file + ")"),
                "Cancelled", std::move(ctx));
}

Status WithCtx(Status s, const ErrorContext& ctx) {
  // Name the repo file in the message when the lower layer (cache, transport) could not.
  if (!ctx.file.empty() && s.message().find(ctx.file) == std::string::npos)
    s = s.WithPrefix(ctx.repo_id.empty() ? ctx.file : ctx.repo_id + ": " + ctx.file);
  ErrorContext& c = s.mutable_context();
  if (c.repo_id.empty()) c.repo_id = ctx.repo_id;
  if (c.revision.empty()) c.revision = ctx.revision;
  if (c.file.empty() || c.file.find('/') == 0) {
    // keep a local path if one was set; the repo path goes in the message
    if (c.file.empty()) c.file = ctx.file;
  }
  if (c.url.empty()) c.url = ctx.url;
  return s;
}

bool FallbackAllowed(Code c) {
  return c == Code::kNetwork || c == Code::kServerError || c == Code::kUnauthorized || c == Code::kPermissionDenied ||
         c == Code::kRateLimited || c == Code::kRepoNotFound || c == Code::kGated || c == Code::kInvalidFormat;
}

}  // namespace

struct HubClient::Impl {
  ClientOptions opt;
  std::shared_ptr<HttpTransport> http;
  std::string endpoint_origin;

  explicit Impl(ClientOptions o) : opt(std::move(o)) {
    if (opt.config.cache_dir.empty()) opt.config.cache_dir = HubConfig::FromEnvironment().cache_dir;
    while (!opt.config.endpoint.empty() && opt.config.endpoint.back() == '/') opt.config.endpoint.pop_back();
    if (opt.max_workers < 1) opt.max_workers = 1;
    http = opt.transport ? opt.transport : MakeRetryingTransport(MakeCurlTransport(opt.transport_options), opt.retry);
    endpoint_origin = UrlOrigin(opt.config.endpoint);
  }

  ErrorContext Ctx(const std::string& repo, const std::string& rev, const std::string& file,
                   const std::string& url = {}) const {
    ErrorContext c;
    c.repo_id = repo;
    c.revision = rev;
    c.file = file;
    c.url = RedactUrl(url);
    return c;
  }

  void AddAuth(HttpRequest* req) const {
    if (!opt.config.token.empty() && UrlOrigin(req->url) == endpoint_origin)
      req->headers.emplace_back("Authorization", "Bearer " + opt.config.token);
  }

  std::string ResolveUrlFor(RepoType t, const std::string& repo, const std::string& rev, const std::string& path) const {
    return opt.config.endpoint + "/" + WebPrefix(t) + repo + "/resolve/" + EncodeRevision(rev) + "/" + EncodePath(path);
  }
  std::string ApiUrl(RepoType t, const std::string& repo, const std::string& tail) const {
    return opt.config.endpoint + "/api/" + ApiSegment(t) + "/" + repo + tail;
  }

  Status OfflineMiss(const RepoCache& rc, const std::string& rev, const std::string& what) const {
    return Status(Code::kOfflineMiss,
                  what + " of " + rc.repo_id() + " at revision '" + rev + "' is not in the local cache " +
                      rc.cache_dir() + " (offline mode: no request was made)",
                  "OfflineMiss", Ctx(rc.repo_id(), rev, what));
  }

  Result<json> GetJson(const std::string& url, const ErrorContext& ctx, HttpHeaders* out_headers = nullptr) const {
    HttpRequest req;
    req.url = url;
    req.timeout_s = opt.metadata_timeout_s;
    AddAuth(&req);
    auto r = http->Send(req, nullptr);
    ErrorContext c = ctx;
    c.url = RedactUrl(url);
    if (!r.ok()) return WithCtx(r.status(), c);
    if (r->status >= 300) return StatusFromHttp(r->status, r->headers, r->body, c);
    auto j = json::parse(r->body, nullptr, false);
    if (j.is_discarded())
      return Status(Code::kInvalidFormat, "invalid JSON from " + c.url, "BadJson", c);
    if (out_headers) *out_headers = r->headers;
    return j;
  }

  // HEAD probe (huggingface_hub get_hf_file_metadata): follows relative
  // redirects only; an absolute redirect is where the bytes live.
  Result<FileMeta> Head(RepoType t, const std::string& repo, const std::string& rev, const std::string& path,
                        std::string* commit_on_404) const {
    std::string url = ResolveUrlFor(t, repo, rev, path);
    ErrorContext ctx = Ctx(repo, rev, path, url);
    for (int hop = 0; hop <= 10; ++hop) {
      HttpRequest req;
      req.method = "HEAD";
      req.url = url;
      req.follow_redirects = false;
      req.timeout_s = opt.metadata_timeout_s;
      req.headers.emplace_back("Accept-Encoding", "identity");
      AddAuth(&req);
      auto r = http->Send(req, nullptr);
      ctx.url = RedactUrl(url);
      if (!r.ok()) return WithCtx(r.status(), ctx);
      const HttpResponse& resp = *r;
      if (resp.status >= 400) {
        if (commit_on_404)
          if (auto c = resp.headers.Get("X-Repo-Commit")) *commit_on_404 = *c;
        return StatusFromHttp(resp.status, resp.headers, resp.body, ctx);
      }
      bool redirect = resp.status >= 300 && resp.status < 400;
      auto loc = resp.headers.Get("Location");
      if (redirect && loc) {
        bool relative = loc->find("://") == std::string::npos && loc->rfind("//", 0) != 0;
        if (relative) {
          url = ResolveUrl(url, *loc);
          continue;
        }
      }
      FileMeta m;
      m.commit = resp.headers.Get("X-Repo-Commit").value_or("");
      m.raw_etag = resp.headers.Get("X-Linked-Etag").value_or(resp.headers.Get("ETag").value_or(""));
      m.etag = NormalizeEtag(m.raw_etag);
      if (auto s = ParseInt(resp.headers.Get("X-Linked-Size"))) m.size = *s;
      else if (!redirect)
        if (auto s2 = ParseInt(resp.headers.Get("Content-Length"))) m.size = *s2;
      if (redirect && loc) m.location = ResolveUrl(url, *loc);
      std::string host = UrlOrigin(url);
      if (!IsCommitHash(m.commit))
        return Status(Code::kInvalidFormat,
                      "the server " + host + " sent no valid X-Repo-Commit header for '" + path + "'",
                      "MissingHeader", ctx);
      if (m.etag.empty() || m.etag.find('/') != std::string::npos || m.etag.find('.') != std::string::npos)
        return Status(Code::kInvalidFormat,
                      "the server " + host + " sent no usable ETag/X-Linked-Etag header for '" + path + "'",
                      "MissingHeader", ctx);
      return m;
    }
    return Status(Code::kNetwork, "too many relative redirects for '" + path + "'", "TooManyRedirects", ctx);
  }

  // Streams `url` into the writer `open` returns, resuming with Range +
  // If-Range, restarting from zero whenever the answer cannot be appended.
  Result<std::string> Fetch(const std::function<Result<std::unique_ptr<BlobWriter>>(bool resume)>& open,
                            const std::string& url, const FileMeta& m, const ErrorContext& ctx0, Progress* progress,
                            Cancel* cancel, const DownloadCallbacks* cb) const {
    ErrorContext ctx = ctx0;
    ctx.url = RedactUrl(url);
    HUBLOAD_ASSIGN_OR_RETURN(std::unique_ptr<BlobWriter> w, open(true));
    if (progress) progress->Add(static_cast<int64_t>(w->offset()));
    int failures = 0;
    auto restart = [&]() -> Status {
      if (progress) progress->Add(-static_cast<int64_t>(w->offset()));
      return w->Restart();
    };
    while (true) {
      if (cancel && cancel->Cancelled()) return Cancelled(ctx);
      uint64_t off = w->offset();
      if (m.size >= 0 && off == static_cast<uint64_t>(m.size) && off > 0) {
        // B03: the partial is already complete; verify without a request.
        auto c = w->Commit();
        if (c.ok()) return c;
        if (c.status().reason() != "HashMismatch" || ++failures > opt.max_resume_attempts) return WithCtx(c.status(), ctx);
        if (progress) progress->Add(-static_cast<int64_t>(off));
        HUBLOAD_ASSIGN_OR_RETURN(w, open(false));
        continue;
      }
      struct Sink : BodySink {
        BlobWriter* w;
        Progress* progress;
        Cancel* cancel;
        const FileMeta* m;
        const DownloadCallbacks* cb;
        const std::string* path;
        uint64_t off;
        uint64_t got = 0;
        bool mismatch = false;
        bool restarted = false;
        Status err;
        bool OnResponseStart(const HttpResponse& h) override {
          if (h.status == 206) {
            int64_t first = 0, total = 0;
            auto cr = h.headers.Get("Content-Range");
            if (!cr || !ParseContentRange(*cr, &first, &total) || first != static_cast<int64_t>(off) ||
                (m->size >= 0 && total >= 0 && total != m->size)) {
              mismatch = true;
              return false;
            }
            // A 206 from a server that ignored If-Range (B02): its etag must
            // still be ours when it sends one in the Hub's format.
            std::string e = NormalizeEtag(h.headers.Get("X-Linked-Etag").value_or(h.headers.Get("ETag").value_or("")));
            if ((e.size() == 40 || e.size() == 64) && IsHex(e) && e != m->etag) {
              mismatch = true;
              return false;
            }
          } else if (off > 0) {
            // 200 to a ranged request: Range ignored or validator changed — start over.
            restarted = true;
            if (progress) progress->Add(-static_cast<int64_t>(w->offset()));
            err = w->Restart();
            if (!err.ok()) return false;
          }
          return true;
        }
        bool OnData(const char* d, size_t n) override {
          if (cancel && cancel->Cancelled()) return false;
          err = w->Append(d, n);
          if (!err.ok()) return false;
          got += n;
          if (progress) progress->Add(static_cast<int64_t>(n));
          if (cb && cb->on_file_progress) cb->on_file_progress(*path, w->offset(), m->size < 0 ? 0 : m->size);
          return true;
        }
      } sink;
      sink.w = w.get();
      sink.progress = progress;
      sink.cancel = cancel;
      sink.m = &m;
      sink.cb = cb;
      sink.path = &ctx.file;
      sink.off = off;
      HttpRequest req;
      req.url = url;
      AddAuth(&req);
      if (off > 0) {
        req.headers.emplace_back("Range", "bytes=" + std::to_string(off) + "-");
        std::string v = m.raw_etag;
        if (v.rfind("W/", 0) == 0) v = v.substr(2);
        if (!v.empty() && v.front() != '"') v = "\"" + v + "\"";
        if (!v.empty()) req.headers.emplace_back("If-Range", v);
      }
      auto r = http->Send(req, &sink);
      if (!sink.err.ok()) return WithCtx(sink.err, ctx);
      if (cancel && cancel->Cancelled()) return Cancelled(ctx);
      if (sink.mismatch) {
        HUBLOAD_RETURN_IF_ERROR(restart());
        if (++failures > opt.max_resume_attempts)
          return Status(Code::kCorruptDownload, "the server keeps answering ranges that do not fit the partial of '" +
                                                    ctx.file + "'", "RangeMismatch", ctx);
        continue;
      }
      if (!r.ok()) {
        if (r.status().code() != Code::kNetwork) return WithCtx(r.status(), ctx);
        if (sink.got > 0) failures = 0;
        if (++failures > opt.max_resume_attempts) return WithCtx(r.status(), ctx);
        spdlog::debug("resuming {} after: {}", ctx.file, r.status().message());
        continue;
      }
      if (r->status == 416) {
        // Range not satisfiable: trust only what the hash check confirms.
        int64_t first = 0, total = -1;
        auto cr = r->headers.Get("Content-Range");
        if (cr && ParseContentRange(*cr, &first, &total) && total == static_cast<int64_t>(off) &&
            (m.size < 0 || m.size == total)) {
          auto c = w->Commit();
          if (c.ok()) return c;
        }
        HUBLOAD_RETURN_IF_ERROR(restart());
        if (++failures > opt.max_resume_attempts)
          return StatusFromHttp(r->status, r->headers, r->body, ctx);
        continue;
      }
      if (r->status >= 300) return StatusFromHttp(r->status, r->headers, r->body, ctx);
      if (m.size >= 0 && w->offset() < static_cast<uint64_t>(m.size)) {
        // Close-delimited body that ended early: resume.
        if (sink.got > 0) failures = 0;
        if (++failures > opt.max_resume_attempts)
          return Status(Code::kNetwork, "connection closed early while downloading '" + ctx.file + "'",
                        "ConnectionLost", ctx);
        continue;
      }
      auto c = w->Commit();
      if (c.ok()) return c;
      if (c.status().reason() == "HashMismatch" && ++failures <= opt.max_resume_attempts) {
        HUBLOAD_ASSIGN_OR_RETURN(w, open(false));
        continue;
      }
      return WithCtx(c.status(), ctx);
    }
  }

  // Value of If-Range for `m` (a strong validator, quoted).
  static std::string IfRangeValue(const FileMeta& m) {
    std::string v = m.raw_etag;
    if (v.rfind("W/", 0) == 0) v = v.substr(2);
    if (!v.empty() && v.front() != '"') v = "\"" + v + "\"";
    return v;
  }

  // Parallel byte ranges of one file into a RangedBlobWriter (ClientOptions
  // range_*). The first pending chunk is requested alone; once it answers 206
  // the other range workers start. A 200 to it means the server ignores Range:
  // that one response then carries the whole file (exactly size bytes on the
  // wire). Answers that fit no chunk return kUnsupported reason
  // "RangesUnusable" (the caller falls back to one stream); other failures
  // keep the partial, which the next run resumes chunk by chunk.
  Result<std::string> FetchRanged(const std::function<Result<std::unique_ptr<RangedBlobWriter>>(bool)>& open,
                                  const std::string& url, const FileMeta& m, const ErrorContext& ctx0,
                                  Progress* progress, Cancel* cancel, const DownloadCallbacks* cb) const {
    ErrorContext ctx = ctx0;
    ctx.url = RedactUrl(url);
    HUBLOAD_ASSIGN_OR_RETURN(std::unique_ptr<RangedBlobWriter> wp, open(true));
    RangedBlobWriter& w = *wp;
    const uint64_t size = static_cast<uint64_t>(m.size);
    const size_t n = w.num_chunks();
    uint64_t counted = w.bytes_received();  // bytes reported to `progress` so far
    if (progress) progress->Add(static_cast<int64_t>(counted));
    std::mutex mu;
    size_t next = 0;
    Status first_err;
    bool unusable = false;
    std::atomic<bool> abort{false};
    auto stop = [&]() { return abort.load() || (cancel && cancel->Cancelled()); };
    auto fail = [&](Status s, bool ranges_unusable) {
      std::lock_guard<std::mutex> l(mu);
      if (first_err.ok()) {
        first_err = std::move(s);
        unusable = ranges_unusable;
      }
      abort = true;
    };
    auto take = [&]() -> std::optional<size_t> {
      std::lock_guard<std::mutex> l(mu);
      while (next < n && w.chunk_received(next) == w.chunk_end(next) - w.chunk_begin(next)) ++next;
      if (next >= n) return std::nullopt;
      return next++;
    };
    auto report_file = [&]() {
      if (cb && cb->on_file_progress) cb->on_file_progress(ctx.file, w.bytes_received(), size);
    };
    std::mutex progress_mu;
    auto add_progress = [&](int64_t d) {
      if (!progress) return;
      std::lock_guard<std::mutex> l(progress_mu);
      counted = static_cast<uint64_t>(static_cast<int64_t>(counted) + d);
      progress->Add(d);
    };

    // One chunk until it is complete (resumed within the chunk after network
    // errors). `on_first_206` runs once when the probe learns ranges work;
    // `whole` is set when the probe got 200 and streamed the file instead.
    std::vector<std::thread> workers;
    auto fetch_chunk = [&](size_t k, bool probe, const std::function<void()>& on_first_206) -> Status {
      int failures = 0;
      while (true) {
        if (stop()) return Status::Ok();
        uint64_t b = w.chunk_begin(k) + w.chunk_received(k), e = w.chunk_end(k);
        if (b >= e) return Status::Ok();
        struct Sink : BodySink {
          RangedBlobWriter* w;
          size_t k;
          uint64_t b = 0, e = 0, size = 0, got = 0, pos = 0;
          bool probe = false, whole = false, mismatch = false;
          const FileMeta* m;
          std::function<bool()> stop;
          std::function<void(int64_t)> add;
          std::function<void()> report, on_206;
          Status err;
          bool OnResponseStart(const HttpResponse& h) override {
            if (h.status == 206) {
              int64_t first = 0, total = 0;
              auto cr = h.headers.Get("Content-Range");
              std::string e2 =
                  NormalizeEtag(h.headers.Get("X-Linked-Etag").value_or(h.headers.Get("ETag").value_or("")));
              if (!cr || !ParseContentRange(*cr, &first, &total) || first != static_cast<int64_t>(b) ||
                  total != static_cast<int64_t>(size) || ((e2.size() == 40 || e2.size() == 64) && IsHex(e2) && e2 != m->etag)) {
                mismatch = true;
                return false;
              }
              if (on_206) on_206();
              return true;
            }
            if (!probe) {  // 200 to a later range: the server changed its mind
              mismatch = true;
              return false;
            }
            // Range ignored (or If-Range failed): the body is the whole file.
            whole = true;
            if (w->bytes_received() > 0) {
              add(-static_cast<int64_t>(w->bytes_received()));
              err = w->Restart();
              if (!err.ok()) return false;
            }
            return true;
          }
          bool OnData(const char* d, size_t len) override {
            if (stop()) return false;
            if (!whole) {
              err = w->Append(k, d, len);
              if (!err.ok()) return false;
            } else {
              // Spread the sequential body over the chunks in order.
              while (len > 0) {
                size_t ck = ChunkOf(pos);
                uint64_t room = w->chunk_end(ck) - pos;
                size_t t = static_cast<size_t>(std::min<uint64_t>(room, len));
                err = w->Append(ck, d, t);
                if (!err.ok()) return false;
                pos += t;
                d += t;
                len -= t;
                if (pos == w->chunk_end(ck)) {
                  err = w->FlushChunk(ck);
                  if (!err.ok()) return false;
                }
                add(static_cast<int64_t>(t));
              }
              report();
              return true;
            }
            got += len;
            add(static_cast<int64_t>(len));
            report();
            return true;
          }
          size_t ChunkOf(uint64_t off) const {
            size_t lo = 0, hi = w->num_chunks() - 1;
            while (lo < hi) {
              size_t mid = (lo + hi + 1) / 2;
              if (w->chunk_begin(mid) <= off) lo = mid;
              else hi = mid - 1;
            }
            return lo;
          }
        } sink;
        sink.w = &w;
        sink.k = k;
        sink.b = b;
        sink.e = e;
        sink.size = size;
        sink.probe = probe;
        sink.m = &m;
        sink.stop = stop;
        sink.add = add_progress;
        sink.report = report_file;
        sink.on_206 = on_first_206;
        HttpRequest req;
        req.url = url;
        AddAuth(&req);
        req.headers.emplace_back("Range", "bytes=" + std::to_string(b) + "-" + std::to_string(e - 1));
        if (std::string v = IfRangeValue(m); !v.empty()) req.headers.emplace_back("If-Range", v);
        auto r = http->Send(req, &sink);
        Status fl = sink.whole ? Status::Ok() : w.FlushChunk(k);
        if (!sink.err.ok()) return sink.err;
        if (!fl.ok()) return fl;
        if (sink.mismatch)
          return Status(Code::kUnsupported,
                        "the server answered a byte range of '" + ctx.file + "' with a response that does not fit it",
                        "RangesUnusable", ctx);
        if (stop()) return Status::Ok();
        if (!r.ok()) {
          if (r.status().code() != Code::kNetwork) return r.status();
          if (sink.got > 0 || sink.pos > 0) failures = 0;
          if (++failures > opt.max_resume_attempts) return r.status();
          spdlog::debug("resuming {} bytes {}- after: {}", ctx.file, w.chunk_begin(k) + w.chunk_received(k),
                        r.status().message());
          if (sink.whole) return Status(Code::kUnsupported, "whole-file answer broke off", "RangesUnusable", ctx);
          continue;
        }
        if (r->status >= 300) return StatusFromHttp(r->status, r->headers, r->body, ctx);
        if (sink.whole) {
          if (sink.pos != size)
            return Status(Code::kNetwork,
                          "connection closed after " + std::to_string(sink.pos) + " of " + std::to_string(size) +
                              " bytes of '" + ctx.file + "'",
                          "ConnectionLost", ctx);
          abort = true;  // every chunk is written; nothing left for workers
          return Status::Ok();
        }
        if (w.chunk_received(k) < e - w.chunk_begin(k)) {
          if (sink.got > 0) failures = 0;
          if (++failures > opt.max_resume_attempts)
            return Status(Code::kNetwork, "connection closed early while downloading '" + ctx.file + "'",
                          "ConnectionLost", ctx);
          continue;
        }
        return Status::Ok();
      }
    };
    auto worker = [&]() {
      while (!stop()) {
        auto k = take();
        if (!k) return;
        Status s = fetch_chunk(*k, false, nullptr);
        if (!s.ok()) fail(s, s.reason() == "RangesUnusable");
      }
    };
    int extra = std::max(0, opt.max_ranges_per_file - 1);
    bool started = false;
    auto start_workers = [&]() {
      if (started) return;
      started = true;
      for (int i = 0; i < extra; ++i) workers.emplace_back(worker);
    };
    if (auto k0 = take()) {
      Status s = fetch_chunk(*k0, true, start_workers);
      if (!s.ok()) fail(s, s.reason() == "RangesUnusable");
      if (first_err.ok() && !abort.load()) {
        start_workers();  // resumed: the probe chunk may have been the last one short
        worker();
      }
    }
    for (auto& t : workers) t.join();
    if (first_err.ok() && cancel && cancel->Cancelled()) return Cancelled(ctx);
    if (!first_err.ok()) {
      if (unusable) {
        add_progress(-static_cast<int64_t>(counted));
        wp->Discard();
        return first_err;
      }
      return WithCtx(first_err, ctx);
    }
    auto c = w.Commit();
    if (!c.ok()) {
      if (c.status().reason() == "HashMismatch") add_progress(-static_cast<int64_t>(counted));
      return WithCtx(c.status(), ctx);
    }
    return c;
  }

  Status CheckFreeSpace(const std::string& dir, int64_t need, const ErrorContext& ctx) const {
    if (!opt.check_free_space || need <= 0) return Status::Ok();
    std::error_code ec;
    fs::create_directories(dir, ec);
    struct statvfs sv;
    if (::statvfs(dir.c_str(), &sv) != 0) return Status::Ok();
    uint64_t avail = static_cast<uint64_t>(sv.f_bavail) * sv.f_frsize;
    if (avail < static_cast<uint64_t>(need)) {
      return Status(Code::kDiskFull,
                    "not enough free space in " + dir + " for '" + ctx.file + "': needs " + std::to_string(need) +
                        " bytes, " + std::to_string(avail) + " available",
                    "InsufficientSpace", ctx);
    }
    return Status::Ok();
  }

  // Puts the file described by `m` into the cache and links snapshots/<commit>/<path>.
  Result<std::string> Materialize(const RepoCache& rc, const FileMeta& m, const std::string& path,
                                  const std::string& rev_for_url, bool force, Progress* progress, Cancel* cancel,
                                  const DownloadCallbacks* cb) const {
    ErrorContext ctx = Ctx(rc.repo_id(), rev_for_url, path);
    if (!force) {
      if (auto p = rc.CachedPointer(m.commit, path)) {
        std::error_code ec;
        auto target = fs::read_symlink(*p, ec);
        if (ec || target.filename().string() == m.etag) {
          if (progress && m.size > 0) progress->Add(m.size);
          return *p;
        }
      }
      if (rc.HasBlob(m.etag, m.size)) {
        if (progress && m.size > 0) progress->Add(m.size);
        return rc.LinkSnapshot(m.commit, path, m.etag, opt.use_symlinks);
      }
    }
    HUBLOAD_ASSIGN_OR_RETURN(FileLock lock, FileLock::Acquire(rc.LockPath(m.etag), opt.lock_timeout_s));
    if (!force && rc.HasBlob(m.etag, m.size)) {  // another process finished it meanwhile
      if (progress && m.size > 0) progress->Add(m.size);
      return rc.LinkSnapshot(m.commit, path, m.etag, opt.use_symlinks);
    }
    std::string url = m.location.empty() ? ResolveUrlFor(rc.repo_type(), rc.repo_id(), rev_for_url, path) : m.location;
    bool lfs = m.etag.size() == 64 && IsHex(m.etag);
    HUBLOAD_RETURN_IF_ERROR(FetchInto(rc.IncompletePath(m.etag), rc.RangedIncompletePath(m.etag),
                                      rc.BlobPath(m.etag), "blob " + m.etag, rc.repo_dir() + "/blobs", url, m, lfs,
                                      ctx, progress, cancel, cb));
    // A blob this call downloaded may be moved into the snapshot when symlinks fail (B14).
    return rc.LinkSnapshot(m.commit, path, m.etag, opt.use_symlinks, /*new_blob=*/true);
  }

  // True when the ranged path applies to `m` (see ClientOptions::range_threshold_bytes).
  bool UseRanges(const FileMeta& m, const std::string& single_partial) const {
    if (opt.range_threshold_bytes == 0 || opt.max_ranges_per_file < 2 || m.size <= 0 ||
        static_cast<uint64_t>(m.size) < opt.range_threshold_bytes)
      return false;
    struct stat st;
    // A single-stream partial (ours or huggingface_hub's) is resumed as it is.
    return !(::stat(single_partial.c_str(), &st) == 0 && st.st_size > 0);
  }

  // Downloads `m` from `url` to `final_path` through a partial: parallel ranges
  // for large files, else one resumable stream. Checks free space first (B37).
  Status FetchInto(const std::string& single_partial, const std::string& ranged_partial, const std::string& final_path,
                   const std::string& label, const std::string& dir, const std::string& url, const FileMeta& m,
                   bool lfs, const ErrorContext& ctx, Progress* progress, Cancel* cancel,
                   const DownloadCallbacks* cb) const {
    struct stat st;
    int64_t have = 0;
    if (::stat(single_partial.c_str(), &st) == 0) have = st.st_size;
    if (::stat(ranged_partial.c_str(), &st) == 0)  // sparse: count allocated bytes
      have = std::max<int64_t>(have, std::min<int64_t>(static_cast<int64_t>(st.st_blocks) * 512, m.size));
    HUBLOAD_RETURN_IF_ERROR(CheckFreeSpace(dir, m.size - have, ctx));
    if (UseRanges(m, single_partial)) {
      auto open_ranged = [&](bool resume) {
        RangedBlobWriter::Options o;
        o.size = static_cast<uint64_t>(m.size);
        o.chunk_bytes = std::max<uint64_t>(opt.range_chunk_bytes, 1ull << 20);
        o.expected_sha256 = lfs ? m.etag : std::string();
        o.resume = resume;
        return RangedBlobWriter::OpenPaths(ranged_partial, final_path, label, o);
      };
      auto r = FetchRanged(open_ranged, url, m, ctx, progress, cancel, cb);
      if (r.ok()) return Status::Ok();
      const std::string why = r.status().reason();
      if (why != "RangesUnusable" && why != "HashMismatch") return r.status();
      spdlog::warn("{}: {}; downloading it again on one connection", ctx.file, r.status().message());
    }
    auto open = [&](bool resume) {
      BlobWriter::Options o;
      o.expected_size = m.size;
      o.expected_sha256 = lfs ? m.etag : std::string();
      o.resume = resume;
      return BlobWriter::OpenPaths(single_partial, final_path, label, o);
    };
    return Fetch(open, url, m, ctx, progress, cancel, cb).status();
  }

  // ---- local_dir mode (huggingface_hub _local_folder.py) ----
  struct LocalMeta {
    std::string commit, etag;
    double timestamp = 0;
  };
  static std::string LocalMetaPath(const std::string& dir, const std::string& path) {
    return dir + "/.cache/huggingface/download/" + path + ".metadata";
  }
  static std::optional<LocalMeta> ReadLocalMeta(const std::string& dir, const std::string& path) {
    std::ifstream in(LocalMetaPath(dir, path));
    if (!in) return std::nullopt;
    LocalMeta m;
    std::string ts;
    if (!std::getline(in, m.commit) || !std::getline(in, m.etag) || !std::getline(in, ts)) return std::nullopt;
    m.timestamp = std::strtod(ts.c_str(), nullptr);
    struct stat st;
    if (::stat((dir + "/" + path).c_str(), &st) != 0) return std::nullopt;
    if (static_cast<double>(st.st_mtime) > m.timestamp + 1) return std::nullopt;  // edited since
    return m;
  }
  static Status WriteLocalMeta(const std::string& dir, const std::string& path, const std::string& commit,
                               const std::string& etag) {
    std::string base = dir + "/.cache/huggingface";
    std::error_code ec;
    fs::create_directories(base, ec);
    if (!fs::exists(base + "/.gitignore")) std::ofstream(base + "/.gitignore") << "*";
    if (!fs::exists(base + "/CACHEDIR.TAG"))
      std::ofstream(base + "/CACHEDIR.TAG") << "Signature: 8a477f597d28d172789f06886806bc55\n";
    std::string mp = LocalMetaPath(dir, path);
    fs::create_directories(fs::path(mp).parent_path(), ec);
    double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::ofstream out(mp, std::ios::trunc);
    out << commit << "\n" << etag << "\n" << std::to_string(now) << "\n";
    if (!out) return Status(Code::kIOError, "cannot write " + mp, "IOError");
    return Status::Ok();
  }

  Result<std::string> DownloadToLocalDir(RepoType t, const std::string& repo, const std::string& rev,
                                         const std::string& path, const std::string& dir, bool force,
                                         Progress* progress, Cancel* cancel, const DownloadCallbacks* cb) const {
    std::string target = dir + "/" + path;
    ErrorContext ctx = Ctx(repo, rev, path);
    auto meta = ReadLocalMeta(dir, path);
    if (!force && meta && IsCommitHash(rev) && meta->commit == rev) return target;
    if (opt.config.offline) {
      if (fs::exists(target)) return target;
      return Status(Code::kOfflineMiss, "'" + path + "' is not in the local folder " + dir + " (offline mode)",
                    "OfflineMiss", ctx);
    }
    auto head = Head(t, repo, rev, path, nullptr);
    if (!head.ok()) {
      if (FallbackAllowed(head.status().code()) && fs::exists(target)) {
        spdlog::warn("using {} from the local folder: {}", path, head.status().message());
        return target;
      }
      return head.status();
    }
    const FileMeta& m = *head;
    if (!force && meta && meta->etag == m.etag && fs::exists(target)) {
      if (meta->commit != m.commit) HUBLOAD_RETURN_IF_ERROR(WriteLocalMeta(dir, path, m.commit, m.etag));
      if (progress && m.size > 0) progress->Add(m.size);
      return target;
    }
    HUBLOAD_ASSIGN_OR_RETURN(FileLock lock, FileLock::Acquire(LocalMetaPath(dir, path) + ".lock", opt.lock_timeout_s));
    std::string partial = dir + "/.cache/huggingface/download/" + path + "." + m.etag + ".incomplete";
    std::string ranged = dir + "/.cache/huggingface/download/" + path + "." + m.etag + ".ranges.incomplete";
    std::string url = m.location.empty() ? ResolveUrlFor(t, repo, rev, path) : m.location;
    bool lfs = m.etag.size() == 64 && IsHex(m.etag);
    HUBLOAD_RETURN_IF_ERROR(FetchInto(partial, ranged, target, "'" + path + "'",
                                      fs::path(partial).parent_path().string(), url, m, lfs, ctx, progress, cancel,
                                      cb));
    HUBLOAD_RETURN_IF_ERROR(WriteLocalMeta(dir, path, m.commit, m.etag));
    return target;
  }

  // Downloads `paths` at `commit` with a worker pool. `sizes` (optional) gives
  // the total for progress. First error cancels the rest.
  Status RunFiles(const RepoCache& rc, const std::string& commit, const std::vector<std::string>& paths,
                  const DownloadCallbacks& cb, int workers, const std::string& local_dir,
                  const std::map<std::string, uint64_t>& sizes, std::string* failed_path, Code* failed_code) const {
    Cancel cancel;
    cancel.cb = &cb;
    Progress progress;
    progress.cb = &cb;
    for (auto& p : paths)
      if (auto it = sizes.find(p); it != sizes.end()) progress.total += it->second;
    std::atomic<size_t> next{0};
    std::mutex err_mu;
    Status first_err;
    auto worker = [&]() {
      while (true) {
        size_t i = next.fetch_add(1);
        if (i >= paths.size() || cancel.Cancelled()) return;
        const std::string& path = paths[i];
        Result<std::string> r = Status(Code::kInternal, "unset");
        bool known_size = sizes.count(path) > 0;
        if (!local_dir.empty()) {
          r = DownloadToLocalDir(rc.repo_type(), rc.repo_id(), commit, path, local_dir, false, &progress, &cancel, &cb);
        } else if (auto p = rc.CachedPointer(commit, path)) {
          if (known_size) progress.Add(static_cast<int64_t>(sizes.at(path)));
          r = *p;
        } else {
          auto m = Head(rc.repo_type(), rc.repo_id(), commit, path, nullptr);
          if (!m.ok()) {
            r = m.status();
          } else {
            if (!known_size && m->size > 0) progress.total += static_cast<uint64_t>(m->size);
            r = Materialize(rc, *m, path, commit, false, &progress, &cancel, &cb);
          }
        }
        if (!r.ok()) {
          std::lock_guard<std::mutex> l(err_mu);
          bool cancelled_by_other = r.status().code() == Code::kCancelled && cancel.stop.load();
          if (first_err.ok() && !cancelled_by_other) {
            first_err = WithCtx(r.status(), Ctx(rc.repo_id(), commit, path));
            if (failed_path) *failed_path = path;
            if (failed_code) *failed_code = r.status().code();
          }
          cancel.stop = true;
          return;
        }
        if (cb.on_file_done) cb.on_file_done(path, *r);
      }
    };
    int n = std::max(1, std::min<int>(workers, static_cast<int>(paths.size())));
    std::vector<std::thread> threads;
    for (int i = 1; i < n; ++i) threads.emplace_back(worker);
    worker();
    for (auto& t : threads) t.join();
    progress.Report(true);
    if (first_err.ok() && cancel.Cancelled())
      return Status(Code::kCancelled, "download of " + rc.repo_id() + " cancelled", "Cancelled",
                    Ctx(rc.repo_id(), commit, ""));
    return first_err;
  }

  Result<RepoListing> ListAt(RepoType t, const std::string& repo, const std::string& commit) const {
    RepoListing out;
    out.commit = commit;
    std::string url = ApiUrl(t, repo, "/tree/" + EncodeRevision(commit) + "?recursive=true&expand=false");
    ErrorContext ctx = Ctx(repo, commit, "");
    for (int page = 0; page < 100000 && !url.empty(); ++page) {
      HttpHeaders h;
      HUBLOAD_ASSIGN_OR_RETURN(json j, GetJson(url, ctx, &h));
      if (!j.is_array())
        return Status(Code::kInvalidFormat, "tree listing of " + repo + " is not a JSON array", "BadTree", ctx);
      for (auto& e : j) {
        if (!e.is_object() || e.value("type", "") != "file") continue;
        RepoFile f;
        f.path = e.value("path", "");
        HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRepoPath(f.path), ctx));
        f.size = e.value("size", uint64_t{0});
        f.blob_id = e.value("oid", "");
        if (e.contains("lfs") && e["lfs"].is_object()) {
          f.lfs_sha256 = e["lfs"].value("oid", e["lfs"].value("sha256", ""));
          if (e["lfs"].contains("size") && e["lfs"]["size"].is_number_unsigned()) f.size = e["lfs"]["size"];
        }
        out.files.push_back(std::move(f));
      }
      auto next = NextLink(h);
      url = next ? *next : std::string();
      if (!url.empty() && UrlOrigin(url) != endpoint_origin)
        return Status(Code::kInvalidFormat, "tree pagination points to another host", "BadLink", ctx);
    }
    return out;
  }

  // Listing from the cache only (offline).
  Result<RepoListing> ListLocal(const RepoCache& rc, const std::string& rev) const {
    auto commit = rc.LocalCommit(rev);
    if (!commit || !fs::is_directory(rc.SnapshotDir(*commit))) return OfflineMiss(rc, rev, "snapshot");
    RepoListing out;
    out.commit = *commit;
    auto tree = ReadTreeCache(rc, *commit);
    if (tree) {
      out.files = *tree;
      return out;
    }
    std::error_code ec;
    fs::path dir = rc.SnapshotDir(*commit);
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      std::error_code e2;
      if (it->is_directory(e2)) continue;
      RepoFile f;
      f.path = it->path().lexically_relative(dir).generic_string();
      f.size = it->file_size(e2);
      std::string blob = fs::read_symlink(it->path(), e2).filename().string();
      if (blob.size() == 64) f.lfs_sha256 = blob;
      else f.blob_id = blob;
      out.files.push_back(std::move(f));
    }
    std::sort(out.files.begin(), out.files.end(), [](auto& a, auto& b) { return a.path < b.path; });
    return out;
  }

  // trees/<commit>.json as huggingface_hub _tree_cache.py writes it.
  std::optional<std::vector<RepoFile>> ReadTreeCache(const RepoCache& rc, const std::string& commit) const {
    std::ifstream in(rc.repo_dir() + "/trees/" + commit + ".json");
    if (!in) return std::nullopt;
    auto j = json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("files") || !j["files"].is_object()) return std::nullopt;
    std::vector<RepoFile> files;
    for (auto& [p, e] : j["files"].items()) {
      if (!ValidateRepoPath(p).ok() || !e.is_object()) return std::nullopt;
      RepoFile f;
      f.path = p;
      f.size = e.value("size", uint64_t{0});
      f.blob_id = e.value("blob_id", "");
      if (e.contains("lfs_sha256") && e["lfs_sha256"].is_string()) f.lfs_sha256 = e["lfs_sha256"];
      files.push_back(std::move(f));
    }
    std::sort(files.begin(), files.end(), [](auto& a, auto& b) { return a.path < b.path; });
    return files;
  }

  void WriteTreeCache(const RepoCache& rc, const RepoListing& l) const {
    json files = json::object();
    for (auto& f : l.files) {
      json e = {{"size", f.size}, {"blob_id", f.blob_id}};
      if (!f.lfs_sha256.empty()) {
        e["lfs_sha256"] = f.lfs_sha256;
        e["lfs_size"] = f.size;
      }
      files[f.path] = e;
    }
    json doc = {{"format_version", 1}, {"files", files}};
    std::string path = rc.repo_dir() + "/trees/" + l.commit + ".json";
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    std::string tmp = path + ".tmp" + std::to_string(::getpid());
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << doc.dump();
      if (!out) {
        fs::remove(tmp, ec);
        return;  // a cache of a listing: best effort
      }
    }
    fs::rename(tmp, path, ec);
    if (ec) fs::remove(tmp, ec);
  }
};

HubClient::HubClient(ClientOptions options) : impl_(std::make_shared<Impl>(std::move(options))) {}
HubClient::~HubClient() = default;
const ClientOptions& HubClient::options() const { return impl_->opt; }

Result<std::string> HubClient::Download(const FileRequest& req) const {
  const Impl& im = *impl_;
  ErrorContext ctx = im.Ctx(req.repo_id, req.revision, req.filename);
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRepoId(req.repo_id), ctx));
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRevision(req.revision), ctx));
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRepoPath(req.filename), ctx));
  if (!req.local_dir.empty())
    return im.DownloadToLocalDir(req.repo_type, req.repo_id, req.revision, req.filename, req.local_dir,
                                 req.force_download, nullptr, nullptr, nullptr);
  RepoCache rc(im.opt.config.cache_dir, req.repo_id, req.repo_type);
  if (im.opt.config.offline) {
    auto commit = rc.LocalCommit(req.revision);
    if (commit) {
      if (auto p = rc.CachedPointer(*commit, req.filename)) return *p;
      if (rc.IsMarkedNoExist(*commit, req.filename))
        return Status(Code::kEntryNotFound,
                      "'" + req.filename + "' does not exist in " + req.repo_id + " at " + *commit +
                          " (known from the cache's .no_exist marker; offline mode)",
                      "EntryNotFound", ctx);
    }
    return im.OfflineMiss(rc, req.revision, req.filename);
  }
  if (IsCommitHash(req.revision) && !req.force_download)
    if (auto p = rc.CachedPointer(req.revision, req.filename)) return *p;  // zero requests
  std::string commit404;
  auto m = im.Head(req.repo_type, req.repo_id, req.revision, req.filename, &commit404);
  if (!m.ok()) {
    Code c = m.status().code();
    if (c == Code::kEntryNotFound && IsCommitHash(commit404)) {
      (void)rc.MarkNoExist(commit404, req.filename);
      if (!IsCommitHash(req.revision)) (void)rc.WriteRef(req.revision, commit404);
    }
    if (FallbackAllowed(c)) {
      if (auto commit = rc.LocalCommit(req.revision))
        if (auto p = rc.CachedPointer(*commit, req.filename)) {
          spdlog::warn("{}: {}; using the cached copy at {}", req.filename, m.status().message(), *commit);
          return *p;
        }
    }
    return m.status();
  }
  HUBLOAD_ASSIGN_OR_RETURN(std::string path,
                           im.Materialize(rc, *m, req.filename, req.revision, req.force_download, nullptr, nullptr, nullptr));
  if (req.revision != m->commit) HUBLOAD_RETURN_IF_ERROR(WithCtx(rc.WriteRef(req.revision, m->commit), ctx));
  return path;
}

Result<std::string> HubClient::ReadRange(const FileRequest& req, uint64_t offset, uint64_t length) const {
  const Impl& im = *impl_;
  ErrorContext ctx = im.Ctx(req.repo_id, req.revision, req.filename);
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRepoId(req.repo_id), ctx));
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRevision(req.revision), ctx));
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRepoPath(req.filename), ctx));
  if (length > (1ull << 30))
    return Status(Code::kInvalidArgument,
                  "ReadRange of '" + req.filename + "' asks for " + std::to_string(length) + " bytes (limit 1 GiB)",
                  "RangeTooLarge", ctx);
  if (length == 0) return std::string();
  RepoCache rc(im.opt.config.cache_dir, req.repo_id, req.repo_type);
  std::optional<std::string> commit;
  if (IsCommitHash(req.revision)) commit = req.revision;
  else if (im.opt.config.offline) commit = rc.LocalCommit(req.revision);
  if (commit) {
    if (auto p = rc.CachedPointer(*commit, req.filename)) {
      std::ifstream in(*p, std::ios::binary);
      if (!in) return Status(Code::kIOError, "cannot open cached " + *p, "IOError", ctx);
      in.seekg(static_cast<std::streamoff>(offset));
      std::string out(length, '\0');
      in.read(out.data(), static_cast<std::streamsize>(length));
      out.resize(in ? length : static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
      return out;
    }
  }
  if (im.opt.config.offline) return im.OfflineMiss(rc, req.revision, req.filename);
  std::string url = im.ResolveUrlFor(req.repo_type, req.repo_id, req.revision, req.filename);
  ctx.url = RedactUrl(url);
  struct Sink : BodySink {
    uint64_t skip = 0, want = 0;
    std::string out;
    bool OnResponseStart(const HttpResponse& h) override {
      if (h.status != 206) return true;  // 200: Range ignored, cut the body here
      skip = 0;
      return true;
    }
    bool OnData(const char* d, size_t n) override {
      if (skip > 0) {
        size_t s = static_cast<size_t>(std::min<uint64_t>(skip, n));
        skip -= s;
        d += s;
        n -= s;
      }
      size_t t = static_cast<size_t>(std::min<uint64_t>(want - out.size(), n));
      out.append(d, t);
      return out.size() < want;  // stop reading once we have enough
    }
  } sink;
  sink.skip = offset;
  sink.want = length;
  HttpRequest hr;
  hr.url = url;
  hr.timeout_s = im.opt.metadata_timeout_s + static_cast<double>(length) / (1 << 20);
  hr.headers.emplace_back("Range", "bytes=" + std::to_string(offset) + "-" + std::to_string(offset + length - 1));
  hr.headers.emplace_back("Accept-Encoding", "identity");
  im.AddAuth(&hr);
  auto r = im.http->Send(hr, &sink);
  if (!r.ok()) {
    if (r.status().reason() == "SinkAborted" && sink.out.size() == length) return std::move(sink.out);
    return WithCtx(r.status(), ctx);
  }
  if (r->status == 416) return std::string();  // offset at or past the end
  if (r->status >= 300) return StatusFromHttp(r->status, r->headers, r->body, ctx);
  return std::move(sink.out);
}

Result<std::string> HubClient::ResolveCommit(const std::string& repo_id, const std::string& revision,
                                             RepoType repo_type) const {
  const Impl& im = *impl_;
  ErrorContext ctx = im.Ctx(repo_id, revision, "");
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRepoId(repo_id), ctx));
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRevision(revision), ctx));
  if (IsCommitHash(revision)) return revision;
  RepoCache rc(im.opt.config.cache_dir, repo_id, repo_type);
  if (im.opt.config.offline) {
    if (auto c = rc.ReadRef(revision)) return *c;
    return im.OfflineMiss(rc, revision, "ref");
  }
  HUBLOAD_ASSIGN_OR_RETURN(json j, im.GetJson(im.ApiUrl(repo_type, repo_id, "/revision/" + EncodeRevision(revision)), ctx));
  std::string sha = j.is_object() ? j.value("sha", "") : "";
  if (!IsCommitHash(sha))
    return Status(Code::kInvalidFormat, "revision info of " + repo_id + "@" + revision + " has no 40-hex 'sha'",
                  "BadRevisionInfo", ctx);
  return sha;
}

Result<RepoListing> HubClient::ListFiles(const std::string& repo_id, const std::string& revision,
                                         RepoType repo_type) const {
  const Impl& im = *impl_;
  ErrorContext ctx = im.Ctx(repo_id, revision, "");
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRepoId(repo_id), ctx));
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRevision(revision), ctx));
  RepoCache rc(im.opt.config.cache_dir, repo_id, repo_type);
  if (im.opt.config.offline) return im.ListLocal(rc, revision);
  HUBLOAD_ASSIGN_OR_RETURN(std::string commit, ResolveCommit(repo_id, revision, repo_type));
  HUBLOAD_ASSIGN_OR_RETURN(RepoListing listing, im.ListAt(repo_type, repo_id, commit));
  // As snapshot_download: the revision's ref is recorded once it is resolved
  // (only when it changes, so a read-only cache hit writes nothing).
  if (revision != commit && rc.ReadRef(revision) != commit)
    HUBLOAD_RETURN_IF_ERROR(WithCtx(rc.WriteRef(revision, commit), ctx));
  return listing;
}

Status HubClient::DownloadFiles(const std::string& repo_id, const std::string& revision, RepoType repo_type,
                                const std::vector<std::string>& paths, const DownloadCallbacks& cb) const {
  const Impl& im = *impl_;
  ErrorContext ctx = im.Ctx(repo_id, revision, "");
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRepoId(repo_id), ctx));
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRevision(revision), ctx));
  for (auto& p : paths) HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRepoPath(p), ctx));
  RepoCache rc(im.opt.config.cache_dir, repo_id, repo_type);
  auto local_commit = rc.LocalCommit(revision);
  auto all_cached = [&](const std::string& commit) {
    std::vector<std::string> missing;
    for (auto& p : paths)
      if (!rc.CachedPointer(commit, p)) missing.push_back(p);
    return missing;
  };
  auto serve_cached = [&](const std::string& commit) {
    for (auto& p : paths) {
      if (cb.on_file_done) cb.on_file_done(p, *rc.CachedPointer(commit, p));
    }
  };
  if (im.opt.config.offline) {
    if (!local_commit) return im.OfflineMiss(rc, revision, "ref");
    auto missing = all_cached(*local_commit);
    if (!missing.empty()) {
      std::string list;
      for (auto& m : missing) list += (list.empty() ? "" : ", ") + m;
      Status s = im.OfflineMiss(rc, revision, list);
      return s;
    }
    serve_cached(*local_commit);
    return Status::Ok();
  }
  std::string commit;
  bool resolved = false;
  if (IsCommitHash(revision)) {
    commit = revision;
  } else {
    auto c = ResolveCommit(repo_id, revision, repo_type);
    if (!c.ok()) {
      if (FallbackAllowed(c.status().code()) && local_commit && all_cached(*local_commit).empty()) {
        spdlog::warn("{}: {}; using the cached snapshot {}", repo_id, c.status().message(), *local_commit);
        serve_cached(*local_commit);
        return Status::Ok();
      }
      return c.status();
    }
    commit = *c;
    resolved = true;
  }
  std::string failed_path;
  Code failed_code = Code::kOk;
  Status st = im.RunFiles(rc, commit, paths, cb, im.opt.max_workers, "", {}, &failed_path, &failed_code);
  if (!st.ok() && resolved && (failed_code == Code::kEntryNotFound || failed_code == Code::kRevisionNotFound)) {
    // B11: the revision API may have answered a stale commit; /resolve/<branch> wins.
    auto m = im.Head(repo_type, repo_id, revision, failed_path, nullptr);
    if (m.ok() && m->commit != commit) {
      spdlog::warn("{}@{} resolved to {} which lacks '{}'; retrying at {}", repo_id, revision, commit, failed_path,
                   m->commit);
      commit = m->commit;
      st = im.RunFiles(rc, commit, paths, cb, im.opt.max_workers, "", {}, nullptr, nullptr);
    }
  }
  HUBLOAD_RETURN_IF_ERROR(st);
  if (revision != commit) HUBLOAD_RETURN_IF_ERROR(WithCtx(rc.WriteRef(revision, commit), ctx));
  return Status::Ok();
}

Result<std::string> HubClient::Snapshot(const SnapshotRequest& req) const {
  const Impl& im = *impl_;
  ErrorContext ctx = im.Ctx(req.repo_id, req.revision, "");
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRepoId(req.repo_id), ctx));
  HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRevision(req.revision), ctx));
  RepoCache rc(im.opt.config.cache_dir, req.repo_id, req.repo_type);
  int workers = req.max_workers > 0 ? req.max_workers : im.opt.max_workers;
  auto select = [&](const RepoListing& l) {
    std::vector<std::string> paths;
    std::map<std::string, uint64_t> sizes;
    for (auto& f : l.files)
      if (MatchesPatterns(f.path, req.allow_patterns, req.ignore_patterns)) {
        paths.push_back(f.path);
        sizes[f.path] = f.size;
      }
    return std::make_pair(paths, sizes);
  };
  auto offline_snapshot = [&](const Status* why) -> Result<std::string> {
    if (!req.local_dir.empty()) {
      if (fs::is_directory(req.local_dir)) return req.local_dir;
      return Status(Code::kOfflineMiss, "local folder " + req.local_dir + " does not exist (offline)", "OfflineMiss", ctx);
    }
    auto commit = rc.LocalCommit(req.revision);
    if (!commit || !fs::is_directory(rc.SnapshotDir(*commit))) {
      if (why) return *why;
      return im.OfflineMiss(rc, req.revision, "snapshot");
    }
    if (auto tree = im.ReadTreeCache(rc, *commit)) {
      RepoListing l;
      l.commit = *commit;
      l.files = *tree;
      auto [paths, sizes] = select(l);
      std::string missing;
      for (auto& p : paths)
        if (!rc.CachedPointer(*commit, p)) missing += (missing.empty() ? "" : ", ") + p;
      if (!missing.empty())
        return Status(why ? why->code() : Code::kOfflineMiss,
                      "incomplete snapshot of " + req.repo_id + " at " + *commit + " in " + rc.cache_dir() +
                          ": missing " + missing + (why ? " (" + why->message() + ")" : " (offline mode)"),
                      "IncompleteSnapshot", ctx);
      for (auto& p : paths)
        if (req.callbacks.on_file_done) req.callbacks.on_file_done(p, *rc.CachedPointer(*commit, p));
    }
    if (why) spdlog::warn("{}: {}; using the cached snapshot {}", req.repo_id, why->message(), *commit);
    return rc.SnapshotDir(*commit);
  };
  if (im.opt.config.offline) return offline_snapshot(nullptr);
  auto commit_r = ResolveCommit(req.repo_id, req.revision, req.repo_type);
  if (!commit_r.ok()) {
    if (FallbackAllowed(commit_r.status().code())) {
      Status why = commit_r.status();
      return offline_snapshot(&why);
    }
    return commit_r.status();
  }
  std::string commit = *commit_r;
  RepoListing listing;
  if (auto tree = im.ReadTreeCache(rc, commit); tree && req.local_dir.empty()) {
    listing.commit = commit;
    listing.files = *tree;
  } else {
    auto l = im.ListAt(req.repo_type, req.repo_id, commit);
    if (!l.ok()) return l.status();
    listing = std::move(*l);
    if (req.local_dir.empty()) im.WriteTreeCache(rc, listing);
  }
  auto [paths, sizes] = select(listing);
  std::string failed_path;
  Code failed_code = Code::kOk;
  Status st = im.RunFiles(rc, commit, paths, req.callbacks, workers, req.local_dir, sizes, &failed_path, &failed_code);
  if (!st.ok() && !IsCommitHash(req.revision) &&
      (failed_code == Code::kEntryNotFound || failed_code == Code::kRevisionNotFound)) {
    // B11: a stale revision answer; the commit /resolve/<revision> reports wins.
    auto m = im.Head(req.repo_type, req.repo_id, req.revision, failed_path, nullptr);
    if (m.ok() && m->commit != commit) {
      spdlog::warn("{}@{} resolved to {} which lacks '{}'; retrying at {}", req.repo_id, req.revision, commit,
                   failed_path, m->commit);
      commit = m->commit;
      HUBLOAD_ASSIGN_OR_RETURN(listing, im.ListAt(req.repo_type, req.repo_id, commit));
      if (req.local_dir.empty()) im.WriteTreeCache(rc, listing);
      auto sel = select(listing);
      st = im.RunFiles(rc, commit, sel.first, req.callbacks, workers, req.local_dir, sel.second, nullptr, nullptr);
    }
  }
  HUBLOAD_RETURN_IF_ERROR(st);
  if (!req.local_dir.empty()) return req.local_dir;
  if (req.revision != commit) HUBLOAD_RETURN_IF_ERROR(WithCtx(rc.WriteRef(req.revision, commit), ctx));
  std::error_code ec;
  fs::create_directories(rc.SnapshotDir(commit), ec);
  return rc.SnapshotDir(commit);
}

}  // namespace hubload
