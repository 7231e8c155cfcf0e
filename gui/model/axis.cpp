// Axis arithmetic.
#include "gui/model/axis.hpp"

#include "plan/util/axis_ticks.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace paratwin::gui {

double nice_step(double lo, double hi, int max_ticks) {
  return paratwin::nice_step(hi - lo, max_ticks);
}

std::vector<double> nice_values(double lo, double hi, int max_ticks) {
  return multiples_within(lo, hi, nice_step(lo, hi, max_ticks));
}

QString format_time(double seconds, double step) {
  struct Unit {
    double factor;
    const char* name;
  };
  static const Unit units[] = {{1e-9, "ns"}, {1e-6, "us"}, {1e-3, "ms"}, {1, "s"},
                               {60, "min"},  {3600, "h"},  {86400, "d"}};
  const double scale = std::max(std::fabs(seconds), step);
  Unit unit = units[0];
  for (const Unit& u : units)
    if (scale >= u.factor * (1 - 1e-9)) unit = u;
  // Enough decimals that neighbouring ticks differ.
  const double in_unit = step / unit.factor;
  const int decimals = in_unit >= 1 ? 0 : std::min(6, int(std::ceil(-std::log10(in_unit) - 1e-9)));
  if (seconds == 0) return "0";
  return QString::number(seconds / unit.factor, 'f', decimals) + " " + unit.name;
}

QString format_si(double value, int digits) {
  static const struct {
    double factor;
    const char* prefix;
  } prefixes[] = {{1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "K"}};
  for (const auto& p : prefixes)
    if (std::fabs(value) >= p.factor) return QString::number(value / p.factor, 'g', digits) + p.prefix;
  return QString::number(value, 'g', digits);
}

TimeAxis::TimeAxis(double begin_s, double end_s, double left_px, double width_px) {
  set_geometry(left_px, width_px);
  show(begin_s, end_s);
}

void TimeAxis::set_geometry(double left_px, double width_px) {
  left_ = left_px;
  width_ = std::max(1.0, width_px);
}

void TimeAxis::show(double begin_s, double end_s) {
  begin_ = begin_s;
  end_ = std::max(end_s, begin_s + 1e-9);
}

void TimeAxis::zoom(double factor, double anchor_x) {
  const double anchor_t = t(anchor_x);
  const double span = std::max((end_ - begin_) / factor, 1e-9);
  const double share = (anchor_x - left_) / width_;
  show(anchor_t - share * span, anchor_t - share * span + span);
}

void TimeAxis::pan(double dx_px) {
  const double dt = dx_px * seconds_per_pixel();
  show(begin_ - dt, end_ - dt);
}

void TimeAxis::clamp(double lo, double hi) {
  const double margin = (hi - lo) * 0.05;
  lo -= margin, hi += margin;
  const double span = std::min(end_ - begin_, hi - lo);
  double b = std::clamp(begin_, lo, hi - span);
  show(b, b + span);
}

std::vector<Tick> TimeAxis::ticks(double min_spacing_px) const {
  const int max_ticks = std::max(1, int(width_ / min_spacing_px));
  const double step = nice_step(begin_, end_, max_ticks);
  std::vector<Tick> out;
  for (double v : nice_values(begin_, end_, max_ticks)) out.push_back({v, x(v), format_time(v, step)});
  return out;
}

ValueAxis::ValueAxis(double lo, double hi, double bottom_px, double top_px, int max_ticks, bool round)
    : lo_(lo), hi_(hi), bottom_(bottom_px), top_(top_px), max_ticks_(max_ticks) {
  if (!(hi_ > lo_)) hi_ = lo_ + (lo_ == 0 ? 1 : std::fabs(lo_) * 0.1);
  if (round) {
    std::tie(lo_, hi_) = widen_to_multiples(lo_, hi_, nice_step(lo_, hi_, max_ticks_));
  }
}

std::vector<Tick> ValueAxis::ticks() const {
  std::vector<Tick> out;
  const double step = nice_step(lo_, hi_, max_ticks_);
  for (double v : nice_values(lo_, hi_, max_ticks_))
    out.push_back({v, pixel(v), step >= 1 || v == 0 ? format_si(v) : QString::number(v, 'g', 4)});
  return out;
}

}  // namespace paratwin::gui
