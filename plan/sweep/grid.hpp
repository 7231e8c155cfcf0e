// The points of a sweep: its list entries crossed with its grid, and grid axes given on the command
// line (`--grid cluster.gpus=64,128,256`).
#pragma once

#include <string>
#include <vector>

#include "plan/spec/scenario.hpp"

namespace paratwin {

struct SweepPoint {
  int index = 0;                       // position in the sweep, from 0
  std::vector<SweepSetting> settings;  // the list entry's fields, then one value of each grid axis
};

// The points of a sweep, in order: list entries outermost (in file order), then the grid's axes as
// nested loops (the first axis varies slowest). A sweep without a list is its grid; one without a grid,
// its list. Each point is made from its index when asked for, so a sweep of millions of points holds
// no more than its axes.
class SweepPoints {
 public:
  SweepPoints() = default;
  // Throws InputError when the sweep has more points than the limit (plan/spec/sweep_size.hpp).
  explicit SweepPoints(SweepSpec sweep);

  int size() const { return size_; }
  // Throws std::out_of_range for an index outside [0, size()).
  SweepPoint at(int index) const;

 private:
  SweepSpec sweep_;
  int size_ = 0;
};

// Every point at once: for small sweeps and tests.
std::vector<SweepPoint> expand_sweep(const SweepSpec& sweep);

// "cluster=dgx-h100 cluster.nodes=64": the point's settings as --set would write them.
std::string describe(const SweepPoint& point);

// Parses `PATH=V1,V2,...` (the values are a YAML flow list without its brackets, so mappings and
// quoted text work: `cluster={from: dgx-h100, nodes: 4},dgx-a100-80g`). Messages point into the
// argument, as "<--grid ARG>:1:COL"; a malformed argument throws InputError.
SweepAxis parse_grid_argument(const std::string& argument);

// Adds command-line axes to a scenario's sweep: an axis on a path the sweep already has replaces it
// in place, others are appended. Each value is checked against its field (InputError listing every
// problem); the scenario's own values were checked when it was loaded.
void add_grid_axes(ScenarioSpec& scenario, const std::vector<SweepAxis>& axes,
                   const Catalog& catalog = Catalog::installed());

}  // namespace paratwin
