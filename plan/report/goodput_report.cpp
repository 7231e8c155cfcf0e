// The closed-form goodput of a plan, as the report carries and prints it.
#include "plan/report/goodput_report.hpp"

#include <cstdio>

#include "plan/report/report.hpp"

namespace paratwin {

void add_expected_goodput(Report& report, const ScenarioSpec& scenario, const Program& program) {
  if (!has_failure_rates(scenario)) return;
  report.goodput = expected_goodput(scenario, job_shape(scenario, report.plan, program));
}

nlohmann::json to_json(const ExpectedGoodput& g) {
  return {{"goodput", g.goodput},
          {"job_mtbf_s", g.job_mtbf_s},
          {"checkpoint_cost_s", g.checkpoint_cost_s},
          {"checkpoint_interval_s", g.checkpoint_interval_s},
          {"young_daly_interval_s", g.young_daly_interval_s},
          {"checkpoint_share", g.checkpoint_share},
          {"lost_work_share", g.lost_work_share},
          {"downtime_share", g.downtime_share},
          {"shrunk_share", g.shrunk_share},
          {"lost_work_per_failure_s", g.lost_work_per_failure_s},
          {"downtime_per_failure_s", g.downtime_per_failure_s},
          {"replicas_share", g.replicas_share}};
}

std::string to_text(const ExpectedGoodput& g) {
  auto seconds = [](double s) { return to_string(Seconds(s)); };
  char buf[256];
  std::string out = "  under failures (expected, closed form):\n";
  auto row = [&](const char* label, const std::string& value) {
    std::snprintf(buf, sizeof buf, "    %-22s %s\n", label, value.c_str());
    out += buf;
  };
  std::snprintf(buf, sizeof buf, "%.1f%% (a failure every %s)", 100 * g.goodput,
                seconds(g.job_mtbf_s).c_str());
  row("goodput", buf);
  row("checkpoint", seconds(g.checkpoint_cost_s) + " every " + seconds(g.checkpoint_interval_s) +
                        " (Young/Daly " + seconds(g.young_daly_interval_s) + ")");
  std::snprintf(buf, sizeof buf, "checkpoints %.1f%%, lost work %.1f%%, downtime %.1f%%, shrunk %.1f%%",
                100 * g.checkpoint_share, 100 * g.lost_work_share, 100 * g.downtime_share,
                100 * g.shrunk_share);
  row("time lost to", buf);
  row("per failure",
      "lost work " + seconds(g.lost_work_per_failure_s) + ", downtime " + seconds(g.downtime_per_failure_s));
  return out;
}

}  // namespace paratwin
