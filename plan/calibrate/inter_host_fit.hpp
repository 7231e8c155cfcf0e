// The network between hosts, fitted to collectives that crossed hosts: the NIC's achievable bandwidth
// and its latency (pools.<pool>.nic.achievable, nic.latency), apart from the collectives inside one
// host (intra_node, fitted in plan/calibrate/fit.cpp). The collectives come from live runs' profiles
// or from nccl-tests runs across hosts (plan/calibrate/nccl_tests.hpp).
#pragma once

#include <vector>

#include "plan/calibrate/fit.hpp"
#include "plan/cost/collectives.hpp"

namespace paratwin {

// One collective across hosts and the time it took.
struct TimedCollective {
  cost::CollectiveKind kind = cost::CollectiveKind::AllReduce;
  Bytes bytes;
  cost::GroupPlacement placement;
  int count = 1;          // times it ran in the measured time
  double measured_s = 0;  // the transfer alone
  size_t cluster = 0;     // index of the cluster it ran on (as sized for its run)
};

// The collectives of `runs` whose group spans several hosts; run i's are on cluster i.
std::vector<TimedCollective> collectives_across_hosts(const std::vector<ProfiledRun>& runs);

// Fits the NIC of pool `cal.pool` in `cal.cluster` to `timed`. `clusters[i]` is the cluster collective
// i names, with the figures already calibrated (device, intra-node); its NIC figures are replaced
// while fitting. The cost model's time of such a collective is piecewise linear in 1 / bandwidth and
// the latency (each algorithm's alpha-beta form; the fastest chosen), so it is linearized (first at a
// quarter of the NIC's figure, where the NIC rather than another link bounds the collectives), fitted,
// and linearized again at the fit until the figures settle. Adds the two figures to
// `cal.figures`, replacing any earlier fit of them (kept, and saying why, when nothing crossed hosts
// or all had one size).
void fit_inter_host(const std::vector<TimedCollective>& timed, std::vector<ClusterSpec> clusters,
                    Calibration& cal);

}  // namespace paratwin
