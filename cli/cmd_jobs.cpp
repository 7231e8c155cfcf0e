// `paratwin plan` and `paratwin simulate` on a scenario of several jobs (`jobs:`): placement and a plan
// per job; with simulate, each job's iteration alone and beside the others on the shared fabric.
#include <iostream>

#include "cli/commands.hpp"
#include "cli/sweep/plotter.hpp"
#include "plan/analytic/evaluate.hpp"
#include "plan/io/atomic_file.hpp"
#include "plan/report/report.hpp"
#include "plan/search/plan_jobs.hpp"
#include "sim/jobs.hpp"

namespace paratwin::cli {
namespace {

PlannedJobs load_and_plan(const std::string& path, const std::vector<std::string>& sets) {
  JobsScenario scenario = load_jobs_scenario(path, parse_overrides(sets));
  print_diagnostics(scenario.warnings);
  return plan_jobs(std::move(scenario), SearchOptions{1, false});
}

nlohmann::json placement_json(const JobSpec& job, const PlacementCost& cost, const ClusterSpec& cluster) {
  const JobPlacement& pl = job.placement;
  return {
      {"pool", cluster.pools[size_t(pl.pool)].name},  {"nodes", {pl.first_node, pl.first_node + pl.nodes}},
      {"packed", pl.kind == PlacementKind::Auto},     {"fabric_domains", cost.domains},
      {"fewest_fabric_domains", cost.fewest_domains}, {"shares_uplinks_with", cost.sharing_with}};
}

}  // namespace

bool is_jobs_scenario(const std::string& path) {
  return holds_jobs(load_yaml_file(path));
}

void plan_jobs_command(const std::string& path, const std::vector<std::string>& sets,
                       const std::string& json_path) {
  const PlannedJobs planned = load_and_plan(path, sets);
  const JobsScenario& s = planned.scenario;
  nlohmann::json jobs = nlohmann::json::array();
  std::string text = "placement on " + s.cluster.name + ":\n" + to_text(s, planned.costs);
  for (size_t j = 0; j < s.jobs.size(); ++j) {
    const ScenarioSpec& job = s.jobs[j].scenario;
    const Program program = lower(planned.plans[j].plan, job.model, job.cluster, job.training);
    const Report report = make_report(s.jobs[j].name, program, evaluate(program, job.cluster, job.training));
    text += "\njob " + s.jobs[j].name + ":\n" + to_text(report);
    nlohmann::json one = to_json(report);
    one["name"] = s.jobs[j].name;
    one["placement"] = placement_json(s.jobs[j], planned.costs[j], s.cluster);
    jobs.push_back(one);
  }
  if (json_path != "-") std::cout << text;
  if (!json_path.empty())
    write_file_atomically(json_path, nlohmann::json{{"scenario", s.name}, {"jobs", jobs}}.dump(2) + "\n");
}

void simulate_jobs_command(const std::string& path, const std::vector<std::string>& sets, int iterations,
                           const std::string& json_path, const std::string& png) {
  if (!png.empty() && !png_available())
    throw InputError(Location{"<--png " + png + ">"},
                     "--png needs paratwin-plot, which is built when Qt 6 Gui is found; install "
                     "qt6-base-dev and rebuild");
  const PlannedJobs planned = load_and_plan(path, sets);
  std::vector<Plan> plans;
  for (const ChosenPlan& c : planned.plans) plans.push_back(c.plan);
  const sim::JobsSimulation result =
      sim::simulate_jobs(planned.scenario, plans, sim::JobsSimulateOptions{std::max(1, iterations)});
  nlohmann::json json = result.json;
  for (size_t j = 0; j < planned.scenario.jobs.size(); ++j)
    json["jobs"][j]["placement"] =
        placement_json(planned.scenario.jobs[j], planned.costs[j], planned.scenario.cluster);
  if (json_path != "-")
    std::cout << "placement on " << planned.scenario.cluster.name << ":\n"
              << to_text(planned.scenario, planned.costs) << "simulated (every rank, no folding):\n"
              << sim::to_text(result);
  if (!json_path.empty()) write_file_atomically(json_path, json.dump(2) + "\n");
  if (!png.empty()) write_report_png("jobs", json.dump(), png);
}

}  // namespace paratwin::cli
