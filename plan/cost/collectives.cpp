// Alpha-beta collective costs (Thakur et al. 2005; NCCL ring, double binary tree, NVLink SHARP) and the
// choice among flat and hierarchical algorithms for a group's placement on nodes.
#include "plan/cost/collectives.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <optional>

namespace paratwin::cost {

Seconds ring_allreduce_time(Bytes n, int p, BytesPerSecond b, Seconds alpha) {
  if (p <= 1) return Seconds(0);
  // Reduce-scatter then all-gather: 2 (p-1) steps, each moving n / p.
  return alpha * (2.0 * (p - 1)) + n * (2.0 * (p - 1) / p) / b;
}

Seconds tree_allreduce_time(Bytes n, int p, BytesPerSecond b, Seconds alpha) {
  if (p <= 1) return Seconds(0);
  // Pipelined reduce up and broadcast down a binary tree of depth ceil(log2 p).
  return alpha * (2 * std::ceil(std::log2(p))) + n * 2.0 / b;
}

Seconds ring_gather_time(Bytes n, int p, BytesPerSecond b, Seconds alpha) {
  if (p <= 1) return Seconds(0);
  return alpha * (p - 1.0) + n * ((p - 1.0) / p) / b;
}

Seconds alltoall_time(Bytes n, int p, BytesPerSecond b, Seconds alpha) {
  if (p <= 1) return Seconds(0);
  // Pairwise exchange: p-1 rounds, each sending the n / p meant for one peer.
  return alpha * (p - 1.0) + n * ((p - 1.0) / p) / b;
}

Seconds broadcast_time(Bytes n, int p, BytesPerSecond b, Seconds alpha) {
  if (p <= 1) return Seconds(0);
  // A chain pipelined in small chunks: the first chunk crosses p-1 hops, then n streams at b.
  return alpha * (p - 1.0) + n / b;
}

std::optional<BytesPerSecond> measured_busbw(CollectiveKind kind, Bytes n, const IntraNodeSpec& fabric) {
  const std::optional<BusbwCurve>* curve = nullptr;
  switch (kind) {
    case CollectiveKind::AllReduce:
      curve = &fabric.all_reduce_curve;
      break;
    case CollectiveKind::AllGather:
    case CollectiveKind::AllToAll:
      curve = fabric.all_gather_curve ? &fabric.all_gather_curve : &fabric.reduce_scatter_curve;
      break;
    case CollectiveKind::ReduceScatter:
      curve = fabric.reduce_scatter_curve ? &fabric.reduce_scatter_curve : &fabric.all_gather_curve;
      break;
    case CollectiveKind::Broadcast:
      return std::nullopt;
  }
  if (!*curve) curve = &fabric.all_reduce_curve;
  if (!*curve) return std::nullopt;
  return (*curve)->at(n);
}

namespace {

// One level of links: p ranks, each with bandwidth b per direction and step latency alpha; inside a
// node, the fabric's measured curves where it has them.
struct Level {
  int p;
  BytesPerSecond b;
  Seconds alpha;
  const IntraNodeSpec* measured = nullptr;
};

// A collective of `p` GPUs of one node on n bytes from the fabric's nccl-tests curve: n x 2(p-1)/p
// / busbw(n) for an all-reduce, n x (p-1)/p / busbw(n) for the others.
std::optional<Seconds> measured_time(CollectiveKind kind, Bytes n, int p, const IntraNodeSpec& fabric) {
  if (p <= 1 || n.value() <= 0) return Seconds(0);
  const auto busbw = measured_busbw(kind, n, fabric);
  if (!busbw) return std::nullopt;
  const double factor = (kind == CollectiveKind::AllReduce ? 2.0 : 1.0) * (p - 1) / p;
  return (n * factor) / *busbw;
}

// An all-gather or reduce-scatter inside a node: measured where the fabric has a curve.
Seconds intra_gather_time(CollectiveKind kind, Bytes n, const Level& l) {
  if (l.measured)
    if (auto t = measured_time(kind, n, l.p, *l.measured)) return *t;
  return ring_gather_time(n, l.p, l.b, l.alpha);
}

// Ring and (for all-reduce) tree on one level: the faster one.
CollectiveCost flat(CollectiveKind kind, Bytes n, const Level& l) {
  switch (kind) {
    case CollectiveKind::AllReduce: {
      const Seconds ring = ring_allreduce_time(n, l.p, l.b, l.alpha);
      const Seconds tree = tree_allreduce_time(n, l.p, l.b, l.alpha);
      return tree < ring ? CollectiveCost{tree, Algorithm::Tree} : CollectiveCost{ring, Algorithm::Ring};
    }
    case CollectiveKind::AllGather:
    case CollectiveKind::ReduceScatter:
      return {ring_gather_time(n, l.p, l.b, l.alpha), Algorithm::Ring};
    case CollectiveKind::AllToAll:
      return {alltoall_time(n, l.p, l.b, l.alpha), Algorithm::Ring};
    case CollectiveKind::Broadcast:
      return {broadcast_time(n, l.p, l.b, l.alpha), Algorithm::Ring};
  }
  return {};
}

// Inside the node, then across nodes on 1/per_node of the data (the per_node members each drive their
// own share of the NICs in parallel), then inside the node again.
Seconds hierarchical(CollectiveKind kind, Bytes n, const Level& intra, const Level& inter) {
  const Bytes shard = n / intra.p;
  switch (kind) {
    case CollectiveKind::AllReduce:  // reduce-scatter, all-reduce across nodes, all-gather
      return intra_gather_time(CollectiveKind::ReduceScatter, n, intra) +
             intra_gather_time(CollectiveKind::AllGather, n, intra) + flat(kind, shard, inter).time;
    case CollectiveKind::AllGather:  // gather across nodes, then inside (reduce-scatter: the mirror)
    case CollectiveKind::ReduceScatter:
      return ring_gather_time(shard, inter.p, inter.b, inter.alpha) + intra_gather_time(kind, n, intra);
    case CollectiveKind::Broadcast:  // to one member per node, then inside each node
      return broadcast_time(n, inter.p, inter.b, inter.alpha) +
             broadcast_time(n, intra.p, intra.b, intra.alpha);
    case CollectiveKind::AllToAll:
      break;  // no hierarchical form: every pair exchanges its own data
  }
  assert(false && "no hierarchical algorithm for this collective");
  return Seconds(0);
}

}  // namespace

CollectiveCost collective_time(CollectiveKind kind, Bytes n, const GroupPlacement& group,
                               const PoolSpec& pool, const ClusterSpec& cluster) {
  assert(group.size >= 1 && group.per_node >= 1 && group.size % group.per_node == 0 &&
         group.per_node <= pool.gpus_per_node && group.size / group.per_node <= pool.nodes &&
         "group placement does not fit the pool");
  if (group.size == 1) return {Seconds(0), Algorithm::Ring};

  const IntraNodeSpec& fabric = pool.intra_node;
  const Level intra{group.per_node, fabric.allreduce_busbw.value_or(fabric.bandwidth), fabric.latency,
                    &fabric};
  if (group.size == group.per_node) {
    // A measured curve already holds the algorithm NCCL chose at each size (NVLink SHARP included).
    if (auto t = measured_time(kind, n, group.size, fabric)) return {*t, Algorithm::Ring};
    CollectiveCost best = flat(kind, n, intra);
    if (kind == CollectiveKind::AllReduce && fabric.sharp) {
      // NVLink SHARP: each rank sends its vector to the switch and receives the sum once.
      const Seconds sharp = fabric.latency * 2 + n / intra.b;
      if (sharp < best.time) best = {sharp, Algorithm::Sharp};
    }
    return best;
  }

  // One GPU's share of the node's NICs, thinned by the oversubscribed uplinks above a pod.
  const BytesPerSecond nic = pool.nic.achievable.value_or(pool.nic.bandwidth) * pool.nic.count /
                             pool.gpus_per_node /
                             (group.crosses_pods ? cluster.network.oversubscription : 1.0);
  const Seconds hop = pool.nic.latency + cluster.network.switch_latency * 2;
  const Level inter{group.size / group.per_node, nic, hop};

  if (group.per_node == 1) return flat(kind, n, {group.size, nic, hop});

  if (kind == CollectiveKind::AllToAll) {
    // Pairwise exchange: the (size - per_node) / size of n bound for other nodes leaves through this
    // rank's NIC share while the rest crosses the fabric at the same time.
    const double p = group.size, remote = (p - group.per_node) / p, local = (group.per_node - 1) / p;
    const Seconds wire = std::max((n * remote) / nic, (n * local) / intra.b);
    return {hop * (p - 1) + wire, Algorithm::Ring};
  }
  // A flat algorithm over all members: NCCL runs one channel per member through its own NIC, so a node
  // boundary carries per_node NIC shares, unless the intra-node fabric is slower still.
  const BytesPerSecond node_link = std::min(intra.b, nic * group.per_node);
  CollectiveCost best = flat(kind, n, {group.size, node_link, hop});
  const Seconds hier = hierarchical(kind, n, intra, inter);
  if (hier < best.time) best = {hier, Algorithm::Hierarchical};
  return best;
}

Seconds p2p_time(Bytes n, bool same_node, const PoolSpec& pool, const ClusterSpec& cluster) {
  if (same_node) return pool.intra_node.latency + n / pool.intra_node.bandwidth;
  const BytesPerSecond nic =
      pool.nic.achievable.value_or(pool.nic.bandwidth) * pool.nic.count / pool.gpus_per_node;
  return pool.nic.latency + cluster.network.switch_latency * 2 + n / nic;
}

}  // namespace paratwin::cost
