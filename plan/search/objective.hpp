// Objectives of the search, all proportional to the iteration time: time itself, cost per token, cost
// or energy of the whole run, time to train.
#pragma once

#include <vector>

#include "plan/spec/scenario.hpp"

namespace paratwin {

// Objective units per second of iteration time (every objective is time x this): 1, dollars per
// token, dollars or joules for the whole run, or iterations. `rank_pools`: the pool of each pipeline
// rank, each rank using `gpus_per_rank` GPUs.
double objective_per_second(const ScenarioSpec& s, const std::vector<const PoolSpec*>& rank_pools,
                            long long gpus_per_rank);

}  // namespace paratwin
