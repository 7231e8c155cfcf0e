// A sweep's points ranked by one figure, best (smallest) first: the simulated P95 iteration time (the
// step a plan delivers 95% of the time), the mean iteration time, the time to train or the cost.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "plan/sweep/results.hpp"

namespace paratwin {

// The figures a sweep can rank by: p95, iteration_time, time_to_train, cost.
const std::vector<std::string>& rank_keys();

// The figure `key` names of a point; nullopt when the point has none (not ok, not simulated over
// several iterations for p95, no price for cost). Throws std::invalid_argument for an unknown key.
std::optional<double> rank_value(const std::string& key, const PointResult& point);

// (index, figure) of the points that have the figure, smallest first, ties by index. Holds two
// numbers per point.
std::vector<std::pair<int, double>> rank_points(const std::string& key, const PointSource& points);

// "ranked by KEY (best first): #i value, ..." for the first `top` points, or why none could be ranked.
void write_ranking(std::ostream& out, const std::string& key, const PointSource& points, int top = 10);

}  // namespace paratwin
