// A sweep's figure: time to train and cost against GPU count, one line per device type (and per
// value of the other swept fields), the Pareto front ringed in black and the goal's point in red,
// the deadline and budget drawn; and cost against time to train, where the front is the lower-left edge.
#pragma once

#include "plan/sweep/results.hpp"
#include "viz/chart.hpp"

namespace paratwin::plot {

viz::Figure sweep_figure(const SweepResults& results);

}  // namespace paratwin::plot
