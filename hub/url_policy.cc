// Schemes, redirects and header values the client accepts (hub/url_policy.h).
#include "hub/url_policy.h"

#include <cctype>

#include "hubload/reasons.h"
#include "hubload/transport.h"

namespace hubload::hub_internal {

std::string UrlScheme(std::string_view url) {
  size_t sep = url.find("://");
  if (sep == std::string_view::npos || sep == 0) return {};
  std::string out;
  for (char c : url.substr(0, sep)) {
    unsigned char u = static_cast<unsigned char>(c);
    if (!(std::isalnum(u) || c == '+' || c == '-' || c == '.')) return {};
    out.push_back(static_cast<char>(std::tolower(u)));
  }
  return std::isalpha(static_cast<unsigned char>(out[0])) ? out : std::string();
}

namespace {

bool IsHttpScheme(const std::string& s) { return s == "http" || s == "https"; }

std::string Shown(std::string_view url) {
  std::string s = UrlScheme(url);
  return s.empty() ? "'" + RedactUrl(url) + "'" : RedactUrl(url);
}

}  // namespace

Status CheckHttpUrl(std::string_view url, std::string_view what) {
  std::string scheme = UrlScheme(url);
  if (IsHttpScheme(scheme)) return Status::Ok();
  Status s(Code::kInvalidArgument,
           std::string(what) + " " + Shown(url) + " is not an http or https URL" +
               (scheme.empty() ? std::string(" (no scheme)") : " (scheme '" + scheme + "')") +
               ": hubload speaks only http and https, as huggingface_hub",
           reason::kUnsupportedScheme);
  s.mutable_context().url = RedactUrl(url);
  return s;
}

Status CheckRedirect(std::string_view from, std::string_view to, bool allow_https_to_http) {
  std::string ts = UrlScheme(to);
  if (!IsHttpScheme(ts)) {
    Status s(Code::kUnsupported,
             "refused redirect from " + RedactUrl(from) + " to " + Shown(to) +
                 (ts.empty() ? std::string() : " (scheme '" + ts + "')") + ": only http and https are followed",
             reason::kUnsupportedScheme);
    s.mutable_context().url = RedactUrl(from);
    return s;
  }
  if (ts == "http" && UrlScheme(from) == "https" && !allow_https_to_http) {
    Status s(Code::kUnsupported,
             "refused redirect from https to plain http (" + RedactUrl(from) + " -> " + RedactUrl(to) +
                 "): allowed only when the endpoint itself is http",
             reason::kInsecureRedirect);
    s.mutable_context().url = RedactUrl(from);
    return s;
  }
  return Status::Ok();
}

Status CheckHeader(std::string_view name, std::string_view value) {
  auto bad = [](char c) { return c == '\r' || c == '\n' || c == '\0'; };
  bool name_ok = !name.empty();
  for (char c : name)
    if (bad(c) || c == ':' || c == ' ' || c == '\t') name_ok = false;
  std::string shown;
  for (char c : name) shown.push_back(bad(c) ? '?' : c);
  if (!name_ok)
    return Status(Code::kInvalidArgument, "request header name '" + shown + "' is not a valid field name",
                  reason::kBadHeaderValue);
  for (char c : value)
    if (bad(c))
      return Status(Code::kInvalidArgument,
                    "request header '" + shown +
                        "' has a value containing CR, LF or NUL (header injection); refused, value not shown",
                    reason::kBadHeaderValue);
  return Status::Ok();
}

}  // namespace hubload::hub_internal
