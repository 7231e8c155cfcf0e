// Re-evaluating a plan under balanced routing.
#include "plan/report/routing_cost.hpp"

#include "plan/analytic/evaluate.hpp"

namespace paratwin {

void add_routing_cost(Report& report, const ScenarioSpec& scenario) {
  if (!report.routing || !scenario.model.moe) return;
  ModelSpec balanced = scenario.model;
  balanced.moe->routing = MoeRouting{};
  balanced.moe->capacity_factor.reset();
  const double unbalanced_s =
      evaluate(lower(report.plan, scenario.model, scenario.cluster, scenario.training), scenario.cluster,
               scenario.training)
          .iteration_time_s;
  const double balanced_s = evaluate(lower(report.plan, balanced, scenario.cluster, scenario.training),
                                     scenario.cluster, scenario.training)
                                .iteration_time_s;
  RoutingReport& r = *report.routing;
  r.balanced_iteration_time_s = report.metrics.iteration_time_s * balanced_s / unbalanced_s;
  r.cost_s = report.metrics.iteration_time_s - r.balanced_iteration_time_s;
}

}  // namespace paratwin
