// What expert routing that is not balanced does to a run, as the report shows it: the imbalance
// (hottest over mean tokens per EP rank), the assignments a capacity dropped, and the time it costs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/ir/program.hpp"

namespace paratwin {

struct RoutingReport {
  double imbalance = 1;  // hottest over mean tokens per EP rank, mean over MoE layers (and steps)
  double dropped = 0;    // share of the token assignments the capacity factor dropped
  // The first MoE layer in step 0 (a draw, not an average, so that which rank is hot shows): tokens
  // per EP rank over the balanced count, and each expert's share of the assignments.
  std::vector<double> rank_load;
  std::vector<double> expert_share;
  // The same plan under balanced routing, and what the imbalance adds to the report's iteration time:
  // the report's time x (1 - balanced / unbalanced), both of the analytic evaluator (routing_cost.hpp);
  // 0 until worked out.
  double balanced_iteration_time_s = 0;
  double cost_s = 0;
};

// From the Program's MoE layers; nullopt when every rank of every layer runs the balanced count.
std::optional<RoutingReport> routing_report(const Program& program);

// {imbalance, dropped, rank_load[], expert_share[], balanced_iteration_time_s, cost_s}
nlohmann::json to_json(const RoutingReport& routing);
// The inverse of to_json. Throws nlohmann::json's exceptions on a malformed section.
RoutingReport routing_from_json(const nlohmann::json& routing);
// Two lines for the terminal table, against `iteration_time_s`.
std::string to_text(const RoutingReport& routing, double iteration_time_s);

}  // namespace paratwin
