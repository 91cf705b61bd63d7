// libFuzzer entry for the router of `hubload serve`: request building (query
// string, Host, Authorization), the fault rules answered before routing, the
// routes of every API family and their handlers, on a small store (a regular
// file, an LFS file, a folder, a PR ref, a tag) that writes may change (it is
// rebuilt every 5000 runs). No sockets: the input is
//   byte 0: flags (bit 0 CDN listener, bit 1 path prefix "/p", bit 2 read-only)
//   then "METHOD\nTARGET\nName: value\n...\n\nBODY".
// Checks: no crash, no sanitizer report, every answer has a status in
// 100..499 (a 5xx is a bug of ours on this healthy store: the handler guard's
// 500, a store error mapped to 500).
#include <spdlog/spdlog.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "hub/server/impl.h"

namespace fs = std::filesystem;
using namespace hubload;
using namespace hubload::server;

namespace {

struct Env {
  fs::path root;
  std::unique_ptr<Server::Impl> impl;
  uint64_t runs = 0;

  Env() {
    spdlog::set_level(spdlog::level::off);
    root = fs::temp_directory_path() / ("hubload-router-fuzz-" + std::to_string(::getpid()));
    Reset();
  }
  ~Env() {
    impl.reset();
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  void Reset() {
    impl.reset();
    std::error_code ec;
    fs::remove_all(root, ec);
    fs::create_directories(root, ec);
    CreateRepoOptions o;
    o.lfs_threshold_bytes = 64;
    auto c = CreateRepoFromFiles(root.string(), "org/model",
                                 {{"config.json", "{\"a\": 1}"}, {"w/model.safetensors", std::string(100, 'x')},
                                  {"sub/dir/f.txt", "deep"}},
                                 o);
    if (!c.ok()) std::abort();
    if (!SetRef(root.string(), "org/model", "refs/pr/1", *c).ok()) std::abort();
    if (!CreateTag(root.string(), "org/model", "v1", "main").ok()) std::abort();
    CreateRepoOptions d;
    d.repo_type = RepoType::kDataset;
    if (!CreateRepoFromFiles(root.string(), "gpt2", {{"vocab.txt", "a b"}}, d).ok()) std::abort();
    ServerOptions so;
    so.root = root.string();
    so.tokens = {"t"};
    so.tree_page_size = 2;
    so.multipart_chunk_size = 50;
    so.faults.SetRedirect("/Org/", "/org/", 307, Faults::RedirectForm::kRelative);
    so.faults.SetRateLimit("cdn", 1000000, 3600);
    auto i = NewServerImpl(so);
    if (!i.ok()) std::abort();
    impl = std::move(*i);
    impl->hub_port = 8000;
    impl->cdn_port = 8001;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Env env;
  if (++env.runs % 5000 == 0) env.Reset();
  if (size < 1) return 0;
  uint8_t flags = data[0];
  std::string in(reinterpret_cast<const char*>(data + 1), size - 1);
  Server::Impl& impl = *env.impl;
  impl.faults->SetPathPrefix((flags & 2) ? "/p" : "");
  impl.opt.read_only = (flags & 4) != 0;
  internal::Request r;
  r.cdn = (flags & 1) != 0;
  size_t nl = in.find('\n');
  r.method = in.substr(0, std::min(nl, size_t{16}));
  size_t pos = nl == std::string::npos ? in.size() : nl + 1;
  size_t nl2 = in.find('\n', pos);
  r.target = in.substr(pos, nl2 == std::string::npos ? std::string::npos : nl2 - pos);
  pos = nl2 == std::string::npos ? in.size() : nl2 + 1;
  while (pos < in.size()) {
    size_t e = in.find('\n', pos);
    std::string line = in.substr(pos, e == std::string::npos ? std::string::npos : e - pos);
    pos = e == std::string::npos ? in.size() : e + 1;
    if (line.empty()) break;
    size_t colon = line.find(':');
    std::string name = line.substr(0, colon);
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value = colon == std::string::npos ? "" : line.substr(colon + 1);
    while (!value.empty() && value[0] == ' ') value.erase(0, 1);
    r.headers.emplace_back(name, value);
  }
  if (pos < in.size()) r.body = in.substr(pos);
  impl.Prepare(r);
  auto early = impl.Early(r);
  internal::Response resp = early ? *early : impl.Dispatch(r);
  if (resp.status < 100 || resp.status > 499) {
    std::fprintf(stderr, "status %d: %s\n", resp.status, resp.body.c_str());
    std::abort();
  }
  return 0;
}
