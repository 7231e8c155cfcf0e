// The SimGrid platform of a cluster, built in code from its spec: GPUs as hosts on their node's
// NVLink/NVSwitch, NICs as endpoints on the inter-node fabric (star, fat tree with oversubscription,
// rail-optimized). Only sim/ includes this header.
#pragma once

#include <map>
#include <string>
#include <utility>
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
// The same for several jobs on one cluster, each with its own layout of the whole cluster (RankLayout's
// first_node): hosts for every job's GPUs, and uplinks shared by all of them.
Platform build_platform(const ClusterSpec& cluster, const std::vector<const RankLayout*>& layouts,
                        const std::vector<double>& gpu_slowdown);

// Bytes each job puts on each link, for runs of several jobs: a flow's bytes count on every link of its
// route, both halves of a split-duplex link under the link's name.
class LinkTally {
 public:
  explicit LinkTally(int jobs) : jobs_(jobs) {}
  void add(simgrid::s4u::Host* src, simgrid::s4u::Host* dst, double bytes, int job);
  // By link name.
  std::vector<LinkBytes> links() const;

 private:
  int jobs_;
  std::map<std::pair<const simgrid::s4u::Host*, const simgrid::s4u::Host*>, std::vector<size_t>> routes_;
  std::map<std::string, size_t> index_;
  std::vector<LinkBytes> links_;
};

// The settings every ParaTwin simulation runs under (the network model, no TCP corrections, quiet
// logs, small actor stacks). Call right after creating the engine, before build_platform.
void configure_engine();

// Runs one phase from the calling actor: its latency, then its flows on the platform's links, until the
// last ends. Flows from GPUs that are not simulated (`gpu_simulated[gpu]` 0: a folded lane) are left out.
// Returns the activities it started.
// With a tally, the flows' bytes count for `job` on the links they cross.
long long run_phase(const Phase& phase, const Platform& platform, const RankLayout& layout,
                    const std::vector<char>& gpu_simulated, LinkTally* tally = nullptr, int job = 0);

}  // namespace paratwin::sim
