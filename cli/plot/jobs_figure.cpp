// Jobs alone and together as bar charts for paratwin_viz.
#include "cli/plot/jobs_figure.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace paratwin::plot {
namespace {

// Tick text: the name at whole x positions inside the list, nothing elsewhere.
std::function<std::string(double)> names_at(std::vector<std::string> names) {
  return [names](double x) {
    const double whole = std::round(x);
    if (std::abs(x - whole) > 1e-6 || whole < 0 || whole >= double(names.size())) return std::string();
    return names[size_t(whole)];
  };
}

// An unlabelled, undrawn point that lifts the y axis a quarter above the tallest bar, for the legend.
viz::Series headroom(const std::vector<viz::Series>& bars) {
  double top = 0;
  for (const auto& s : bars)
    for (const auto& p : s.points) top = std::max(top, p.y);
  return {"", {{0, 1.3 * top}}, 0, false, viz::Marker::None};
}

}  // namespace

viz::Figure jobs_figure(const nlohmann::json& report) {
  if (!report.contains("jobs") || !report["jobs"].is_array() || report["jobs"].empty())
    throw std::runtime_error("the report has no jobs; simulate a scenario with jobs: and --json");
  const nlohmann::json& jobs = report["jobs"];
  std::vector<std::string> names;
  viz::Series alone{"alone on its nodes", {}, 0, false, viz::Marker::None};
  viz::Series together{"beside the other jobs", {}, 3, false, viz::Marker::None};
  alone.bar_width = together.bar_width = 0.35;
  std::vector<std::string> labels;  // each job's name and its time alone
  for (size_t j = 0; j < jobs.size(); ++j) {
    names.push_back(jobs[j].value("name", "job" + std::to_string(j)));
    const double alone_s = jobs[j].value("iteration_time_alone_s", 0.0);
    const double together_s = jobs[j].value("iteration_time_together_s", 0.0);
    char label[160];
    std::snprintf(label, sizeof label, "%s%s %.4g ms", labels.empty() ? "" : ", ", names.back().c_str(),
                  1e3 * alone_s);
    labels.push_back(label);
    alone.points.push_back({double(j) - 0.2, 100});
    together.points.push_back({double(j) + 0.2, alone_s > 0 ? 100 * together_s / alone_s : 0});
  }
  std::string alone_times;
  for (const std::string& l : labels) alone_times += l;
  viz::Chart times{"iteration time per job",
                   {"job (alone: " + alone_times + ")", 0, names_at(names)},
                   {"% of the job's iteration alone"},
                   {},
                   {},
                   {}};
  times.series = {alone, together};
  times.series.push_back(headroom(times.series));

  viz::Figure figure{
      report.value("scenario", std::string("jobs")) + ": several jobs on one cluster", {times}, 560, 460};
  const nlohmann::json& links = report.value("shared_links", nlohmann::json::array());
  if (!links.empty()) {
    std::vector<std::string> link_names;
    viz::Chart bytes{
        "links where jobs meet", {}, {"GB per iteration of each job (both directions)"}, {}, {}, {}};
    const double width = 0.8 / double(names.size());
    for (size_t j = 0; j < names.size(); ++j) {
      viz::Series s{names[j], {}, int(j), false, viz::Marker::None};
      s.bar_width = width * 0.9;
      for (size_t l = 0; l < links.size(); ++l)
        if (links[l]["bytes"].contains(names[j]))
          s.points.push_back(
              {double(l) - 0.4 + width * (double(j) + 0.5), links[l]["bytes"][names[j]].get<double>() / 1e9});
      if (!s.points.empty()) bytes.series.push_back(s);
    }
    bytes.series.push_back(headroom(bytes.series));
    std::string capacities;
    for (const auto& l : links) {
      link_names.push_back(l.value("link", std::string("?")));
      char capacity[160];
      std::snprintf(capacity, sizeof capacity, "%s%s %.0f GB/s", capacities.empty() ? "" : ", ",
                    link_names.back().c_str(), l.value("capacity_GBps", 0.0));
      capacities += capacity;
    }
    bytes.x = {"link (" + capacities + " each way)", 0, names_at(link_names)};
    figure.panels.push_back(bytes);
  }
  return figure;
}

}  // namespace paratwin::plot
