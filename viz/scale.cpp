// Axis ranges, ticks and the value-to-pixel mapping.
#include "viz/scale.hpp"

#include "plan/util/axis_ticks.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace paratwin::viz {
namespace {

double log_in(double v, int base) {
  return std::log(v) / std::log(double(base));
}

// The 1-2-2.5-5 step that gives about `target` intervals over `span`.
double step_for(double span, int target) {
  return nice_step(span, target, TickSteps::OneTwoHalfTwoFive);
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
  std::tie(s.lo, s.hi) = widen_to_multiples(lo, hi, step_for(hi - lo, 6));
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
  return multiples_within(s.lo, s.hi, step_for(s.hi - s.lo, target));
}

}  // namespace paratwin::viz
