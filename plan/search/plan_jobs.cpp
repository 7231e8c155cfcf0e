// Placement, then each job's plan on its own share of the cluster.
#include "plan/search/plan_jobs.hpp"

namespace paratwin {

PlannedJobs plan_jobs(JobsScenario scenario, const SearchOptions& options) {
  place_jobs(scenario);
  PlannedJobs out;
  for (const JobSpec& job : scenario.jobs) {
    try {
      out.plans.push_back(choose_plan(job.scenario, "", options));
    } catch (const InputError& e) {
      std::vector<Diagnostic> named = e.diagnostics();
      for (Diagnostic& d : named) d.message = "job '" + job.name + "': " + d.message;
      throw InputError(named);
    }
  }
  out.costs = placement_costs(scenario);
  out.scenario = std::move(scenario);
  return out;
}

}  // namespace paratwin
