#include "testing/util.h"

#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

namespace hubload::testing {
namespace fs = std::filesystem;

namespace {
// Exports the paths every test (and every child process it starts) may need,
// unless the caller already set them.
struct ExportTestEnvironment {
  ExportTestEnvironment() {
    setenv("HUBLOAD_BIN", HUBLOAD_TEST_BIN, 0);
    setenv("HUBLOAD_SOURCE_DIR", HUBLOAD_TEST_SOURCE_DIR, 0);
    setenv("HUBLOAD_SHARED_DATA", HUBLOAD_TEST_SHARED_DATA, 0);
  }
} export_test_environment;
}  // namespace

TempDir::TempDir() {
  std::string base = fs::temp_directory_path().string() + "/hubload-test-XXXXXX";
  std::vector<char> buf(base.begin(), base.end());
  buf.push_back('\0');
  char* p = mkdtemp(buf.data());
  if (!p) {
    ADD_FAILURE() << "mkdtemp failed";
    return;
  }
  path_ = p;
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) {
    // Make everything writable first so read-only files do not block removal.
    for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      std::error_code ec2;
      if (!it->is_symlink(ec2)) fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec2);
    }
    fs::remove_all(path_, ec);
  }
}

fs::path SharedDataDir() {
  const char* env = std::getenv("HUBLOAD_SHARED_DATA");
  fs::path p = env && *env ? fs::path(env) : fs::path(HUBLOAD_TEST_SHARED_DATA);
  std::error_code ec;
  if (fs::is_directory(p, ec)) return p;
  return {};
}

std::string HubloadBin() {
  const char* env = std::getenv("HUBLOAD_BIN");
  return env && *env ? std::string(env) : std::string(HUBLOAD_TEST_BIN);
}

std::vector<uint8_t> ReadFileBytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << p;
    return {};
  }
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteFileBytes(const fs::path& p, const void* data, size_t n) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  if (!out) ADD_FAILURE() << "cannot write " << p;
}

void WriteFileBytes(const fs::path& p, const std::string& s) { WriteFileBytes(p, s.data(), s.size()); }

std::string PatternBytes(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = 2463534242u ^ (seed * 2654435761u);
  if (x == 0) x = 2463534242u;
  for (auto& c : s) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c = static_cast<char>(x & 0xff);
  }
  return s;
}

bool HasSymlinkBelow(const std::filesystem::path& root, std::string* which) {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_symlink()) {
      *which = it->path().string();
      return true;
    }
  }
  return false;
}

void SetFileAge(const std::string& path, double age_s) {
  const double t =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() - age_s;
  timespec ts[2];
  ts[0].tv_sec = ts[1].tv_sec = static_cast<time_t>(t);
  ts[0].tv_nsec = ts[1].tv_nsec = 0;
  if (::utimensat(AT_FDCWD, path.c_str(), ts, 0) != 0) ADD_FAILURE() << "cannot set the age of " << path;
}

std::string Sha256Hex(const void* data, size_t n) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data, n, md, &len, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < len; ++i) {
    s.push_back(hex[md[i] >> 4]);
    s.push_back(hex[md[i] & 15]);
  }
  return s;
}

std::string GitBlobSha1Hex(const std::string& content) {
  // git hash-object: sha1 of "blob <size>\0" + content.
  std::string pre = "blob " + std::to_string(content.size()) + std::string(1, '\0') + content;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(pre.data(), pre.size(), md, &len, EVP_sha1(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < len; ++i) {
    s.push_back(hex[md[i] >> 4]);
    s.push_back(hex[md[i] & 15]);
  }
  return s;
}

uint16_t FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

int RunCommand(const std::string& cmd, std::string* out, std::string* err) {
  TempDir tmp;
  std::string o = tmp.str() + "/out", e = tmp.str() + "/err";
  std::string full = "(" + cmd + ") >'" + o + "' 2>'" + e + "' </dev/null";
  int rc = std::system(full.c_str());
  auto slurp = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  if (out) *out = slurp(o);
  if (err) *err = slurp(e);
  if (rc == -1) return -1;
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

}  // namespace hubload::testing
