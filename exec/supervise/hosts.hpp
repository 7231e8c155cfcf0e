// The machines of a live run across hosts, as `paratwin run` is given them (--hosts, an Open MPI
// hostfile, or the Slurm allocation it runs in), and which host each world rank runs on: node n of
// the plan's cluster is host n, and a rank's node is the one the plan's rank layout gives it
// (plan/topology/rank_layout.hpp), so TP groups and pipeline neighbours land where the plan says.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plan/ir/plan.hpp"
#include "plan/spec/cluster.hpp"

namespace paratwin::exec {

struct Host {
  std::string name;  // a host name or IPv4 address the launcher (mpirun) reaches
  int slots = 1;     // ranks it may run
};

// "h1:4,h2:4" (a host without ":N" has one slot). Throws InputError at <--hosts TEXT>:1:column for an
// empty name, a count that is not a positive integer, or a host listed twice.
std::vector<Host> parse_host_list(const std::string& text);

// An Open MPI hostfile: one host a line, "name [slots=N] [max_slots=N]", '#' comments, blank lines; a
// host listed twice adds its slots (as mpirun counts them). Throws InputError at file:line:column for
// an unreadable file, an unknown keyword (with the nearest valid one) or a bad count.
std::vector<Host> load_hostfile(const std::string& path);

// Inside a Slurm allocation (SLURM_JOB_ID set): its nodes, from `scontrol show hostnames`, each with the
// tasks Slurm gives a node (SLURM_NTASKS_PER_NODE, else the node's CPUs); nullopt outside one. Throws
// InputError when the allocation's node list cannot be read.
std::optional<std::vector<Host>> slurm_hosts();

// The hosts of a run: --hostfile, else --hosts, else the Slurm allocation, else none (this machine).
// Throws InputError for bad input, or both flags given.
std::vector<Host> resolve_hosts(const std::string& hostfile, const std::string& host_list);

// The host index of every world rank of `plan` on `cluster`, whose nodes are the hosts in order.
// Throws InputError (at `source`) when the cluster does not have one node per host or a host would
// get more ranks than its slots.
std::vector<int> host_of_ranks(const Plan& plan, const ClusterSpec& cluster, const std::vector<Host>& hosts,
                               const std::string& source);

// Open MPI's sequential mapper file (mpirun --hostfile F --mca rmaps seq): line r names rank r's host. A
// host given by an address of this machine is written as this machine's name, which is how mpirun
// knows its own node.
std::string sequential_hostfile(const std::vector<Host>& hosts, const std::vector<int>& host_of_rank);

// The IPv4 address of `host` when it is an address or name of this machine (where the supervisor
// runs), for its control channel; nullopt otherwise.
std::optional<std::string> local_address_of(const std::string& host);

}  // namespace paratwin::exec
