// The spread of a simulation's iteration times as the reliability view draws it: the distribution
// function of the simulated steps and the figures around it, from `paratwin simulate`'s report.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/report/spread.hpp"

namespace paratwin::gui {

struct SpreadCurve {
  IterationSpread spread;                      // percentiles, noise-free step, P(slower)
  std::vector<std::pair<double, double>> cdf;  // (seconds, fraction of iterations)
};

// nullopt when the report has no simulation.spread (one iteration and no variability).
std::optional<SpreadCurve> spread_curve(const nlohmann::json& report);

}  // namespace paratwin::gui
