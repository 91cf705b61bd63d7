// Shared fixture of the `hubload serve` tests: libcurl as the independent
// client, expected etags/hashes computed here with OpenSSL from the raw bytes.
#pragma once
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "hubload/server.h"
#include "testing/hub_server.h"
#include "testing/util.h"

namespace hubload::testing {

namespace fs = std::filesystem;
using json = nlohmann::json;

inline std::string Hex(const unsigned char* md, unsigned n) {
  static const char* h = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < n; ++i) {
    s.push_back(h[md[i] >> 4]);
    s.push_back(h[md[i] & 15]);
  }
  return s;
}
inline std::string Sha256(const std::string& s) { return Sha256Hex(s.data(), s.size()); }
// git blob sha1, computed independently of hubload.
inline std::string GitSha1(const std::string& content) {
  std::string obj = "blob " + std::to_string(content.size());
  obj.push_back('\0');
  obj += content;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_Digest(obj.data(), obj.size(), md, &n, EVP_sha1(), nullptr);
  return Hex(md, n);
}
inline std::string Base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

struct Reply {
  long status = 0;
  CURLcode code = CURLE_OK;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  bool has(const std::string& h) const { return headers.count(h) > 0; }
  std::string h(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

inline size_t WriteCb(char* p, size_t s, size_t n, void* ud) {
  static_cast<Reply*>(ud)->body.append(p, s * n);
  return s * n;
}
inline size_t HeaderCb(char* p, size_t s, size_t n, void* ud) {
  auto* r = static_cast<Reply*>(ud);
  std::string line(p, s * n);
  if (line.rfind("HTTP/", 0) == 0) {
    r->headers.clear();
    return s * n;
  }
  auto colon = line.find(':');
  if (colon != std::string::npos) {
    std::string k = line.substr(0, colon), v = line.substr(colon + 1);
    for (auto& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    while (!v.empty() && (v.front() == ' ')) v.erase(0, 1);
    while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) v.pop_back();
    r->headers[k] = v;
  }
  return s * n;
}

inline Reply Http(const std::string& method, const std::string& url, const std::vector<std::string>& headers = {},
           const std::string* body = nullptr, bool follow = false) {
  Reply r;
  CURL* c = curl_easy_init();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, WriteCb);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, HeaderCb);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, follow ? 1L : 0L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  if (method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (method != "GET") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
  if (body) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body->data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size()));
  }
  curl_slist* hl = nullptr;
  for (auto& h : headers) hl = curl_slist_append(hl, h.c_str());
  hl = curl_slist_append(hl, "Expect:");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
  r.code = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  curl_slist_free_all(hl);
  curl_easy_cleanup(c);
  return r;
}
inline Reply Get(const std::string& url, const std::vector<std::string>& headers = {}) { return Http("GET", url, headers); }

/// Sends `bytes` on a fresh TCP connection to host:port and returns what
/// comes back until the server closes, or `timeout_ms` passes without data
/// (a raw socket: for input libcurl would refuse to send).
inline std::string RawExchange(uint16_t port, const std::string& bytes, int timeout_ms = 5000,
                               const char* host = "127.0.0.1", bool half_close = true) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return {};
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, host, &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return {};
  }
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t k = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (k <= 0) break;
    off += static_cast<size_t>(k);
  }
  if (half_close) ::shutdown(fd, SHUT_WR);
  std::string out;
  char buf[65536];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) break;
    ssize_t k = ::recv(fd, buf, sizeof buf, 0);
    if (k <= 0) break;
    out.append(buf, static_cast<size_t>(k));
  }
  ::close(fd);
  return out;
}

/// Status code of the first response in raw HTTP text (0 when none).
inline int RawStatus(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) return 0;
  return std::atoi(response.substr(9, 3).c_str());
}

/// Every line of a JSON-lines access log.
inline std::vector<nlohmann::json> ReadAccessLog(const std::filesystem::path& p) {
  std::vector<nlohmann::json> out;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

inline const char* kGood = "hf_good_token";
inline const char* kGatedOk = "hf_gated_ok";
inline const char* kOther = "hf_other";

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::ServerOptions o;
    o.tokens = {kGood, kGatedOk, kOther};
    o.tree_page_size = 2;
    o.multipart_chunk_size = 1000;
    o.access_log = log_dir_.str() + "/access.log";
    hub_ = StartTestHub(o);
    ASSERT_TRUE(hub_);
    files_ = {{"config.json", "{\"hidden_size\": 8}\n"},
              {"weights/model.safetensors", PatternBytes(5000, 1)},
              {"empty.txt", ""},
              {"a b#c?.txt", "odd name\n"},
              {"sub/dir/deep.txt", "deep\n"}};
    commit_ = hub_->AddRepo("org/model", files_);
    ASSERT_EQ(commit_.size(), 40u);
  }
  std::string U(const std::string& path) const { return hub_->url() + path; }
  static std::string Auth(const std::string& t) { return "Authorization: Bearer " + t; }

  TempDir log_dir_;
  std::unique_ptr<TestHub> hub_;
  std::map<std::string, std::string> files_;
  std::string commit_;
};

}  // namespace hubload::testing
