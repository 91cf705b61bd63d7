// Private to hub/: the one Hub session every HubClient call goes through —
// endpoint, Authorization only to the endpoint's origin, URL building
// (hub-protocol.md §0.1, §0.3), JSON calls and HTTP error mapping.
//
// Thread safety: immutable after construction; every method is const and may
// be called from many threads at once (the transport is thread-safe).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "hubload/hub.h"

namespace hubload::hub_internal {

struct Session {
  ClientOptions opt;
  std::shared_ptr<HttpTransport> http;
  std::string endpoint_origin;
  /// The endpoint is plain http: only then may an https URL redirect to http.
  bool endpoint_is_http = false;

  /// An endpoint that is not http(s), or a token with CR/LF/NUL, gives a
  /// session whose every request fails at once, unsent: kInvalidArgument
  /// reason kUnsupportedScheme naming the endpoint / kBadHeaderValue
  /// (the token never shown).
  explicit Session(ClientOptions o);

  ErrorContext Ctx(const std::string& repo, const std::string& rev, const std::string& file,
                   const std::string& url = {}) const;
  /// Adds `Authorization: Bearer <token>` when `req->url` is on the endpoint's origin.
  void AddAuth(HttpRequest* req) const;
  /// {endpoint}/{prefix}{repo}/resolve/{rev}/{path} (revision and path quoted as huggingface_hub).
  std::string ResolveUrlFor(RepoType t, const std::string& repo, const std::string& rev, const std::string& path) const;
  /// {endpoint}/api/{type}s/{repo}{tail}
  std::string ApiUrl(RepoType t, const std::string& repo, const std::string& tail) const;
  /// kOfflineMiss naming `what`, the repo, the revision and the cache folder.
  Status OfflineMiss(const RepoCache& rc, const std::string& rev, const std::string& what) const;
  /// GET `url` with the metadata timeout and parse the body as untrusted JSON
  /// (util::ParseJson). `max_retries` as HttpRequest::max_retries. Errors:
  /// transport errors, StatusFromHttp, kInvalidFormat "BadJson" naming the URL.
  Result<nlohmann::json> GetJson(const std::string& url, const ErrorContext& ctx, HttpHeaders* out_headers = nullptr,
                                 int max_retries = -1) const;
};

/// Adds the request's context to a lower layer's status and names the repo
/// file in the message when the lower layer (cache, transport) could not.
Status WithCtx(Status s, const ErrorContext& ctx);

/// Codes for which huggingface_hub answers from the cache when it can
/// (transport errors, 5xx, 401/403, RepoNotFound, Gated, bad metadata); never
/// RevisionNotFound or EntryNotFound.
bool FallbackAllowed(Code c);

/// True for the failures that mean "the Hub cannot be reached": connection
/// refused, DNS failure, timeout, a connection lost before an answer.
bool IsUnreachable(const Status& s);

/// kCancelled "download cancelled (<file>)".
Status Cancelled(ErrorContext ctx);

}  // namespace hubload::hub_internal
