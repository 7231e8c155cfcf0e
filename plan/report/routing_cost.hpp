// The time unbalanced expert routing costs a report's plan: the plan evaluated again with balanced
// routing (analytic evaluator), so plan, simulate and the GUI all say it the same way.
#pragma once

#include "plan/report/report.hpp"
#include "plan/spec/scenario.hpp"

namespace paratwin {

// Fills report.routing's balanced_iteration_time_s and cost_s (nothing without a routing section).
// The cost is the report's iteration time x (1 - balanced / unbalanced), both times analytic, so a
// simulated report gets the analytic share of its own time.
void add_routing_cost(Report& report, const ScenarioSpec& scenario);

}  // namespace paratwin
