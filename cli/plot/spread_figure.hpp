// The spread of a simulation's iteration times (paratwin simulate --iterations N --json): their
// histogram and their distribution function, with the noise-free step and the P50/P95/P99 marked.
#pragma once

#include <nlohmann/json.hpp>

#include "viz/chart.hpp"

namespace paratwin::plot {

// Throws std::runtime_error when the report has no simulation.spread (simulate it with --iterations
// above 1 or with the scenario's variability).
viz::Figure spread_figure(const nlohmann::json& report);

}  // namespace paratwin::plot
