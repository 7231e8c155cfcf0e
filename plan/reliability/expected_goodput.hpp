// The goodput a job can expect under the scenario's failures, in closed form (no simulation): the
// optimizer ranks plans by it, the report explains it. Failures arrive as a Poisson process at the
// job's rate; after each the job waits for detection, for enough repaired nodes for its elastic
// policy, and restarts from its last checkpoint on as many replicas as it then has. The simulated
// horizon (sim/reliability.hpp) replays the same model over sampled failures.
#pragma once

#include <optional>

#include "plan/reliability/job_shape.hpp"

namespace paratwin {

struct ExpectedGoodput {
  double goodput = 1;  // useful tokens / (time x the full configuration's tokens/s)
  double job_mtbf_s = 0;
  double checkpoint_cost_s = 0;
  double checkpoint_interval_s = 0;  // training time between checkpoints: the scenario's, or Young/Daly
  double young_daly_interval_s = 0;
  // Shares of the wall time (with goodput and shrunk_share they add up to 1).
  double checkpoint_share = 0;  // writing checkpoints
  double lost_work_share = 0;   // training whose work a failure threw away
  double downtime_share = 0;    // detection, waiting for repairs, restarts
  double shrunk_share = 0;      // training time's tokens not made because replicas were missing
  double lost_work_per_failure_s = 0;
  double downtime_per_failure_s = 0;
  double replicas_share = 1;  // mean share of the replicas the job runs on between failures
};

// Whether the scenario has failure rates (scripted events alone give no rate to expect).
bool has_failure_rates(const ScenarioSpec& scenario);

// The expected goodput of `job` under the scenario's failures, checkpoint interval and elasticity.
// Without failure rates: goodput 1 and nothing lost.
ExpectedGoodput expected_goodput(const ScenarioSpec& scenario, const JobShape& job);

// An upper bound of expected_goodput(scenario, job) over every checkpoint cost (the job's is ignored):
// what its failure rate, downtime and shrinks leave. The search divides its bounds by it.
double goodput_upper_bound(const ScenarioSpec& scenario, JobShape job);

}  // namespace paratwin
