// How many points a sweep makes, counted before any is made, and the refusal of a sweep too large to
// run: its size and how to narrow it, before any work.
#pragma once

#include <cstdint>

#include "plan/spec/diagnostics.hpp"
#include "plan/spec/scenario.hpp"

namespace paratwin {

// List entries (or 1) x the values of each grid axis; INT64_MAX when the product does not fit.
std::int64_t sweep_point_count(const SweepSpec& sweep);

// Reports an error at the sweep (its `sweep:` section or first --grid) when it has more points than
// the limit (plan/spec/limits.hpp): the count, each axis's size, and how to narrow it. Returns whether
// the sweep is within the limit.
bool check_sweep_size(const SweepSpec& sweep, Diagnostics& diag);

}  // namespace paratwin
