// Collectives and point-to-point transfers decomposed into the flows their algorithms put on the wire,
// so that concurrent traffic shares links in SimGrid's flow model. No SimGrid here: the decomposition
// is plain data, tested on its own.
//
// One flow per member and algorithm phase: a ring's p-1 pipelined steps move n/p each over the same
// link, so one flow of (p-1)/p n per member loads every link exactly as the steps do. The alpha terms
// (a step's latency, as the cost model charges it) become the phase's fixed delay; links carry
// bandwidth only.
#pragma once

#include <string>
#include <vector>

#include "plan/ir/program.hpp"
#include "plan/topology/rank_layout.hpp"

namespace paratwin::sim {

// Inside a node over NVLink/NVSwitch, or between nodes from NIC to NIC through the fabric.
enum class Path { NvLink, Nic };

struct Flow {
  int src_gpu = 0;
  int dst_gpu = 0;
  double bytes = 0;
  Path path = Path::NvLink;
};

// The bytes each job's flows put on one link of the platform (runs of several jobs on one cluster).
struct LinkBytes {
  std::string link;           // as the platform names it (plan/topology/link_names.hpp)
  double capacity_Bps = 0;    // each direction's
  std::vector<double> bytes;  // per job, both directions
};

// Flows that run together, after a fixed delay; the phase ends when the last flow ends.
struct Phase {
  double latency_s = 0;
  std::vector<Flow> flows;
};

// The phases of a collective task among `member_gpus` (group order), with the algorithm the cost
// model picks for the task's placement (ring, double binary tree, NVLink SHARP, hierarchical), its
// `count` folded collectives merged into one set of phases. Intra-node volumes are scaled by
// bandwidth / allreduce_busbw so that an uncontended collective takes the cost model's time.
std::vector<Phase> collective_phases(const Task& task, const std::vector<int>& member_gpus,
                                     const RankLayout& layout, const PoolSpec& pool,
                                     const ClusterSpec& cluster);

// A send of `bytes` from one GPU to another: NVLink inside a node, NICs across.
Phase p2p_phase(double bytes, int src_gpu, int dst_gpu, const RankLayout& layout, const PoolSpec& pool,
                const ClusterSpec& cluster);

}  // namespace paratwin::sim
