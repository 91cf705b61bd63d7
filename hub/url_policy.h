// Private to hub/: what the client agrees to send and to follow (issue 19):
// only http and https, for the endpoint and every redirect; no https -> http
// redirect unless the endpoint itself is http; no CR, LF or NUL in a request
// header. huggingface_hub speaks only http(s) (requests refuses other schemes).
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "hubload/status.h"

namespace hubload::hub_internal {

/// Lower-cased scheme of an absolute URL ("HTTPS://h/p" -> "https"), empty
/// when `url` has no "scheme://" prefix.
std::string UrlScheme(std::string_view url);

/// OK when `url` is an absolute http or https URL. Otherwise kInvalidArgument
/// reason kUnsupportedScheme naming `what` ("endpoint", "request URL") and
/// the redacted URL. Makes no request.
Status CheckHttpUrl(std::string_view url, std::string_view what);

/// The redirect decision, `from` -> `to` (`to` already resolved against
/// `from`): `to` must be http or https (kUnsupported reason
/// kUnsupportedScheme: file://, ftp://, gopher://, dict://, ... are never
/// opened), and an https `from` may go to http only when
/// `allow_https_to_http` (the endpoint is http) — else kUnsupported reason
/// kInsecureRedirect. Messages carry redacted URLs only.
Status CheckRedirect(std::string_view from, std::string_view to, bool allow_https_to_http);

/// OK when neither `name` nor `value` holds CR, LF or NUL (and `name` is a
/// non-empty token without ':' or spaces). Otherwise kInvalidArgument reason
/// kBadHeaderValue naming the header, never its value (it may be a token).
Status CheckHeader(std::string_view name, std::string_view value);

}  // namespace hubload::hub_internal
