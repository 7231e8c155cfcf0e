// Goodput against iteration time of the search's candidates, as charts for paratwin_viz.
#include "cli/plot/goodput_figure.hpp"

#include <cstdio>
#include <stdexcept>
#include <string>

namespace paratwin::plot {

viz::Figure goodput_figure(const nlohmann::json& report) {
  if (!report.contains("candidates") || report["candidates"].empty() ||
      !report["candidates"][0].contains("expected_goodput"))
    throw std::runtime_error(
        "the report's candidates have no expected_goodput; plan a scenario with failure rates and the "
        "time_to_train or cost objective (paratwin plan SCENARIO --top N --json FILE)");
  const nlohmann::json& search = report["search"];
  const std::string unit = search.value("objective_unit", std::string());
  const bool days = unit == "s";  // time to train reads better in days
  const double scale = days ? 1.0 / 86400 : 1;
  viz::Series others{"candidates", {}, 0, false, viz::Marker::Circle};
  others.joined = false;
  viz::Series objectives = others;
  viz::Rings chosen{{}, "chosen (#1)", false, 9}, chosen_objective = chosen;
  viz::Rings faster{{}, "faster per iteration, lost to failures", true, 9}, faster_objective = faster;
  const auto& candidates = report["candidates"];
  for (size_t i = 0; i < candidates.size(); ++i) {
    const auto& c = candidates[i];
    const double t = c["metrics"]["iteration_time_s"].get<double>();
    const viz::XY g{t, 100 * c["expected_goodput"]["goodput"].get<double>()};
    const viz::XY o{t, c["objective"].get<double>() * scale};
    others.points.push_back(g);
    objectives.points.push_back(o);
    if (i == 0) chosen.points.push_back(g), chosen_objective.points.push_back(o);
  }
  if (search.contains("faster_lost_to_failures")) {
    const auto& f = search["faster_lost_to_failures"];
    const double t = f["metrics"]["iteration_time_s"].get<double>();
    const viz::XY g{t, 100 * f["expected_goodput"]["goodput"].get<double>()};
    const viz::XY o{t, f["objective"].get<double>() * scale};
    bool listed = false;  // among the candidates already
    for (const auto& c : candidates) listed = listed || c["plan"] == f["plan"];
    if (!listed) others.points.push_back(g), objectives.points.push_back(o);
    faster.points.push_back(g), faster_objective.points.push_back(o);
  }
  viz::Chart goodput{
      "expected goodput under failures", {"iteration time (s)"}, {"goodput (%)"}, {others}, {chosen}, {}};
  const std::string objective = search.value("objective", std::string("objective"));
  viz::Chart objective_chart{objective + " (objective)",
                             {"iteration time (s)"},
                             {objective + " (" + (days ? std::string("days") : unit) + ")"},
                             {objectives},
                             {chosen_objective},
                             {}};
  if (!faster.points.empty()) {
    goodput.rings.push_back(faster);
    objective_chart.rings.push_back(faster_objective);
  }
  char title[256];
  std::snprintf(title, sizeof title, "%s: %zu plans, the objective divided by the expected goodput",
                report.value("scenario", std::string("plan")).c_str(), others.points.size());
  return {title, {goodput, objective_chart}, 560, 460};
}

}  // namespace paratwin::plot
