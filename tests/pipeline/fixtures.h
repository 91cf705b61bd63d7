// Fixtures for the fetch-and-load tests: safetensors files written byte by byte
// here (independently of hubload's writer), a store + `hubload serve` server in
// process, and a client pointed at it.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hubload/hub.h"
#include "hubload/server.h"
#include "hubload/transport.h"
#include "testing/hub_server.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace hubload::pipeline_test {

namespace fs = std::filesystem;

/// One tensor with its exact little-endian bytes.
struct RawTensor {
  std::string name;
  std::string dtype;  // header spelling
  std::vector<uint64_t> shape;
  std::string bytes;
};

/// Finite float values as bytes (F32: small uniform values; F16/BF16: a fixed
/// finite bit pattern family; I64: 0..n-1; U16: pseudo-random).
inline RawTensor MakeTensor(const std::string& name, const std::string& dtype, std::vector<uint64_t> shape,
                            uint32_t seed) {
  uint64_t n = 1;
  for (auto d : shape) n *= d;
  RawTensor t{name, dtype, shape, {}};
  if (dtype == "F32") {
    t.bytes.resize(n * 4);
    std::string r = hubload::testing::PatternBytes(n, seed);
    for (uint64_t i = 0; i < n; ++i) {
      float v = (static_cast<int>(static_cast<uint8_t>(r[i])) - 128) / 64.0f;
      std::memcpy(&t.bytes[i * 4], &v, 4);
    }
  } else if (dtype == "F16" || dtype == "BF16") {
    t.bytes.resize(n * 2);
    std::string r = hubload::testing::PatternBytes(n, seed);
    for (uint64_t i = 0; i < n; ++i) {
      // sign bit | exponent around 1.0 | random mantissa bits: always finite
      uint16_t h = dtype == "F16" ? static_cast<uint16_t>(0x3800u | (static_cast<uint8_t>(r[i]) & 0xFFu))
                                  : static_cast<uint16_t>(0x3F00u | (static_cast<uint8_t>(r[i]) & 0x7Fu));
      if (i % 3 == 0) h |= 0x8000u;
      std::memcpy(&t.bytes[i * 2], &h, 2);
    }
  } else if (dtype == "I64") {
    t.bytes.resize(n * 8);
    for (uint64_t i = 0; i < n; ++i) {
      int64_t v = static_cast<int64_t>(i) * 7 - 3 + seed;
      std::memcpy(&t.bytes[i * 8], &v, 8);
    }
  } else if (dtype == "U16") {
    t.bytes = hubload::testing::PatternBytes(n * 2, seed);  // any bit pattern is a uint16
  } else {
    ADD_FAILURE() << "fixture dtype " << dtype;
  }
  return t;
}

/// A safetensors file, tensors in the given order, header padded to 8 bytes;
/// `metadata` is added to __metadata__ (which has "format": "pt").
inline std::string SafetensorsBytes(const std::vector<RawTensor>& tensors,
                                    const std::map<std::string, std::string>& metadata = {}) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  h["__metadata__"] = {{"format", "pt"}};
  for (const auto& [k, v] : metadata) h["__metadata__"][k] = v;
  uint64_t off = 0;
  for (const auto& t : tensors) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
  }
  std::string js = h.dump();
  while ((8 + js.size()) % 8) js.push_back(' ');
  std::string out(8, '\0');
  uint64_t n = js.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  out += js;
  for (const auto& t : tensors) out += t.bytes;
  return out;
}

inline void WriteText(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  hubload::testing::WriteFileBytes(p, s);
}

/// Writes `shards` (file name -> tensors) into `dir` plus the index `index_name`.
inline void WriteSharded(const fs::path& dir, const std::string& index_name,
                         const std::map<std::string, std::vector<RawTensor>>& shards) {
  nlohmann::ordered_json idx;
  uint64_t total = 0;
  nlohmann::json wm = nlohmann::json::object();
  for (const auto& [file, tensors] : shards) {
    WriteText(dir / file, SafetensorsBytes(tensors));
    for (const auto& t : tensors) {
      wm[t.name] = file;
      total += t.bytes.size();
    }
  }
  idx["metadata"] = {{"total_size", total}};
  idx["weight_map"] = wm;
  WriteText(dir / index_name, idx.dump(2));
}

/// A store folder served by an in-process `hubload serve`.
class ServedStore {
 public:
  ServedStore() : hub_(hubload::testing::StartTestHub()) {}
  /// Creates `repo_id` from `folder`; returns the commit.
  std::string AddRepo(const std::string& repo_id, const fs::path& folder) {
    if (!hub_) return std::string();
    auto c = server::CreateRepoFromFolder(hub_->root.str(), repo_id, folder.string());
    EXPECT_OK(c);
    return c.ok() ? *c : std::string();
  }
  server::Server& server() { return *hub_->server; }
  std::string url() const { return hub_ ? hub_->url() : std::string("http://127.0.0.1:9"); }
  bool ok() const { return hub_ != nullptr; }

 private:
  std::unique_ptr<hubload::testing::TestHub> hub_;
};

inline HubClient MakeClient(const std::string& endpoint, const std::string& cache_dir,
                            std::shared_ptr<HttpTransport> transport = nullptr, bool offline = false) {
  ClientOptions o;
  o.config.endpoint = endpoint;
  o.config.cache_dir = cache_dir;
  o.config.token = "";
  o.config.offline = offline;
  o.retry.max_retries = 1;
  o.retry.sleep = [](double) {};
  o.transport = std::move(transport);
  return HubClient(o);
}

/// Wraps a transport; GETs whose URL contains `needle` wait until Release()
/// (or `max_wait`), so a test controls when one file may start arriving.
class StallTransport : public HttpTransport {
 public:
  StallTransport(std::shared_ptr<HttpTransport> inner, std::string needle, std::chrono::seconds max_wait)
      : inner_(std::move(inner)), needle_(std::move(needle)), max_wait_(max_wait) {}
  Result<HttpResponse> Send(const HttpRequest& req, BodySink* sink) override {
    if (req.method == "GET" && req.url.find(needle_) != std::string::npos) {
      std::unique_lock<std::mutex> l(mu_);
      if (!cv_.wait_for(l, max_wait_, [&] { return released_; })) timed_out_ = true;
    }
    return inner_->Send(req, sink);
  }
  void Release() {
    std::lock_guard<std::mutex> l(mu_);
    released_ = true;
    cv_.notify_all();
  }
  bool timed_out() {
    std::lock_guard<std::mutex> l(mu_);
    return timed_out_;
  }

 private:
  std::shared_ptr<HttpTransport> inner_;
  std::string needle_;
  std::chrono::seconds max_wait_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  bool timed_out_ = false;
};

}  // namespace hubload::pipeline_test
