// Grouping sweep points into plot lines.
#include "plan/sweep/lines.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace paratwin {

bool sizes_cluster(const std::string& path) {
  if (path == "cluster.nodes" || path == "cluster.gpus") return true;
  return path.rfind("cluster.pools.", 0) == 0 && path.size() > 6 && path.substr(path.size() - 6) == ".nodes";
}

std::vector<SweepLine> sweep_lines(const SweepResults& results) {
  const auto& points = results.points;
  std::map<std::string, std::set<std::string>> clusters_of;  // device types -> cluster names
  for (const auto& p : points)
    if (p.ok()) clusters_of[p.devices].insert(p.cluster);
  std::vector<std::string> devices, variants;
  auto position = [](std::vector<std::string>& seen, const std::string& key) {
    auto it = std::find(seen.begin(), seen.end(), key);
    if (it == seen.end()) return seen.push_back(key), int(seen.size()) - 1;
    return int(it - seen.begin());
  };
  std::vector<SweepLine> lines;
  for (int i = 0; i < int(points.size()); ++i) {
    const PointResult& p = points[i];
    if (!p.ok()) continue;
    const std::string device =
        clusters_of[p.devices].size() > 1 ? p.devices + " (" + p.cluster + ")" : p.devices;
    std::string variant;
    for (const auto& field : results.fields) {
      if (field == "cluster" || sizes_cluster(field)) continue;
      const auto value = p.settings.find(field);
      if (value != p.settings.end()) variant += (variant.empty() ? "" : ", ") + field + "=" + value->second;
    }
    const int d = position(devices, device), v = position(variants, variant);
    auto line = std::find_if(lines.begin(), lines.end(),
                             [&](const SweepLine& l) { return l.device == d && l.variant == v; });
    if (line == lines.end()) {
      lines.push_back({device + (variant.empty() ? "" : ", " + variant), d, v, {}});
      line = lines.end() - 1;
    }
    line->points.push_back(i);
  }
  for (auto& line : lines)
    std::stable_sort(line.points.begin(), line.points.end(),
                     [&](int a, int b) { return points[a].gpus < points[b].gpus; });
  return lines;
}

}  // namespace paratwin
