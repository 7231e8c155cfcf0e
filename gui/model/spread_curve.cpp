// The iteration-time spread from a simulate report.
#include "gui/model/spread_curve.hpp"

namespace paratwin::gui {

std::optional<SpreadCurve> spread_curve(const nlohmann::json& report) {
  const auto sim = report.find("simulation");
  if (sim == report.end() || !sim->is_object() || !sim->contains("spread") ||
      !sim->contains("iteration_times_s"))
    return std::nullopt;
  SpreadCurve c;
  c.spread = spread_from_json(sim->at("spread"));
  c.spread.times_s = sim->at("iteration_times_s").get<std::vector<double>>();
  c.cdf = empirical_cdf(c.spread.times_s);
  return c;
}

}  // namespace paratwin::gui
