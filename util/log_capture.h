// Internal (util): the warnings and errors logged through the project's one
// logger while a WarningCapture is alive.
//
// hubload logs through spdlog's default logger, compiled in libspdlog
// (SPDLOG_COMPILED_LIB): one registry, one default logger for the whole
// process. A translation unit that includes spdlog's headers without the
// definitions of spdlog::spdlog is built in spdlog's header-only mode and has
// a default logger of its own, which the library's warnings never reach
// (issue 38: a test's capture saw nothing in an optimised build). So this
// header includes no spdlog: the capture is compiled in hubload_util
// (log_capture.cc) against libspdlog, whatever its user's compile flags, and
// tools/lint-spdlog.py checks that every file including spdlog is compiled
// with SPDLOG_COMPILED_LIB.
//
//   util::WarningCapture logged;     // attached to the default logger
//   ... calls that may spdlog::warn ...
//   logged.Has(text); logged.Count("could not be reached");
//
// The CLI uses it not to print a warning of a report a second time when the
// library already logged it; tests count warnings with it.
// Thread safety: attach and detach (construction, destruction) while no other
// thread logs (spdlog's sink list is not synchronised); recording and the
// queries are thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace hubload::util {

class WarningCapture {
 public:
  /// Attaches a recording sink to spdlog's default logger (the one in
  /// libspdlog, which every hubload library logs through).
  WarningCapture();
  /// Detaches it.
  ~WarningCapture();
  WarningCapture(const WarningCapture&) = delete;
  WarningCapture& operator=(const WarningCapture&) = delete;

  /// Warnings logged so far, in order (message text, without level or time).
  std::vector<std::string> Lines() const;
  /// True when a warning with exactly this text was logged.
  bool Has(const std::string& text) const;
  /// Warnings that contain `needle`.
  int Count(const std::string& needle) const;
  /// Errors (spdlog::error) that contain `needle`.
  int CountErrors(const std::string& needle) const;
  /// Forgets what was recorded.
  void Clear();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hubload::util
