// The CLI's one progress renderer on stderr (tools/hubload): per-file bars and
// a total line with bytes, rate, ETA and an optional suffix ("shards 2/4").
// Shown only when ProgressWanted(): stderr is a terminal, no --quiet, and
// HF_HUB_DISABLE_PROGRESS_BARS is not set to a true value (as huggingface_hub).
// Thread safety: every member may be called from any thread (one mutex);
// redraws are limited to about 7 a second, forced ones excepted.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace hubload::cli {

/// True when progress should be drawn: stderr is a tty, !quiet, and
/// HF_HUB_DISABLE_PROGRESS_BARS is not 1/true/yes/on (case-insensitive).
bool ProgressWanted(bool quiet);

class ProgressBar {
 public:
  ProgressBar();
  /// Per-file bytes (total 0 = unknown); the file's line goes when done >= total > 0.
  void File(const std::string& name, uint64_t done, uint64_t total);
  /// Aggregate bytes and a suffix printed after the ETA (e.g. "shards 1/4").
  void Total(uint64_t done, uint64_t total, const std::string& suffix, bool force = false);
  /// Erases the bars (call before printing the result).
  void Finish();

 private:
  void Clear();
  void Draw(bool force);
  std::mutex mu_;
  std::map<std::string, std::pair<uint64_t, uint64_t>> files_;
  uint64_t done_ = 0, total_ = 0;
  std::string suffix_;
  int lines_ = 0;
  const std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace hubload::cli
