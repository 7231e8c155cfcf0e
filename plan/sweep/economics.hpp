// What a plan costs while it runs: the GPUs it occupies, their price per hour and their power, from
// the cluster file (`price_per_gpu_hour`, device `power`, `node_power`, `pue`).
#pragma once

#include <optional>
#include <string>

#include "plan/ir/plan.hpp"

namespace paratwin {

struct RunRates {
  int gpus = 0;                         // GPUs the plan occupies (dp x tp x pp x cp)
  std::optional<double> dollars_per_s;  // nullopt when a pool the plan uses has no price_per_gpu_hour
  double watts = 0;                     // the GPUs at rated power plus their share of the node, times PUE
  std::string devices;  // device types of the pools it uses, "h100-sxm" or "h100-sxm+a100-sxm-80g"
};

// Pipeline rank r runs on the pool of the plan's stage r (each rank holds dp x tp x cp GPUs).
RunRates run_rates(const Plan& plan, const ClusterSpec& cluster);

}  // namespace paratwin
