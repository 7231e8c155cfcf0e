// The progress bar and the progress lines.
#include "cli/sweep/progress.hpp"

#include <cstdio>

#include "plan/sweep/analysis.hpp"

namespace paratwin::cli {

Progress::Progress(int total, int done, bool terminal)
    : total_(total), done_(done), terminal_(terminal), start_(std::chrono::steady_clock::now()) {}

std::string Progress::eta() const {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (done_here_ == 0) return "ETA --";
  const double left = elapsed / done_here_ * (total_ - done_);
  return to_string(Seconds(elapsed)) + " elapsed, ETA " + to_string(Seconds(left));
}

void Progress::point_finished(const PointResult& point) {
  ++done_;
  ++done_here_;
  // A line per point for sweeps people read point by point; in larger ones a line (or a redraw) at most
  // every second (a tenth on a terminal), and the last: millions of points make no million lines.
  constexpr int kEveryPoint = 1000;
  const auto now = std::chrono::steady_clock::now();
  const auto every = terminal_ ? std::chrono::milliseconds(100) : std::chrono::milliseconds(1000);
  if (total_ > kEveryPoint && done_ < total_ && drawn_at_ && now - *drawn_at_ < every) return;
  drawn_at_ = now;
  if (!terminal_) {
    std::string outcome = point.ok()
                              ? point_summary(point)
                              : point_summary(point) + ": " + enum_name(point.status, kPointStatusNames);
    std::fprintf(stderr, "sweep: %d/%d done; %s; %s\n", done_, total_, outcome.c_str(), eta().c_str());
    return;
  }
  constexpr int kWidth = 30;
  const int filled = total_ ? kWidth * done_ / total_ : kWidth;
  std::fprintf(stderr, "\r\033[Ksweep [%s%s] %d/%d points  %s", std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '.').c_str(), done_, total_, eta().c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::close() {
  if (drawn_) std::fprintf(stderr, "\n");
  drawn_ = false;
}

}  // namespace paratwin::cli
