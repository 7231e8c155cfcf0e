// The iteration-time spread as charts for paratwin_viz.
#include "cli/plot/spread_figure.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "plan/report/spread.hpp"

namespace paratwin::plot {
namespace {

constexpr int kBins = 30;

// A vertical line at x from y 0 to `top`, as a two-point series.
viz::Series vertical(const std::string& label, double x, double top, int color) {
  return {label, {{x, 0}, {x, top}}, color, true, viz::Marker::None};
}

}  // namespace

viz::Figure spread_figure(const nlohmann::json& report) {
  const nlohmann::json* sim = report.contains("simulation") ? &report["simulation"] : nullptr;
  if (!sim || !sim->contains("spread") || !sim->contains("iteration_times_s"))
    throw std::runtime_error(
        "the report has no simulation.spread; simulate with --iterations N (N > 1) or a scenario with "
        "variability");
  const IterationSpread spread = spread_from_json(sim->at("spread"));
  std::vector<double> times = sim->at("iteration_times_s").get<std::vector<double>>();
  // Milliseconds for steps under 10 s, seconds above.
  const bool ms = spread.p50_s < 10;
  const double scale = ms ? 1e3 : 1;
  for (double& t : times) t *= scale;
  const std::string unit = ms ? "ms" : "s";

  viz::Chart hist{"iteration times", {"iteration time (" + unit + ")"}, {"iterations"}, {}, {}, {}};
  viz::Series bars{"iterations per bin", {}, 0, false, viz::Marker::None};
  int top = 0;
  for (const HistogramBin& b : histogram(times, kBins)) {  // the bars' outline
    bars.points.push_back({b.from_s, 0});
    bars.points.push_back({b.from_s, double(b.count)});
    bars.points.push_back({b.to_s, double(b.count)});
    bars.points.push_back({b.to_s, 0});
    top = std::max(top, b.count);
  }
  hist.series.push_back(bars);
  hist.series.push_back(vertical("noise-free step", spread.noise_free_s * scale, top, 2));
  hist.series.push_back(vertical("P95", spread.p95_s * scale, top, 3));

  viz::Chart cdf{
      "distribution function", {"iteration time (" + unit + ")"}, {"fraction of iterations"}, {}, {}, {}};
  viz::Series steps{"simulated iterations", {}, 0, false, viz::Marker::None};
  for (const auto& [t, f] : empirical_cdf(times)) steps.points.push_back({t, f});
  cdf.series.push_back(steps);
  cdf.series.push_back(vertical("noise-free step", spread.noise_free_s * scale, 1, 2));
  cdf.references = {{0.5, "P50"}, {0.95, "P95"}, {0.99, "P99"}};

  char title[256];
  std::snprintf(title, sizeof title,
                "%s: %zu iterations, P50 %.4g %s, P95 %.4g %s, P99 %.4g %s; %.0f%% of steps > %g%% slower "
                "than noise-free",
                report.value("scenario", std::string("simulation")).c_str(), times.size(),
                spread.p50_s * scale, unit.c_str(), spread.p95_s * scale, unit.c_str(), spread.p99_s * scale,
                unit.c_str(), 100 * spread.p_slower, spread.slower_than_pct);
  return {title, {hist, cdf}, 620, 480};
}

}  // namespace paratwin::plot
