// The topology view's picture of a cluster: nodes with their GPUs, NVSwitch and NICs, the switches
// of the fabric below them, and the links between, each link named as the simulator names it so
// that a simulation's per-link utilization (`simulation.links[]` of `paratwin simulate --json`)
// colours it. Laid out in its own coordinates; the view scales it to fit.
#pragma once

#include <QRectF>
#include <QString>
#include <QStringList>
#include <map>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/spec/cluster.hpp"
#include "plan/spec/jobs.hpp"

namespace paratwin::gui {

struct TopologyBox {
  enum class Kind { Node, Gpu, Fabric, Nic, Switch, Core, More };
  Kind kind = Kind::Gpu;
  QRectF rect;
  QString label;
  QString tooltip;
};

struct LinkLoad {
  double capacity_GBps = 0;
  double mean_GBps = 0;
  double peak_GBps = 0;
  double utilization = 0;  // mean / capacity over the simulated iterations
};

struct TopologyLink {
  int from = 0, to = 0;  // box indices; drawn from the bottom of `from` to the top of `to`
  QString name;          // the simulator's link name, empty for links it does not model
  QString tooltip;
  std::optional<LinkLoad> load;  // after apply_link_loads, when the simulation watched it
  std::vector<int> jobs;         // after apply_job_placement: the jobs whose nodes it serves
};

struct Topology {
  QString caption;
  std::vector<TopologyBox> boxes;
  std::vector<TopologyLink> links;
  QSizeF size;
  int drawn_nodes = 0, total_nodes = 0;
  std::vector<QString> job_names;  // a scenario of several jobs (apply_job_placement): colour by job
};

// At most `nodes_per_pool` nodes of each pool are drawn; the rest become one "more nodes" box.
Topology build_topology(const ClusterSpec& cluster, int nodes_per_pool = 4);

// Per-link figures from a simulate report's `simulation.links[]`, by link name.
std::map<QString, LinkLoad> link_loads(const nlohmann::json& report);
// Sets each link's load from `loads`; returns how many links got one.
int apply_link_loads(Topology& topology, const std::map<QString, LinkLoad>& loads);

// For a scenario of several jobs (placements complete): marks each link with the jobs whose traffic it
// can carry, by the placement: a GPU's NVLink port and a NIC's link serve the job on their node, a fabric
// domain's uplink every job with a node under it (two or more: where jobs meet). Returns how many links
// got a job.
int apply_job_placement(Topology& topology, const JobsScenario& jobs);

}  // namespace paratwin::gui
