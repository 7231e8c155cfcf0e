// GPU and NIC sites of a cluster, and the fabric domain of a NIC.
#include "plan/topology/cluster_sites.hpp"

#include <algorithm>
#include <map>

namespace paratwin {

ClusterSites::ClusterSites(const ClusterSpec& cluster) {
  for (size_t p = 0; p < cluster.pools.size(); ++p) {
    const PoolSpec& pool = cluster.pools[p];
    pool_first_gpu_.push_back(static_cast<int>(sites_.size()));
    for (int n = 0; n < pool.nodes; ++n) {
      for (int g = 0; g < pool.gpus_per_node; ++g) {
        // GPUs share the node's NICs evenly: GPU g leaves through NIC g x count / gpus_per_node.
        const int nic = nic_count_ + g * pool.nic.count / pool.gpus_per_node;
        sites_.push_back({static_cast<int>(p), node_count_, g, nic});
      }
      ++node_count_;
      nic_count_ += pool.nic.count;
    }
  }
  nic_first_gpu_.assign(nic_count_, -1);
  for (int g = 0; g < gpus(); ++g)
    if (nic_first_gpu_[sites_[g].nic] < 0) nic_first_gpu_[sites_[g].nic] = g;
}

int ClusterSites::fabric_domain(const ClusterSpec& cluster, int nic) const {
  const int first_gpu = nic_first_gpu_[nic];
  const GpuSite& site = sites_[first_gpu];
  const PoolSpec& pool = cluster.pools[site.pool];
  if (cluster.network.topology == NetworkTopology::RailOptimized)
    return site.local * pool.nic.count / pool.gpus_per_node;  // the rail: the NIC's index on its node
  return first_gpu / full_bisection_gpus(pool, cluster);
}

bool ClusterSites::oversubscribed(const ClusterSpec& cluster) const {
  return cluster.network.oversubscription > 1.0 && node_count_ > 1 &&
         cluster.network.topology != NetworkTopology::Star;
}

int full_bisection_gpus(const PoolSpec& pool, const ClusterSpec& cluster) {
  return cluster.network.pod_gpus        ? *cluster.network.pod_gpus
         : cluster.network.gpus_per_leaf ? cluster.network.gpus_per_leaf
                                         : pool.gpus_per_node;
}

cost::GroupPlacement placement_of_members(const std::vector<int>& gpus, const std::vector<int>& nodes,
                                          const PoolSpec& pool, const ClusterSpec& cluster) {
  cost::GroupPlacement g;
  g.size = static_cast<int>(gpus.size());
  if (gpus.empty()) return g;
  std::map<int, int> on_node;
  for (int node : nodes) ++on_node[node];
  g.per_node = g.size;
  if (pool.nodes > 1)
    for (const auto& [node, members] : on_node) g.per_node = std::min(g.per_node, members);
  const auto [lo, hi] = std::minmax_element(gpus.begin(), gpus.end());
  g.crosses_pods = *hi - *lo + 1 > full_bisection_gpus(pool, cluster);
  return g;
}

}  // namespace paratwin
