// tools/hubload/progress_bar.h.
#include "tools/hubload/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "tools/hubload/cli.h"

namespace hubload::cli {

bool ProgressWanted(bool quiet) {
  if (quiet || !::isatty(2)) return false;
  if (const char* v = std::getenv("HF_HUB_DISABLE_PROGRESS_BARS")) {
    std::string s = v;
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    if (s == "1" || s == "true" || s == "yes" || s == "on") return false;
  }
  return true;
}

namespace {
std::string Bar(uint64_t d, uint64_t t) {
  int w = 24, filled = t ? static_cast<int>(w * static_cast<double>(d) / static_cast<double>(t)) : 0;
  filled = std::clamp(filled, 0, w);
  return "[" + std::string(filled, '#') + std::string(w - filled, '.') + "]";
}
}  // namespace

ProgressBar::ProgressBar() : start_(std::chrono::steady_clock::now()) {}

void ProgressBar::File(const std::string& name, uint64_t done, uint64_t total) {
  std::lock_guard<std::mutex> l(mu_);
  if (total > 0 && done >= total)
    files_.erase(name);
  else
    files_[name] = {done, total};
  Draw(false);
}

void ProgressBar::Total(uint64_t done, uint64_t total, const std::string& suffix, bool force) {
  std::lock_guard<std::mutex> l(mu_);
  done_ = done;
  total_ = total;
  suffix_ = suffix;
  Draw(force);
}

void ProgressBar::Finish() {
  std::lock_guard<std::mutex> l(mu_);
  Clear();
  std::fflush(stderr);
}

void ProgressBar::Clear() {
  for (int i = 0; i < lines_; ++i) std::fprintf(stderr, "\x1b[1A\x1b[2K");
  lines_ = 0;
}

void ProgressBar::Draw(bool force) {
  auto now = std::chrono::steady_clock::now();
  if (!force && lines_ > 0 && now - last_ < std::chrono::milliseconds(150)) return;
  last_ = now;
  Clear();
  int shown = 0;
  for (const auto& [name, dt] : files_) {
    if (shown == 8) break;
    std::fprintf(stderr, "%s %s / %s  %s\n", Bar(dt.first, dt.second).c_str(),
                 HumanBytes(static_cast<double>(dt.first)).c_str(),
                 dt.second ? HumanBytes(static_cast<double>(dt.second)).c_str() : "?", name.c_str());
    ++shown;
  }
  double secs = std::chrono::duration<double>(now - start_).count();
  double rate = secs > 0 ? static_cast<double>(done_) / secs : 0;
  std::string eta = rate > 0 && total_ > done_
                        ? std::to_string(static_cast<long long>(static_cast<double>(total_ - done_) / rate)) + " s"
                        : "-";
  int pct = total_ ? static_cast<int>(100.0 * static_cast<double>(done_) / static_cast<double>(total_)) : 0;
  std::fprintf(stderr, "%s %3d%% %s / %s  %s/s  ETA %s%s%s\n", Bar(done_, total_).c_str(), std::min(pct, 100),
               HumanBytes(static_cast<double>(done_)).c_str(), HumanBytes(static_cast<double>(total_)).c_str(),
               HumanBytes(rate).c_str(), eta.c_str(), suffix_.empty() ? "" : "  ", suffix_.c_str());
  std::fflush(stderr);
  lines_ = shown + 1;
}

}  // namespace hubload::cli
