// Reliability history from a simulate report and its trace markers.
#include "gui/model/reliability_history.hpp"

#include "plan/spec/diagnostics.hpp"

namespace paratwin::gui {

ReliabilityHistory reliability_history(const nlohmann::json& report, const Trace& trace,
                                       const QString& source) {
  const auto r = report.find("reliability");
  if (r == report.end() || !r->is_object())
    throw InputError(Location{source.toStdString()},
                     "the report has no reliability section (simulate with --horizon)");
  ReliabilityHistory h;
  h.horizon_s = r->value("horizon_s", 0.0);
  h.goodput = r->value("goodput", 0.0);
  h.effective_training_time_ratio = r->value("effective_training_time_ratio", 0.0);
  h.failures = r->value("failures", 0);
  h.restarts = r->value("restarts", 0);
  h.lost_work_s = r->value("lost_work_s", 0.0);
  h.downtime_s = r->value("downtime_s", 0.0);
  h.checkpoint_interval_s = r->value("checkpoint_interval_s", 0.0);
  h.checkpoint_cost_s = r->value("checkpoint_cost_s", 0.0);
  h.young_daly_interval_s = r->value("young_daly_interval_s", 0.0);
  h.job_mtbf_s = r->value("job_mtbf_s", 0.0);
  h.time_to_train_s = r->value("time_to_train_s", 0.0);
  if (report.contains("metrics")) h.full_tokens_per_s = report["metrics"].value("tokens_per_s", 0.0);

  double down_since = -1;
  for (const Marker& m : trace.markers) {
    if (m.category == "failure") {
      h.failure_markers.push_back(m);
      if (down_since < 0) down_since = m.at_s;
    } else if (m.category == "restart") {
      h.restart_markers.push_back(m);
      if (down_since >= 0) h.down.push_back({down_since, m.at_s});
      down_since = -1;
    } else if (m.category == "checkpoint") {
      h.checkpoints.push_back(m.at_s);
    } else {
      continue;
    }
    if (m.useful_tokens >= 0 && m.at_s > 0 && h.full_tokens_per_s > 0)
      h.goodput_curve.push_back({m.at_s, m.useful_tokens / (m.at_s * h.full_tokens_per_s)});
  }
  if (down_since >= 0) h.down.push_back({down_since, h.horizon_s});
  h.goodput_curve.push_back({h.horizon_s, h.goodput});
  return h;
}

}  // namespace paratwin::gui
