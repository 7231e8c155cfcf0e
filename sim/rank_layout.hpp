// Where every global rank of a Program sits: its coordinates along tp, cp, dp and pp under the plan's
// rank order, the GPU, node and NIC it runs on, and the members of each group it belongs to.
#pragma once

#include <array>
#include <vector>

#include "plan/ir/program.hpp"

namespace paratwin::sim {

// Coordinates of one rank along each parallel dimension.
struct RankCoords {
  int tp = 0, cp = 0, dp = 0, pp = 0;
};

// A GPU of the cluster: pools in file order, nodes in order, GPUs of a node in order.
struct GpuSite {
  int pool = 0;
  int node = 0;   // counted over the whole cluster
  int local = 0;  // index inside its node
  int nic = 0;    // the NIC its inter-node traffic leaves through, counted over the cluster
};

class RankLayout {
 public:
  // Ranks are given GPUs in rank order, each from the pool of its pipeline stage (so a one-pool
  // cluster maps rank r to GPU r, as lowering's placement assumes). Throws std::logic_error when a
  // pool has fewer GPUs than its stages need (a plan that was not verified).
  RankLayout(const Plan& plan, const ClusterSpec& cluster);

  int world() const { return static_cast<int>(coords_.size()); }
  const RankCoords& coords(int rank) const { return coords_[rank]; }
  int rank_of(const RankCoords& c) const;
  int gpu_of(int rank) const { return gpu_of_rank_[rank]; }
  const GpuSite& site(int gpu) const { return sites_[gpu]; }
  int gpus() const { return static_cast<int>(sites_.size()); }
  int nics() const { return nic_count_; }
  int nodes() const { return node_count_; }
  bool same_node(int rank_a, int rank_b) const {
    return sites_[gpu_of(rank_a)].node == sites_[gpu_of(rank_b)].node;
  }

  // The ranks of `rank`'s group of this kind, in group order (the first is the group's leader).
  // Ep groups are `ep` consecutive dp indices; Embedding is the first and last pipeline rank.
  std::vector<int> group(int rank, GroupKind kind) const;
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
  std::array<long long, 4> stride_{};  // tp, cp, dp, pp
  std::vector<RankCoords> coords_;
  std::vector<int> gpu_of_rank_;
  std::vector<GpuSite> sites_;
  int nic_count_ = 0, node_count_ = 0;
  int folded_ = 1;
};

}  // namespace paratwin::sim
