// The report's expert-routing section.
#include "plan/report/routing_report.hpp"

#include <cstdio>

#include "plan/spec/units.hpp"

namespace paratwin {

std::optional<RoutingReport> routing_report(const Program& program) {
  bool balanced = true;
  for (const cost::LayerRouting& l : program.routing) {
    balanced = balanced && l.pace == 1 && l.dropped == 0;
    for (double load : l.rank_load) balanced = balanced && load == 1;
  }
  if (balanced) return std::nullopt;
  RoutingReport r;
  const double layers = static_cast<double>(program.routing.size());
  r.imbalance = r.dropped = 0;
  r.rank_load = program.routing.front().rank_load;
  r.expert_share = program.routing.front().expert_share;
  for (const cost::LayerRouting& l : program.routing) {
    // The ranks run 1 - dropped of the balanced count on average; the hottest sets the pace.
    r.imbalance += l.pace / (1 - l.dropped) / layers;
    r.dropped += l.dropped / layers;
  }
  return r;
}

nlohmann::json to_json(const RoutingReport& r) {
  return {{"imbalance", r.imbalance},
          {"dropped", r.dropped},
          {"rank_load", r.rank_load},
          {"expert_share", r.expert_share},
          {"balanced_iteration_time_s", r.balanced_iteration_time_s},
          {"cost_s", r.cost_s}};
}

RoutingReport routing_from_json(const nlohmann::json& j) {
  RoutingReport r;
  r.imbalance = j.at("imbalance").get<double>();
  r.dropped = j.at("dropped").get<double>();
  r.rank_load = j.at("rank_load").get<std::vector<double>>();
  r.expert_share = j.at("expert_share").get<std::vector<double>>();
  r.balanced_iteration_time_s = j.at("balanced_iteration_time_s").get<double>();
  r.cost_s = j.at("cost_s").get<double>();
  return r;
}

std::string to_text(const RoutingReport& r, double iteration_time_s) {
  char buf[256];
  std::snprintf(
      buf, sizeof buf,
      "  %-24s imbalance %.2fx (hottest / mean tokens per EP rank), %.1f%% of assignments dropped\n",
      "expert routing", r.imbalance, 100 * r.dropped);
  std::string out = buf;
  if (r.balanced_iteration_time_s > 0) {
    std::snprintf(buf, sizeof buf, "  %-24s %s per iteration (%.1f%%) over balanced routing\n", "  costs",
                  to_string(Seconds(r.cost_s)).c_str(), 100 * r.cost_s / iteration_time_s);
    out += buf;
  }
  std::string loads = "  tokens per EP rank       ";
  for (size_t i = 0; i < r.rank_load.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s%.2f", i ? " " : "", r.rank_load[i]);
    loads += buf;
  }
  return out + loads + "  (of the balanced count; first MoE layer, step 0)\n";
}

}  // namespace paratwin
