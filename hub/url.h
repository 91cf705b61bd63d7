// hub/url.h (internal): URL and file-pattern helpers of the Hub client. Not
// installed; the public percent-encoding (EncodeRevision, EncodePath) and
// pattern filter (MatchesPatterns) are in hubload/hub.h, RedactUrl in
// hubload/transport.h.
#pragma once

#include <string>
#include <string_view>

namespace hubload {

/// Lower-cased "scheme://host:port" of an absolute URL (port made explicit),
/// empty when not parseable. Two URLs with different origins never share
/// Authorization. Pure function; thread-safe.
std::string UrlOrigin(std::string_view url);

/// Resolves a Location value against the URL it came from (RFC 3986 §5:
/// absolute, scheme-relative "//h/p", absolute-path "/p", relative "p").
/// Pure function; thread-safe.
std::string ResolveUrl(std::string_view base, std::string_view location);

/// fnmatch.fnmatchcase, as huggingface_hub's filter_repo_objects uses it:
/// `*` (any run, crossing '/'), `?`, `[seq]`, `[!seq]`. Pure; thread-safe.
bool FnMatch(std::string_view pattern, std::string_view name);

}  // namespace hubload
