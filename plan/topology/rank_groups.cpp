// Group membership under the plan's rank order (rank_groups.hpp).
#include "plan/topology/rank_groups.hpp"

#include <algorithm>

namespace paratwin {

namespace {

// The members of a folded expert group (folds_experts, plan.hpp): Megatron-Core's expert grid numbers a
// stage's ranks tp fastest, then cp, then dp; `first` and `step` pick `count` of those numbers, kept
// in rank order.
std::vector<int> folded_members(const Plan& plan, const RankStrides& strides, RankCoords c, int first,
                                int step, int count) {
  std::vector<int> members;
  for (int i = 0; i < count; ++i) {
    const int r = first + i * step;
    c.tp = r % plan.tp;
    c.cp = r / plan.tp % plan.cp;
    c.dp = r / (plan.tp * plan.cp);
    members.push_back(int(rank_of(strides, c)));
  }
  std::sort(members.begin(), members.end());
  return members;
}

}  // namespace

std::vector<int> group_members(const Plan& plan, const RankStrides& strides, int rank, GroupKind kind) {
  const RankCoords at = rank_coords(strides, plan, rank);
  RankCoords c = at;
  if (folds_experts(plan) && (kind == GroupKind::Ep || kind == GroupKind::ExpertDp)) {
    const int r = at.tp + plan.tp * (at.cp + plan.cp * at.dp), etp = experts_tp(plan);
    const int block = etp * plan.ep;  // an EP group's numbers
    return kind == GroupKind::Ep
               ? folded_members(plan, strides, c, r / block * block + r % etp, etp, plan.ep)
               : folded_members(plan, strides, c, r % block, block, plan.tp * plan.cp * plan.dp / block);
  }
  std::vector<int> members;
  auto vary = [&](int RankCoords::*field, int begin, int end) {
    for (int i = begin; i < end; ++i) {
      c.*field = i;
      members.push_back(int(rank_of(strides, c)));
    }
  };
  switch (kind) {
    case GroupKind::None:
      members.push_back(rank);
      break;
    case GroupKind::Tp:
      vary(&RankCoords::tp, 0, plan.tp);
      break;
    case GroupKind::Cp:
      vary(&RankCoords::cp, 0, plan.cp);
      break;
    case GroupKind::Dp: {
      // Gradients are reduced over dp x cp (Megatron-LM's data-parallel group with context parallelism);
      // under HSDP over the rank's shard group, consecutive dp coordinates (as torchtitan's mesh
      // [dp_replicate, dp_shard] lays them out).
      const int shard = plan.dp / plan.dp_replicate, first = c.dp / shard * shard;
      for (int cp = 0; cp < plan.cp; ++cp) {
        c.cp = cp;
        vary(&RankCoords::dp, first, first + shard);
      }
      std::sort(members.begin(), members.end());  // in rank order, as a communicator split from the world
      break;
    }
    case GroupKind::DpReplicate: {
      // HSDP: the rank's place in its shard group, in every replica.
      const int shard = plan.dp / plan.dp_replicate;
      for (int r = 0; r < plan.dp_replicate; ++r) {
        c.dp = at.dp % shard + r * shard;
        members.push_back(int(rank_of(strides, c)));
      }
      break;
    }
    case GroupKind::Pp:
      vary(&RankCoords::pp, 0, plan.pp);
      break;
    case GroupKind::Ep: {
      const int first = c.dp / plan.ep * plan.ep;
      vary(&RankCoords::dp, first, first + plan.ep);
      break;
    }
    case GroupKind::ExpertDp:
      // The DP group's members at the rank's place in their EP groups (EP is carved out of dp).
      for (int cp = 0; cp < plan.cp; ++cp) {
        c.cp = cp;
        for (int dp = at.dp % plan.ep; dp < plan.dp; dp += plan.ep) {
          c.dp = dp;
          members.push_back(int(rank_of(strides, c)));
        }
      }
      std::sort(members.begin(), members.end());
      break;
    case GroupKind::Embedding:
      c.pp = 0;
      members.push_back(int(rank_of(strides, c)));
      c.pp = plan.pp - 1;
      members.push_back(int(rank_of(strides, c)));
      break;
    case GroupKind::World:
      for (int r = 0; r < plan.gpus(); ++r) members.push_back(r);
      break;
  }
  return members;
}

std::vector<int> group_members(const Plan& plan, int rank, GroupKind kind) {
  return group_members(plan, rank_strides(plan), rank, kind);
}

}  // namespace paratwin
