// Flow decomposition of ring, tree, SHARP, pairwise, chain and hierarchical collectives.
#include "sim/flows.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

namespace paratwin::sim {
namespace {

using cost::Algorithm;
using cost::CollectiveKind;

// The group's members as the algorithms see them, with the figures of the links they use.
struct Ring {
  const std::vector<int>& gpus;
  const RankLayout& layout;
  double intra_scale;  // NVLink bytes per byte of algorithm volume (bandwidth / busbw)

  Path path(int a, int b) const {
    return layout.site(a).node == layout.site(b).node ? Path::NvLink : Path::Nic;
  }
  Flow flow(int a, int b, double bytes) const {
    const Path p = path(a, b);
    return {a, b, bytes * (p == Path::NvLink ? intra_scale : 1.0), p};
  }
};

// Each member sends `bytes` to its successor in group order.
void ring_flows(const Ring& r, const std::vector<int>& gpus, double bytes, Phase& phase) {
  const size_t p = gpus.size();
  if (p < 2 || bytes <= 0) return;
  for (size_t i = 0; i < p; ++i) phase.flows.push_back(r.flow(gpus[i], gpus[(i + 1) % p], bytes));
}

// A ring over members of several nodes with NCCL's one channel per member and NIC: a hop between
// nodes is split over the per_node members' NICs (member k of a node to member k of the next).
void channel_ring_flows(const Ring& r, double bytes, Phase& phase) {
  const auto& g = r.gpus;
  const size_t p = g.size();
  std::map<int, std::vector<int>> by_node;  // node -> members in group order
  for (int gpu : g) by_node[r.layout.site(gpu).node].push_back(gpu);
  for (size_t i = 0; i < p; ++i) {
    const int a = g[i], b = g[(i + 1) % p];
    if (r.path(a, b) == Path::NvLink) {
      phase.flows.push_back(r.flow(a, b, bytes));
      continue;
    }
    const auto& from = by_node[r.layout.site(a).node];
    const auto& to = by_node[r.layout.site(b).node];
    const size_t channels = std::min(from.size(), to.size());
    for (size_t k = 0; k < channels; ++k) phase.flows.push_back(r.flow(from[k], to[k], bytes / channels));
  }
}

void pairwise_flows(const Ring& r, const std::vector<int>& gpus, double bytes_each, Phase& phase) {
  for (int a : gpus)
    for (int b : gpus)
      if (a != b) phase.flows.push_back(r.flow(a, b, bytes_each));
}

void chain_flows(const Ring& r, const std::vector<int>& gpus, double bytes, Phase& phase) {
  for (size_t i = 0; i + 1 < gpus.size(); ++i) phase.flows.push_back(r.flow(gpus[i], gpus[i + 1], bytes));
}

// One level of a collective over `gpus` with `alg` (ring or tree), `steps_alpha` the latency.
Phase flat_phase(const Ring& r, const std::vector<int>& gpus, CollectiveKind kind, Algorithm alg, double n,
                 double alpha, int count, bool channels) {
  Phase ph;
  const double p = static_cast<double>(gpus.size());
  if (gpus.size() < 2) return ph;
  const double c = count;
  switch (kind) {
    case CollectiveKind::AllReduce:
      if (alg == Algorithm::Tree) {
        // NCCL's double binary tree: two trees, each member inner in one and a leaf in the other, so
        // every member's port sends (and receives) 2n. Kept as successor flows of 2n: the same load
        // on every port, the same for every member (which lane folding relies on).
        ph.latency_s = 2 * std::ceil(std::log2(p)) * alpha * c;
        n *= 2;
        break;
      }
      ph.latency_s = 2 * (p - 1) * alpha * c;
      n *= 2 * (p - 1) / p;
      break;
    case CollectiveKind::AllGather:
    case CollectiveKind::ReduceScatter:
      ph.latency_s = (p - 1) * alpha * c;
      n *= (p - 1) / p;
      break;
    case CollectiveKind::AllToAll:
      ph.latency_s = (p - 1) * alpha * c;
      pairwise_flows(r, gpus, n / p * c, ph);
      return ph;
    case CollectiveKind::Broadcast:
      ph.latency_s = (p - 1) * alpha * c;
      chain_flows(r, gpus, n * c, ph);
      return ph;
  }
  if (channels)
    channel_ring_flows(r, n * c, ph);
  else
    ring_flows(r, gpus, n * c, ph);
  return ph;
}

}  // namespace

std::vector<Phase> collective_phases(const Task& t, const std::vector<int>& member_gpus,
                                     const RankLayout& layout, const PoolSpec& pool,
                                     const ClusterSpec& cluster) {
  const cost::GroupPlacement& g = t.placement;
  if (member_gpus.size() < 2 || t.bytes.value() <= 0) return {};
  const IntraNodeSpec& fabric = pool.intra_node;
  const double busbw = fabric.allreduce_busbw.value_or(fabric.bandwidth).value();
  const Ring ring{member_gpus, layout, fabric.bandwidth.value() / busbw};
  const double n = t.bytes.value();
  const int c = t.count;
  const cost::CollectiveCost chosen = cost::collective_time(t.collective, t.bytes, g, pool, cluster);
  const double intra_alpha = fabric.latency.value();
  const double hop = (pool.nic.latency + cluster.network.switch_latency * 2).value();

  // A measured curve sets a one-node collective's rate at its size, latency included: its ring's
  // NVLink flows carry bandwidth / busbw(n) bytes per byte of algorithm volume.
  auto measured_ring = [&](CollectiveKind kind, double bytes) -> std::optional<Ring> {
    const auto busbw = cost::measured_busbw(kind, Bytes(bytes), fabric);
    if (!busbw) return std::nullopt;
    return Ring{member_gpus, layout, fabric.bandwidth.value() / busbw->value()};
  };
  if (g.size == g.per_node) {  // one node
    if (const auto measured = measured_ring(t.collective, n))
      return {flat_phase(*measured, member_gpus, t.collective, Algorithm::Ring, n, 0, c, false)};
    if (chosen.algorithm == Algorithm::Sharp) {
      // Each member sends its vector into the switch and receives the sum: one vector per link.
      Phase ph;
      ph.latency_s = 2 * intra_alpha * c;
      ring_flows(ring, member_gpus, n * c, ph);
      return {ph};
    }
    return {flat_phase(ring, member_gpus, t.collective, chosen.algorithm, n, intra_alpha, c, false)};
  }
  if (chosen.algorithm != Algorithm::Hierarchical)
    return {flat_phase(ring, member_gpus, t.collective, chosen.algorithm, n, hop, c, g.per_node > 1)};

  // Hierarchical: members grouped by node, and by their index on the node across nodes.
  std::map<int, std::vector<int>> by_node;
  for (int gpu : member_gpus) by_node[layout.site(gpu).node].push_back(gpu);
  const int per_node = static_cast<int>(by_node.begin()->second.size());
  std::vector<std::vector<int>> lanes(per_node);
  for (const auto& [node, gpus] : by_node)
    for (size_t k = 0; k < gpus.size() && k < lanes.size(); ++k) lanes[k].push_back(gpus[k]);
  auto merge = [](std::vector<Phase> parts) {
    Phase all;
    for (auto& p : parts) {
      all.latency_s = std::max(all.latency_s, p.latency_s);
      all.flows.insert(all.flows.end(), p.flows.begin(), p.flows.end());
    }
    return all;
  };
  auto intra = [&](CollectiveKind kind, double bytes) {
    const auto measured = measured_ring(kind, bytes);
    std::vector<Phase> parts;
    for (const auto& [node, gpus] : by_node)
      parts.push_back(flat_phase(measured ? *measured : ring, gpus, kind, Algorithm::Ring, bytes,
                                 measured ? 0 : intra_alpha, c, false));
    return merge(parts);
  };
  // Across nodes, ring or tree as the cost model's flat level would choose.
  const double nic =
      (pool.nic.achievable.value_or(pool.nic.bandwidth) * pool.nic.count / pool.gpus_per_node).value() /
      (g.crosses_pods ? cluster.network.oversubscription : 1.0);
  auto inter = [&](CollectiveKind kind, double bytes) {
    Algorithm alg = Algorithm::Ring;
    const int nodes = static_cast<int>(by_node.size());
    if (kind == CollectiveKind::AllReduce &&
        cost::tree_allreduce_time(Bytes(bytes), nodes, BytesPerSecond(nic), Seconds(hop)) <
            cost::ring_allreduce_time(Bytes(bytes), nodes, BytesPerSecond(nic), Seconds(hop)))
      alg = Algorithm::Tree;
    std::vector<Phase> parts;
    for (const auto& lane : lanes) parts.push_back(flat_phase(ring, lane, kind, alg, bytes, hop, c, false));
    return merge(parts);
  };
  const double shard = n / per_node;
  switch (t.collective) {
    case CollectiveKind::AllReduce:
      return {intra(CollectiveKind::ReduceScatter, n), inter(CollectiveKind::AllReduce, shard),
              intra(CollectiveKind::AllGather, n)};
    case CollectiveKind::AllGather:
      return {inter(CollectiveKind::AllGather, shard), intra(CollectiveKind::AllGather, n)};
    case CollectiveKind::ReduceScatter:
      return {intra(CollectiveKind::ReduceScatter, n), inter(CollectiveKind::ReduceScatter, shard)};
    case CollectiveKind::Broadcast:
      return {inter(CollectiveKind::Broadcast, n), intra(CollectiveKind::Broadcast, n)};
    case CollectiveKind::AllToAll:
      break;  // never hierarchical
  }
  return {};
}

Phase p2p_phase(double bytes, int src_gpu, int dst_gpu, const RankLayout& layout, const PoolSpec& pool,
                const ClusterSpec& cluster) {
  Phase ph;
  const bool same_node = layout.site(src_gpu).node == layout.site(dst_gpu).node;
  ph.latency_s = same_node ? pool.intra_node.latency.value()
                           : (pool.nic.latency + cluster.network.switch_latency * 2).value();
  if (bytes > 0) ph.flows.push_back({src_gpu, dst_gpu, bytes, same_node ? Path::NvLink : Path::Nic});
  return ph;
}

}  // namespace paratwin::sim
