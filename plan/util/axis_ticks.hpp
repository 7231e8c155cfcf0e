// Nice axis steps and ticks: 1-2-5 x 10^k, as people read charts. One rule for the PNG charts
// (viz/) and the GUI's axes (gui/model/axis), kept free of any drawing library.
#pragma once

#include <utility>
#include <vector>

namespace paratwin {

// The mantissas a step may have.
enum class TickSteps {
  OneTwoFive,         // 1, 2, 5 x 10^k
  OneTwoHalfTwoFive,  // 1, 2, 2.5, 5 x 10^k
};

// The smallest step of the set that cuts `span` into at most `intervals` intervals (at least 1).
// A span of 0 or less is taken as the smallest positive double.
double nice_step(double span, int intervals, TickSteps steps = TickSteps::OneTwoFive);

// The multiples of `step` (> 0) within [lo, hi], allowing for rounding at both ends; a value within
// rounding of zero is exactly 0.
std::vector<double> multiples_within(double lo, double hi, double step);

// [lo, hi] widened to the multiples of `step` at or around its ends.
std::pair<double, double> widen_to_multiples(double lo, double hi, double step);

}  // namespace paratwin
