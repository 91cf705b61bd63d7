// The addresses the server hands out (issue 19): URLs in answers use the
// address the client reached the server by (its Host header), or
// ServerOptions::public_url behind a proxy; the CDN URLs the same host name
// with the CDN listener's port, unless --cdn-host overrides it.
#include <string_view>

#include "hub/server/impl.h"

namespace hubload::server {

using namespace internal;

namespace {

// "host" of "host:port" / "[v6]:port" / "host".
std::string HostName(std::string_view hostport) {
  if (!hostport.empty() && hostport[0] == '[') {
    size_t close = hostport.find(']');
    return std::string(hostport.substr(0, close == std::string_view::npos ? hostport.size() : close + 1));
  }
  return std::string(hostport.substr(0, hostport.find(':')));
}

// Host of an absolute URL "scheme://host[:port]/...".
std::string UrlHostName(const std::string& url) {
  size_t s = url.find("://");
  if (s == std::string::npos) return {};
  std::string_view rest(url);
  rest = rest.substr(s + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  return HostName(rest);
}

}  // namespace

std::string Server::Impl::UrlHost() const {
  const std::string& h = opt.host;
  if (h == "0.0.0.0" || h.empty()) return "127.0.0.1";
  if (h == "::" || h == "[::]") return "[::1]";
  if (h.find(':') != std::string::npos && h.front() != '[') return "[" + h + "]";
  return h;
}

std::string Server::Impl::HubUrl() const {
  if (!opt.public_url.empty()) return opt.public_url;
  return "http://" + UrlHost() + ":" + std::to_string(hub_port) + faults->path_prefix();
}

std::string Server::Impl::Base(const Request& r) const {
  if (!opt.public_url.empty()) return opt.public_url;
  if (r.host.empty()) return HubUrl();
  return "http://" + r.host + faults->path_prefix();
}

std::string Server::Impl::CdnUrl(const Request* r) const {
  std::string name = opt.cdn_host;
  if (name.empty() && !opt.public_url.empty()) name = UrlHostName(opt.public_url);
  if (name.empty() && r && !r->host.empty()) name = HostName(r->host);
  if (name.empty()) name = UrlHost();
  return "http://" + name + ":" + std::to_string(cdn_port);
}

int Server::Impl::SignedTtl() const {
  int ttl = faults->signed_url_ttl_s();
  return ttl > 0 ? ttl : opt.signed_url_ttl_s;
}

}  // namespace hubload::server
