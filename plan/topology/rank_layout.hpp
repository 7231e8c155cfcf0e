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
  // pool has fewer GPUs than its stages need (a plan that was not verified). With `first_node`, the
  // plan's ranks start at that node of each pool (a job placed on part of a shared cluster: sites,
  // NICs and fabric domains are the whole cluster's).
  RankLayout(const Plan& plan, const ClusterSpec& cluster, int first_node = 0);

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

  // The ranks of `rank`'s group of this kind, in group order (the first is the group's leader):
  // group_members (rank_groups.hpp), the rule the live engines' communicators follow too.
  std::vector<int> group(int rank, GroupKind kind) const;
  // Where a group of these GPUs sits, as lowering places a plan's groups: its size, the members on its
  // least populated node (all of them in a one-node pool), and whether its GPUs span more than a
  // full-bisection domain. For groups that no plan made (a replayed trace's).
  cost::GroupPlacement placement_of(const std::vector<int>& gpus, const ClusterSpec& cluster) const;
  // The pipeline-rank neighbour `peer_pp` with the same tp, cp and dp coordinates.
  int pipeline_peer(int rank, int peer_pp) const;

  // Folding of symmetric ranks, so that the simulator runs one rank for many. Ranks that run the same
  // tasks, on their own ports, in the same traffic pattern as others are represented by one of them:
  //  - TP lanes: the tp ranks of a TP group, when the group sits inside one node and every GPU has its
  //    own NIC (each lane's traffic then stays on its own NVLink and NIC ports);
  //  - CP lanes and DP replicas: the cp ranks of a CP group and the dp replicas of the plan, when every
  //    GPU has its own NIC on a homogeneous cluster and, where the fabric has an oversubscribed level,
  //    each CP (DP) group lies inside one of its domains (a folded rank's flows then stay in the
  //    domain of the rank that stands for it).
  // The simulator gives shared links (oversubscribed uplinks) the capacity its simulated ranks' share
  // of them is, and a flow to a folded rank loads the sender's ports only (its symmetric twin loads the
  // receiver's as much): see sim/platform.hpp. What differs is never folded:
  // every replica with a GPU whose slowdown is not 1 is simulated whole (all its cp lanes), and TP
  // lanes fold only when every GPU of each TP group has the same slowdown.
  struct Folding {
    int tp = 1;  // TP lanes each simulated rank stands for
    int cp = 1;  // CP lanes of the representative replica each simulated rank stands for
    int dp = 1;  // DP replicas the representative replica stands for (itself included)
  };
  Folding fold(const ClusterSpec& cluster, const std::vector<double>& gpu_slowdown = {});
  const Folding& folding() const { return folding_; }
  int simulated_ranks() const { return simulated_count_; }
  bool simulated(int rank) const { return simulated_.empty() || simulated_[rank]; }

 private:
  bool groups_inside_domains(const ClusterSpec& cluster, GroupKind kind) const;

  Plan plan_;
  RankStrides strides_;
  ClusterSites sites_;
  std::vector<RankCoords> coords_;
  std::vector<int> gpu_of_rank_;
  Folding folding_;
  std::vector<char> simulated_;  // empty: every rank
  int simulated_count_ = 0;
};

}  // namespace paratwin
