// The SimGrid platform of a cluster, built in code from its spec: GPUs as hosts on their node's
// NVLink/NVSwitch, NICs as endpoints on the inter-node fabric (star, fat tree with oversubscription,
// rail-optimized). Only sim/ includes this header.
#pragma once

#include <string>
#include <vector>

#include <simgrid/s4u.hpp>

#include "plan/spec/cluster.hpp"
#include "plan/topology/rank_layout.hpp"
#include "sim/flows.hpp"

namespace paratwin::sim {

// Compute runs on "normalized" hosts: a task of duration d executes d x kWorkPerSecond units, so the
// cost model's roofline time (not a bare FLOP count) is what an unloaded host takes; a straggler's
// speed is kWorkPerSecond / slowdown.
constexpr double kWorkPerSecond = 1e9;

struct Platform {
  // By GPU index (RankLayout::site); with folded lanes, a folded GPU is its node's NVSwitch.
  std::vector<simgrid::s4u::Host*> gpus;
  // By NIC index: the endpoint of a NIC on the fabric; for a NIC no simulated rank uses, its fabric
  // domain's sink, a host without a link: a flow to a folded rank loads the sender's NIC as in the full
  // simulation, and the folded rank's symmetric twin loads its own side (RankLayout::fold keeps a
  // folded rank's flows inside its representative's domain).
  std::vector<simgrid::s4u::Host*> nics;
  // Links worth watching in a trace (their outgoing halves): the oversubscribed uplinks, then the first
  // node's NICs and NVLinks.
  std::vector<simgrid::s4u::Link*> watched;
};

// Builds the platform into the engine (which must exist and have no platform yet). Links carry
// bandwidth only (latency 0): the algorithms' step latencies are charged by the flows' phases.
// `gpu_slowdown[gpu]` (1 = nominal) slows a GPU's compute; empty means none. With folded ranks
// (RankLayout::fold), a domain's uplink gets simulated / plan ranks in the domain of its capacity, so
// that each simulated flow through it gets the share its real counterparts get.
Platform build_platform(const ClusterSpec& cluster, const RankLayout& layout,
                        const std::vector<double>& gpu_slowdown);

// The settings every ParaTwin simulation runs under (the network model, no TCP corrections, quiet
// logs, small actor stacks). Call right after creating the engine, before build_platform.
void configure_engine();

// Runs one phase from the calling actor: its latency, then its flows on the platform's links, until the
// last ends. Flows from GPUs that are not simulated (`gpu_simulated[gpu]` 0: a folded lane) are left out.
// Returns the activities it started.
long long run_phase(const Phase& phase, const Platform& platform, const RankLayout& layout,
                    const std::vector<char>& gpu_simulated);

}  // namespace paratwin::sim
