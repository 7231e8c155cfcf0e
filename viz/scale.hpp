// From data to pixels: the range an axis shows, its ticks, and the mapping of values onto the
// plot's pixels. Kept apart from painting so that it is tested without drawing anything.
#pragma once

#include <vector>

namespace paratwin::viz {

struct Scale {
  double lo = 0, hi = 1;  // the values at the two ends of the axis
  int log_base = 0;       // 0 linear, else logarithmic
  double pixel_lo = 0, pixel_hi = 1;

  // The pixel of a value; logarithmic scales need positive values.
  double to_pixel(double value) const;
};

// The range to show for `values` (at least one): linear ranges start at 0 for positive data unless
// that would squash it (the data spans less than a third of its top), and end on a tick; logarithmic
// ranges go from the power of the base at or below the smallest value to the one at or above the
// largest. Non-positive values are ignored on logarithmic scales.
Scale fit_scale(const std::vector<double>& values, int log_base);

// Tick values within [lo, hi]: 1-2-5 steps for linear scales (about `target` of them); powers of the
// base for logarithmic ones, with 2x and 5x in between for base 10 when the range is under three
// decades.
std::vector<double> ticks(const Scale& scale, int target = 6);

}  // namespace paratwin::viz
