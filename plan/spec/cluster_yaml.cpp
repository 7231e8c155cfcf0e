// A cluster written back as a cluster file, every quantity with its unit.
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "plan/spec/cluster.hpp"

namespace paratwin {
namespace {

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

struct Unit {
  double factor;
  const char* name;
};

// In the largest unit that leaves a number of at least 1 (the first one for smaller values).
std::string with_unit(double v, std::initializer_list<Unit> units) {
  Unit chosen = *units.begin();
  for (const Unit& u : units)
    if (std::fabs(v) >= u.factor) chosen = u;
  return number(v / chosen.factor) + chosen.name;
}

std::string q(FlopsPerSecond v) {
  return with_unit(
      v.value(),
      {{1, "flops"}, {1e3, "Kflops"}, {1e6, "Mflops"}, {1e9, "Gflops"}, {1e12, "Tflops"}, {1e15, "Pflops"}});
}
std::string q(BytesPerSecond v) {
  return with_unit(v.value(), {{1, "Bps"}, {1e3, "KBps"}, {1e6, "MBps"}, {1e9, "GBps"}, {1e12, "TBps"}});
}
std::string q(Seconds v) {
  return with_unit(v.value(), {{1e-9, "ns"}, {1e-6, "us"}, {1e-3, "ms"}, {1, "s"}});
}
std::string q(Bytes v) {
  // Binary units when they are exact (80GiB), decimal ones otherwise (512MB).
  const std::initializer_list<Unit> binary = {{1, "B"},
                                              {1024.0, "KiB"},
                                              {1024.0 * 1024, "MiB"},
                                              {1024.0 * 1024 * 1024, "GiB"},
                                              {1024.0 * 1024 * 1024 * 1024, "TiB"}};
  double largest = 1;
  for (const Unit& u : binary)
    if (v.value() >= u.factor) largest = u.factor;
  if (std::fmod(v.value(), largest) == 0) return with_unit(v.value(), binary);
  return with_unit(v.value(), {{1, "B"}, {1e3, "KB"}, {1e6, "MB"}, {1e9, "GB"}, {1e12, "TB"}});
}
std::string q(Watts v) {
  return with_unit(v.value(), {{1, "W"}, {1e3, "kW"}, {1e6, "MW"}});
}

// A fused attention kernel's rates as a flow mapping: the four figures, then by key length.
std::string fused_rates_text(const EfficiencySpec::FusedRates& r) {
  return "forward: " + number(r.forward) + ", backward: " + number(r.backward) +
         (r.forward_full ? ", forward_full: " + number(*r.forward_full) : "") +
         (r.backward_full ? ", backward_full: " + number(*r.backward_full) : "");
}

// A curve's figures and key lengths, without the braces.
std::string fused_curve_text(const EfficiencySpec::FusedCurve& f) {
  std::string s = fused_rates_text(f);
  if (f.seq_len > 0) s += ", seq_len: " + std::to_string(f.seq_len);
  if (!f.by_seq_len.empty()) {
    s += ", by_seq_len: {";
    for (const auto& [length, rates] : f.by_seq_len)
      s += (length == f.by_seq_len.begin()->first ? "" : ", ") + std::to_string(length) + ": {" +
           fused_rates_text(rates) + "}";
    s += "}";
  }
  return s;
}

std::string fused_attention_text(const EfficiencySpec::FusedAttention& f) {
  std::string s = "{" + fused_curve_text(f);
  if (f.head_dim > 0) s += ", head_dim: " + std::to_string(f.head_dim);
  if (!f.by_head_dim.empty()) {
    s += ", by_head_dim: {";
    for (const auto& [head, curve] : f.by_head_dim)
      s += (head == f.by_head_dim.begin()->first ? "" : ", ") + std::to_string(head) + ": {" +
           fused_curve_text(curve) + "}";
    s += "}";
  }
  return s + "}";
}

// Writes `key: value`, with the comment kept for `path` when there is one.
class Writer {
 public:
  explicit Writer(const std::map<std::string, std::string>& comments) : comments_(comments) {}
  void line(int indent, const std::string& key, const std::string& value, const std::string& path) {
    std::string l = std::string(indent, ' ') + key + ":" + (value.empty() ? "" : " " + value);
    if (auto it = comments_.find(path); it != comments_.end()) {
      if (l.size() < 36) l.resize(36, ' ');
      l += "  # " + it->second;
    }
    text += l + "\n";
  }
  std::string text;

 private:
  const std::map<std::string, std::string>& comments_;
};

}  // namespace

std::string to_yaml(const ClusterSpec& c, const std::map<std::string, std::string>& comments) {
  Writer w(comments);
  const auto b = [](bool v) { return v ? "true" : "false"; };
  w.line(0, "name", nlohmann::json(c.name).dump(), "name");
  if (!c.description.empty()) w.line(0, "description", nlohmann::json(c.description).dump(), "description");
  w.line(0, "devices", "", "devices");
  for (const auto& [name, d] : c.devices) {
    const std::string dp = "devices." + name;
    w.line(2, name, "", dp);
    w.line(4, "peak", "", dp + ".peak");
    for (const auto& [precision, rate] : d.peak)
      w.line(6, enum_name(precision, kPrecisionNames), q(rate),
             dp + ".peak." + enum_name(precision, kPrecisionNames));
    w.line(4, "memory", q(d.memory), dp + ".memory");
    w.line(4, "memory_bandwidth", q(d.memory_bandwidth), dp + ".memory_bandwidth");
    if (d.power.value() > 0) w.line(4, "power", q(d.power), dp + ".power");
    if (d.sms > 0) w.line(4, "sms", std::to_string(d.sms), dp + ".sms");
    if (d.speed_cv > 0) w.line(4, "speed_cv", number(d.speed_cv), dp + ".speed_cv");
    const EfficiencySpec& e = d.efficiency;
    w.line(4, "efficiency", "", dp + ".efficiency");
    w.line(6, "gemm", number(e.gemm), dp + ".efficiency.gemm");
    if (e.gemm_fp8) w.line(6, "gemm_fp8", number(*e.gemm_fp8), dp + ".efficiency.gemm_fp8");
    if (e.gemm_tile_k_steps > 0)
      w.line(6, "gemm_tile_k_steps", number(e.gemm_tile_k_steps), dp + ".efficiency.gemm_tile_k_steps");
    if (e.attention) w.line(6, "attention", number(*e.attention), dp + ".efficiency.attention");
    for (auto [key, rates] : {std::pair{"flash2", &e.flash2}, {"flash3", &e.flash3}, {"triton", &e.triton}})
      if (*rates) w.line(6, key, fused_attention_text(**rates), dp + ".efficiency." + key);
    w.line(6, "memory", number(e.memory), dp + ".efficiency.memory");
    if (e.optimizer) w.line(6, "optimizer", number(*e.optimizer), dp + ".efficiency.optimizer");
    for (const auto& [key, kind] : kMemoryShares)
      if (e.*kind) w.line(6, key, number(*(e.*kind)), dp + ".efficiency." + key);
    w.line(6, "kernel_launch", q(e.kernel_launch), dp + ".efficiency.kernel_launch");
    w.line(6, "synchronous_launch", q(e.synchronous_launch), dp + ".efficiency.synchronous_launch");
  }
  w.line(0, "pools", "", "pools");
  bool several_nodes = false;
  for (const PoolSpec& p : c.pools) {
    const std::string pp = "pools." + p.name;
    several_nodes |= p.nodes > 1 || c.pools.size() > 1;
    w.line(2, p.name, "", pp);
    w.line(4, "device", p.device, pp + ".device");
    w.line(4, "nodes", std::to_string(p.nodes), pp + ".nodes");
    w.line(4, "gpus_per_node", std::to_string(p.gpus_per_node), pp + ".gpus_per_node");
    const IntraNodeSpec& f = p.intra_node;
    w.line(4, "intra_node", "", pp + ".intra_node");
    w.line(6, "kind", enum_name(f.kind, kFabricKindNames), pp + ".intra_node.kind");
    w.line(6, "bandwidth", q(f.bandwidth), pp + ".intra_node.bandwidth");
    w.line(6, "latency", q(f.latency), pp + ".intra_node.latency");
    if (f.allreduce_busbw)
      w.line(6, "allreduce_busbw", q(*f.allreduce_busbw), pp + ".intra_node.allreduce_busbw");
    if (f.sharp) w.line(6, "sharp", b(f.sharp), pp + ".intra_node.sharp");
    if (f.all_reduce_curve || f.all_gather_curve || f.reduce_scatter_curve) {
      w.line(6, "busbw", "", pp + ".intra_node.busbw");
      for (auto [key, curve] : {std::pair{"all_reduce", &f.all_reduce_curve},
                                {"all_gather", &f.all_gather_curve},
                                {"reduce_scatter", &f.reduce_scatter_curve}}) {
        if (!*curve) continue;
        std::string flow;
        for (const auto& [size, busbw] : (*curve)->points)
          flow += (flow.empty() ? "" : ", ") + q(size) + ": " + q(busbw);
        w.line(8, key, "{" + flow + "}", pp + ".intra_node.busbw." + key);
      }
    }
    if (p.nic.bandwidth.value() > 0) {
      w.line(4, "nic", "", pp + ".nic");
      w.line(6, "kind", enum_name(p.nic.kind, kNicKindNames), pp + ".nic.kind");
      w.line(6, "count", std::to_string(p.nic.count), pp + ".nic.count");
      w.line(6, "bandwidth", q(p.nic.bandwidth), pp + ".nic.bandwidth");
      if (p.nic.achievable) w.line(6, "achievable", q(*p.nic.achievable), pp + ".nic.achievable");
      w.line(6, "latency", q(p.nic.latency), pp + ".nic.latency");
    }
    w.line(4, "pcie_bandwidth", q(p.pcie_bandwidth), pp + ".pcie_bandwidth");
    w.line(4, "host_memory", q(p.host_memory), pp + ".host_memory");
    if (p.comm_sms > 0) w.line(4, "comm_sms", std::to_string(p.comm_sms), pp + ".comm_sms");
    if (p.comm_sms_in_node > 0)
      w.line(4, "comm_sms_in_node", std::to_string(p.comm_sms_in_node), pp + ".comm_sms_in_node");
    if (p.price_per_gpu_hour)
      w.line(4, "price_per_gpu_hour", "$" + number(p.price_per_gpu_hour->value()),
             pp + ".price_per_gpu_hour");
    if (p.node_power.value() > 0) w.line(4, "node_power", q(p.node_power), pp + ".node_power");
  }
  if (several_nodes) {
    const NetworkSpec& n = c.network;
    w.line(0, "network", "", "network");
    w.line(2, "topology", enum_name(n.topology, kNetworkTopologyNames), "network.topology");
    w.line(2, "oversubscription", number(n.oversubscription), "network.oversubscription");
    if (n.pod_gpus) w.line(2, "pod_gpus", std::to_string(*n.pod_gpus), "network.pod_gpus");
    if (n.gpus_per_leaf > 0)
      w.line(2, "gpus_per_leaf", std::to_string(n.gpus_per_leaf), "network.gpus_per_leaf");
    w.line(2, "switch_latency", q(n.switch_latency), "network.switch_latency");
  }
  if (c.storage_bandwidth.value() > 0) {
    w.line(0, "storage", "", "storage");
    w.line(2, "bandwidth", q(c.storage_bandwidth), "storage.bandwidth");
  }
  if (c.pue != 1.0) w.line(0, "pue", number(c.pue), "pue");
  return w.text;
}

}  // namespace paratwin
