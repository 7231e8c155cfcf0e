// A directory of Chakra traces as plain data for a replay (`paratwin simulate --chakra DIR`): per rank
// its nodes with what a simulator needs (kind, duration, bytes, collective kind and group members,
// peer and tag, dependencies by index), with no protobuf type in sight, so that sim/ replays it
// without knowing the format. Any producer's traces within the node kinds ASTRA-sim simulates.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "plan/cost/collectives.hpp"

namespace paratwin::chakra {

enum class ReplayKind {
  Compute,     // COMP_NODE: runs for its duration on the rank's GPU
  Memory,      // MEM_LOAD_NODE / MEM_STORE_NODE: host copies, for their duration
  Collective,  // COMM_COLL_NODE
  Send,        // COMM_SEND_NODE
  Recv,        // COMM_RECV_NODE
  Nothing,     // metadata and invalid nodes: done as soon as their dependencies are
};

struct ReplayNode {
  ReplayKind kind = ReplayKind::Nothing;
  std::string name;
  double duration_s = 0;  // compute and memory nodes (duration_ns when given, else duration_micros)
  double bytes = 0;       // comm_size of a transfer or collective
  cost::CollectiveKind collective = cost::CollectiveKind::AllReduce;
  int group = 0;          // collectives: the process group id (0: every rank)
  int sequence = 0;       // collectives: how many collectives on the same group come before it in the file
  int peer = -1;          // sends: comm_dst; receives: comm_src
  std::int64_t tag = 0;   // sends and receives: comm_tag
  int occurrence = 0;     // sends and receives: earlier ones of the same peer and tag in the file
  std::vector<int> deps;  // indices of this rank's nodes, data and control alike
};

struct ReplayWorkload {
  std::vector<std::vector<ReplayNode>> ranks;  // by rank, in file order
  std::map<int, std::vector<int>> groups;      // process group id -> member ranks (0: all)
};

// Reads and checks every rank's trace of `dir`. Process groups come from the directory's
// <prefix>.comm_groups.json when there is one, else from the ranks' process_group:init metadata nodes.
// Throws InputError naming the file and node for what it cannot replay: a collective kind other than
// all-reduce, all-gather, reduce-scatter, all-to-all and broadcast, a dependency on a node the file
// does not hold, an unknown process group, a send without its receive.
ReplayWorkload load_replay_workload(const std::string& dir);

}  // namespace paratwin::chakra
