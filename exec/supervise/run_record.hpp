// What the supervisor measured over a whole job, across its launches: failures and recoveries,
// steps and checkpoints, and from them the measured goodput, the failure trace the twin replays and
// the report's reliability{} section.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/io/failure_trace.hpp"

namespace paratwin::exec {

// One failure and the recovery from it. Times are the supervisor's clock, in seconds.
struct Recovery {
  std::string kind;          // kill, hang (injected or watchdog), chaos (killed by --chaos), exit
  int rank = -1, slot = -1;  // -1: not known
  int64_t step = 0;          // the furthest step a rank reported before it
  double failed_s = 0;       // when it happened (the kill, the fault's report, else its detection)
  double detected_s = 0;     // when the supervisor decided
  double waited_s = 0;       // waiting for enough slots to come back
  double first_step_s = -1;  // when the first step after the restart ended; -1 before that
  int ranks_before = 0, ranks_after = 0;
  int64_t resumed_from = -1;  // the checkpoint's step the restart went on from
  int64_t lost_steps = 0;     // steps done again

  bool recovered() const { return first_step_s >= 0; }
  // Training at full speed again: the first step's end less a typical step (the first one after a
  // start is slower: connections, allocations; that is part of the restart).
  double resumed_s(double step_s) const { return first_step_s - step_s; }
  double time_to_recover_s(double step_s) const { return resumed_s(step_s) - failed_s; }
};

struct RunRecord {
  int max_ranks = 0, min_ranks = 0;
  double first_step_s = -1, end_s = 0;  // training: the first step's end, the last one's
  int64_t first_step = -1;              // steps done when training began (a checkpoint resumed from)
  int64_t last_step = 0, total_steps = 0;
  std::vector<double> full_step_s;  // rank 0's steps on max_ranks, the first of each launch left out
  double step_s = 0;                // rank 0's steps, all of them
  double snapshot_s = 0, write_s = 0;
  int checkpoints = 0, shrinks = 0, grows = 0;
  int64_t lost_steps = 0;  // at failures and at planned stops (growing back)
  std::vector<Recovery> recoveries;

  // Mean of full_step_s (0 without): what the full job's steps take, noise of a shared machine included.
  double mean_step_s() const;
  // Training began (as Recovery::resumed_s) and lasted until end_s.
  double start_s() const { return first_step_s - mean_step_s(); }
  double horizon_s() const { return first_step_s < 0 ? 0 : std::max(0.0, end_s - start_s()); }
  // Useful work over what the full job would do in the time: steps gained x mean step / time.
  double goodput() const;
  // Steps done again, at the mean step time.
  double lost_work_s() const { return double(lost_steps) * mean_step_s(); }
  // Training held up by checkpoints, as a share of step time.
  double checkpoint_overhead() const { return step_s > 0 ? snapshot_s / step_s : 0; }
};

// The trace `paratwin simulate --failure-trace` replays. `checkpoint_interval_s` is the run's
// interval in seconds (0 without checkpoints); `sets` the overrides that make the full job's plan.
FailureTrace failure_trace(const RunRecord& record, const std::string& scenario,
                           std::vector<std::string> sets, double checkpoint_interval_s, double down_s);

// reliability{} of the report: measured figures, the recoveries, and the twin's `predicted` ones.
nlohmann::json reliability_json(const RunRecord& record, const std::optional<nlohmann::json>& predicted);

// The twin's reliability{} for a trace: `paratwin simulate SCENARIO [--plan PLAN] --failure-trace
// TRACE` in a child process. nullopt, with the reason in `error`, when the simulation fails.
std::optional<nlohmann::json> predict_with_twin(const std::string& trace, const std::string& plan_file,
                                                std::string& error);

}  // namespace paratwin::exec
