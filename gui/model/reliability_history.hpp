// A simulated horizon as the reliability view draws it: when the job was down (from a failure to
// its restart), the failures, restarts and checkpoints, and goodput over time, from the report of
// `paratwin simulate --horizon` and the markers of its trace.
#pragma once

#include <QString>
#include <vector>

#include <nlohmann/json.hpp>

#include "gui/model/trace.hpp"

namespace paratwin::gui {

struct ReliabilityHistory {
  double horizon_s = 0;
  double goodput = 0;  // at the horizon
  double effective_training_time_ratio = 0;
  int failures = 0, restarts = 0;
  double lost_work_s = 0, downtime_s = 0, checkpoint_interval_s = 0, checkpoint_cost_s = 0;
  double young_daly_interval_s = 0, job_mtbf_s = 0, time_to_train_s = 0;
  double full_tokens_per_s = 0;  // of the full configuration

  std::vector<std::pair<double, double>> down;  // [failure, restart) intervals
  std::vector<Marker> failure_markers, restart_markers;
  std::vector<double> checkpoints;  // finished checkpoints, sampled (the simulator keeps at most 1,000)
  std::vector<std::pair<double, double>> goodput_curve;  // (t, useful tokens so far / (t x full rate))

  bool empty() const { return horizon_s <= 0; }
};

// Throws InputError naming `source` when the report has no `reliability` section.
ReliabilityHistory reliability_history(const nlohmann::json& report, const Trace& trace,
                                       const QString& source);

}  // namespace paratwin::gui
