// The sweep's figure as charts for paratwin_viz.
#include "cli/plot/sweep_figure.hpp"

#include <algorithm>
#include <cstdio>

#include "plan/sweep/lines.hpp"

namespace paratwin::plot {
namespace {

constexpr double kDay = 86400;

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Logarithmic when the values span more than `ratio` (and are positive).
int log_base_for(const std::vector<double>& values, double ratio, int base) {
  double lo = 0, hi = 0;
  for (double v : values)
    if (v > 0) lo = lo == 0 ? v : std::min(lo, v), hi = std::max(hi, v);
  return lo > 0 && hi / lo > ratio ? base : 0;
}

}  // namespace

viz::Figure sweep_figure(const SweepResults& results) {
  const std::vector<PointResult>& points = results.points;
  const std::vector<SweepLine> lines = sweep_lines(results);
  const std::vector<int> front = pareto_front(points);
  const viz::Marker markers[] = {viz::Marker::Circle, viz::Marker::Square, viz::Marker::Triangle,
                                 viz::Marker::Diamond};

  viz::Chart time{"time to train", {"GPUs"}, {"days"}, {}, {}, {}};
  viz::Chart cost{"cost", {"GPUs"}, {"US dollars"}, {}, {}, {}};
  viz::Chart tradeoff{"cost against time to train", {"time to train (days)"}, {"US dollars"}, {}, {}, {}};
  std::vector<double> gpus, days, dollars;
  for (const auto& line : lines) {
    viz::Series t{line.label, {}, line.device, line.variant % 2 == 1, markers[(line.variant / 2) % 4]};
    viz::Series c = t, tc = t;
    for (int i : line.points) {
      const PointResult& p = points[i];
      t.points.push_back({double(p.gpus), p.time_to_train_s / kDay});
      gpus.push_back(p.gpus);
      days.push_back(p.time_to_train_s / kDay);
      if (!p.cost_usd) continue;
      c.points.push_back({double(p.gpus), *p.cost_usd});
      tc.points.push_back({p.time_to_train_s / kDay, *p.cost_usd});
      dollars.push_back(*p.cost_usd);
    }
    time.series.push_back(std::move(t));
    cost.series.push_back(std::move(c));
    tradeoff.series.push_back(std::move(tc));
  }
  // The Pareto front ringed in black, the goal's point in red.
  auto ring = [&](const std::vector<int>& chosen, const std::string& label, bool red) {
    viz::Rings t{{}, label, red, red ? 12.0 : 8.0}, c = t, tc = t;
    for (int i : chosen) {
      const PointResult& p = points[i];
      t.points.push_back({double(p.gpus), p.time_to_train_s / kDay});
      if (!p.cost_usd) continue;
      c.points.push_back({double(p.gpus), *p.cost_usd});
      tc.points.push_back({p.time_to_train_s / kDay, *p.cost_usd});
    }
    time.rings.push_back(std::move(t));
    cost.rings.push_back(std::move(c));
    tradeoff.rings.push_back(std::move(tc));
  };
  ring(front, "Pareto front", false);
  const GoalAnswer answer = answer_goal(results.goal, points);
  if (answer.chosen)
    ring({*answer.chosen},
         results.goal.deadline ? "cheapest within " + to_string(*results.goal.deadline)
                               : "fastest within budget",
         true);
  if (results.goal.deadline)
    time.references.push_back(
        {results.goal.deadline->value() / kDay, "deadline " + to_string(*results.goal.deadline)});
  if (results.goal.budget)
    cost.references.push_back({results.goal.budget->value(), "budget " + to_string(*results.goal.budget)});

  const int gpu_log = log_base_for(gpus, 3, 2), day_log = log_base_for(days, 20, 10),
            dollar_log = log_base_for(dollars, 20, 10);
  auto money = [](double v) { return v >= 1000 ? to_string(Dollars(v)) : "$" + number(v); };
  for (viz::Chart* chart : {&time, &cost}) {
    chart->x.log_base = gpu_log;
    chart->x.label = number;
  }
  time.y.log_base = day_log;
  time.y.label = number;
  cost.y.log_base = dollar_log;
  cost.y.label = money;
  tradeoff.x.log_base = day_log;
  tradeoff.x.label = number;
  tradeoff.y.log_base = dollar_log;
  tradeoff.y.label = money;

  return {"sweep " + results.scenario + ": " + std::to_string(points.size()) + " points" +
              (results.simulate ? " (simulated)" : ""),
          {time, cost, tradeoff},
          620,
          520};
}

}  // namespace paratwin::plot
