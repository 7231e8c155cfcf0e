// Cluster file parsing.
#include "plan/spec/cluster.hpp"

#include <utility>

#include <algorithm>
#include <charconv>
#include <cmath>

namespace paratwin {

const EnumNames<Precision> kPrecisionNames = {{"fp32", Precision::Fp32},
                                              {"tf32", Precision::Tf32},
                                              {"fp16", Precision::Fp16},
                                              {"bf16", Precision::Bf16},
                                              {"fp8", Precision::Fp8}};
const EnumNames<FabricKind> kFabricKindNames = {{"nvswitch", FabricKind::NvSwitch},
                                                {"nvlink", FabricKind::NvLink},
                                                {"pcie", FabricKind::Pcie},
                                                {"infinity_fabric", FabricKind::InfinityFabric},
                                                {"shared_memory", FabricKind::SharedMemory}};
const EnumNames<NicKind> kNicKindNames = {
    {"infiniband", NicKind::InfiniBand}, {"roce", NicKind::RoCE}, {"ethernet", NicKind::Ethernet}};
const EnumNames<NetworkTopology> kNetworkTopologyNames = {{"star", NetworkTopology::Star},
                                                          {"fat_tree", NetworkTopology::FatTree},
                                                          {"rail_optimized", NetworkTopology::RailOptimized}};

const PoolSpec& ClusterSpec::pool_named(const std::string& name) const {
  for (const PoolSpec& p : pools)
    if (p.name == name) return p;
  throw std::logic_error("no pool " + name);
}

PoolSpec& ClusterSpec::pool_named(const std::string& name) {
  return const_cast<PoolSpec&>(std::as_const(*this).pool_named(name));
}

int ClusterSpec::gpus() const {
  int n = 0;
  for (const auto& p : pools) n += p.gpus();
  return n;
}

FlopsPerSecond ClusterSpec::peak(Precision precision) const {
  FlopsPerSecond total;
  for (const auto& p : pools) {
    const auto& peaks = device_of(p).peak;
    if (auto it = peaks.find(precision); it != peaks.end()) total += it->second * p.gpus();
  }
  return total;
}

BytesPerSecond BusbwCurve::at(Bytes size) const {
  if (points.empty()) return BytesPerSecond(0);
  const auto& first = points.front();
  // Below the smallest size measured the collective is latency-bound: its time stays that size's.
  if (size <= first.first) return first.second * (size / first.first);
  for (size_t i = 1; i < points.size(); ++i) {
    const auto& [s1, b1] = points[i];
    if (size > s1) continue;
    const auto& [s0, b0] = points[i - 1];
    const double x = std::log(size / s0) / std::log(s1 / s0);
    return BytesPerSecond(std::exp(std::log(b0.value()) + x * std::log(b1 / b0)));
  }
  return points.back().second;
}

Bytes ClusterSpec::device_memory() const {
  Bytes total;
  for (const auto& p : pools) total += device_of(p).memory * p.gpus();
  return total;
}

namespace {

// A busbw curve written as a mapping of message size to bus bandwidth: {1MiB: 36GBps, 1GiB: 228GBps}.
std::optional<BusbwCurve> read_curve(MapReader& parent, std::string_view key) {
  const DocNode* node = parent.get(key);
  if (!node) return std::nullopt;
  Diagnostics& diag = parent.diagnostics();
  const std::string field = parent.field(key);
  if (!node->is_mapping() || node->entries.size() < 2) {
    diag.error(node->location, field +
                                   " should map at least two message sizes to bus bandwidths, e.g. "
                                   "{1MiB: 36GBps, 1GiB: 228GBps}; got " +
                                   describe(*node));
    return std::nullopt;
  }
  BusbwCurve curve;
  for (const DocEntry& e : node->entries) {
    const auto size = read_quantity(DocNode::scalar_node(e.key, e.key_location), field + " size",
                                    Dimension::DataSize, diag);
    const auto busbw = read_quantity(e.value.front(), field + "." + e.key, Dimension::Bandwidth, diag);
    if (size && busbw) curve.points.push_back({Bytes(*size), BytesPerSecond(*busbw)});
  }
  if (curve.points.size() != node->entries.size()) return std::nullopt;
  if (!std::is_sorted(curve.points.begin(), curve.points.end(),
                      [](const auto& a, const auto& b) { return a.first <= b.first; })) {
    diag.error(node->location, field + " should list its message sizes in increasing order");
    return std::nullopt;
  }
  return curve;
}

// "7:1" or "7" as 7; nullopt unless both sides are positive numbers.
std::optional<double> parse_ratio(const DocNode& node) {
  if (!node.is_scalar() || (node.quoted && node.scalar.find(':') == std::string::npos)) return std::nullopt;
  auto number = [](std::string_view s) -> std::optional<double> {
    double v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || ptr != s.data() + s.size() || !(v > 0) || v > 1e6) return std::nullopt;
    return v;
  };
  const std::string& s = node.scalar;
  const size_t colon = s.find(':');
  if (colon == std::string::npos) return number(s);
  auto a = number(std::string_view(s).substr(0, colon)), b = number(std::string_view(s).substr(colon + 1));
  if (!a || !b) return std::nullopt;
  return *a / *b;
}

// A fused attention kernel's four rates; false when a required one is missing or out of range.
bool read_fused_rates(MapReader& r, EfficiencySpec::FusedRates& f) {
  double full = 0;
  if (r.read("forward_full", full, 0.001, 1.0)) f.forward_full = full;
  if (r.read("backward_full", full, 0.001, 1.0)) f.backward_full = full;
  const bool forward = r.read("forward", f.forward, 0.001, 1.0, true);
  return r.read("backward", f.backward, 0.001, 1.0, true) && forward;
}

// One curve of a fused attention kernel: the rates at seq_len and, optionally, by key length. False
// when something is missing or out of range (reported).
bool read_fused_curve(MapReader& r, EfficiencySpec::FusedCurve& f, Diagnostics& diag,
                      FieldLocations* locations) {
  bool valid = read_fused_rates(r, f);
  const bool has_length = r.read("seq_len", f.seq_len, 16, 1 << 24);
  if (const DocNode* table = r.get("by_seq_len")) {
    if (!table->is_mapping() || table->entries.empty()) {
      diag.error(table->location, r.field("by_seq_len") +
                                      ": expected a mapping from key lengths to rates, e.g. "
                                      "{2048: {forward: 0.25, backward: 0.26}}, found " +
                                      describe(*table));
      valid = false;
    } else if (!has_length) {
      diag.error(table->location, r.field("by_seq_len") +
                                      " needs seq_len: the key length the figures beside it were "
                                      "measured at");
      valid = false;
    }
    for (const DocEntry& e : table->entries) {
      const std::string where = r.field("by_seq_len") + "." + e.key;
      const auto length = read_int(DocNode::scalar_node(e.key, e.key_location), where, diag, 16, 1 << 24);
      MapReader lr(e.value.front(), where, diag, locations);
      EfficiencySpec::FusedRates rates;
      const bool read = read_fused_rates(lr, rates);
      lr.finish();
      if (!length || !read) {
        valid = false;
      } else if (*length == f.seq_len) {
        diag.error(e.key_location,
                   where + " repeats seq_len " + e.key + ": the figures beside by_seq_len are that length's");
        valid = false;
      } else {
        f.by_seq_len[int(*length)] = rates;
      }
    }
  }
  return valid;
}

// efficiency.flash2 / flash3 / triton: a curve for heads of head_dim and, optionally, by head size.
std::optional<EfficiencySpec::FusedAttention> read_fused_attention(const DocNode& node,
                                                                   const std::string& path, Diagnostics& diag,
                                                                   FieldLocations* locations) {
  MapReader r(node, path, diag, locations);
  EfficiencySpec::FusedAttention f;
  bool valid = read_fused_curve(r, f, diag, locations);
  const bool has_head = r.read("head_dim", f.head_dim, 8, 1024);
  if (const DocNode* table = r.get("by_head_dim")) {
    if (!table->is_mapping() || table->entries.empty()) {
      diag.error(table->location, r.field("by_head_dim") +
                                      ": expected a mapping from head sizes to curves, e.g. "
                                      "{64: {forward: 0.25, backward: 0.26, seq_len: 8192}}, found " +
                                      describe(*table));
      valid = false;
    } else if (!has_head) {
      diag.error(
          table->location,
          r.field("by_head_dim") + " needs head_dim: the head size the figures beside it were measured at");
      valid = false;
    }
    for (const DocEntry& e : table->entries) {
      const std::string where = r.field("by_head_dim") + "." + e.key;
      const auto head = read_int(DocNode::scalar_node(e.key, e.key_location), where, diag, 8, 1024);
      MapReader hr(e.value.front(), where, diag, locations);
      EfficiencySpec::FusedCurve curve;
      const bool read = read_fused_curve(hr, curve, diag, locations);
      hr.finish();
      if (!head || !read) {
        valid = false;
      } else if (*head == f.head_dim) {
        diag.error(e.key_location,
                   where + " repeats head_dim " + e.key + ": the figures beside by_head_dim are that size's");
        valid = false;
      } else {
        f.by_head_dim[int(*head)] = curve;
      }
    }
  }
  r.finish();
  if (!valid) return std::nullopt;
  return f;
}

DeviceSpec parse_device(const std::string& name, const DocNode& node, const std::string& path,
                        Diagnostics& diag, FieldLocations* locations) {
  DeviceSpec d;
  d.name = name;
  MapReader r(node, path, diag, locations);
  if (const DocNode* peak = r.require("peak")) {
    MapReader pr(*peak, r.field("peak"), diag, locations);
    for (const auto& [pname, precision] : kPrecisionNames) {
      FlopsPerSecond rate;
      if (pr.read_quantity(pname, rate)) d.peak[precision] = rate;
    }
    pr.finish();
    if (peak->is_mapping() && peak->entries.empty())
      diag.error(peak->location, r.field("peak") +
                                     " lists no precision; expected at least one of fp32, tf32, "
                                     "fp16, bf16, fp8");
  }
  r.read_quantity("memory", d.memory, true);
  r.read_quantity("memory_bandwidth", d.memory_bandwidth, true);
  r.read_quantity("power", d.power);
  r.read("sms", d.sms, 1, 1 << 16);
  r.read("speed_cv", d.speed_cv, 0.0, kMostSpeedCv);
  if (const DocNode* eff = r.get("efficiency")) {
    MapReader er(*eff, r.field("efficiency"), diag, locations);
    er.read("gemm", d.efficiency.gemm, 0.01, 1.0);
    double share = 0;
    if (er.read("gemm_fp8", share, 0.01, 1.0)) d.efficiency.gemm_fp8 = share;
    er.read("gemm_tile_k_steps", d.efficiency.gemm_tile_k_steps, 0.0, 64.0);
    if (er.read("attention", share, 0.001, 1.0)) d.efficiency.attention = share;
    for (auto [key, rates] : {std::pair{"flash2", &d.efficiency.flash2},
                              {"flash3", &d.efficiency.flash3},
                              {"triton", &d.efficiency.triton}})
      if (const DocNode* k = er.get(key)) *rates = read_fused_attention(*k, er.field(key), diag, locations);
    er.read("memory", d.efficiency.memory, 0.01, 1.0);
    if (er.read("optimizer", share, 0.001, 1.0)) d.efficiency.optimizer = share;
    for (const auto& [key, kind] : kMemoryShares)
      if (er.read(key, share, 0.01, 1.0)) d.efficiency.*kind = share;
    er.read_quantity("kernel_launch", d.efficiency.kernel_launch, false, true);
    er.read_quantity("synchronous_launch", d.efficiency.synchronous_launch, false, true);
    er.finish();
  }
  r.finish();
  return d;
}

PoolSpec parse_pool(const std::string& name, const DocNode& node, const std::string& path,
                    const std::map<std::string, DeviceSpec>& devices, Diagnostics& diag,
                    FieldLocations* locations) {
  PoolSpec p;
  p.name = name;
  MapReader r(node, path, diag, locations);
  if (const DocNode* dev = r.require("device")) {
    std::vector<std::string> names;
    for (const auto& [n, d] : devices) names.push_back(n);
    if (auto chosen = read_choice(*dev, r.field("device"), names, diag)) p.device = *chosen;
  }
  r.read("nodes", p.nodes, 1, 1 << 20, true);
  r.read("gpus_per_node", p.gpus_per_node, 1, 1024, true);
  if (const DocNode* fabric = r.require("intra_node")) {
    MapReader fr(*fabric, r.field("intra_node"), diag, locations);
    fr.read_enum("kind", p.intra_node.kind, kFabricKindNames, true);
    fr.read_quantity("bandwidth", p.intra_node.bandwidth, true);
    fr.read_quantity("latency", p.intra_node.latency, false, true);
    fr.read_quantity("allreduce_busbw", p.intra_node.allreduce_busbw);
    fr.read("sharp", p.intra_node.sharp);
    if (const DocNode* curves = fr.get("busbw")) {
      MapReader cr(*curves, fr.field("busbw"), diag, locations);
      p.intra_node.all_reduce_curve = read_curve(cr, "all_reduce");
      p.intra_node.all_gather_curve = read_curve(cr, "all_gather");
      p.intra_node.reduce_scatter_curve = read_curve(cr, "reduce_scatter");
      cr.finish();
    }
    fr.finish();
  }
  if (const DocNode* nic = r.get("nic")) {
    MapReader nr(*nic, r.field("nic"), diag, locations);
    nr.read_enum("kind", p.nic.kind, kNicKindNames, true);
    nr.read("count", p.nic.count, 1, 64);
    nr.read_quantity("bandwidth", p.nic.bandwidth, true);
    nr.read_quantity("achievable", p.nic.achievable);
    nr.read_quantity("latency", p.nic.latency, false, true);
    nr.finish();
    if (p.nic.achievable && p.nic.bandwidth.value() > 0 && *p.nic.achievable > p.nic.bandwidth)
      diag.error(nic->find("achievable")->location,
                 nr.field("achievable") + " (" + to_string(*p.nic.achievable) + ") exceeds the line rate " +
                     nr.field("bandwidth") + " (" + to_string(p.nic.bandwidth) + ")");
  } else if (p.nodes > 1) {
    diag.error(node.location, r.field("nic") + " is required for a pool of more than one node");
  }
  r.read_quantity("pcie_bandwidth", p.pcie_bandwidth, true);
  r.read_quantity("host_memory", p.host_memory, true);
  r.read("comm_sms", p.comm_sms, 0, 1 << 16);
  r.read("comm_sms_in_node", p.comm_sms_in_node, 0, 1 << 16);
  r.read_quantity("price_per_gpu_hour", p.price_per_gpu_hour, true);
  r.read_quantity("node_power", p.node_power, false, true);
  r.finish();
  return p;
}

}  // namespace

ClusterSpec parse_cluster(const DocNode& node, const std::string& path, Diagnostics& diag,
                          FieldLocations* locations) {
  ClusterSpec c;
  MapReader r(node, path, diag, locations);
  if (!r.is_mapping()) return c;
  r.read("name", c.name);
  r.read("description", c.description);
  r.get("source");
  if (const DocNode* devices = r.require("devices")) {
    MapReader dr(*devices, r.field("devices"), diag, locations);
    for (const auto& e : devices->entries) {
      dr.get(e.key);
      c.devices[e.key] = parse_device(e.key, e.value.front(), dr.field(e.key), diag, locations);
    }
    if (devices->is_mapping() && devices->entries.empty())
      diag.error(devices->location, r.field("devices") + " is empty; expected at least one device type");
  }
  if (const DocNode* pools = r.require("pools")) {
    MapReader pr(*pools, r.field("pools"), diag, locations);
    for (const auto& e : pools->entries) {
      pr.get(e.key);
      c.pools.push_back(parse_pool(e.key, e.value.front(), pr.field(e.key), c.devices, diag, locations));
    }
    if (pools->is_mapping() && pools->entries.empty())
      diag.error(pools->location, r.field("pools") + " is empty; expected at least one node pool");
  }
  if (const DocNode* net = r.get("network")) {
    MapReader nr(*net, r.field("network"), diag, locations);
    nr.read_enum("topology", c.network.topology, kNetworkTopologyNames, true);
    if (const DocNode* over = nr.get("oversubscription")) {
      if (auto ratio = parse_ratio(*over)) {
        c.network.oversubscription = *ratio;
        if (*ratio < 1)
          diag.error(over->location, nr.field("oversubscription") +
                                         " must be at least 1 (1:1 is full bisection), got " + over->scalar);
      } else {
        diag.error(over->location,
                   nr.field("oversubscription") +
                       ": expected a number such as 2 or a ratio of positive numbers such as 2:1, "
                       "got " +
                       (over->is_scalar() ? "'" + over->scalar + "'" : describe(*over)));
      }
    }
    int pod = 0;
    if (nr.read("pod_gpus", pod, 1, 1 << 24)) c.network.pod_gpus = pod;
    nr.read("gpus_per_leaf", c.network.gpus_per_leaf, 1, 1 << 20);
    nr.read_quantity("switch_latency", c.network.switch_latency, false, true);
    nr.finish();
  }
  if (const DocNode* storage = r.get("storage")) {
    MapReader sr(*storage, r.field("storage"), diag, locations);
    sr.read_quantity("bandwidth", c.storage_bandwidth, true);
    sr.finish();
  }
  r.read("pue", c.pue, 1.0, 5.0);

  // `nodes` or `gpus` at the top resizes a one-pool cluster (`--set cluster.nodes=128`, a sweep over
  // `cluster.gpus`); when both are written, the later one wins, as later overrides do.
  r.get("nodes"), r.get("gpus");  // known keys, for the suggestions of finish()
  for (const DocEntry& e : node.entries) {
    if (e.key != "nodes" && e.key != "gpus") continue;
    const DocNode& size = e.value.front();
    auto n = read_int(size, r.field(e.key), diag, 1, e.key == "nodes" ? 1 << 20 : kMaxClusterGpus);
    if (!n || c.pools.empty()) continue;
    if (c.pools.size() > 1) {
      std::vector<std::string> names;
      for (const auto& p : c.pools) names.push_back(p.name);
      diag.error(size.location, r.field(e.key) + " resizes a cluster of one node pool, but this one has " +
                                    std::to_string(c.pools.size()) + " (" + join(names) + "); set " +
                                    r.field("pools") + "." + names.front() + ".nodes instead");
      continue;
    }
    PoolSpec& pool = c.pools.front();
    if (e.key == "nodes") {
      pool.nodes = static_cast<int>(*n);
    } else if (*n % pool.gpus_per_node == 0) {
      pool.nodes = static_cast<int>(*n / pool.gpus_per_node);
    } else {
      const long long per_node = pool.gpus_per_node, below = *n / per_node * per_node;
      const long long nearest = below == 0 || *n - below > below + per_node - *n ? below + per_node : below;
      diag.error(size.location, r.field("gpus") + "=" + std::to_string(*n) + " is not a whole number of " +
                                    std::to_string(per_node) + "-GPU nodes (pool '" + pool.name +
                                    "'); the nearest " + r.field("gpus") + " that works is " +
                                    std::to_string(nearest));
    }
  }
  r.finish();
  long long nodes_total = 0, gpus_total = 0;
  for (const auto& p : c.pools) {
    nodes_total += p.nodes;
    gpus_total += static_cast<long long>(p.nodes) * p.gpus_per_node;
  }
  if (gpus_total > kMaxClusterGpus) {
    diag.error(node.location, "the cluster has " + std::to_string(gpus_total) +
                                  " GPUs; ParaTwin models up to " + std::to_string(kMaxClusterGpus));
    c.pools.clear();  // keep gpus() within int for whoever looks at the partial result
  }
  if (nodes_total > 1 && !node.find("network"))
    diag.error(node.location, "missing required key 'network'" +
                                  (path.empty() ? std::string() : " in " + path) +
                                  ": a cluster of more than one node needs the fabric between nodes");
  return c;
}

}  // namespace paratwin
