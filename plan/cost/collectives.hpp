// Communication time of collectives and point-to-point transfers, by the alpha-beta model of each
// algorithm (Thakur et al. 2005; NCCL's ring and double binary tree), on the links a group spans.
#pragma once

#include <optional>

#include "plan/spec/cluster.hpp"
#include "plan/spec/units.hpp"

namespace paratwin::cost {

enum class CollectiveKind { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast };
enum class Algorithm { Ring, Tree, Hierarchical, Sharp };

// Closed forms. n is the full buffer (all-reduce: the vector; all-gather: the gathered output;
// reduce-scatter: the input; all-to-all: what one rank sends in all), p ranks, b the bandwidth of each
// rank's link per direction, alpha the latency of one step.
//   ring all-reduce:      2 (p-1) alpha + 2 (p-1)/p n / b
//   tree all-reduce:      2 ceil(log2 p) alpha + 2 n / b      (pipelined reduce then broadcast)
//   ring all-gather / reduce-scatter:  (p-1) alpha + (p-1)/p n / b
//   all-to-all (pairwise): (p-1) alpha + (p-1)/p n / b
//   broadcast (pipelined chain): (p-1) alpha + n / b
// p = 1 costs nothing.
Seconds ring_allreduce_time(Bytes n, int p, BytesPerSecond b, Seconds alpha);
Seconds tree_allreduce_time(Bytes n, int p, BytesPerSecond b, Seconds alpha);
Seconds ring_gather_time(Bytes n, int p, BytesPerSecond b, Seconds alpha);  // all-gather, reduce-scatter
Seconds alltoall_time(Bytes n, int p, BytesPerSecond b, Seconds alpha);
Seconds broadcast_time(Bytes n, int p, BytesPerSecond b, Seconds alpha);

// Where the members of one group sit: `size` ranks, `per_node` of them on each node they use (so
// size / per_node nodes), all in one pool. `crosses_pods`: the group leaves a full-bisection pod (or,
// without pods, a leaf switch), so its inter-node traffic shares oversubscribed uplinks.
struct GroupPlacement {
  int size = 1;
  int per_node = 1;
  bool crosses_pods = false;
};

struct CollectiveCost {
  Seconds time;
  Algorithm algorithm = Algorithm::Ring;
};

// Link figures used:
//   inside a node: the fabric's measured busbw curve at n when it has one (measured_busbw: it holds
//     the latency and the algorithm NCCL chose at each size), n x 2(p-1)/p / busbw(n) for an
//     all-reduce and n x (p-1)/p / busbw(n) for the others; else intra_node.allreduce_busbw when given (a
//     measured all-reduce bus bandwidth), else intra_node.bandwidth; latency intra_node.latency. With
//     intra_node.sharp, an all-reduce inside a node may use in-switch reduction: 2 alpha + n / busbw.
//   between nodes: per GPU, nic.count x (nic.achievable or nic.bandwidth) / gpus_per_node shared by
//     the group's members on a node; divided by network.oversubscription when crosses_pods; latency
//     nic.latency + 2 x network.switch_latency.
// A group inside one node uses the intra-node figures. A group over several nodes with one member
// per node uses ring or tree over the inter-node figures; with several members per node it may also
// go hierarchical: reduce-scatter inside the node, the collective across nodes on n / per_node, then
// all-gather inside the node. The fastest applicable algorithm is chosen, as NCCL's tuner does.
CollectiveCost collective_time(CollectiveKind kind, Bytes n, const GroupPlacement& group,
                               const PoolSpec& pool, const ClusterSpec& cluster);

// The bus bandwidth a collective of one node's GPUs reaches on n bytes, from the fabric's measured
// curves: its own kind's, else (all-gather, reduce-scatter and all-to-all, which move the same volume)
// the other's, else the all-reduce curve. nullopt without curves, and for a broadcast.
std::optional<BytesPerSecond> measured_busbw(CollectiveKind kind, Bytes n, const IntraNodeSpec& fabric);

// A point-to-point transfer of n bytes between two ranks of a pool: latency + n / bandwidth over the
// intra-node fabric when `same_node`, else over the node's NICs (one GPU's share).
Seconds p2p_time(Bytes n, bool same_node, const PoolSpec& pool, const ClusterSpec& cluster);

}  // namespace paratwin::cost
