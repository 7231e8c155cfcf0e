// The validation set's picture as charts for paratwin_viz: predicted against measured iteration time
// with the y = x line, each run's error against its measured time, and, where sources published one,
// the predicted peak memory against the published peak.
#pragma once

#include <vector>

#include "bench/fidelity_set.hpp"
#include "viz/chart.hpp"

namespace paratwin::fidelity {

// One colour and marker per source, in the order of `sources`; `headline` is the figure's title. The
// held-out runs (optional) join the time panels as one series of their own, drawn under the set's.
viz::Figure fidelity_figure(const std::vector<Outcome>& outcomes, const std::vector<Source>& sources,
                            const std::string& headline, const std::vector<Outcome>& held_out = {});

}  // namespace paratwin::fidelity
