// `hubload env`: what this process would use, for bug reports (as `hf env`):
// version, endpoint, cache folder and its file system (statfs), whether
// flock works there (tried on a temporary file), the HF_* / HUBLOAD_*
// variables seen, proxy and CA variables, the libcurl version. Tokens are
// shown only as "set" / "not set"; credentials in proxy URLs are masked.
#include <curl/curl.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "tools/hubload/cli.h"
#include "util/json.h"

extern char** environ;

namespace {
namespace fs = std::filesystem;

std::string FsTypeName(long type) {
  static const std::map<long, const char*> names = {
      {0xEF53, "ext2/3/4"},    {0x58465342, "xfs"},      {0x9123683E, "btrfs"},     {0x01021994, "tmpfs"},
      {0x6969, "nfs"},         {0xFF534D42, "cifs/smb"}, {0xFE534D42, "smb2"},      {0x65735546, "fuse"},
      {0x794C7630, "overlayfs"}, {0x4d44, "vfat"},       {0x2011BAB0, "exfat"},     {0x5346544e, "ntfs"},
      {0x2FC12FC1, "zfs"},     {0x00C36400, "ceph"},     {0x0BD00BD0, "lustre"},    {0x47504653, "gpfs"},
      {0x6A656A63, "fakeowner"}, {0x73717368, "squashfs"}, {0xF2F52010, "f2fs"},  {0x01021997, "9p/v9fs"},
      {0x858458f6, "ramfs"}};
  auto it = names.find(type);
  char hex[24];
  std::snprintf(hex, sizeof hex, "0x%lx", static_cast<unsigned long>(type));
  return it == names.end() ? std::string("unknown (") + hex + ")" : std::string(it->second) + " (" + hex + ")";
}

// A value of the report as text: a string as is, anything else as JSON.
std::string Text(const nlohmann::ordered_json& v) {
  const std::string* s = v.get_ptr<const std::string*>();
  return s ? *s : hubload::util::DumpJson(v);
}

// The cache folder, or its nearest existing parent (the cache may not exist yet).
std::string ExistingFolder(std::string p) {
  std::error_code ec;
  fs::path path(p);
  while (!path.empty() && !fs::is_directory(path, ec)) {
    fs::path parent = path.parent_path();
    if (parent == path) break;
    path = parent;
  }
  return path.empty() ? "." : path.string();
}

// Tries an exclusive flock on a fresh file in `dir`; "yes" or why not.
std::string TryFlock(const std::string& dir) {
  std::string tmpl = dir + "/.hubload-env-flock-XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  int fd = ::mkstemp(name.data());
  if (fd < 0) return std::string("unknown (cannot create a file there: ") + std::strerror(errno) + ")";
  std::string out = ::flock(fd, LOCK_EX | LOCK_NB) == 0 ? "yes" : std::string("no (") + std::strerror(errno) + ")";
  ::close(fd);
  ::unlink(name.data());
  return out;
}

// Masks a password in "scheme://user:password@host" (and any userinfo).
std::string MaskUrl(const std::string& v) {
  size_t scheme = v.find("://");
  size_t start = scheme == std::string::npos ? 0 : scheme + 3;
  size_t at = v.find('@', start);
  size_t slash = v.find('/', start);
  if (at == std::string::npos || (slash != std::string::npos && slash < at)) return v;
  return v.substr(0, start) + "***@" + v.substr(at + 1);
}

bool IsSecret(const std::string& name) {
  return name.find("TOKEN") != std::string::npos || name.find("SECRET") != std::string::npos ||
         name.find("PASSWORD") != std::string::npos || name.find("KEY") != std::string::npos;
}

hubload::cli::Command reg{"env", [](CLI::App& app, hubload::cli::Global& g) {
  auto as_json = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("env", "Print versions, endpoint, cache folder, its file system and the "
                                        "variables hubload reads (tokens shown as set / not set)");
  sub->add_flag("--json", *as_json, "machine-readable output");
  return [as_json, &g]() -> int {
    nlohmann::ordered_json out;
    out["hubload_version"] = HUBLOAD_VERSION;
    out["libcurl_version"] = curl_version_info(CURLVERSION_NOW)->version;
    out["endpoint"] = g.config.endpoint;
    out["offline"] = g.config.offline;
    out["token"] = g.config.token.empty() ? "not set" : "set";
    out["cache_dir"] = g.config.cache_dir;
    std::error_code ec;
    out["cache_dir_exists"] = fs::is_directory(g.config.cache_dir, ec);
    std::string probe = ExistingFolder(g.config.cache_dir);
    struct statfs sf;
    out["cache_fs_checked_at"] = probe;
    out["cache_fs_type"] = ::statfs(probe.c_str(), &sf) == 0 ? FsTypeName(static_cast<long>(sf.f_type))
                                                              : std::string("unknown (") + std::strerror(errno) + ")";
    out["cache_flock_works"] = TryFlock(probe);
    nlohmann::ordered_json vars = nlohmann::ordered_json::object();
    std::vector<std::string> names;
    for (char** e = environ; e && *e; ++e) {
      std::string kv = *e;
      std::string name = kv.substr(0, kv.find('='));
      if (name.rfind("HF_", 0) == 0 || name.rfind("HUBLOAD_", 0) == 0 || name.rfind("HUGGINGFACE_", 0) == 0)
        names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    for (auto& n : names) {
      const char* v = std::getenv(n.c_str());
      vars[n] = IsSecret(n) ? (v && *v ? "set" : "not set") : (v ? v : "");
    }
    if (!vars.contains("HF_TOKEN")) vars["HF_TOKEN"] = "not set";
    out["variables"] = vars;
    nlohmann::ordered_json net = nlohmann::ordered_json::object();
    for (const char* n : {"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy",
                          "NO_PROXY", "no_proxy", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR",
                          "REQUESTS_CA_BUNDLE"}) {
      const char* v = std::getenv(n);
      net[n] = v ? MaskUrl(v) : "not set";
    }
    out["proxy_and_ca"] = net;
    if (*as_json) {
      std::printf("%s\n", hubload::util::DumpJson(out, 2).c_str());
      return 0;
    }
    for (auto it = out.begin(); it != out.end(); ++it) {
      if (it.value().is_object()) {
        std::printf("%s:\n", it.key().c_str());
        for (auto jt = it.value().begin(); jt != it.value().end(); ++jt)
          std::printf("  %s: %s\n", jt.key().c_str(), Text(jt.value()).c_str());
      } else {
        std::printf("%s: %s\n", it.key().c_str(), Text(it.value()).c_str());
      }
    }
    return 0;
  };
}};

}  // namespace
