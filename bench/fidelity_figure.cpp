// The validation set's picture: the panels share the sources' colours and markers.
#include "bench/fidelity_figure.hpp"

#include <algorithm>

namespace paratwin::fidelity {

viz::Figure fidelity_figure(const std::vector<Outcome>& outcomes, const std::vector<Source>& sources,
                            const std::string& headline, const std::vector<Outcome>& held_out) {
  const viz::Marker markers[] = {viz::Marker::Circle, viz::Marker::Square, viz::Marker::Triangle,
                                 viz::Marker::Diamond};
  viz::Chart scatter{"predicted against measured",
                     {"measured iteration time (s)", 10},
                     {"predicted iteration time (s)", 10},
                     {},
                     {},
                     {}};
  viz::Chart errors{"error of each run",
                    {"measured iteration time (s)", 10},
                    {"error: predicted / measured - 1 (%)"},
                    {},
                    {},
                    {}};
  viz::Chart memory{"peak memory against the published peak",
                    {"published peak per GPU (GiB)"},
                    {"predicted peak per GPU (GiB)"},
                    {},
                    {},
                    {}};
  double lo = 0, hi = 0, most_memory = 0;
  auto widen = [&](const Outcome& o) {
    lo = lo == 0 ? o.measured_s : std::min({lo, o.measured_s, o.predicted_s});
    hi = std::max({hi, o.measured_s, o.predicted_s});
  };
  if (!held_out.empty()) {
    viz::Series s{"held out", {}, 9, false, viz::Marker::Diamond, false};
    viz::Series e = s;
    for (const Outcome& o : held_out) {
      s.points.push_back({o.measured_s, o.predicted_s});
      e.points.push_back({o.measured_s, 100 * o.error()});
      widen(o);
    }
    scatter.series.push_back(std::move(s));
    errors.series.push_back(std::move(e));
  }
  int shown = 0;
  for (const Source& source : sources) {
    viz::Series s{source.name, {}, shown, false, markers[shown % 4], false};
    viz::Series e = s, m = s;
    for (const Outcome& o : outcomes) {
      if (o.source != source.name) continue;
      s.points.push_back({o.measured_s, o.predicted_s});
      e.points.push_back({o.measured_s, 100 * o.error()});
      widen(o);
      if (!o.published_peak) continue;
      m.points.push_back({o.published_peak_gib(), o.report.metrics.peak_memory_gib});
      most_memory = std::max({most_memory, o.published_peak_gib(), o.report.metrics.peak_memory_gib});
    }
    if (s.points.empty()) continue;
    scatter.series.push_back(std::move(s));
    errors.series.push_back(std::move(e));
    if (!m.points.empty()) memory.series.push_back(std::move(m));
    ++shown;
  }
  // y = x, and the bound on any run's error around it.
  scatter.series.push_back({"y = x", {{lo, lo}, {hi, hi}}, 7, false, viz::Marker::None, true});
  scatter.series.push_back({"+/-12%", {{lo, 1.12 * lo}, {hi, 1.12 * hi}}, 7, true, viz::Marker::None, true});
  scatter.series.push_back({"", {{lo, 0.88 * lo}, {hi, 0.88 * hi}}, 7, true, viz::Marker::None, true});
  errors.series.push_back({"", {{lo, 0}, {hi, 0}}, 7, false, viz::Marker::None, true});
  errors.references = {{12, "+12%: the issue's bound on any run"}, {-12, "-12%"}};
  if (memory.series.empty()) return {headline, {scatter, errors}, 640, 560};
  // A published peak holds every allocation the twin counts: the points belong under y = x.
  memory.series.push_back({"y = x", {{0, 0}, {most_memory, most_memory}}, 7, false, viz::Marker::None, true});
  return {headline, {scatter, errors, memory}, 640, 560};
}

}  // namespace paratwin::fidelity
