// Price and power of a running plan, pool by pool.
#include "plan/sweep/economics.hpp"

#include <algorithm>
#include <vector>

namespace paratwin {

RunRates run_rates(const Plan& plan, const ClusterSpec& cluster) {
  RunRates rates;
  rates.gpus = plan.gpus();
  rates.dollars_per_s = 0.0;
  const int gpus_per_rank = plan.dp * plan.tp * plan.cp;
  std::vector<std::string> devices;
  for (int r = 0; r < plan.pp; ++r) {
    const std::string& name = r < int(plan.stages.size()) ? plan.stages[r].pool : cluster.pools.front().name;
    const auto pool = std::find_if(cluster.pools.begin(), cluster.pools.end(),
                                   [&](const PoolSpec& p) { return p.name == name; });
    if (pool == cluster.pools.end()) continue;  // verify() rejects such plans before they get here
    const DeviceSpec& device = cluster.device_of(*pool);
    if (pool->price_per_gpu_hour && rates.dollars_per_s)
      *rates.dollars_per_s += gpus_per_rank * pool->price_per_gpu_hour->value() / 3600;
    else
      rates.dollars_per_s.reset();
    rates.watts += gpus_per_rank * (device.power.value() + pool->node_power.value() / pool->gpus_per_node);
    if (std::find(devices.begin(), devices.end(), device.name) == devices.end())
      devices.push_back(device.name);
  }
  rates.watts *= cluster.pue;
  for (const auto& d : devices) rates.devices += (rates.devices.empty() ? "" : "+") + d;
  return rates;
}

}  // namespace paratwin
