#include "hubload/config.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace hubload {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string Trim(std::string s) {
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

std::string StripTrailingSlash(std::string s) {
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

std::string ReadTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  return Trim(ss.str());
}

bool IsTrue(std::string v) {
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::toupper(c); });
  return v == "1" || v == "ON" || v == "YES" || v == "TRUE";
}

}  // namespace

std::string HubConfig::HfHome() {
  std::string home = Env("HF_HOME");
  if (!home.empty()) return StripTrailingSlash(home);
  std::string xdg = Env("XDG_CACHE_HOME");
  if (!xdg.empty()) return StripTrailingSlash(xdg) + "/huggingface";
  return StripTrailingSlash(Env("HOME")) + "/.cache/huggingface";
}

HubConfig HubConfig::FromEnvironment() {
  HubConfig c;
  std::string ep = Env("HF_ENDPOINT");
  c.endpoint = StripTrailingSlash(ep.empty() ? std::string(kDefaultEndpoint) : ep);
  c.token = Trim(Env("HF_TOKEN"));
  if (c.token.empty()) {
    std::string token_path = Env("HF_TOKEN_PATH");
    if (token_path.empty()) token_path = HfHome() + "/token";
    c.token = ReadTokenFile(token_path);
  }
  std::string cache = Env("HF_HUB_CACHE");
  c.cache_dir = StripTrailingSlash(cache.empty() ? HfHome() + "/hub" : cache);
  c.offline = IsTrue(Env("HF_HUB_OFFLINE"));
  auto seconds = [&c](const char* name, double* out) {
    const std::string v = Env(name);
    if (v.empty()) return;
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (!end || *end != '\0' || !(x > 0) || x > 1e6) {
      c.environment_errors.push_back(std::string(name) + "='" + v + "' is not a positive number of seconds");
      return;
    }
    *out = x;
  };
  seconds("HF_HUB_ETAG_TIMEOUT", &c.etag_timeout_s);
  seconds("HF_HUB_DOWNLOAD_TIMEOUT", &c.download_timeout_s);
  return c;
}

}  // namespace hubload
