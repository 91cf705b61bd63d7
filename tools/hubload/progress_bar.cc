// tools/hubload/progress_bar.h (HumanBytes, declared in cli.h too, lives here: the
// renderer is built alone into the unit test).
#include "tools/hubload/progress_bar.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>

namespace hubload::cli {

std::string HumanBytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (b >= 1024 && i < 4) {
    b /= 1024;
    ++i;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, i == 0 ? "%.0f %s" : "%.1f %s", b, units[i]);
  return buf;
}

bool ProgressWanted(bool quiet) {
  if (quiet || !::isatty(2)) return false;
  if (const char* v = std::getenv("HF_HUB_DISABLE_PROGRESS_BARS")) {
    std::string s = v;
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    if (s == "1" || s == "true" || s == "yes" || s == "on") return false;
  }
  return true;
}

std::string FormatBar(uint64_t done, uint64_t total) {
  constexpr int kWidth = 24;
  int filled = 0;
  if (total > 0)
    filled = static_cast<int>(std::min<double>(kWidth, kWidth * static_cast<double>(done) / static_cast<double>(total)));
  return "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "]";
}

std::string FormatEta(uint64_t done, uint64_t total, double bytes_per_s) {
  if (!(bytes_per_s > 0) || done >= total) return "-";
  const double secs = static_cast<double>(total - done) / bytes_per_s;
  if (secs >= 1e9) return "-";
  const auto s = static_cast<unsigned long long>(secs);
  char buf[48];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%llu s", s);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%llu min %02llu s", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%llu h %02llu min", s / 3600, (s % 3600) / 60);
  return buf;
}

namespace {
bool Continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }
// Byte offset where the first `n` characters of `s` end.
size_t PrefixBytes(const std::string& s, size_t n) {
  size_t i = 0;
  for (size_t seen = 0; i < s.size(); ++i) {
    if (!Continuation(s[i]) && seen++ == n) break;
  }
  return i;
}
}  // namespace

size_t TextColumns(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += Continuation(c) ? 0 : 1;
  return n;
}

std::string CutToColumns(const std::string& line, size_t columns) {
  if (columns == 0 || TextColumns(line) <= columns) return line;
  return line.substr(0, PrefixBytes(line, columns));
}

std::string ShortenMiddle(const std::string& name, size_t columns) {
  const size_t n = TextColumns(name);
  if (n <= columns) return name;
  if (columns < 4) return name.substr(PrefixBytes(name, n - columns));
  const size_t keep = columns - 3, head = keep / 3, tail = keep - head;
  return name.substr(0, PrefixBytes(name, head)) + "..." + name.substr(PrefixBytes(name, n - tail));
}

std::string FormatFileLine(const std::string& name, uint64_t done, uint64_t total, size_t columns) {
  const std::string head = FormatBar(done, total) + " " + HumanBytes(static_cast<double>(done)) + " / " +
                           (total ? HumanBytes(static_cast<double>(total)) : std::string("?")) + "  ";
  if (columns == 0) return head + name;
  const size_t used = TextColumns(head);
  // At least a few characters of the name, else the line is cut as a whole.
  if (used + 8 > columns) return CutToColumns(head + name, columns);
  return head + ShortenMiddle(name, columns - used);
}

std::string FitTotalLine(const std::string& line, size_t columns) {
  if (columns == 0 || TextColumns(line) <= columns) return line;
  std::string out = line;
  const size_t b = out.find('[');  // the bar: "[" + 24 cells + "]" and a space
  if (b != std::string::npos && b + 26 < out.size() && out[b + 25] == ']') out.erase(b, 27);
  return CutToColumns(out, columns);
}

size_t LineColumns() {
  // One column is left free: a line that fills the last one wraps on some terminals.
  const size_t width = TerminalColumns();
  return width > 1 ? width - 1 : 0;
}

size_t TerminalColumns() {
  struct winsize ws {};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* c = std::getenv("COLUMNS")) {
    char* end = nullptr;
    long v = std::strtol(c, &end, 10);
    if (end && end != c && *end == '\0' && v > 0 && v < 100000) return static_cast<size_t>(v);
  }
  return 0;
}

std::string FormatTotalLine(const std::string& label, uint64_t done, uint64_t total, double bytes_per_s,
                            const std::string& suffix) {
  if (!label.empty() && done == 0 && total == 0 && suffix.empty()) return label;
  int pct = 0;
  if (total > 0) pct = static_cast<int>(std::min(100.0, 100.0 * static_cast<double>(done) / static_cast<double>(total)));
  char pct_s[8];
  std::snprintf(pct_s, sizeof pct_s, "%3d%%", pct);
  std::string line = label.empty() ? std::string() : label + " ";
  line += FormatBar(done, total) + " " + pct_s + " " + HumanBytes(static_cast<double>(done)) + " / " +
          HumanBytes(static_cast<double>(total)) + "  " + HumanBytes(bytes_per_s > 0 ? bytes_per_s : 0) +
          "/s  ETA " + FormatEta(done, total, bytes_per_s);
  if (!suffix.empty()) line += "  " + suffix;
  return line;
}

namespace {

// The bar on screen that log messages go through (InstallBarAwareLogger).
std::mutex g_active_mu;
ProgressBar* g_active = nullptr;

void SetActive(ProgressBar* bar, bool on) {
  std::lock_guard<std::mutex> l(g_active_mu);
  if (on) g_active = bar;
  else if (g_active == bar) g_active = nullptr;
}

// spdlog sink: the colour sink on stderr, printed around the active bar.
class BarAwareSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  BarAwareSink() : inner_(std::make_shared<spdlog::sinks::stderr_color_sink_mt>()) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::lock_guard<std::mutex> l(g_active_mu);
    if (g_active) {
      g_active->Interject([&] {
        inner_->log(msg);
        inner_->flush();
      });
    } else {
      inner_->log(msg);
    }
  }
  void flush_() override { inner_->flush(); }
  void set_pattern_(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter_(std::unique_ptr<spdlog::formatter> f) override { inner_->set_formatter(std::move(f)); }

 private:
  std::shared_ptr<spdlog::sinks::stderr_color_sink_mt> inner_;
};

}  // namespace

void InstallBarAwareLogger() {
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("hubload", std::make_shared<BarAwareSink>()));
}

ProgressBar::ProgressBar() : start_(std::chrono::steady_clock::now()) { SetActive(this, true); }

ProgressBar::~ProgressBar() { SetActive(this, false); }

void ProgressBar::Interject(const std::function<void()>& print) {
  std::lock_guard<std::mutex> l(mu_);
  Clear();
  std::fflush(stderr);
  print();
  if (drawn_ && !finished_) Draw(true);
}

void ProgressBar::SetFile(const std::string& name, uint64_t done, uint64_t total) {
  if (total > 0 && done >= total)
    files_.erase(name);
  else
    files_[name] = {done, total};
}

void ProgressBar::File(const std::string& name, uint64_t done, uint64_t total) {
  std::lock_guard<std::mutex> l(mu_);
  SetFile(name, done, total);
  Draw(false);
}

void ProgressBar::Update(const std::string& name, uint64_t file_done, uint64_t file_total, uint64_t done,
                         uint64_t total, const std::string& suffix, bool force) {
  std::lock_guard<std::mutex> l(mu_);
  if (!name.empty()) SetFile(name, file_done, file_total);
  done_ = done;
  total_ = total;
  suffix_ = suffix;
  Draw(force);
}

void ProgressBar::Total(uint64_t done, uint64_t total, const std::string& suffix, bool force) {
  std::lock_guard<std::mutex> l(mu_);
  done_ = done;
  total_ = total;
  suffix_ = suffix;
  Draw(force);
}

void ProgressBar::RateBytes(uint64_t bytes) {
  std::lock_guard<std::mutex> l(mu_);
  rate_bytes_ = bytes;
}

void ProgressBar::Phase(const std::string& label) {
  std::lock_guard<std::mutex> l(mu_);
  if (label == label_) return;
  if (drawn_ && !label_.empty()) {  // the previous phase as it ended stays on screen
    Clear();
    std::fprintf(stderr, "%s\n", FitTotalLine(TotalLineNow(), LineColumns()).c_str());
  }
  label_ = label;
  files_.clear();
  done_ = total_ = 0;
  rate_bytes_.reset();
  suffix_.clear();
  drawn_ = false;
  drawn_complete_ = false;
  start_ = std::chrono::steady_clock::now();
  Draw(true);
}

void ProgressBar::Log(const std::string& line) {
  std::lock_guard<std::mutex> l(mu_);
  Clear();
  std::fprintf(stderr, "%s\n", line.c_str());
  if (drawn_) Draw(true);
}

void ProgressBar::Finish(bool keep) {
  SetActive(this, false);
  std::lock_guard<std::mutex> l(mu_);
  finished_ = true;
  if (keep) {
    if (drawn_) Draw(true);  // the last state, which the rate limit may have skipped
    lines_ = 0;
  } else {
    Clear();
  }
  std::fflush(stderr);
}

void ProgressBar::Clear() {
  for (int i = 0; i < lines_; ++i) std::fprintf(stderr, "\x1b[1A\x1b[2K");
  lines_ = 0;
}

std::string ProgressBar::TotalLineNow() const {
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double moved = static_cast<double>(rate_bytes_ ? *rate_bytes_ : done_);
  return FormatTotalLine(label_, done_, total_, secs > 0 ? moved / secs : 0, suffix_);
}

void ProgressBar::Draw(bool force) {
  // The moment the total completes is always drawn (the rate limit would skip it).
  const bool complete = total_ > 0 && done_ >= total_;
  if (!limiter_.Due(force || (complete && !drawn_complete_))) return;
  drawn_complete_ = complete;
  Clear();
  const size_t columns = LineColumns();
  int shown = 0;
  for (const auto& [name, dt] : files_) {
    if (shown == 8) break;
    std::fprintf(stderr, "%s\n", FormatFileLine(name, dt.first, dt.second, columns).c_str());
    ++shown;
  }
  std::fprintf(stderr, "%s\n", FitTotalLine(TotalLineNow(), columns).c_str());
  std::fflush(stderr);
  drawn_ = true;
  lines_ = shown + 1;
}

}  // namespace hubload::cli
