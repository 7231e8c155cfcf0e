// Sweep points from a scenario's grid and list, and grid axes from the command line.
#include "plan/sweep/grid.hpp"

#include <algorithm>

namespace paratwin {

std::vector<SweepPoint> expand_sweep(const SweepSpec& sweep) {
  const std::vector<std::vector<SweepSetting>> entries =
      sweep.list.empty() ? std::vector<std::vector<SweepSetting>>{{}} : sweep.list;
  std::vector<SweepPoint> points;
  for (const auto& entry : entries) {
    std::vector<size_t> at(sweep.grid.size(), 0);  // an odometer over the axes, the last one fastest
    while (true) {
      SweepPoint point{static_cast<int>(points.size()), entry};
      for (size_t a = 0; a < sweep.grid.size(); ++a)
        point.settings.push_back({sweep.grid[a].path, sweep.grid[a].location, sweep.grid[a].values[at[a]]});
      points.push_back(std::move(point));
      size_t a = sweep.grid.size();
      while (a > 0 && ++at[a - 1] == sweep.grid[a - 1].values.size()) at[--a] = 0;
      if (a == 0) break;
    }
  }
  return points;
}

std::string describe(const SweepPoint& point) {
  std::string out;
  for (const auto& s : point.settings) out += (out.empty() ? "" : " ") + s.path + "=" + to_flow_yaml(s.value);
  return out;
}

SweepAxis parse_grid_argument(const std::string& argument) {
  const std::string file = "<--grid " + argument + ">";
  const size_t eq = argument.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError(Location{file, 1, 1}, "expected PATH=V1,V2,... such as cluster.gpus=64,128,256");
  // Parsed as the override PATH=[V1,V2,...]; its messages and locations are moved back onto the argument
  // (one column to the left past the '=', for the added bracket).
  auto relocate = [&](Location where) {
    if (is_override_location(where))
      where = {file, where.line, where.column > int(eq) + 1 ? where.column - 1 : where.column};
    return where;
  };
  Override o;
  try {
    o = parse_override(argument.substr(0, eq) + "=[" + argument.substr(eq + 1) + "]");
  } catch (const InputError& e) {
    std::vector<Diagnostic> moved = e.diagnostics();
    for (auto& d : moved) d.where = relocate(d.where);
    throw InputError(std::move(moved));
  }
  auto relocate_tree = [&](auto& self, DocNode& n) -> void {
    n.location = relocate(n.location);
    for (auto& item : n.items) self(self, item);
    for (auto& e : n.entries) {
      e.key_location = relocate(e.key_location);
      self(self, e.value.front());
    }
  };
  relocate_tree(relocate_tree, o.value);
  SweepAxis axis{argument.substr(0, eq), Location{file, 1, 1}, o.value.items};
  if (axis.values.empty() ||
      std::any_of(axis.values.begin(), axis.values.end(), [](const DocNode& v) { return v.is_null(); }))
    throw InputError(Location{file, 1, int(eq) + 2},
                     "expected a comma-separated list of values after '=' for --grid " + axis.path +
                         ", such as " + axis.path + "=64,128,256");
  return axis;
}

void add_grid_axes(ScenarioSpec& scenario, const std::vector<SweepAxis>& axes, const Catalog& catalog) {
  if (axes.empty()) return;
  Diagnostics diag;
  check_sweep_values(scenario, SweepSpec{axes, {}, false, {}}, catalog, diag);
  diag.throw_if_errors();
  if (scenario.sweep.empty()) scenario.sweep.location = axes.front().location;
  for (const auto& axis : axes) {
    auto same = std::find_if(scenario.sweep.grid.begin(), scenario.sweep.grid.end(),
                             [&](const SweepAxis& a) { return a.path == axis.path; });
    if (same != scenario.sweep.grid.end())
      *same = axis;
    else
      scenario.sweep.grid.push_back(axis);
  }
}

}  // namespace paratwin
