// Objectives of the search, all proportional to the iteration time: time itself, cost per token, cost
// or energy of the whole run, time to train; under failures, time to train and cost also divided by
// the plan's expected goodput.
#pragma once

#include <vector>

#include "plan/spec/scenario.hpp"

namespace paratwin {

// Objective units per second of iteration time (every objective is time x this): 1, dollars per
// token, dollars or joules for the whole run, or iterations. `rank_pools`: the pool of each pipeline
// rank, each rank using `gpus_per_rank` GPUs.
double objective_per_second(const ScenarioSpec& s, const std::vector<const PoolSpec*>& rank_pools,
                            long long gpus_per_rank);

// Whether the objective counts the scenario's failures: time_to_train and cost, with failure rates.
// They are then divided by the plan's expected goodput (plan/reliability/expected_goodput.hpp).
bool objective_counts_failures(const ScenarioSpec& s);

// Plans whose objectives differ by less than this share (0.1%, below the cost model's precision) are
// ties, and a tie goes to the simpler plan: no compression, no offload, ZeRO 1, no HSDP, the default
// order.
inline constexpr double kTieMargin = 1e-3;

// The tie class of an objective (> 0): the search ranks plans by class first, then by simplicity.
// One class spans a factor of exp(kTieMargin) of the objective.
double tie_class(double objective);

}  // namespace paratwin
