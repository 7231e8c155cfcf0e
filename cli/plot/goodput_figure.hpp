// Plans under failures (paratwin plan --json with failure rates in the scenario): each candidate's
// expected goodput against its iteration time, and its objective against its iteration time, the
// chosen plan and the faster plan that lost to failures marked.
#pragma once

#include <nlohmann/json.hpp>

#include "viz/chart.hpp"

namespace paratwin::plot {

// Throws std::runtime_error when the report's candidates carry no expected_goodput (a scenario
// without failure rates, or an objective other than time_to_train and cost).
viz::Figure goodput_figure(const nlohmann::json& report);

}  // namespace paratwin::plot
