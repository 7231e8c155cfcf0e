// One-screen summary of a scenario: model size and FLOPs, cluster size and peak, the training job.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "plan/spec/scenario.hpp"

namespace paratwin {

struct ScenarioSummary {
  std::string scenario;
  std::string model;
  double parameters = 0;
  double active_parameters = 0;
  double flops_per_token = 0;  // training, model FLOPs
  std::string cluster;
  int gpus = 0;
  int pools = 0;
  FlopsPerSecond peak;  // at the training precision
  Bytes device_memory;
  double tokens_per_iteration = 0;
  Flops flops_per_iteration;
  // Iterations of the whole training budget, 0 when the scenario gives none.
  double iterations = 0;
  // Lower bound on one iteration: all FLOPs at the cluster's peak.
  Seconds ideal_iteration_time;
};

ScenarioSummary summarize(const ScenarioSpec& scenario);
std::string to_text(const ScenarioSummary& summary);
nlohmann::json to_json(const ScenarioSummary& summary);

}  // namespace paratwin
