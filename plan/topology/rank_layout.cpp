// Rank coordinates, GPU assignment and group membership.
#include "plan/topology/rank_layout.hpp"

#include <algorithm>
#include <cassert>
#include <map>
#include <stdexcept>
#include <string>

#include "plan/topology/rank_groups.hpp"

namespace paratwin {

RankLayout::RankLayout(const Plan& plan, const ClusterSpec& cluster, int first_node)
    : plan_(plan), strides_(rank_strides(plan)), sites_(cluster) {
  std::map<std::string, int> pool_index;
  for (size_t p = 0; p < cluster.pools.size(); ++p) pool_index[cluster.pools[p].name] = static_cast<int>(p);
  const int world = plan.gpus();
  coords_.resize(world);
  gpu_of_rank_.resize(world);
  std::vector<int> next_in_pool(cluster.pools.size(), 0);
  for (size_t p = 0; p < cluster.pools.size(); ++p)
    next_in_pool[p] = first_node * cluster.pools[p].gpus_per_node;
  for (int r = 0; r < world; ++r) {
    const RankCoords& c = coords_[r] = rank_coords(strides_, plan, r);
    const int p = pool_index.at(plan.stages.at(c.pp).pool);
    if (next_in_pool[p] >= cluster.pools[p].gpus())
      throw std::logic_error("pool " + cluster.pools[p].name + " has fewer GPUs than the plan's stages need");
    gpu_of_rank_[r] = sites_.first_gpu_of_pool(p) + next_in_pool[p]++;
  }
  simulated_count_ = world;
}

std::vector<int> RankLayout::group(int rank, GroupKind kind) const {
  return group_members(plan_, strides_, rank, kind);
}

namespace {

bool slowdowns_equal(const std::vector<double>& slowdown, int a, int b) {
  return slowdown.empty() || slowdown[size_t(a)] == slowdown[size_t(b)];
}

bool slowed(const std::vector<double>& slowdown, int gpu) {
  return !slowdown.empty() && slowdown[size_t(gpu)] != 1.0;
}

}  // namespace

bool RankLayout::groups_inside_domains(const ClusterSpec& cluster, GroupKind kind) const {
  const auto domain = [&](int rank) { return sites_.fabric_domain(cluster, site(gpu_of(rank)).nic); };
  assert((kind == GroupKind::Cp || kind == GroupKind::Dp) && "groups varying cp (and dp) only");
  for (int r = 0; r < world(); ++r) {
    // Each group once, from its member with the varied coordinates at 0; TP lanes are placed alike.
    const RankCoords& c = coords_[r];
    if (c.tp != 0 || c.cp != 0 || (kind == GroupKind::Dp && c.dp % (plan_.dp / plan_.dp_replicate) != 0))
      continue;
    for (int m : group(r, kind))
      if (domain(m) != domain(r)) return false;
  }
  return true;
}

cost::GroupPlacement RankLayout::placement_of(const std::vector<int>& gpus,
                                              const ClusterSpec& cluster) const {
  if (gpus.empty()) return {0, 1, false};
  std::vector<int> nodes;
  for (int gpu : gpus) nodes.push_back(site(gpu).node);
  return placement_of_members(gpus, nodes, cluster.pools[static_cast<size_t>(site(gpus.front()).pool)],
                              cluster);
}

RankLayout::Folding RankLayout::fold(const ClusterSpec& cluster, const std::vector<double>& gpu_slowdown) {
  folding_ = Folding{};
  simulated_.clear();
  simulated_count_ = world();
  if (!cluster.homogeneous()) return folding_;
  const PoolSpec& pool = cluster.pools.front();
  if (pool.nic.count != pool.gpus_per_node) return folding_;

  bool fold_tp = plan_.tp > 1 && strides_.tp == 1 && pool.gpus_per_node % plan_.tp == 0;
  for (int r = 0; r < world() && fold_tp; ++r)
    fold_tp = slowdowns_equal(gpu_slowdown, gpu_of(r), gpu_of(r - coords_[r].tp));
  // Above an oversubscribed level a folded rank's traffic must stay in its representative's domain:
  // CP and DP groups fold only when each lies inside one.
  const bool oversubscribed = sites_.oversubscribed(cluster);
  const bool fold_cp = plan_.cp > 1 && (!oversubscribed || groups_inside_domains(cluster, GroupKind::Cp));
  // HSDP's replica groups cross the shard groups: with them, DP folds only where nothing is oversubscribed.
  const bool fold_dp =
      plan_.dp > 1 &&
      (!oversubscribed || (plan_.dp_replicate == 1 && groups_inside_domains(cluster, GroupKind::Dp)));
  // Replicas that hold a slowed GPU keep every rank (their cp lanes differ from the others').
  std::vector<char> distinct(size_t(plan_.dp), 0);
  for (int r = 0; r < world(); ++r)
    if (slowed(gpu_slowdown, gpu_of(r))) distinct[size_t(coords_[r].dp)] = 1;
  int representative = -1, distinct_replicas = 0;
  for (int d = 0; d < plan_.dp; ++d) {
    if (distinct[size_t(d)])
      ++distinct_replicas;
    else if (representative < 0)
      representative = d;
  }
  folding_.tp = fold_tp ? plan_.tp : 1;
  folding_.cp = fold_cp && representative >= 0 ? plan_.cp : 1;
  folding_.dp = fold_dp && representative >= 0 ? plan_.dp - distinct_replicas : 1;
  if (folding_.tp * folding_.cp * folding_.dp == 1) return folding_;

  simulated_.assign(size_t(world()), 0);
  simulated_count_ = 0;
  for (int r = 0; r < world(); ++r) {
    const RankCoords& c = coords_[r];
    const bool plain = !distinct[size_t(c.dp)];
    const bool lane = folding_.tp == 1 || c.tp == 0;
    const bool replica = !plain || folding_.dp == 1 || c.dp == representative;
    const bool cp_lane = !plain || folding_.cp == 1 || c.cp == 0;
    if (lane && replica && cp_lane) {
      simulated_[size_t(r)] = 1;
      ++simulated_count_;
    }
  }
  return folding_;
}

int RankLayout::pipeline_peer(int rank, int peer_pp) const {
  RankCoords c = coords_[rank];
  c.pp = peer_pp;
  return rank_of(c);
}

}  // namespace paratwin
