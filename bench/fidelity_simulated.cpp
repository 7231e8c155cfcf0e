#include "bench/fidelity_simulated.hpp"

#include "plan/search/choose.hpp"
#include "sim/simulate.hpp"

namespace paratwin::fidelity {

double simulated_iteration_time(const Run& run, const Catalog& catalog) {
  const ScenarioSpec scenario = load_run_scenario(run, catalog);
  const Plan plan = choose_plan(scenario, "", SearchOptions{}).plan;
  return sim::simulate(scenario, plan, sim::SimulateOptions{}).report.metrics.iteration_time_s;
}

}  // namespace paratwin::fidelity
