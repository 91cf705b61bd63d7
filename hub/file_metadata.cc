// HEAD probe of one file (hub/file_metadata.h).
#include "hub/errors.h"
#include "hub/url.h"
#include "hub/file_metadata.h"

#include "hub/http_parse.h"
#include "hub/url_policy.h"
#include "hubload/reasons.h"

namespace hubload::hub_internal {

Result<FileMeta> Head(const Session& s, RepoType t, const std::string& repo, const std::string& rev,
                      const std::string& path, std::string* commit_on_404, int max_retries) {
  const std::string first = s.ResolveUrlFor(t, repo, rev, path);
  std::string url = first;
  ErrorContext ctx = s.Ctx(repo, rev, path, url);
  for (int hop = 0; hop <= 10; ++hop) {
    HttpRequest req;
    req.method = "HEAD";
    req.url = url;
    req.follow_redirects = false;
    req.timeout_s = s.opt.config.etag_timeout_s;
    req.max_retries = max_retries;
    req.headers.emplace_back("Accept-Encoding", "identity");
    s.AddAuth(&req);
    auto r = s.http->Send(req, nullptr);
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
      // A hop on the same origin (a renamed or re-cased repo, a mirror's
      // rewrite; path-only, relative or written out in full: B46) carries no
      // metadata: follow it. The first hop to another origin, or one that
      // carries the Hub's headers, is where the bytes live.
      const std::string target = ResolveUrl(url, *loc);
      if (UrlOrigin(target) == UrlOrigin(url) && !resp.headers.Has("X-Repo-Commit")) {
        url = target;
        continue;
      }
    }
    FileMeta m;
    m.commit = resp.headers.Get("X-Repo-Commit").value_or("");
    m.raw_etag = resp.headers.Get("X-Linked-Etag").value_or(resp.headers.Get("ETag").value_or(""));
    m.etag = NormalizeEtag(m.raw_etag);
    if (auto sz = ParseDecimal(resp.headers.Get("X-Linked-Size"))) m.size = *sz;
    else if (!redirect)
      if (auto s2 = ParseDecimal(resp.headers.Get("Content-Length"))) m.size = *s2;
    if (redirect && loc) {
      m.location = ResolveUrl(url, *loc);
      // The bytes are fetched from this location later: the redirect rule applies to it.
      HUBLOAD_RETURN_IF_ERROR(WithCtx(CheckRedirect(url, m.location, s.endpoint_is_http), ctx));
    }
    std::string host = UrlOrigin(url);
    if (!IsCommitHash(m.commit))
      return Status(Code::kInvalidFormat,
                    "the server " + host + " sent no valid X-Repo-Commit header for '" + path + "'",
                    reason::kMissingHeader, ctx);
    if (m.etag.empty() || m.etag.find('/') != std::string::npos || m.etag.find('.') != std::string::npos ||
        m.etag.size() > 255)
      return Status(Code::kInvalidFormat,
                    "the server " + host + " sent no usable ETag/X-Linked-Etag header for '" + path + "'",
                    reason::kMissingHeader, ctx);
    return m;
  }
  ctx.url = RedactUrl(first);
  return Status(Code::kNetwork,
                "too many redirects (more than 10) for '" + path + "' starting at " + RedactUrl(first),
                reason::kTooManyRedirects, ctx);
}

}  // namespace hubload::hub_internal
