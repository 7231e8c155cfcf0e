// Bars of tokens per EP rank and per expert, with the balanced level drawn.
#include "viz/routing_figure.hpp"

#include <cstdio>

namespace paratwin::viz {

namespace {

Chart bars(const std::string& title, const std::string& x, const std::string& y,
           const std::vector<double>& values, double level, const std::string& level_label, int color) {
  Chart c;
  c.title = title;
  c.x.title = x;
  c.y.title = y;
  c.x.label = [](double v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return std::string(buf);
  };
  Series s;
  s.color = color;
  s.marker = Marker::None;
  s.joined = false;
  s.bar_width = 0.7;
  for (size_t i = 0; i < values.size(); ++i) s.points.push_back({double(i), values[i]});
  c.series.push_back(s);
  c.references.push_back({level, level_label});
  return c;
}

}  // namespace

Figure routing_figure(const std::string& scenario, const RoutingReport& r) {
  const std::vector<double>&ranks = r.rank_load, &experts = r.expert_share;
  char title[256];
  std::snprintf(title, sizeof title,
                "%s: expert routing, imbalance %.2fx, %.1f%% dropped, costs %.3g s per iteration",
                scenario.c_str(), r.imbalance, 100 * r.dropped, r.cost_s);
  Figure f;
  f.title = title;
  f.panels.push_back(bars("tokens per EP rank (first MoE layer, step 0)", "EP rank",
                          "tokens / balanced count", ranks, 1.0, "balanced", 0));
  f.panels.push_back(bars("share of the assignments per expert (same layer)", "expert", "share", experts,
                          experts.empty() ? 0 : 1.0 / double(experts.size()), "even", 1));
  return f;
}

}  // namespace paratwin::viz
