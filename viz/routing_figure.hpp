// A report's expert routing (plan/report/routing_report.hpp) as a figure: tokens per EP rank against
// the balanced count, and each expert's share of the assignments against an even share. Drawn by
// paratwin-plot routing and by the GUI's plans view.
#pragma once

#include <string>

#include "plan/report/routing_report.hpp"
#include "viz/chart.hpp"

namespace paratwin::viz {

Figure routing_figure(const std::string& scenario, const RoutingReport& routing);

}  // namespace paratwin::viz
