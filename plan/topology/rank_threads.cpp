// CPU ranks of several threads as devices of several cores (see rank_threads.hpp).
#include "plan/topology/rank_threads.hpp"

#include <set>

namespace paratwin {

bool is_cpu_pool(const PoolSpec& pool) {
  return pool.intra_node.kind == FabricKind::SharedMemory;
}

void scale_cpu_devices(ClusterSpec& cluster, int threads) {
  if (threads <= 1) return;
  std::set<std::string> scaled;
  for (const PoolSpec& pool : cluster.pools) {
    if (!is_cpu_pool(pool) || !scaled.insert(pool.device).second) continue;
    DeviceSpec& d = cluster.devices.at(pool.device);
    for (auto& [precision, peak] : d.peak) peak = FlopsPerSecond(peak.value() * threads);
    d.memory = Bytes(d.memory.value() * threads);
    d.memory_bandwidth = BytesPerSecond(d.memory_bandwidth.value() * threads);
  }
}

}  // namespace paratwin
