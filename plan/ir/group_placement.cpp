// Where a plan's groups sit on a pool's nodes: lowering's GroupPlacement of each group kind (how many
// members, how many share a node, whether they span more than a full-bisection domain), under the rank
// order, with the ranks on the pool's GPUs in order.
#include <algorithm>

#include "plan/ir/role_builder.hpp"
#include "plan/topology/cluster_sites.hpp"
#include "plan/topology/rank_groups.hpp"

namespace paratwin {

cost::GroupPlacement lowering::place(int n, long long stride, const PoolSpec& pool,
                                     const ClusterSpec& cluster) {
  cost::GroupPlacement g;
  g.size = n;
  const long long per_node = pool.gpus_per_node;
  // Members per node for the least favourable first member; a one-node pool holds them all (with
  // 3 ranks a node, ranks 0 and 2 share it although 3 / 2 rounds down to one).
  g.per_node = pool.nodes == 1      ? n
               : stride >= per_node ? 1
                                    : static_cast<int>(std::min<long long>(n, per_node / stride));
  const long long span = stride * (n - 1) + 1;
  g.crosses_pods = span > full_bisection_gpus(pool, cluster);
  return g;
}

namespace {

// Where these ranks sit, on GPUs in rank order as place() assumes: for a group whose members are not
// evenly strided (the experts' replicas under cp > 1: runs of cp ranks, every ep-th DP rank; folded
// expert groups).
cost::GroupPlacement place_members(const std::vector<int>& ranks, const PoolSpec& pool,
                                   const ClusterSpec& cluster) {
  std::vector<int> nodes;
  for (int r : ranks) nodes.push_back(r / pool.gpus_per_node);
  return placement_of_members(ranks, nodes, pool, cluster);
}

}  // namespace

using lowering::place;

cost::GroupPlacement group_placement(const Plan& p, GroupKind kind, const PoolSpec& pool,
                                     const ClusterSpec& c) {
  const RankStrides stride = rank_strides(p);
  if (folds_experts(p) && (kind == GroupKind::Ep || kind == GroupKind::ExpertDp))
    return place_members(group_members(p, 0, kind), pool, c);  // over the stage's tp x cp x dp ranks
  switch (kind) {
    case GroupKind::Tp:
      return place(p.tp, stride.tp, pool, c);
    case GroupKind::Cp:
      return place(p.cp, stride.cp, pool, c);
    case GroupKind::Ep:
      return place(p.ep, stride.dp, pool, c);  // carved out of dp
    case GroupKind::DpReplicate:
      return place(p.dp_replicate, stride.dp * (p.dp / p.dp_replicate), pool, c);  // one per shard group
    case GroupKind::World:
      return place(p.gpus(), 1, pool, c);
    case GroupKind::ExpertDp:  // every ep-th DP rank, over cp
      return p.cp > 1 ? place_members(group_members(p, 0, kind), pool, c)
                      : place(p.dp / p.ep, stride.dp * p.ep, pool, c);
    default: {
      // Gradients are reduced over dp x cp, as Megatron-LM does: the CP ranks of a replica hold the
      // same weights and the gradients of different tokens (under HSDP within a shard group).
      return place(p.zero_group(), p.cp > 1 ? std::min(stride.dp, stride.cp) : stride.dp, pool, c);
    }
  }
}

}  // namespace paratwin
