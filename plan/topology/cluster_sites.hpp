// Where every GPU and NIC of a cluster sits: pools in file order, nodes in order, GPUs of a node in
// order; a GPU's inter-node traffic leaves through NIC g x count / gpus_per_node of its node; NICs
// grouped into fabric domains where the level above them is oversubscribed.
#pragma once

#include <vector>

#include "plan/cost/collectives.hpp"
#include "plan/spec/cluster.hpp"

namespace paratwin {

// GPUs under one full-bisection domain of the network: a pod, else a leaf switch, else a node. A group
// whose GPUs span more than that shares oversubscribed uplinks (GroupPlacement::crosses_pods).
int full_bisection_gpus(const PoolSpec& pool, const ClusterSpec& cluster);

// Where a group of GPUs of `pool` sits, from each member's GPU index and node: its size, the members on
// its least populated node (all of them in a one-node pool), and whether its GPUs span more than a
// full-bisection domain.
cost::GroupPlacement placement_of_members(const std::vector<int>& gpus, const std::vector<int>& nodes,
                                          const PoolSpec& pool, const ClusterSpec& cluster);

// A GPU of the cluster.
struct GpuSite {
  int pool = 0;
  int node = 0;   // counted over the whole cluster
  int local = 0;  // index inside its node
  int nic = 0;    // the NIC its inter-node traffic leaves through, counted over the cluster
};

class ClusterSites {
 public:
  explicit ClusterSites(const ClusterSpec& cluster);

  int gpus() const { return static_cast<int>(sites_.size()); }
  const GpuSite& site(int gpu) const { return sites_[gpu]; }
  int nics() const { return nic_count_; }
  int nodes() const { return node_count_; }
  int first_gpu_of_pool(int pool) const { return pool_first_gpu_[pool]; }
  // The first GPU whose traffic leaves through `nic`, -1 for a NIC no GPU uses.
  int first_gpu_of_nic(int nic) const { return nic_first_gpu_[nic]; }
  // The fabric domain `nic` hangs under when the level above the NICs is oversubscribed: its rail
  // (its index on its node) on a rail-optimized network, else its pod, its leaf, or its node. `nic`
  // must be used by some GPU (first_gpu_of_nic >= 0).
  int fabric_domain(const ClusterSpec& cluster, int nic) const;
  // Whether the level above the NICs is oversubscribed, so that fabric domains share uplinks (a star
  // fabric or a single node has none).
  bool oversubscribed(const ClusterSpec& cluster) const;

 private:
  std::vector<GpuSite> sites_;
  std::vector<int> pool_first_gpu_, nic_first_gpu_;
  int nic_count_ = 0, node_count_ = 0;
};

}  // namespace paratwin
