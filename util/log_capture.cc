// util::WarningCapture (log_capture.h), compiled against libspdlog so that it
// attaches to the same default logger as every hubload library.
#include "util/log_capture.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <mutex>

#ifndef SPDLOG_COMPILED_LIB
#error "util/log_capture.cc must be compiled against libspdlog (link spdlog::spdlog): header-only spdlog has a default logger of its own"
#endif

namespace hubload::util {
namespace {

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
  // Called with mutex_ held (base_sink::log).
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (msg.level == spdlog::level::warn) lines_.emplace_back(msg.payload.data(), msg.payload.size());
    if (msg.level == spdlog::level::err) errors_.emplace_back(msg.payload.data(), msg.payload.size());
  }
  void flush_() override {}

 private:
  std::vector<std::string> lines_, errors_;
};

int CountIn(const std::vector<std::string>& lines, const std::string& needle) {
  return static_cast<int>(
      std::count_if(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(needle) != std::string::npos; }));
}

}  // namespace

struct WarningCapture::Impl {
  std::shared_ptr<Sink> sink = std::make_shared<Sink>();
  std::shared_ptr<spdlog::logger> logger = spdlog::default_logger();
};

WarningCapture::WarningCapture() : impl_(std::make_unique<Impl>()) { impl_->logger->sinks().push_back(impl_->sink); }

WarningCapture::~WarningCapture() {
  auto& s = impl_->logger->sinks();
  s.erase(std::remove(s.begin(), s.end(), impl_->sink), s.end());
}

std::vector<std::string> WarningCapture::Lines() const { return impl_->sink->Lines(); }

bool WarningCapture::Has(const std::string& text) const {
  auto l = Lines();
  return std::find(l.begin(), l.end(), text) != l.end();
}

int WarningCapture::Count(const std::string& needle) const { return CountIn(Lines(), needle); }

int WarningCapture::CountErrors(const std::string& needle) const { return CountIn(impl_->sink->Errors(), needle); }

void WarningCapture::Clear() { impl_->sink->Clear(); }

}  // namespace hubload::util
