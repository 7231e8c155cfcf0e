// Rank coordinates, GPU assignment and group membership.
#include "sim/rank_layout.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

namespace paratwin::sim {
namespace {

enum Dim { kTp = 0, kCp = 1, kDp = 2, kPp = 3 };

int dim_index(const std::string& name) {
  static const std::map<std::string, int> names = {{"tp", kTp}, {"cp", kCp}, {"dp", kDp}, {"pp", kPp}};
  return names.at(name);
}

}  // namespace

RankLayout::RankLayout(const Plan& plan, const ClusterSpec& cluster) : plan_(plan) {
  const std::array<int, 4> size = {plan.tp, plan.cp, plan.dp, plan.pp};
  long long stride = 1;
  size_t start = 0;
  while (start <= plan.order.size()) {
    const size_t dash = plan.order.find('-', start);
    const int d =
        dim_index(plan.order.substr(start, dash == std::string::npos ? std::string::npos : dash - start));
    stride_[d] = stride;
    stride *= size[d];
    if (dash == std::string::npos) break;
    start = dash + 1;
  }

  // GPUs of the cluster, pool by pool.
  std::map<std::string, int> pool_index;
  std::vector<int> pool_first_gpu;
  for (size_t p = 0; p < cluster.pools.size(); ++p) {
    const PoolSpec& pool = cluster.pools[p];
    pool_index[pool.name] = static_cast<int>(p);
    pool_first_gpu.push_back(static_cast<int>(sites_.size()));
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

  const int world = plan.gpus();
  coords_.resize(world);
  gpu_of_rank_.resize(world);
  std::vector<int> next_in_pool(cluster.pools.size(), 0);
  for (int r = 0; r < world; ++r) {
    RankCoords& c = coords_[r];
    c.tp = static_cast<int>(r / stride_[kTp] % plan.tp);
    c.cp = static_cast<int>(r / stride_[kCp] % plan.cp);
    c.dp = static_cast<int>(r / stride_[kDp] % plan.dp);
    c.pp = static_cast<int>(r / stride_[kPp] % plan.pp);
    const int p = pool_index.at(plan.stages.at(c.pp).pool);
    if (next_in_pool[p] >= cluster.pools[p].gpus())
      throw std::logic_error("pool " + cluster.pools[p].name + " has fewer GPUs than the plan's stages need");
    gpu_of_rank_[r] = pool_first_gpu[p] + next_in_pool[p]++;
  }
}

int RankLayout::rank_of(const RankCoords& c) const {
  return static_cast<int>(c.tp * stride_[kTp] + c.cp * stride_[kCp] + c.dp * stride_[kDp] +
                          c.pp * stride_[kPp]);
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
  if (pool.nic.count != pool.gpus_per_node || stride_[kTp] != 1 || pool.gpus_per_node % plan_.tp != 0)
    return false;
  folded_ = plan_.tp;
  return true;
}

int RankLayout::pipeline_peer(int rank, int peer_pp) const {
  RankCoords c = coords_[rank];
  c.pp = peer_pp;
  return rank_of(c);
}

}  // namespace paratwin::sim
