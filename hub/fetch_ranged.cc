// Byte ranges of fixed chunks into a RangedBlobWriter (hub/fetch.h).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "hub/errors.h"
#include "hub/fetch.h"
#include "hub/http_parse.h"
#include "hubload/reasons.h"

namespace hubload::hub_internal {

Result<std::unique_ptr<RangedBlobWriter>> OpenRanged(const Session& s, const FetchTarget& t, bool resume) {
  const uint64_t chunk = std::max<uint64_t>(s.opt.range_chunk_bytes, 1ull << 20);
  return RangedBlobWriter::OpenPaths(t.ranged_partial, t.final_path, t.label,
                                     cache_internal::RangedOptions(t.id, chunk, resume));
}

namespace {

// One request's body, written in order from offset `pos` over the chunks it
// covers (up to `end`; the whole file when the answer is a 200).
struct ChunkSink : BodySink {
  RangedBlobWriter* w = nullptr;
  uint64_t b = 0, end = 0, size = 0, pos = 0;
  uint64_t gen = 0;  // generation of the signed URL asked
  bool probe = false, whole = false, mismatch = false;
  const FetchTarget* t = nullptr;
  FileIo* io = nullptr;
  const std::function<bool()>* stop = nullptr;
  const std::function<void(bool)>* on_answer = nullptr;
  Status err;

  uint64_t got() const { return pos - b; }
  void Landed(size_t n) {
    if (io->wire_bytes) io->wire_bytes->fetch_add(n, std::memory_order_relaxed);
    if (io->progress) io->progress->AddReceived(n);
    if (io->cb && io->cb->on_file_progress) io->cb->on_file_progress(t->path_in_repo, w->bytes_received(), size);
    if (io->bytes) io->bytes->Update(w->fd(), w->partial_path(), w->contiguous_bytes(), static_cast<int64_t>(size), false);
  }
  bool OnResponseStart(const HttpResponse& h) override {
    if (h.status == 206) {
      int64_t first = 0, total = 0;
      auto cr = h.headers.Get("Content-Range");
      std::string e2 = NormalizeEtag(h.headers.Get("X-Linked-Etag").value_or(h.headers.Get("ETag").value_or("")));
      if (!cr || !ParseContentRange(*cr, &first, &total) || first != static_cast<int64_t>(b) ||
          total != static_cast<int64_t>(size) || (IsHubEtag(e2) && e2 != t->meta.etag)) {
        mismatch = true;
        return false;
      }
      if (*on_answer) (*on_answer)(true);
      return true;
    }
    if (!probe) {  // 200 to a later range: the server changed its mind
      mismatch = true;
      return false;
    }
    // Range ignored (or If-Range failed): the body is the whole file.
    whole = true;
    b = pos = 0;
    end = size;
    if (*on_answer) (*on_answer)(false);
    if (w->bytes_received() > 0) {
      if (io->progress) io->progress->Add(-static_cast<int64_t>(w->bytes_received()));
      err = w->Restart();  // a new partial: announced bytes are never rewritten
      if (!err.ok()) return false;
    }
    return true;
  }
  // Spreads the sequential body over the chunks in order.
  bool OnData(const char* d, size_t len) override {
    if ((*stop)()) return false;
    if (pos == b && t->signed_url) t->signed_url->MarkProductive(gen);
    if (len > end - pos) {  // more than the range asked for (the next bytes belong to another request)
      mismatch = true;
      return false;
    }
    size_t n = len;
    while (len > 0) {
      size_t ck = ChunkOf(pos);
      uint64_t room = w->chunk_end(ck) - pos;
      size_t take = static_cast<size_t>(std::min<uint64_t>(room, len));
      err = w->Append(ck, d, take);
      if (!err.ok()) return false;
      pos += take;
      d += take;
      len -= take;
      if (pos == w->chunk_end(ck)) {
        err = w->FlushChunk(ck);
        if (!err.ok()) return false;
      }
    }
    Landed(n);
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
};

}  // namespace

Status FetchChunk(const Session& s, RangedBlobWriter& w, size_t k, size_t k_end, bool probe, const FetchTarget& t,
                  const ErrorContext& ctx0, FileIo io, const std::function<bool()>& stop,
                  const std::function<void(bool)>& on_answer, bool* whole) {
  ErrorContext ctx = ctx0;
  ctx.url = RedactUrl(t.url);
  const uint64_t size = static_cast<uint64_t>(t.meta.size);
  k_end = std::min(std::max(k_end, k + 1), w.num_chunks());
  int failures = 0;
  if (!io.budget) io.budget = std::make_shared<RetryBudget>();
  int renewed_idle = 0;  // B44: renewals since this run's last body byte
  while (true) {
    if (stop()) return Status::Ok();
    // The first byte still missing; chunks before it in the run are complete.
    while (k < k_end && w.chunk_received(k) == w.chunk_end(k) - w.chunk_begin(k)) ++k;
    if (k >= k_end) return Status::Ok();
    uint64_t b = w.chunk_begin(k) + w.chunk_received(k), e = w.chunk_end(k_end - 1);
    ChunkSink sink;
    sink.w = &w;
    sink.b = sink.pos = b;
    sink.end = e;
    sink.size = size;
    sink.probe = probe;
    sink.t = &t;
    sink.io = &io;
    sink.stop = &stop;
    sink.on_answer = &on_answer;
    HttpRequest req;
    auto [url, gen] = CurrentUrl(t);
    sink.gen = gen;
    req.url = url;
    ctx.url = RedactUrl(url);
    req.stall_timeout_s = s.opt.config.download_timeout_s;
    req.on_retry = io.on_retry;
    req.budget = io.budget;
    s.AddAuth(&req);
    req.headers.emplace_back("Range", "bytes=" + std::to_string(b) + "-" + std::to_string(e - 1));
    if (std::string v = IfRangeValue(t.meta.raw_etag); !v.empty()) req.headers.emplace_back("If-Range", v);
    auto r = s.http->Send(req, &sink);
    // The chunk the body stopped in (complete chunks were flushed on the way).
    Status fl = sink.whole || sink.pos >= sink.end ? Status::Ok() : w.FlushChunk(sink.ChunkOf(sink.pos));
    if (!sink.err.ok()) return sink.err;
    if (!fl.ok()) return fl;
    if (!sink.whole && io.bytes)
      io.bytes->Update(w.fd(), w.partial_path(), w.contiguous_bytes(), static_cast<int64_t>(size), false);
    if (sink.got() > 0) renewed_idle = 0;
    if (r.ok() && r->status == 403 && !stop()) {
      Status renew;
      if (RenewAfter403(t, gen, r->body, &renewed_idle, &renew)) continue;
      HUBLOAD_RETURN_IF_ERROR(WithCtx(renew, ctx));
    }
    if (sink.mismatch)
      return Status(Code::kUnsupported,
                    "the server answered a byte range of '" + ctx.file + "' with a response that does not fit it",
                    reason::kRangesUnusable, ctx);
    if (stop()) return Status::Ok();
    if (!r.ok()) {
      if (r.status().code() != Code::kNetwork) return r.status();
      if (sink.got() > 0) failures = 0;
      else if (GiveUpAfter(r.status(), *io.budget)) return r.status();
      if (++failures > s.opt.max_resume_attempts) return r.status();
      spdlog::debug("resuming {} bytes {}- after: {}", ctx.file, sink.pos, r.status().message());
      if (sink.whole)
        return Status(Code::kUnsupported, "whole-file answer broke off", reason::kRangesUnusable, ctx);
      continue;
    }
    if (r->status >= 300) return StatusFromHttp(r->status, r->headers, r->body, ctx);
    if (sink.whole) {
      if (sink.pos != size)
        return Status(Code::kNetwork,
                      "connection closed after " + std::to_string(sink.pos) + " of " + std::to_string(size) +
                          " bytes of '" + ctx.file + "'",
                      reason::kConnectionLost, ctx);
      *whole = true;  // every chunk is written
      return Status::Ok();
    }
    if (sink.pos < e) {
      if (sink.got() > 0) failures = 0;
      if (++failures > s.opt.max_resume_attempts)
        return Status(Code::kNetwork, "connection closed early while downloading '" + ctx.file + "'",
                      reason::kConnectionLost, ctx);
      continue;
    }
    return Status::Ok();
  }
}

}  // namespace hubload::hub_internal
