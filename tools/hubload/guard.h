// The CLI's last line of defence (belt and braces): no library exception may
// escape (every input error is a Status), but should one escape a command's
// action it becomes exit 1 with a message on stderr, never std::terminate's
// abort (exit 134) and a core dump. Header-only: main.cc and tests/cli use it.
#pragma once

#include <cstdio>
#include <exception>
#include <functional>
#include <string>

namespace hubload::cli {

/// Runs `action`; returns its exit code, or 1 after printing
/// "hubload <command>: internal error: <what> (a bug: please report it)" to
/// stderr when it throws (std::exception or anything else).
inline int RunGuarded(const std::string& command, const std::function<int()>& action) {
  const char* what = nullptr;
  std::string text;
  try {
    return action();
  } catch (const std::exception& e) {
    text = e.what();
    what = text.c_str();
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  std::fprintf(stderr, "hubload %s: internal error: %s (a bug: please report it)\n", command.c_str(), what);
  std::fflush(stderr);
  return 1;
}

}  // namespace hubload::cli
