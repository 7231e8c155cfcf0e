// Sweep points from a scenario's grid and list, and grid axes from the command line.
#include "plan/sweep/grid.hpp"

#include <algorithm>
#include <stdexcept>

#include "plan/spec/sweep_size.hpp"

namespace paratwin {

SweepPoints::SweepPoints(SweepSpec sweep) : sweep_(std::move(sweep)) {
  Diagnostics diag;
  check_sweep_size(sweep_, diag);
  diag.throw_if_errors();
  size_ = static_cast<int>(sweep_point_count(sweep_));
}

SweepPoint SweepPoints::at(int index) const {
  if (index < 0 || index >= size_)
    throw std::out_of_range("no sweep point " + std::to_string(index) + " of " + std::to_string(size_));
  // The index in mixed radix: the list entry, then one digit per axis, the last axis fastest.
  int rest = index;
  std::vector<size_t> digit(sweep_.grid.size(), 0);
  for (size_t a = sweep_.grid.size(); a-- > 0;) {
    const int radix = static_cast<int>(sweep_.grid[a].values.size());
    digit[a] = static_cast<size_t>(rest % radix);
    rest /= radix;
  }
  SweepPoint point{index, sweep_.list.empty() ? std::vector<SweepSetting>{} : sweep_.list[size_t(rest)]};
  for (size_t a = 0; a < sweep_.grid.size(); ++a)
    point.settings.push_back({sweep_.grid[a].path, sweep_.grid[a].location, sweep_.grid[a].values[digit[a]]});
  return point;
}

std::vector<SweepPoint> expand_sweep(const SweepSpec& sweep) {
  const SweepPoints points(sweep);
  std::vector<SweepPoint> out;
  for (int i = 0; i < points.size(); ++i) out.push_back(points.at(i));
  return out;
}

std::string describe(const SweepPoint& point) {
  std::string out;
  for (const auto& s : point.settings) out += (out.empty() ? "" : " ") + s.path + "=" + to_flow_yaml(s.value);
  return out;
}

SweepAxis parse_grid_argument(const std::string& argument) {
  const std::string file = argument_location("--grid", argument).file;
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
  SweepSpec merged = scenario.sweep;
  if (merged.empty()) merged.location = axes.front().location;
  for (const auto& axis : axes) {
    auto same = std::find_if(merged.grid.begin(), merged.grid.end(),
                             [&](const SweepAxis& a) { return a.path == axis.path; });
    if (same != merged.grid.end())
      *same = axis;
    else
      merged.grid.push_back(axis);
  }
  // The size first: a grid too large to run is refused before its values are checked.
  Diagnostics diag;
  if (check_sweep_size(merged, diag))
    check_sweep_values(scenario, SweepSpec{axes, {}, false, {}}, catalog, diag);
  diag.throw_if_errors();
  scenario.sweep = std::move(merged);
}

}  // namespace paratwin
