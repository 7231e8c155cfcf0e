#include "plan/search/objective.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "plan/reliability/expected_goodput.hpp"
#include "plan/search/optimizer.hpp"

namespace paratwin {

double tie_class(double objective) {
  return std::floor(std::log(std::max(objective, 1e-300)) * (1 / kTieMargin));
}

double objective_per_second(const ScenarioSpec& s, const std::vector<const PoolSpec*>& rank_pools,
                            long long gpus_per_rank) {
  double price = 0, power = 0;
  for (const PoolSpec* p : rank_pools) {
    price += gpus_per_rank * (p->price_per_gpu_hour ? p->price_per_gpu_hour->value() : 0) / 3600;
    power +=
        gpus_per_rank * (s.cluster.device_of(*p).power.value() + p->node_power.value() / p->gpus_per_node);
  }
  power *= s.cluster.pue;
  const double tokens_per_iteration = double(s.training.global_batch) * s.training.seq_len;
  const double iterations = s.training.steps    ? double(*s.training.steps)
                            : s.training.tokens ? *s.training.tokens / tokens_per_iteration
                                                : 1.0;
  switch (s.search.objective) {
    case Objective::IterationTime:
      return 1;
    case Objective::CostPerToken:
      return price / tokens_per_iteration;
    case Objective::Cost:
      return price * iterations;
    case Objective::Energy:
      return power * iterations;
    case Objective::TimeToTrain:
      return iterations;
  }
  return 1;
}

std::string objective_unit(Objective objective) {
  switch (objective) {
    case Objective::IterationTime:
      return "s";
    case Objective::CostPerToken:
      return "$/token";
    case Objective::Cost:
      return "$";
    case Objective::Energy:
      return "J";
    case Objective::TimeToTrain:
      return "s";
  }
  return "";
}

bool objective_counts_failures(const ScenarioSpec& s) {
  return has_failure_rates(s) &&
         (s.search.objective == Objective::TimeToTrain || s.search.objective == Objective::Cost);
}

double objective_value(const ScenarioSpec& s, const Plan& plan, const Report& report) {
  return objective_value(s, plan, report.metrics.iteration_time_s,
                         report.goodput ? report.goodput->goodput : 1);
}

double objective_value(const ScenarioSpec& s, const Plan& plan, double iteration_time_s, double goodput) {
  std::vector<const PoolSpec*> pools;
  for (int r = 0; r < plan.pp; ++r)
    for (const auto& p : s.cluster.pools)
      if (p.name == plan.stages[r].pool) pools.push_back(&p);
  const double per_iteration =
      iteration_time_s * objective_per_second(s, pools, static_cast<long long>(plan.dp) * plan.tp * plan.cp);
  if (!objective_counts_failures(s)) return per_iteration;
  return goodput > 0 ? per_iteration / goodput : std::numeric_limits<double>::infinity();
}

}  // namespace paratwin
