// Several jobs on one cluster (paratwin simulate --json on a scenario with jobs:): each job's iteration
// time alone and beside the others, and the bytes each job puts on the links where they meet.
#pragma once

#include <nlohmann/json.hpp>

#include "viz/chart.hpp"

namespace paratwin::plot {

// Throws std::runtime_error when the report has no jobs (it is not a simulation of several jobs).
viz::Figure jobs_figure(const nlohmann::json& report);

}  // namespace paratwin::plot
