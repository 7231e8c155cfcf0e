// The Report every evaluator produces (ARCHITECTURE.md's JSON keys), as JSON and as a terminal table.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/analytic/evaluate.hpp"
#include "plan/ir/program.hpp"
#include "plan/reliability/expected_goodput.hpp"
#include "plan/report/routing_report.hpp"

namespace paratwin {

struct StageMemory {
  int stage = 0;  // pipeline rank
  std::string pool;
  Bytes weights, gradients, optimizer, activations, buffers, host;
  Bytes peak, capacity;
  bool fits() const { return peak <= capacity; }
};

struct Metrics {
  double iteration_time_s = 0;
  double tokens_per_s = 0;
  double model_tflops_per_gpu = 0;
  double mfu = 0;  // model FLOPs / (time x peak): no recompute
  double hfu = 0;  // executed FLOPs, recompute included
  double peak_memory_gib = 0;
  double memory_capacity_gib = 0;
  bool fits = true;
  // Compute's time against one GPU's nominal speed: the job's expected slowest GPU (Evaluation).
  double compute_pace = 1;
};

struct Report {
  std::string scenario;
  std::string evaluator;  // "analytic", "simulation", "live"
  Plan plan;
  Metrics metrics;
  TimeBreakdown breakdown;                 // of the critical (last-finishing) pipeline rank
  std::vector<StageMemory> stages;         // per pipeline rank
  int worst_stage = 0;                     // highest peak memory relative to capacity
  std::optional<RoutingReport> routing;    // MoE routing that is not balanced (routing_report.hpp)
  std::optional<ExpectedGoodput> goodput;  // under the scenario's failures (goodput_report.hpp)
};

Report make_report(const std::string& scenario, const Program& program, const Evaluation& evaluation);

nlohmann::json plan_json(const Plan& plan);
// {iteration_time_s, tokens_per_s, model_tflops_per_gpu, mfu, hfu, peak_memory_gib, memory_capacity_gib,
// fits, compute_pace}
nlohmann::json metrics_json(const Metrics& metrics);
nlohmann::json to_json(const Report& report);
std::string to_text(const Report& report);

}  // namespace paratwin
