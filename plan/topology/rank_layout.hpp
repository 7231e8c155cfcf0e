// Where every world rank of a plan sits: its coordinates along tp, cp, dp and pp under the rank
// order, the GPU, node and NIC it runs on, and the members of each group it belongs to (EP groups
// carved out of dp, the DP group over dp x cp). Used by the simulator to place its actors and flows.
#pragma once

#include <vector>

#include "plan/ir/program.hpp"
#include "plan/topology/cluster_sites.hpp"
#include "plan/topology/rank_order.hpp"

namespace paratwin {

class RankLayout {
 public:
  // Ranks are given GPUs in rank order, each from the pool of its pipeline stage (so a one-pool
  // cluster maps rank r to GPU r, as lowering's placement assumes). Throws std::logic_error when a
  // pool has fewer GPUs than its stages need (a plan that was not verified).
  RankLayout(const Plan& plan, const ClusterSpec& cluster);

  int world() const { return static_cast<int>(coords_.size()); }
  const RankCoords& coords(int rank) const { return coords_[rank]; }
  int rank_of(const RankCoords& c) const { return static_cast<int>(paratwin::rank_of(strides_, c)); }
  int gpu_of(int rank) const { return gpu_of_rank_[rank]; }
  const ClusterSites& sites() const { return sites_; }
  const GpuSite& site(int gpu) const { return sites_.site(gpu); }
  int gpus() const { return sites_.gpus(); }
  int nics() const { return sites_.nics(); }
  int nodes() const { return sites_.nodes(); }
  bool same_node(int rank_a, int rank_b) const {
    return site(gpu_of(rank_a)).node == site(gpu_of(rank_b)).node;
  }

  // The ranks of `rank`'s group of this kind, in group order (the first is the group's leader).
  // Ep groups are `ep` consecutive dp indices; Embedding is the first and last pipeline rank.
  std::vector<int> group(int rank, GroupKind kind) const;
  // Where a group of these GPUs sits, as lowering places a plan's groups: its size, the members on its
  // least populated node (all of them in a one-node pool), and whether its GPUs span more than a
  // full-bisection domain. For groups that no plan made (a replayed trace's).
  cost::GroupPlacement placement_of(const std::vector<int>& gpus, const ClusterSpec& cluster) const;
  // The pipeline-rank neighbour `peer_pp` with the same tp, cp and dp coordinates.
  int pipeline_peer(int rank, int peer_pp) const;

  // Tensor-parallel lane folding. The tp ranks of a TP group run the same tasks; when the group sits
  // inside one node and every GPU has its own NIC, each lane's traffic runs on its own NVLink and NIC
  // ports and meets the other lanes only on shared fabric links, in the same pattern. Simulating lane
  // 0 alone, with shared links given 1/tp of their capacity, then gives the same times at 1/tp of the
  // cost. Returns whether it folded (it does not when the conditions do not hold).
  bool fold_tp_lanes(const ClusterSpec& cluster);
  int folded_lanes() const { return folded_; }  // 1: every rank simulated
  bool simulated(int rank) const { return folded_ == 1 || coords_[rank].tp == 0; }

 private:
  Plan plan_;
  RankStrides strides_;
  ClusterSites sites_;
  std::vector<RankCoords> coords_;
  std::vector<int> gpu_of_rank_;
  int folded_ = 1;
};

}  // namespace paratwin
