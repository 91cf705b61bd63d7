// Checkpoints written at test time by Debian's python3-torch
// (tests/pickle/make_fixtures.py), with the manifest the same script dumped
// independently (dtype, shape, stride, storage_offset, storage identity,
// contiguous bytes). Generated once per test executable, not per process
// (ctest runs every test case in its own process, and python3 with torch
// takes seconds to start), into pickle-fixtures/ beside the executable, under
// a file lock; made again when the script changes (the folder records the
// script text it was made with).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
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
      p->Make();
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

  std::string Path(const std::string& file) const { return (dir_ / file).string(); }

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
  // Fills dir_ unless it already holds the output of the current script.
  void Make() {
    namespace fs = std::filesystem;
    const fs::path script = fs::path(HUBLOAD_TEST_SOURCE_DIR) / "tests/pickle/make_fixtures.py";
    std::error_code ec;
    const fs::path parent = fs::read_symlink("/proc/self/exe", ec).parent_path();
    if (ec) {
      rc_ = 1;
      err_ = "cannot read /proc/self/exe: " + ec.message();
      return;
    }
    dir_ = parent / "pickle-fixtures";
    const std::vector<uint8_t> text = ReadFileBytes(script);
    const std::string script_text(text.begin(), text.end());
    const int lock = ::open((parent / "pickle-fixtures.lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (lock < 0 || ::flock(lock, LOCK_EX) != 0) {
      rc_ = 1;
      err_ = "cannot lock " + (parent / "pickle-fixtures.lock").string();
      if (lock >= 0) ::close(lock);
      return;
    }
    std::ifstream done(dir_ / ".made-by");
    const std::string made_by((std::istreambuf_iterator<char>(done)), std::istreambuf_iterator<char>());
    if (!done || made_by != script_text) {
      const fs::path tmp = parent / "pickle-fixtures.tmp";
      fs::remove_all(tmp, ec);
      fs::create_directories(tmp, ec);
      std::string out;
      rc_ = RunCommand("/usr/bin/python3 '" + script.string() + "' '" + tmp.string() + "'", &out, &err_);
      if (rc_ == 0) {
        WriteFileBytes(tmp / ".made-by", script_text);
        fs::remove_all(dir_, ec);
        fs::rename(tmp, dir_, ec);
        if (ec) {
          rc_ = 1;
          err_ = "cannot rename " + tmp.string() + " to " + dir_.string() + ": " + ec.message();
        }
      }
    } else {
      rc_ = 0;
    }
    ::close(lock);  // releases the lock
  }

  std::filesystem::path dir_;
  int rc_ = -1;
  std::string err_;
};

#define HUBLOAD_PYTHON_FIXTURES(var)                       \
  std::string var##_why;                                   \
  const auto* var = PythonFixtures::Get(&var##_why);       \
  if (!var) GTEST_SKIP() << var##_why

}  // namespace hubload::testing
