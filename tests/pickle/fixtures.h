// Checkpoints written at test time by Debian's python3-torch
// (tests/pickle/make_fixtures.py), with the manifest the same script dumped
// independently (dtype, shape, stride, storage_offset, storage identity,
// contiguous bytes). Generated once per test process into a temp dir.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "testing/util.h"

namespace hubload::testing {

struct ExpectedTensor {
  std::string name;
  std::string dtype;  // safetensors spelling
  std::vector<uint64_t> shape;
  std::vector<uint64_t> stride;
  uint64_t storage_offset = 0;
  int storage = 0;    // equal for tensors sharing one Python storage
  std::string data;   // contiguous little-endian bytes
  std::optional<std::string> f32;  // t.float() bytes for floating tensors
};

class PythonFixtures {
 public:
  /// The fixtures of this process; nullptr (with *why set) when python3-torch
  /// is not installed. A script failure is a test failure.
  static const PythonFixtures* Get(std::string* why) {
    static PythonFixtures* f = [] {
      auto* p = new PythonFixtures();
      std::string out, err;
      std::string cmd = "/usr/bin/python3 '" + std::string(HUBLOAD_TEST_SOURCE_DIR) +
                        "/tests/pickle/make_fixtures.py' '" + p->dir_.str() + "'";
      p->rc_ = RunCommand(cmd, &out, &err);
      p->err_ = err;
      return p;
    }();
    if (f->rc_ == 0) return f;
    if (f->rc_ == 3 || f->rc_ == 127 || f->rc_ == 126) {
      *why = "python3-torch is not installed (/usr/bin/python3 -c 'import torch' fails; tools/install-deps.sh "
             "installs it): " + f->err_;
    } else {
      ADD_FAILURE() << "make_fixtures.py failed (" << f->rc_ << "): " << f->err_;
      *why = "fixture script failed";
    }
    return nullptr;
  }

  std::string Path(const std::string& file) const { return (dir_.path() / file).string(); }

  std::vector<ExpectedTensor> Manifest(const std::string& file) const {
    std::ifstream in(Path(file) + ".json");
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    std::vector<uint8_t> raw = ReadFileBytes(Path(file) + ".raw");
    std::vector<ExpectedTensor> out;
    if (!j.is_object()) {
      ADD_FAILURE() << "bad manifest for " << file;
      return out;
    }
    auto slice = [&](const nlohmann::json& r) {
      size_t off = r[0].get<size_t>(), len = r[1].get<size_t>();
      return std::string(reinterpret_cast<const char*>(raw.data()) + off, len);
    };
    for (const auto& t : j["tensors"]) {
      ExpectedTensor e;
      e.name = t["name"].get<std::string>();
      e.dtype = t["dtype"].get<std::string>();
      e.shape = t["shape"].get<std::vector<uint64_t>>();
      e.stride = t["stride"].get<std::vector<uint64_t>>();
      e.storage_offset = t["storage_offset"].get<uint64_t>();
      e.storage = t["storage"].get<int>();
      e.data = slice(t["data"]);
      if (t.contains("f32")) e.f32 = slice(t["f32"]);
      out.push_back(std::move(e));
    }
    return out;
  }

  /// Checkpoint files the script writes (each with a manifest).
  static std::vector<std::string> Files() {
    return {"model.bin",          "legacy.bin", "proto4.bin", "same_object.bin", "params.bin", "params_legacy.bin",
            "pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"};
  }

 private:
  TempDir dir_;
  int rc_ = -1;
  std::string err_;
};

#define HUBLOAD_PYTHON_FIXTURES(var)                       \
  std::string var##_why;                                   \
  const auto* var = PythonFixtures::Get(&var##_why);       \
  if (!var) GTEST_SKIP() << var##_why

}  // namespace hubload::testing
