// Adaptive connection count of the download scheduler (hub/connections.h).
#include "hub/connections.h"

#include <algorithm>

namespace hubload::hub_internal {
namespace {

constexpr int kLevels[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256};

}  // namespace

ConnectionController::ConnectionController(Options o) : o_(o) {
  o_.min = std::max(1, o_.min);
  o_.max = std::max(o_.min, o_.max);
  n_ = std::clamp(o_.start, o_.min, o_.max);
  from_ = n_;
}

ConnectionController ConnectionController::Pinned(int n) {
  Options o;
  o.min = o.max = o.start = std::max(1, n);
  ConnectionController c(o);
  c.pinned_ = true;
  return c;
}

int ConnectionController::Up(int n) const {
  for (int l : kLevels)
    if (l > n) return std::min(l, o_.max);
  return o_.max;
}

int ConnectionController::Down(int n) const {
  int best = o_.min;
  for (int l : kLevels)
    if (l < n) best = std::max(best, l);
  return std::max(best, o_.min);
}

void ConnectionController::Move(int to, Phase p) {
  from_ = n_;
  n_ = to;
  phase_ = p;
}

void ConnectionController::Sample(uint64_t total_bytes, double now_s, bool saturated) {
  if (pinned_) return;
  if (!started_) {
    started_ = true;
    window_t_ = now_s;
    window_bytes_ = total_bytes;
    window_valid_ = true;
    return;
  }
  if (!saturated) window_valid_ = false;
  double dt = now_s - window_t_;
  uint64_t db = total_bytes - window_bytes_;
  if (dt < o_.window_s || (db < o_.window_min_bytes && dt < 8 * o_.window_s)) return;
  bool valid = window_valid_;
  window_t_ = now_s;
  window_bytes_ = total_bytes;
  window_valid_ = true;
  if (!valid) return;
  ++windows_;
  if (no_up_windows_ > 0) --no_up_windows_;
  double r = static_cast<double>(db) / dt;
  rate_[n_] = r;
  switch (phase_) {
    case Phase::kUp: {
      auto below = rate_.find(from_);
      bool gained = below == rate_.end() || r > below->second * o_.gain;
      if (gained && n_ < o_.max && no_up_windows_ == 0) {
        Move(Up(n_), Phase::kUp);
      } else if (gained) {
        phase_ = Phase::kHold;
        hold_left_ = o_.hold_windows;
        next_probe_up_ = false;
      } else {
        Move(from_, Phase::kHold);
        hold_left_ = n_ > o_.min ? 1 : o_.hold_windows;  // then try below, if there is a below
        next_probe_up_ = false;
      }
      break;
    }
    case Phase::kDown: {
      auto above = rate_.find(from_);
      bool kept = above == rate_.end() || r >= above->second * o_.tolerance;
      if (kept && n_ > o_.min) {
        Move(Down(n_), Phase::kDown);
      } else if (kept) {
        phase_ = Phase::kHold;
        hold_left_ = o_.hold_windows;
        next_probe_up_ = true;
      } else {
        Move(from_, Phase::kHold);
        hold_left_ = o_.hold_windows;
        next_probe_up_ = true;
      }
      break;
    }
    case Phase::kHold: {
      if (--hold_left_ > 0) break;
      hold_left_ = o_.hold_windows;
      bool can_up = n_ < o_.max && no_up_windows_ == 0;
      bool can_down = n_ > o_.min;
      if (next_probe_up_ && can_up) Move(Up(n_), Phase::kUp);
      else if (can_down) Move(Down(n_), Phase::kDown);
      else if (can_up) Move(Up(n_), Phase::kUp);
      next_probe_up_ = !next_probe_up_;
      break;
    }
  }
}

void ConnectionController::Throttled(double now_s) {
  if (pinned_ || now_s - last_throttle_t_ < o_.window_s) return;
  last_throttle_t_ = now_s;
  int to = std::max(o_.min, n_ / 2);
  // Rates measured above the new count were measured against a server that
  // now refuses them: forget them, and do not climb back for a while.
  for (auto it = rate_.begin(); it != rate_.end();)
    it = it->first > to ? rate_.erase(it) : std::next(it);
  from_ = n_;
  n_ = to;
  phase_ = Phase::kHold;
  hold_left_ = o_.hold_windows;
  next_probe_up_ = false;
  no_up_windows_ = 2 * o_.hold_windows;
  window_t_ = now_s;
  window_valid_ = false;
}

}  // namespace hubload::hub_internal
