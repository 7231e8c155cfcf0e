// Axis steps and ticks.
#include "plan/util/axis_ticks.hpp"

#include <algorithm>
#include <cmath>

namespace paratwin {

double nice_step(double span, int intervals, TickSteps steps) {
  const double raw = std::max(span, 1e-300) / std::max(1, intervals);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  static const std::vector<double> one_two_five{1.0, 2.0, 5.0, 10.0}, with_half{1.0, 2.0, 2.5, 5.0, 10.0};
  for (double m : steps == TickSteps::OneTwoFive ? one_two_five : with_half)
    if (m * power >= raw * (1 - 1e-9)) return m * power;
  return 10 * power;
}

std::vector<double> multiples_within(double lo, double hi, double step) {
  std::vector<double> out;
  for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; ++k) {
    const double v = k * step;
    out.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  }
  return out;
}

std::pair<double, double> widen_to_multiples(double lo, double hi, double step) {
  return {std::floor(lo / step + 1e-9) * step, std::ceil(hi / step - 1e-9) * step};
}

}  // namespace paratwin
