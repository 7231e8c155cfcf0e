// Rank coordinates, GPU assignment and group membership.
#include "plan/topology/rank_layout.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

namespace paratwin {

RankLayout::RankLayout(const Plan& plan, const ClusterSpec& cluster)
    : plan_(plan), strides_(rank_strides(plan)), sites_(cluster) {
  std::map<std::string, int> pool_index;
  for (size_t p = 0; p < cluster.pools.size(); ++p) pool_index[cluster.pools[p].name] = static_cast<int>(p);
  const int world = plan.gpus();
  coords_.resize(world);
  gpu_of_rank_.resize(world);
  std::vector<int> next_in_pool(cluster.pools.size(), 0);
  for (int r = 0; r < world; ++r) {
    const RankCoords& c = coords_[r] = rank_coords(strides_, plan, r);
    const int p = pool_index.at(plan.stages.at(c.pp).pool);
    if (next_in_pool[p] >= cluster.pools[p].gpus())
      throw std::logic_error("pool " + cluster.pools[p].name + " has fewer GPUs than the plan's stages need");
    gpu_of_rank_[r] = sites_.first_gpu_of_pool(p) + next_in_pool[p]++;
  }
}

std::vector<int> RankLayout::group(int rank, GroupKind kind) const {
  RankCoords c = coords_[rank];
  std::vector<int> members;
  auto vary = [&](int RankCoords::*field, int begin, int end) {
    for (int i = begin; i < end; ++i) {
      c.*field = i;
      members.push_back(rank_of(c));
    }
  };
  switch (kind) {
    case GroupKind::None:
      members.push_back(rank);
      break;
    case GroupKind::Tp:
      vary(&RankCoords::tp, 0, plan_.tp);
      break;
    case GroupKind::Cp:
      vary(&RankCoords::cp, 0, plan_.cp);
      break;
    case GroupKind::Dp:
      // Gradients are reduced over dp x cp (Megatron-LM's data-parallel group with context parallelism).
      for (int cp = 0; cp < plan_.cp; ++cp) {
        c.cp = cp;
        vary(&RankCoords::dp, 0, plan_.dp);
      }
      std::sort(members.begin(), members.end());  // in rank order, as the live engine's group
      break;
    case GroupKind::Pp:
      vary(&RankCoords::pp, 0, plan_.pp);
      break;
    case GroupKind::Ep: {
      const int first = c.dp / plan_.ep * plan_.ep;
      vary(&RankCoords::dp, first, first + plan_.ep);
      break;
    }
    case GroupKind::Embedding:
      c.pp = 0;
      members.push_back(rank_of(c));
      c.pp = plan_.pp - 1;
      members.push_back(rank_of(c));
      break;
  }
  return members;
}

bool RankLayout::fold_tp_lanes(const ClusterSpec& cluster) {
  if (plan_.tp < 2 || !cluster.homogeneous()) return false;
  const PoolSpec& pool = cluster.pools.front();
  if (pool.nic.count != pool.gpus_per_node || strides_.tp != 1 || pool.gpus_per_node % plan_.tp != 0)
    return false;
  folded_ = plan_.tp;
  return true;
}

cost::GroupPlacement RankLayout::placement_of(const std::vector<int>& gpus,
                                              const ClusterSpec& cluster) const {
  cost::GroupPlacement g;
  g.size = static_cast<int>(gpus.size());
  if (gpus.empty()) return g;
  const PoolSpec& pool = cluster.pools[static_cast<size_t>(site(gpus.front()).pool)];
  std::map<int, int> on_node;
  for (int gpu : gpus) ++on_node[site(gpu).node];
  g.per_node = g.size;
  if (pool.nodes > 1)
    for (const auto& [node, members] : on_node) g.per_node = std::min(g.per_node, members);
  const auto [lo, hi] = std::minmax_element(gpus.begin(), gpus.end());
  g.crosses_pods = *hi - *lo + 1 > full_bisection_gpus(pool, cluster);
  return g;
}

int RankLayout::pipeline_peer(int rank, int peer_pp) const {
  RankCoords c = coords_[rank];
  c.pp = peer_pp;
  return rank_of(c);
}

}  // namespace paratwin
