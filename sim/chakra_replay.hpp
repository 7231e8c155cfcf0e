// `paratwin simulate SCENARIO --chakra DIR`: a Chakra workload (plan/chakra/replay_workload.hpp, ours
// or another producer's) replayed on the scenario's cluster, so that ParaTwin's SimGrid network stands
// in for ASTRA-sim's. Rank r runs on GPU r of the cluster's first pool. As ASTRA-sim's replay mode:
// compute and memory nodes take their recorded durations; collectives and sends run as the flows of
// ParaTwin's algorithms on the platform's links (sim/flows.hpp, with the placement of their group's
// GPUs); every node starts once its dependencies have ended.
#pragma once

#include <vector>

#include "plan/chakra/replay_workload.hpp"
#include "plan/spec/cluster.hpp"

namespace paratwin::sim {

struct ReplayResult {
  double end_s = 0;                // when the last node of any rank ended
  std::vector<double> rank_end_s;  // by rank
  long long nodes = 0;             // replayed, over all ranks
  long long activities = 0;        // executions, flows and delays simulated
};

// Runs the replay in a child process (one SimGrid engine per process). Throws InputError when the
// cluster's first pool has fewer GPUs than the workload has ranks, std::runtime_error when the
// simulation fails (a node whose collective or receive never completes, say).
ReplayResult replay_chakra(const chakra::ReplayWorkload& workload, const ClusterSpec& cluster);

}  // namespace paratwin::sim
