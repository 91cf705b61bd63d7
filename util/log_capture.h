// Internal (util): the warnings logged through spdlog's default logger while
// a WarningCapture is alive (header-only; the user links spdlog::spdlog).
// The CLI uses it not to print a warning of a report a second time when the
// library already logged it; tests count warnings with it.
//
//   util::WarningCapture logged;     // attached to spdlog::default_logger()
//   ... calls that may spdlog::warn ...
//   logged.Has(text); logged.Count("could not be reached");
//
// Attach and detach while no other thread logs (the logger's sink list is
// not synchronised); recording is thread-safe.
#pragma once

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace hubload::util {

class WarningCapture {
 public:
  WarningCapture() : sink_(std::make_shared<Sink>()), logger_(spdlog::default_logger()) {
    logger_->sinks().push_back(sink_);
  }
  ~WarningCapture() {
    auto& s = logger_->sinks();
    s.erase(std::remove(s.begin(), s.end(), sink_), s.end());
  }
  WarningCapture(const WarningCapture&) = delete;
  WarningCapture& operator=(const WarningCapture&) = delete;

  /// Warnings logged so far, in order.
  std::vector<std::string> Lines() const { return sink_->Lines(); }
  /// True when a warning with exactly this text was logged.
  bool Has(const std::string& text) const {
    auto l = Lines();
    return std::find(l.begin(), l.end(), text) != l.end();
  }
  /// Warnings that contain `needle`.
  int Count(const std::string& needle) const {
    int n = 0;
    for (const auto& l : Lines()) n += l.find(needle) != std::string::npos;
    return n;
  }
  /// Errors (spdlog::error) that contain `needle`.
  int CountErrors(const std::string& needle) const {
    int n = 0;
    for (const auto& l : sink_->Errors()) n += l.find(needle) != std::string::npos;
    return n;
  }
  void Clear() { sink_->Clear(); }

 private:
  class Sink : public spdlog::sinks::base_sink<std::mutex> {
   public:
    std::vector<std::string> Lines() {
      std::lock_guard<std::mutex> l(mutex_);
      return lines_;
    }
    std::vector<std::string> Errors() {
      std::lock_guard<std::mutex> l(mutex_);
      return errors_;
    }
    void Clear() {
      std::lock_guard<std::mutex> l(mutex_);
      lines_.clear();
      errors_.clear();
    }

   protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
      if (msg.level == spdlog::level::warn) lines_.emplace_back(msg.payload.data(), msg.payload.size());
      if (msg.level == spdlog::level::err) errors_.emplace_back(msg.payload.data(), msg.payload.size());
    }
    void flush_() override {}

   private:
    std::vector<std::string> lines_, errors_;
  };
  std::shared_ptr<Sink> sink_;
  std::shared_ptr<spdlog::logger> logger_;
};

}  // namespace hubload::util
