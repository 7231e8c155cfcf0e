// Progress of a sweep on standard error: a bar with the ETA redrawn in place on a terminal, one
// plain line per finished point otherwise (logs, CI); past 1000 points, a line a second.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "plan/sweep/point.hpp"

namespace paratwin::cli {

class Progress {
 public:
  // `done`: points already finished before this run (resumed).
  Progress(int total, int done, bool terminal);
  void point_finished(const PointResult& point);
  // Ends the bar's line (a terminal keeps it; the next output starts on a new line).
  void close();

 private:
  std::string eta() const;

  int total_, done_, done_here_ = 0;
  bool terminal_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  std::optional<std::chrono::steady_clock::time_point> drawn_at_;  // the last line or redraw
};

}  // namespace paratwin::cli
