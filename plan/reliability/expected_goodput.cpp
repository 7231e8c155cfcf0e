// Closed-form goodput under failures: the share of the time the job can run (nodes under repair as an
// M/G/infinity queue), and within it training in checkpointed blocks cut by exponential failures.
#include "plan/reliability/expected_goodput.hpp"

#include <algorithm>
#include <cmath>

namespace paratwin {
namespace {

// Where the job stands between failures. Nodes under repair form an M/G/infinity queue: their count is
// Poisson with mean rate x repair at any time, whatever the job does. The job can run while that count
// is at most what its policy runs without (`most_down`); each failure that hits it running costs a
// detection and a restart on top. It restarts on the replicas the nodes then down leave it, and keeps
// them until the next failure.
struct Availability {
  double running_share = 0;   // of the wall time
  double replicas_share = 0;  // mean replicas it runs on / its full replicas
};

Availability availability(const ScenarioSpec& s, const JobShape& job, double rate_per_s) {
  const FailureSpec& f = s.failures;
  Availability out;
  if (runnable_replicas(s.elasticity, job, 0) == 0) return out;
  const double mean_down = rate_per_s * f.repair.value();
  double weight = std::exp(-mean_down), within = 0, replicas = 0, total = 0;
  for (int down = 0; down <= job.nodes; ++down) {
    if (down > 0) weight *= mean_down / down;
    total += weight;
    if (runnable_replicas(s.elasticity, job, down) > 0) within += weight;
    // Restarting after a failure: the node that failed and `down` others still under repair, or, when
    // that is more than the job runs without, as many as it waited for.
    int at_restart = 1 + down;
    while (at_restart > 0 && runnable_replicas(s.elasticity, job, at_restart) == 0) --at_restart;
    replicas += weight * runnable_replicas(s.elasticity, job, at_restart) / job.dp;
    if (down > mean_down && 1 - total < 1e-12) break;
  }
  const double per_failure_s = f.detection.value() + f.restart.value();
  out.running_share = within / (1 + rate_per_s * per_failure_s);
  out.replicas_share = replicas / total;
  return out;
}

}  // namespace

bool has_failure_rates(const ScenarioSpec& scenario) {
  return !scenario.failures.rates.empty();
}

ExpectedGoodput expected_goodput(const ScenarioSpec& s, const JobShape& job) {
  ExpectedGoodput g;
  g.checkpoint_cost_s = job.checkpoint_cost_s;
  const double rate = job_failure_rate_per_s(s.failures, job);
  if (rate <= 0) return g;
  g.job_mtbf_s = 1 / rate;
  g.young_daly_interval_s = young_daly_interval_s(g.job_mtbf_s, job.checkpoint_cost_s);
  const double tau = s.checkpoint.interval ? s.checkpoint.interval->value() : g.young_daly_interval_s;
  const double cost = job.checkpoint_cost_s;
  g.checkpoint_interval_s = tau;
  const Availability running = availability(s, job, rate);
  // Running, the job trains between failures an exponential time X (mean 1 / rate) in blocks of tau
  // training plus a checkpoint. Blocks completed: E floor(X / (tau + cost)) = 1 / (e^{rate (tau + cost)}
  // - 1); the last, cut short, loses its training (at most tau of it) and the checkpoint it was writing.
  const double block = tau + cost;
  const double between = 1 / rate;
  double useful = between, lost = 0;
  if (block > 0) {
    useful = tau / std::expm1(rate * block);
    const double cut = 1 - std::exp(-rate * block);  // the last block's length: exponential below `block`
    lost = (-std::expm1(-rate * tau) / rate - tau * std::exp(-rate * block)) / cut;
  }
  const double per_running_s = running.running_share / between;  // wall time per second between failures
  g.goodput = running.replicas_share * useful * per_running_s;
  g.shrunk_share = (1 - running.replicas_share) * useful * per_running_s;
  g.lost_work_share = lost * per_running_s;
  g.checkpoint_share = (between - useful - lost) * per_running_s;
  g.downtime_share = 1 - running.running_share;
  g.lost_work_per_failure_s = lost;
  g.downtime_per_failure_s =
      running.running_share > 0 ? g.downtime_share / (rate * running.running_share) : 0;
  g.replicas_share = running.replicas_share;
  return g;
}

double goodput_upper_bound(const ScenarioSpec& scenario, JobShape job) {
  // For a given interval tau, tau / (e^{rate (tau + cost)} - 1) falls as the cost grows, and stays below
  // 1 / rate, its limit at cost 0 when tau is Young/Daly's: the cost-free figure bounds every cost.
  job.checkpoint_cost_s = 0;
  return expected_goodput(scenario, job).goodput;
}

}  // namespace paratwin
