// Mapping data to pixels: the timeline's time axis (zoom and pan around a point, ruler ticks) and
// the value axes of charts (nice 1-2-5 ticks). No widgets: views only ask where things go.
#pragma once

#include <QString>
#include <vector>

namespace paratwin::gui {

struct Tick {
  double value = 0;  // in the axis's unit (seconds for time)
  double pixel = 0;
  QString label;
};

// Steps of 1, 2 or 5 x 10^k: the smallest such step that puts at most `max_ticks` ticks on [lo, hi].
double nice_step(double lo, double hi, int max_ticks);
// Ticks at multiples of nice_step on [lo, hi] (pixel left 0; see ValueAxis for placed ticks).
std::vector<double> nice_values(double lo, double hi, int max_ticks);

// A duration for a ruler whose ticks are `step` apart: "250 ms", "1.25 s", "40 us".
QString format_time(double seconds, double step);
// A quantity with an SI prefix and the given digits: 1.5e9 -> "1.5G".
QString format_si(double value, int digits = 3);

// Time (seconds) <-> x (pixels) on a strip of `width` pixels starting at `left`.
class TimeAxis {
 public:
  TimeAxis() = default;
  TimeAxis(double begin_s, double end_s, double left_px, double width_px);

  double begin() const { return begin_; }
  double end() const { return end_; }
  double left() const { return left_; }
  double width() const { return width_; }
  double seconds_per_pixel() const { return (end_ - begin_) / width_; }

  double x(double t) const { return left_ + (t - begin_) / (end_ - begin_) * width_; }
  double t(double x) const { return begin_ + (x - left_) / width_ * (end_ - begin_); }

  void set_geometry(double left_px, double width_px);  // keeps the visible time range
  void show(double begin_s, double end_s);             // the visible range (at least 1 ns wide)
  // Zooms by `factor` (> 1 in, < 1 out) keeping the time under `anchor_x` where it is.
  void zoom(double factor, double anchor_x);
  void pan(double dx_px);  // content moves right by dx pixels
  // Keeps the view inside [lo, hi] (plus a margin) and no wider than it.
  void clamp(double lo, double hi);

  // Ruler ticks at least `min_spacing_px` apart, labelled for their spacing.
  std::vector<Tick> ticks(double min_spacing_px = 90) const;

 private:
  double begin_ = 0, end_ = 1, left_ = 0, width_ = 1;
};

// A linear value axis from [lo, hi] to pixels [bottom, top] (y grows downwards on screen).
class ValueAxis {
 public:
  ValueAxis() = default;
  // Extends [lo, hi] to nice tick boundaries when `round` is set.
  ValueAxis(double lo, double hi, double bottom_px, double top_px, int max_ticks = 6, bool round = true);

  double lo() const { return lo_; }
  double hi() const { return hi_; }
  double pixel(double v) const { return bottom_ + (v - lo_) / (hi_ - lo_) * (top_ - bottom_); }
  std::vector<Tick> ticks() const;

 private:
  double lo_ = 0, hi_ = 1, bottom_ = 1, top_ = 0;
  int max_ticks_ = 6;
};

}  // namespace paratwin::gui
