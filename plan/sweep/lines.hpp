// A sweep's points grouped into the lines of its plots against GPU count: one line per device type
// and per combination of the other swept fields (those that do not size the cluster).
#pragma once

#include <string>
#include <vector>

#include "plan/sweep/results.hpp"

namespace paratwin {

struct SweepLine {
  std::string label;        // "h100-sxm", or "h100-sxm, training.tokens=5T"
  int device = 0;           // which device type (of those on the lines, in order of appearance)
  int variant = 0;          // which combination of the other fields (in order of appearance)
  std::vector<int> points;  // positions in results.points, by GPU count
};

// Whether a field path sizes the cluster (cluster.nodes, cluster.gpus, cluster.pools.NAME.nodes):
// such fields move a point along its line rather than starting another.
bool sizes_cluster(const std::string& path);

// Lines of the points that are ok. Where clusters of different names share a device type, the
// device's label adds the cluster's name, so that they get lines of their own.
std::vector<SweepLine> sweep_lines(const SweepResults& results);

}  // namespace paratwin
