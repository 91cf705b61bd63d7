// The Hub session: endpoint, auth header, URLs, JSON calls (hub/session.h).
#include "hub/errors.h"
#include "hub/url.h"
#include "hub/session.h"

#include "hub/repo_urls.h"
#include "hub/url_policy.h"
#include "hubload/reasons.h"
#include "util/json.h"

namespace hubload::hub_internal {

namespace {

// Answers every request with one error, sending nothing: a session whose
// endpoint or token can never be used (issue 19: refused at once, not after
// a minute of retries).
class RefusingTransport : public HttpTransport {
 public:
  explicit RefusingTransport(Status s) : s_(std::move(s)) {}
  Result<HttpResponse> Send(const HttpRequest&, BodySink*) override { return s_; }

 private:
  Status s_;
};

}  // namespace

Session::Session(ClientOptions o) : opt(std::move(o)) {
  while (!opt.config.endpoint.empty() && opt.config.endpoint.back() == '/') opt.config.endpoint.pop_back();
  if (opt.max_workers < 1) opt.max_workers = 1;
  endpoint_is_http = UrlScheme(opt.config.endpoint) == "http";
  if (opt.transport) {
    http = opt.transport;
  } else {
    TransportOptions to = opt.transport_options;
    // https -> http is followed only when the endpoint itself is http.
    to.allow_https_to_http_redirects = to.allow_https_to_http_redirects || endpoint_is_http;
    http = MakeRetryingTransport(MakeCurlTransport(to), opt.retry);
  }
  Status usable = CheckHttpUrl(opt.config.endpoint, "endpoint");
  if (usable.ok() && !opt.config.token.empty()) usable = CheckHeader("Authorization", "Bearer " + opt.config.token);
  if (!usable.ok()) http = std::make_shared<RefusingTransport>(std::move(usable));
  endpoint_origin = UrlOrigin(opt.config.endpoint);
}

ErrorContext Session::Ctx(const std::string& repo, const std::string& rev, const std::string& file,
                          const std::string& url) const {
  ErrorContext c;
  c.repo_id = repo;
  c.revision = rev;
  c.file = file;
  c.url = RedactUrl(url);
  return c;
}

void Session::AddAuth(HttpRequest* req) const {
  if (!opt.config.token.empty() && UrlOrigin(req->url) == endpoint_origin)
    req->headers.emplace_back("Authorization", "Bearer " + opt.config.token);
}

std::string Session::ResolveUrlFor(RepoType t, const std::string& repo, const std::string& rev,
                                   const std::string& path) const {
  return opt.config.endpoint + "/" + WebPrefix(t) + repo + "/resolve/" + EncodeRevision(rev) + "/" + EncodePath(path);
}

std::string Session::ApiUrl(RepoType t, const std::string& repo, const std::string& tail) const {
  return opt.config.endpoint + "/api/" + ApiSegment(t) + "/" + repo + tail;
}

Status Session::OfflineMiss(const RepoCache& rc, const std::string& rev, const std::string& what) const {
  return Status(Code::kOfflineMiss,
                what + " of " + rc.repo_id() + " at revision '" + rev + "' is not in the local cache " +
                    rc.cache_dir() + " (offline mode: no request was made)",
                reason::kOfflineMiss, Ctx(rc.repo_id(), rev, what == "ref" || what == "snapshot" ? "" : what));
}

Result<nlohmann::json> Session::GetJson(const std::string& url, const ErrorContext& ctx, HttpHeaders* out_headers,
                                        int max_retries) const {
  HttpRequest req;
  req.url = url;
  req.timeout_s = opt.config.etag_timeout_s;
  req.max_retries = max_retries;
  AddAuth(&req);
  auto r = http->Send(req, nullptr);
  ErrorContext c = ctx;
  c.url = RedactUrl(url);
  if (!r.ok()) return WithCtx(r.status(), c);
  if (r->status >= 300) return StatusFromHttp(r->status, r->headers, r->body, c);
  auto j = util::ParseJson(r->body, c.url);
  if (!j.ok()) return j.status().Annotate(c);
  if (out_headers) *out_headers = r->headers;
  return std::move(*j);
}

Status WithCtx(Status s, const ErrorContext& ctx) {
  if (s.ok()) return s;
  if (!ctx.file.empty() && s.message().find(ctx.file) == std::string::npos)
    s = s.WithPrefix(ctx.repo_id.empty() ? ctx.file : ctx.repo_id + ": " + ctx.file);
  // A cache-layer error names its local file (a partial, perhaps already
  // discarded); at this layer `file` is the repo path, as in every other
  // download error (a local path a message needs is in the message).
  if (!ctx.file.empty() && !s.context().file.empty() && s.context().file[0] == '/')
    s.mutable_context().file = ctx.file;
  return s.Annotate(ctx);
}

bool FallbackAllowed(Code c) {
  return c == Code::kNetwork || c == Code::kServerError || c == Code::kUnauthorized || c == Code::kPermissionDenied ||
         c == Code::kRateLimited || c == Code::kRepoNotFound || c == Code::kGated || c == Code::kInvalidFormat;
}

bool IsUnreachable(const Status& s) { return s.code() == Code::kNetwork; }

Status Cancelled(ErrorContext ctx) {
  return Status(Code::kCancelled, "download cancelled" + (ctx.file.empty() ? std::string() : " (" + ctx.file + ")"),
                reason::kCancelled, std::move(ctx));
}

}  // namespace hubload::hub_internal
