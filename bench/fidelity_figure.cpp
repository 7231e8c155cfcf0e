// The validation set's picture: both panels share the sources' colours and markers.
#include "bench/fidelity_figure.hpp"

#include <algorithm>

namespace paratwin::fidelity {

viz::Figure fidelity_figure(const std::vector<Outcome>& outcomes, const std::vector<Source>& sources,
                            const std::string& headline) {
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
  double lo = 0, hi = 0;
  int shown = 0;
  for (const Source& source : sources) {
    viz::Series s{source.name, {}, shown, false, markers[shown % 4], false};
    viz::Series e = s;
    for (const Outcome& o : outcomes) {
      if (o.source != source.name) continue;
      s.points.push_back({o.measured_s, o.predicted_s});
      e.points.push_back({o.measured_s, 100 * o.error()});
      lo = lo == 0 ? o.measured_s : std::min({lo, o.measured_s, o.predicted_s});
      hi = std::max({hi, o.measured_s, o.predicted_s});
    }
    if (s.points.empty()) continue;
    scatter.series.push_back(std::move(s));
    errors.series.push_back(std::move(e));
    ++shown;
  }
  // y = x, and the bound on any run's error around it.
  scatter.series.push_back({"y = x", {{lo, lo}, {hi, hi}}, 7, false, viz::Marker::None, true});
  scatter.series.push_back({"+/-12%", {{lo, 1.12 * lo}, {hi, 1.12 * hi}}, 7, true, viz::Marker::None, true});
  scatter.series.push_back({"", {{lo, 0.88 * lo}, {hi, 0.88 * hi}}, 7, true, viz::Marker::None, true});
  errors.series.push_back({"", {{lo, 0}, {hi, 0}}, 7, false, viz::Marker::None, true});
  errors.references = {{12, "+12%: the issue's bound on any run"}, {-12, "-12%"}};
  return {headline, {scatter, errors}, 640, 560};
}

}  // namespace paratwin::fidelity
