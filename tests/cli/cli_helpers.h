// Helpers of the CLI tests (tests/cli/*_test.cc) that run the `hubload` binary.
#pragma once

#include <filesystem>
#include <set>
#include <string>

#include "testing/util.h"

namespace hubload::testing::cli {

/// `s` in single quotes for sh.
inline std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// `hubload ARGS` with a clean Hub environment; `env` is prepended (VAR=value ...).
inline int Hubload(const std::string& args, std::string* out, std::string* err, const std::string& env = "") {
  std::string cmd = "env -u HF_TOKEN -u HF_HUB_OFFLINE -u HF_ENDPOINT -u HUBLOAD_LOCK_MODE -u HF_HUB_CACHE -u HF_HOME " +
                    env + " " + Quote(HubloadBin()) + " " + args;
  return RunCommand(cmd, out, err);
}

/// Names of the entries of `dir` (none when it cannot be read).
inline std::set<std::string> Names(const std::filesystem::path& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(dir, ec)) out.insert(e.path().filename().string());
  return out;
}

}  // namespace hubload::testing::cli
