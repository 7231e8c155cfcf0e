// Plan selection shared by `paratwin plan`, `simulate` and `run`.
#include "plan/search/choose.hpp"

namespace paratwin {

ChosenPlan choose_plan(const ScenarioSpec& scenario, const std::string& plan_file,
                       const SearchOptions& options) {
  const PlanRequest& request = scenario.plan;
  ChosenPlan chosen;
  if (!plan_file.empty()) {
    chosen.plan = load_plan_file(plan_file, scenario);
  } else if (request.tp && request.pp && request.micro_batch) {
    chosen.plan = complete_plan(scenario);
  } else {
    chosen.search = search_plans(scenario, options);
    chosen.plan = chosen.search->top.front().plan;
  }
  if (auto problems = verify(chosen.plan, scenario.model, scenario.cluster, scenario.training);
      !problems.empty()) {
    const auto at_plan = scenario.locations.find("plan");
    const Location where = !plan_file.empty()                    ? Location{plan_file}
                           : at_plan != scenario.locations.end() ? at_plan->second
                                                                 : scenario.document.location;
    std::vector<Diagnostic> errors;
    for (auto& p : problems) errors.push_back({Severity::Error, where, "the plan cannot run: " + p});
    throw InputError(std::move(errors));
  }
  return chosen;
}

}  // namespace paratwin
