// One point of a sweep: its scenario loaded, its plan chosen (searched, as `paratwin plan` does, when
// the scenario leaves it to the optimizer) and evaluated, and what training would take on it: time,
// GPU-hours, cost and energy for the scenario's token or step budget.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "plan/report/report.hpp"
#include "plan/spec/doc.hpp"
#include "plan/sweep/grid.hpp"

namespace paratwin {

enum class PointStatus {
  Ok,
  Invalid,  // the settings make an invalid scenario (e.g. tp does not divide the heads)
  NoPlan,   // no plan fits: the optimizer says what runs out
  Failed,   // the evaluation itself broke (a simulation or a worker process ended abnormally)
};
extern const EnumNames<PointStatus> kPointStatusNames;  // ok, invalid, no-plan, failed

struct PointResult {
  int index = 0;
  std::map<std::string, std::string> settings;  // path -> value as YAML flow text
  PointStatus status = PointStatus::Ok;
  std::string message;  // why the status is not Ok

  // Filled when Ok:
  std::string cluster;  // the cluster's name
  std::string devices;  // device types the plan runs on
  int gpus = 0;         // of the cluster (the plan may use fewer, see plan_gpus)
  int plan_gpus = 0;
  std::string evaluator;  // "analytic" or "simulation"
  nlohmann::json plan;    // plan_json() of the chosen plan
  Metrics metrics;
  double analytic_iteration_time_s = 0;  // the analytic evaluator's figure (the same unless simulated)
  double tokens = 0;                     // to train: training.tokens, or steps x tokens per step
  double time_to_train_s = 0;            // tokens / (tokens/s x goodput)
  double gpu_hours = 0;                  // plan GPUs x time to train
  std::optional<double> cost_usd;        // GPU-hours x price_per_gpu_hour; nullopt without a price
  double energy_mwh = 0;                 // power x time to train (GPUs, nodes, PUE)
  std::optional<double> goodput;         // simulated with the scenario's failures over the time to train
  std::optional<double> p95_iteration_time_s;  // simulated over several iterations (sweep --iterations)

  bool ok() const { return status == PointStatus::Ok; }
};

// What the simulator reports for a point's plan. plan/ knows no SimGrid, so the caller passes it in.
struct SimulatedPoint {
  Metrics metrics;
  std::optional<double> goodput;               // when a horizon was given
  std::optional<double> p95_iteration_time_s;  // when several iterations or variability were simulated
};
// Simulates `plan`; with a horizon, also failures, checkpoints and restarts over it. Throws
// std::runtime_error when the simulation fails.
using PointSimulator = std::function<SimulatedPoint(const ScenarioSpec& scenario, const Plan& plan,
                                                    std::optional<Seconds> horizon)>;

// The scenario of one point: `sweep_scenario`'s document without its `sweep:` section, with the point's
// settings applied as --set overrides, then `after` (the user's own). Throws InputError when they make
// an invalid scenario.
ScenarioSpec point_scenario(const ScenarioSpec& sweep_scenario, const SweepPoint& point,
                            const Catalog& catalog = Catalog::installed(),
                            const std::vector<Override>& after = {});

// The sweep.list entry of `sweep_scenario` whose `name` field is `name` (`paratwin plan --point`, the
// validation set's runs). Throws InputError at the sweep section, with the names there are and the
// nearest, when none is.
SweepPoint named_sweep_point(const ScenarioSpec& sweep_scenario, const std::string& name);

// Evaluates one point of `sweep_scenario` (loaded with its overrides; its `sweep:` section is not part
// of the points). With `simulate` (for sweeps with sweep.simulate), the plan is also simulated, over a
// horizon of the analytic time to train when the scenario has failures. Problems of the point are its
// status and message, not exceptions.
PointResult evaluate_point(const ScenarioSpec& sweep_scenario, const SweepPoint& point,
                           const PointSimulator& simulate = {},
                           const Catalog& catalog = Catalog::installed());

// A result that names the point but says it could not be evaluated (a worker that died on it).
PointResult failed_point(const SweepPoint& point, const std::string& why);

nlohmann::json to_json(const PointResult& point);
// Throws std::runtime_error naming the missing or mistyped key.
PointResult point_from_json(const nlohmann::json& json);

}  // namespace paratwin
