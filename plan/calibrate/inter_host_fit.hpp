// The network between hosts, fitted to the collectives of live runs that crossed hosts: the NIC's
// achievable bandwidth and its latency (pools.<pool>.nic.achievable, nic.latency), apart from the
// collectives inside one host (intra_node, fitted in plan/calibrate/fit.cpp).
#pragma once

#include <vector>

#include "plan/calibrate/fit.hpp"

namespace paratwin {

// Fits the NIC of pool `cal.pool` in `cal.cluster` to every collective of `runs` whose group spans
// several hosts. `run_clusters[i]` is run i's cluster as sized for it, with the figures already
// calibrated (device, intra-node); its NIC figures are replaced while fitting. The cost model's time
// of such a collective is piecewise linear in 1 / bandwidth and the latency (each algorithm's alpha-
// beta form; the fastest chosen), so it is linearized at the current figures, fitted, and
// linearized again until the figures settle. Adds the two figures to `cal.figures` (kept, and saying
// why, when no collective crossed hosts or all had one size).
void fit_inter_host(const std::vector<ProfiledRun>& runs, std::vector<ClusterSpec> run_clusters,
                    Calibration& cal);

}  // namespace paratwin
