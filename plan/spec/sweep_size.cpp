// Counting sweep points with overflow checks.
#include "plan/spec/sweep_size.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "plan/spec/limits.hpp"

namespace paratwin {

std::int64_t sweep_point_count(const SweepSpec& sweep) {
  std::int64_t count = std::max<std::int64_t>(1, std::int64_t(sweep.list.size()));
  for (const SweepAxis& axis : sweep.grid)
    if (__builtin_mul_overflow(count, std::int64_t(axis.values.size()), &count))
      return std::numeric_limits<std::int64_t>::max();
  return count;
}

bool check_sweep_size(const SweepSpec& sweep, Diagnostics& diag) {
  const std::int64_t count = sweep_point_count(sweep);
  // Point indices are ints everywhere downstream, whatever the limit is raised to.
  const std::int64_t most =
      std::min<std::int64_t>(limit_value(kSweepPointsLimit), std::numeric_limits<int>::max());
  if (count <= most) return true;
  std::string sizes;
  const SweepAxis* largest = nullptr;
  if (!sweep.list.empty()) sizes = std::to_string(sweep.list.size()) + " listed points";
  for (const SweepAxis& axis : sweep.grid) {
    sizes += (sizes.empty() ? "" : " x ") + std::to_string(axis.values.size()) + " values of " + axis.path;
    if (!largest || axis.values.size() > largest->values.size()) largest = &axis;
  }
  const std::string total =
      count == std::numeric_limits<std::int64_t>::max() ? "more than 9.2e18" : std::to_string(count);
  std::string how = "narrow it";
  if (largest)
    how += ": take fewer values of " + largest->path +
           " (a coarser step, then a finer grid around the best "
           "points), or fix some fields with --set and sweep the rest";
  diag.error(sweep.location,
             "the sweep has " + total + " points (" + sizes + "); " + how + limit_note(kSweepPointsLimit));
  return false;
}

}  // namespace paratwin
