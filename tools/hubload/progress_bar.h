// The CLI's one progress renderer on stderr (tools/hubload), used by every
// long command (download, upload/push, load, download-/load-distributed,
// reshard, cache verify): per-file bars and a total line with an optional
// phase label, bytes, percentage, rate, ETA and an optional suffix
// ("shards 2/4", "total").
// Each redrawn line is cut to the terminal's width less one column
// (TerminalColumns(), read at every redraw), so no line wraps and the redraw's
// cursor moves stay right on a narrow terminal; file names are shortened in
// the middle.
// Shown only when ProgressWanted(): stderr is a terminal, no --quiet, and
// HF_HUB_DISABLE_PROGRESS_BARS is not set to a true value (as huggingface_hub).
// Thread safety: every member may be called from any thread (one mutex);
// redraws are limited to about 7 a second (util::RateLimiter), forced ones excepted.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "util/progress.h"

namespace hubload::cli {

/// True when progress should be drawn: stderr is a tty, !quiet, and
/// HF_HUB_DISABLE_PROGRESS_BARS is not 1/true/yes/on (case-insensitive).
bool ProgressWanted(bool quiet);

/// Bytes as text with binary units: "512 B", "1.5 KiB", "3.0 GiB" (as cli.h).
std::string HumanBytes(double bytes);

// Pure formatting (the renderer's lines; unit-tested by hand-computed strings).
/// "[" + 24 cells ('#' for done / total, rounded down, '.' for the rest) + "]"; total 0: all '.'.
std::string FormatBar(uint64_t done, uint64_t total);
/// Seconds left at `bytes_per_s`: "-" when the rate is 0 or nothing is left,
/// else "N s" under a minute, "M min SS s" under an hour, "H h MM min" beyond
/// (whole units, rounded down).
std::string FormatEta(uint64_t done, uint64_t total, double bytes_per_s);
/// Columns `text` takes on a terminal: its UTF-8 code points (bytes that are
/// not continuation bytes; every character counted as one column).
size_t TextColumns(const std::string& text);
/// `name` in at most `columns` columns: unchanged when it fits, else a third
/// of what is left after "..." from its start (rounded down) and the rest from
/// its end (the end tells shards apart), never cutting a UTF-8 sequence;
/// columns < 4: the last `columns` characters.
std::string ShortenMiddle(const std::string& name, size_t columns);
/// `line` cut to at most `columns` columns (whole UTF-8 sequences); 0 = no limit.
std::string CutToColumns(const std::string& line, size_t columns);
/// A file's line: "<bar> <done> / <total>  <name>" (total 0: "?"). With
/// `columns` > 0 the line takes at most that many columns: the name is
/// shortened in the middle (ShortenMiddle), then, on a very narrow terminal,
/// the line is cut (CutToColumns).
std::string FormatFileLine(const std::string& name, uint64_t done, uint64_t total, size_t columns = 0);
/// The total line in at most `columns` columns (0 = no limit): when longer,
/// without its bar, then cut (CutToColumns).
std::string FitTotalLine(const std::string& line, size_t columns);
/// Width of the terminal on stderr: TIOCGWINSZ, else $COLUMNS (a positive
/// whole number), else 0 (unknown: lines are not cut).
size_t TerminalColumns();
/// Columns a redrawn line may take: TerminalColumns() - 1 (the last column is
/// left free: a line that fills it wraps on some terminals); 0 when unknown.
size_t LineColumns();
/// The total line: "[<label> ]<bar> <pct>% <done> / <total>  <rate>/s  ETA <eta>[  <suffix>]"
/// (pct 3 wide, rounded down, at most 100); a label with nothing counted yet
/// (done = total = 0) and no suffix is the label alone ("committing").
std::string FormatTotalLine(const std::string& label, uint64_t done, uint64_t total, double bytes_per_s,
                            const std::string& suffix);

/// Makes spdlog's default logger ("hubload", stderr, colours on a terminal)
/// print through the progress bar on screen, if any: the bars are erased, the
/// message printed and the bars redrawn, so a library warning ("using the
/// cached snapshot", a retry) is neither erased by the next redraw nor left
/// between stale bar lines. Call once at start-up, before any bar exists.
void InstallBarAwareLogger();

class ProgressBar {
 public:
  /// The bar the logger prints through (InstallBarAwareLogger) until Finish()
  /// or destruction.
  ProgressBar();
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  /// Per-file bytes (total 0 = unknown); the file's line goes when done >= total > 0.
  void File(const std::string& name, uint64_t done, uint64_t total);
  /// Aggregate bytes and a suffix printed after the ETA (e.g. "shards 1/4").
  void Total(uint64_t done, uint64_t total, const std::string& suffix = {}, bool force = false);
  /// File() and Total() in one redraw (a file's bytes and the aggregate at once).
  void Update(const std::string& name, uint64_t file_done, uint64_t file_total, uint64_t done, uint64_t total,
              const std::string& suffix, bool force = false);
  /// Bytes moved by this run, when the rate must not count bytes that were
  /// already there (a resumed partial); without it the rate is done / elapsed.
  void RateBytes(uint64_t bytes);
  /// Starts a phase ("hashing", "uploading"): a different label leaves the
  /// previous phase's total line on screen as it last was, drops the file
  /// lines and restarts the counters and the clock. The first call only sets it.
  void Phase(const std::string& label);
  /// Prints `line` above the bars (e.g. "done config.json"), then redraws them (if drawn before).
  void Log(const std::string& line);
  /// Erases the bars (call before printing the result); `keep`: leaves them on
  /// screen as last drawn instead (upload's phase lines). Log messages are
  /// printed plainly from then on.
  void Finish(bool keep = false);
  /// Erases the bars, runs `print` (which writes lines to stderr), redraws the
  /// bars if they were drawn and the bar is not finished.
  void Interject(const std::function<void()>& print);

 private:
  void Clear();
  void Draw(bool force);
  void SetFile(const std::string& name, uint64_t done, uint64_t total);
  std::string TotalLineNow() const;  // the total line with the rate since start_
  std::mutex mu_;
  util::RateLimiter limiter_{std::chrono::milliseconds(150)};
  std::map<std::string, std::pair<uint64_t, uint64_t>> files_;
  uint64_t done_ = 0, total_ = 0;
  std::optional<uint64_t> rate_bytes_;
  std::string label_, suffix_;
  bool drawn_ = false;  // the total line was drawn at least once in this phase
  bool drawn_complete_ = false;  // the drawn total line showed done == total
  bool finished_ = false;
  int lines_ = 0;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace hubload::cli
