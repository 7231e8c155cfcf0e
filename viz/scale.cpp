// Axis ranges, ticks and the value-to-pixel mapping.
#include "viz/scale.hpp"

#include <algorithm>
#include <cmath>

namespace paratwin::viz {
namespace {

double log_in(double v, int base) {
  return std::log(v) / std::log(double(base));
}

// The 1-2-5 step that gives about `target` intervals over `span`.
double nice_step(double span, int target) {
  const double raw = span / std::max(target, 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (raw <= m * magnitude * (1 + 1e-9)) return m * magnitude;
  return 10 * magnitude;
}

}  // namespace

double Scale::to_pixel(double value) const {
  const double a = log_base ? log_in(lo, log_base) : lo;
  const double b = log_base ? log_in(hi, log_base) : hi;
  const double v = log_base ? log_in(value, log_base) : value;
  return b == a ? (pixel_lo + pixel_hi) / 2 : pixel_lo + (v - a) / (b - a) * (pixel_hi - pixel_lo);
}

Scale fit_scale(const std::vector<double>& values, int log_base) {
  Scale s;
  s.log_base = log_base;
  double lo = INFINITY, hi = -INFINITY;
  for (double v : values)
    if (std::isfinite(v) && (!log_base || v > 0)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!std::isfinite(lo)) lo = log_base ? 1 : 0, hi = log_base ? log_base : 1;
  if (log_base) {
    s.lo = std::pow(double(log_base), std::floor(log_in(lo, log_base) + 1e-9));
    s.hi = std::pow(double(log_base), std::ceil(log_in(hi, log_base) - 1e-9));
    if (s.hi <= s.lo) s.hi = s.lo * log_base;
    return s;
  }
  if (lo > 0 && lo < hi * 2 / 3) lo = 0;
  if (hi == lo) {  // one value: show it against zero
    if (lo > 0)
      lo = 0;
    else if (hi < 0)
      hi = 0;
    else
      hi = 1;
  }
  const double step = nice_step(hi - lo, 6);
  s.lo = std::floor(lo / step + 1e-9) * step;
  s.hi = std::ceil(hi / step - 1e-9) * step;
  return s;
}

std::vector<double> ticks(const Scale& s, int target) {
  std::vector<double> out;
  if (s.log_base) {
    const bool fine = s.log_base == 10 && s.hi / s.lo < 1000;
    for (double p = s.lo; p <= s.hi * (1 + 1e-9); p *= s.log_base)
      for (double m : fine ? std::vector<double>{1, 2, 5} : std::vector<double>{1})
        if (p * m <= s.hi * (1 + 1e-9)) out.push_back(p * m);
    return out;
  }
  const double step = nice_step(s.hi - s.lo, target);
  for (double v = std::ceil(s.lo / step - 1e-9) * step; v <= s.hi + step * 1e-9; v += step)
    out.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
  return out;
}

}  // namespace paratwin::viz
