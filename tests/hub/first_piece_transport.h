// Test transport: rewrites the first piece of every streamed body of the
// requests it matches (a mirror or proxy that corrupts, repeats or drops
// bytes), passing everything else through to the inner transport.
#pragma once

#include <functional>
#include <memory>
#include <utility>

#include "hubload/transport.h"

namespace hubload::testing {

class FirstPieceTransport : public HttpTransport {
 public:
  /// `match(req)`: whether this request's body is rewritten. `rewrite(data,
  /// n, out)`: delivers the first piece to `out` (as it likes); its result is
  /// the sink's answer (false aborts).
  using Match = std::function<bool(const HttpRequest&)>;
  using Rewrite = std::function<bool(const char*, size_t, BodySink*)>;
  FirstPieceTransport(std::shared_ptr<HttpTransport> inner, Match match, Rewrite rewrite)
      : inner_(std::move(inner)), match_(std::move(match)), rewrite_(std::move(rewrite)) {}
  Result<HttpResponse> Send(const HttpRequest& req, BodySink* sink) override {
    if (!sink || !match_(req)) return inner_->Send(req, sink);
    struct First : BodySink {
      BodySink* out = nullptr;
      const Rewrite* rewrite = nullptr;
      bool done = false;
      bool OnResponseStart(const HttpResponse& h) override { return out->OnResponseStart(h); }
      bool OnData(const char* d, size_t n) override {
        if (done || n == 0) return out->OnData(d, n);
        done = true;
        return (*rewrite)(d, n, out);
      }
    } first;
    first.out = sink;
    first.rewrite = &rewrite_;
    return inner_->Send(req, &first);
  }

 private:
  std::shared_ptr<HttpTransport> inner_;
  Match match_;
  Rewrite rewrite_;
};

}  // namespace hubload::testing
