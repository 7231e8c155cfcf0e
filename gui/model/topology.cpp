// Topology layout. Link names and the GPU -> NIC -> fabric domain mapping are the simulator's
// (plan/topology/), so a simulation's link usage lands on the links drawn.
#include "gui/model/topology.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "plan/topology/cluster_sites.hpp"
#include "plan/topology/job_placement.hpp"
#include "plan/topology/link_names.hpp"

namespace paratwin::gui {
namespace {

QString qs(const std::string& s) {
  return QString::fromStdString(s);
}

constexpr double kGpuW = 34, kGpuH = 26, kGap = 8, kPad = 12, kTitle = 22, kNodeGap = 28;

QString bandwidth(const BytesPerSecond& b) {
  return qs(to_string(b));
}

// Which fabric switch a NIC hangs on, and how the switch is called.
struct SwitchKey {
  int index = 0;
  QString label;
};

}  // namespace

Topology build_topology(const ClusterSpec& cluster, int nodes_per_pool) {
  Topology t;
  const NetworkSpec& net = cluster.network;
  int total_nodes = 0;
  for (const PoolSpec& pool : cluster.pools) total_nodes += pool.nodes;
  t.total_nodes = total_nodes;
  const bool fabric = total_nodes > 1;
  const ClusterSites sites(cluster);
  const bool oversubscribed = sites.oversubscribed(cluster);

  QStringList pools;
  for (const PoolSpec& pool : cluster.pools)
    pools << QString("%1 x %2 %3 (%4 %5)")
                     .arg(pool.nodes)
                     .arg(pool.gpus_per_node)
                     .arg(qs(pool.device))
                     .arg(qs(enum_name(pool.intra_node.kind, kFabricKindNames)))
                     .arg(bandwidth(pool.intra_node.bandwidth)) +
                 (fabric ? QString(", %1 x %2 %3 per node")
                               .arg(pool.nic.count)
                               .arg(qs(enum_name(pool.nic.kind, kNicKindNames)))
                               .arg(bandwidth(pool.nic.bandwidth))
                         : QString());
  t.caption = qs(cluster.name) + ": " + pools.join("; ");
  if (fabric)
    t.caption += QString("; %1, %2:1 oversubscription")
                     .arg(qs(enum_name(net.topology, kNetworkTopologyNames)))
                     .arg(net.oversubscription);

  auto add = [&t](TopologyBox::Kind kind, QRectF rect, QString label, QString tip = {}) {
    t.boxes.push_back({kind, rect, std::move(label), std::move(tip)});
    return int(t.boxes.size()) - 1;
  };
  struct NicAt {
    int box;
    int index;      // over the cluster, as the simulator counts NICs
    int first_gpu;  // -1 for a NIC no GPU uses
    int local;      // on its node
  };
  std::vector<NicAt> nics;
  std::vector<int> more_boxes;
  double x = 0, node_height = 0;
  int nic_base = 0, node_base = 0;
  for (const PoolSpec& pool : cluster.pools) {
    const int per_node = std::max(pool.gpus_per_node, fabric ? pool.nic.count : 0);
    const double inner = per_node * (kGpuW + kGap) - kGap;
    const double width = std::max(inner + 2 * kPad, 170.0);
    const double gpu_slot = (width - 2 * kPad) / pool.gpus_per_node;
    const double nic_slot = fabric ? (width - 2 * kPad) / pool.nic.count : 0;
    const int drawn = std::min(pool.nodes, nodes_per_pool);
    const DeviceSpec& device = cluster.device_of(pool);
    for (int n = 0; n < drawn; ++n) {
      const int node = node_base + n;
      const double y_gpu = kTitle + 4, y_fabric = y_gpu + kGpuH + 20, y_nic = y_fabric + 14 + 22;
      node_height = fabric ? y_nic + 22 + kPad : y_fabric + 14 + kPad;
      add(TopologyBox::Kind::Node, QRectF(x, 0, width, node_height),
          QString("node %1 · %2").arg(node).arg(qs(pool.name)),
          QString("%1 GPUs %2, %3 host memory")
              .arg(pool.gpus_per_node)
              .arg(qs(device.name))
              .arg(qs(to_string(pool.host_memory))));
      const int switch_box = add(TopologyBox::Kind::Fabric, QRectF(x + kPad, y_fabric, width - 2 * kPad, 14),
                                 qs(enum_name(pool.intra_node.kind, kFabricKindNames)),
                                 QString("%1, %2 per GPU and direction")
                                     .arg(qs(enum_name(pool.intra_node.kind, kFabricKindNames)))
                                     .arg(bandwidth(pool.intra_node.bandwidth)));
      for (int g = 0; g < pool.gpus_per_node; ++g) {
        const double cx = x + kPad + gpu_slot * (g + 0.5);
        const int gpu =
            add(TopologyBox::Kind::Gpu, QRectF(cx - kGpuW / 2, y_gpu, kGpuW, kGpuH), QString::number(g),
                QString("GPU %1 of node %2: %3, %4")
                    .arg(g)
                    .arg(node)
                    .arg(qs(device.name))
                    .arg(qs(to_string(device.memory))));
        const QString name = qs(gpu_link_name(node, g));
        t.links.push_back({gpu, switch_box, name,
                           QString("%1: %2").arg(name).arg(bandwidth(pool.intra_node.bandwidth)),
                           std::nullopt});
      }
      if (fabric)
        for (int k = 0; k < pool.nic.count; ++k) {
          const double cx = x + kPad + nic_slot * (k + 0.5);
          const int index = nic_base + n * pool.nic.count + k;
          const BytesPerSecond bw = pool.nic.achievable.value_or(pool.nic.bandwidth);
          const int box = add(TopologyBox::Kind::Nic, QRectF(cx - kGpuW / 2, y_nic, kGpuW, 22), "nic",
                              QString("NIC %1: %2 %3 (achievable %4)")
                                  .arg(index)
                                  .arg(qs(enum_name(pool.nic.kind, kNicKindNames)))
                                  .arg(bandwidth(pool.nic.bandwidth))
                                  .arg(bandwidth(bw)));
          nics.push_back({box, index, sites.first_gpu_of_nic(index), k});
        }
      x += width + kNodeGap;
    }
    if (pool.nodes > drawn) {
      const int hidden = pool.nodes - drawn;
      more_boxes.push_back(
          add(TopologyBox::Kind::More, QRectF(x, node_height / 2 - 30, 150, 60),
              QString("+ %1 more nodes\n(%2 GPUs)").arg(hidden).arg(hidden * pool.gpus_per_node),
              QString("%1 more nodes of pool %2, drawn as one").arg(hidden).arg(qs(pool.name))));
      x += 150 + kNodeGap;
    }
    t.drawn_nodes += drawn;
    nic_base += pool.nodes * pool.nic.count;
    node_base += pool.nodes;
  }
  const double width = std::max(0.0, x - kNodeGap);
  double height = node_height;

  if (fabric) {
    // The switch a NIC hangs on: its fabric domain where the level above is oversubscribed (as the
    // simulator groups NICs), else its rail or leaf.
    const PoolSpec& first = cluster.pools.front();
    auto switch_of = [&](const NicAt& nic) -> SwitchKey {
      if (net.topology == NetworkTopology::Star) return {0, "switch"};
      if (net.topology == NetworkTopology::RailOptimized)
        return {nic.local, QString("rail %1").arg(nic.local)};
      if (oversubscribed && nic.first_gpu >= 0) {  // the simulator's domain, whose uplink it watches
        const int domain = sites.fabric_domain(cluster, nic.index);
        return {domain, QString(net.pod_gpus ? "pod %1" : "leaf %1").arg(domain)};
      }
      const int leaf = net.gpus_per_leaf ? net.gpus_per_leaf : first.gpus_per_node;
      return {nic.first_gpu / leaf, QString("leaf %1").arg(nic.first_gpu / leaf)};
    };
    std::map<int, QString> switches;
    for (const NicAt& nic : nics) switches.emplace(switch_of(nic).index, switch_of(nic).label);
    const double y_switch = node_height + 90, sw_w = 96, sw_h = 26;
    std::map<int, int> switch_box;
    int i = 0;
    for (const auto& [index, label] : switches) {
      const double cx = width * (i + 0.5) / switches.size();
      switch_box[index] = add(
          TopologyBox::Kind::Switch, QRectF(cx - sw_w / 2, y_switch, sw_w, sw_h), label,
          label + (oversubscribed ? QString(" (its uplink is %1:1 oversubscribed)").arg(net.oversubscription)
                                  : QString()));
      ++i;
    }
    for (const NicAt& nic : nics) {
      const QString name = qs(nic_link_name(nic.index));
      t.links.push_back({nic.box, switch_box[switch_of(nic).index], name, name, std::nullopt});
    }
    height = y_switch + sw_h;
    if (net.topology != NetworkTopology::Star) {
      const double y_core = y_switch + sw_h + 70;
      const int core = add(TopologyBox::Kind::Core, QRectF(width / 2 - 90, y_core, 180, sw_h),
                           oversubscribed ? "core (oversubscribed)" : "spine (non-blocking)",
                           QString("%1 network, %2:1 oversubscription")
                               .arg(qs(enum_name(net.topology, kNetworkTopologyNames)))
                               .arg(net.oversubscription));
      for (const auto& [index, box] : switch_box) {
        const QString name = oversubscribed ? qs(uplink_name(index)) : QString();
        t.links.push_back({box, core, name, oversubscribed ? name : "non-blocking", std::nullopt});
      }
      for (int more : more_boxes) t.links.push_back({more, core, {}, "the nodes not drawn", std::nullopt});
      height = y_core + sw_h;
    } else {
      for (int more : more_boxes)
        t.links.push_back({more, switch_box.begin()->second, {}, "the nodes not drawn", std::nullopt});
    }
  }
  t.size = QSizeF(width, height);
  return t;
}

std::map<QString, LinkLoad> link_loads(const nlohmann::json& report) {
  std::map<QString, LinkLoad> out;
  const auto sim = report.find("simulation");
  if (sim == report.end() || !sim->contains("links")) return out;
  for (const auto& l : (*sim)["links"])
    out[qs(l.value("link", ""))] = {l.value("capacity_GBps", 0.0), l.value("mean_GBps", 0.0),
                                    l.value("peak_GBps", 0.0), l.value("utilization", 0.0)};
  return out;
}

int apply_link_loads(Topology& topology, const std::map<QString, LinkLoad>& loads) {
  int applied = 0;
  for (TopologyLink& link : topology.links) {
    auto it = link.name.isEmpty() ? loads.end() : loads.find(link.name);
    link.load = it == loads.end() ? std::nullopt : std::optional<LinkLoad>(it->second);
    applied += link.load.has_value();
  }
  return applied;
}

int apply_job_placement(Topology& topology, const JobsScenario& jobs) {
  const ClusterSpec& cluster = jobs.cluster;
  const ClusterSites sites(cluster);
  std::vector<int> job_of_node(size_t(sites.nodes()), -1);
  for (size_t j = 0; j < jobs.jobs.size(); ++j) {
    const int first = first_global_node(cluster, jobs.jobs[j].placement);
    for (int n = 0; n < jobs.jobs[j].placement.nodes; ++n) job_of_node[size_t(first + n)] = int(j);
  }
  // Every link the simulator names, with the jobs it serves.
  std::map<QString, std::set<int>> served;
  const bool oversubscribed = sites.oversubscribed(cluster);
  for (int gpu = 0; gpu < sites.gpus(); ++gpu) {
    const GpuSite& site = sites.site(gpu);
    const int job = job_of_node[size_t(site.node)];
    if (job < 0) continue;
    served[qs(gpu_link_name(site.node, site.local))].insert(job);
    served[qs(nic_link_name(site.nic))].insert(job);
    if (oversubscribed) served[qs(uplink_name(sites.fabric_domain(cluster, site.nic)))].insert(job);
  }
  int marked = 0;
  for (TopologyLink& link : topology.links) {
    const auto it = link.name.isEmpty() ? served.end() : served.find(link.name);
    link.jobs =
        it == served.end() ? std::vector<int>{} : std::vector<int>(it->second.begin(), it->second.end());
    marked += !link.jobs.empty();
  }
  topology.job_names.clear();
  for (const JobSpec& job : jobs.jobs) topology.job_names.push_back(qs(job.name));
  return marked;
}

}  // namespace paratwin::gui
