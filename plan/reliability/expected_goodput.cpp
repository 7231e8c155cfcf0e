// Closed-form goodput under failures: a renewal cycle per failure (downtime, then training in
// checkpointed blocks until the next failure), averaged over how many nodes are still under repair.
#include "plan/reliability/expected_goodput.hpp"

#include <algorithm>
#include <cmath>

namespace paratwin {
namespace {

// What a failure costs, averaged over the other nodes still under repair when it is detected: a
// Poisson count with mean rate x (repair - detection), their remaining repair times uniform.
struct AfterFailure {
  double downtime_s = 0;      // detection + waiting for repairs + restart
  double replicas_share = 0;  // replicas the job restarts with / its full replicas
};

AfterFailure after_failure(const ScenarioSpec& s, const JobShape& job, double rate_per_s) {
  const FailureSpec& f = s.failures;
  const double repair_left = std::max(0.0, f.repair.value() - f.detection.value());
  const double mean_others = rate_per_s * repair_left;
  AfterFailure out;
  double weight = std::exp(-mean_others), total_weight = 0;
  for (int others = 0; others < 100000; ++others) {
    if (others > 0) weight *= mean_others / others;
    const int failed = 1 + others;
    // Repairs to wait for: the j-th earliest of `others` uniform remaining times is j / (others + 1) of
    // the repair left; the node that just failed comes back last.
    int j = 0;
    while (j < failed && runnable_replicas(s.elasticity, job, failed - j) == 0) ++j;
    const int replicas = runnable_replicas(s.elasticity, job, failed - j);
    const double wait = j == failed ? repair_left : repair_left * j / (others + 1);
    out.downtime_s += weight * (f.detection.value() + wait + f.restart.value());
    out.replicas_share += weight * double(replicas) / job.dp;
    total_weight += weight;
    if (others > mean_others && 1 - total_weight < 1e-12) break;
  }
  out.downtime_s /= total_weight;
  out.replicas_share /= total_weight;
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
  const AfterFailure after = after_failure(s, job, rate);
  // Between failures the job runs an exponential time X (mean 1 / rate) in blocks of tau training plus
  // a checkpoint. Blocks completed: E floor(X / (tau + cost)) = 1 / (e^{rate (tau + cost)} - 1); the
  // last, cut short, loses its training (at most tau of it) and the checkpoint it was writing.
  const double block = tau + cost;
  const double running = 1 / rate;
  double blocks = 0, useful = running, lost = 0;
  if (block > 0) {
    blocks = 1 / std::expm1(rate * block);
    useful = tau * blocks;
    const double cut = 1 - std::exp(-rate * block);  // the last block's length: exponential below `block`
    lost = (-std::expm1(-rate * tau) / rate - tau * std::exp(-rate * block)) / cut;
  }
  const double cycle = after.downtime_s + running;
  g.goodput = after.replicas_share * useful / cycle;
  g.shrunk_share = (1 - after.replicas_share) * useful / cycle;
  g.lost_work_share = lost / cycle;
  g.checkpoint_share = (running - useful - lost) / cycle;
  g.downtime_share = after.downtime_s / cycle;
  g.lost_work_per_failure_s = lost;
  g.downtime_per_failure_s = after.downtime_s;
  g.replicas_share = after.replicas_share;
  return g;
}

double goodput_upper_bound(const ScenarioSpec& scenario, JobShape job) {
  // For a given interval tau, tau / (e^{rate (tau + cost)} - 1) falls as the cost grows, and stays below
  // 1 / rate, its limit at cost 0 when tau is Young/Daly's: the cost-free figure bounds every cost.
  job.checkpoint_cost_s = 0;
  return expected_goodput(scenario, job).goodput;
}

}  // namespace paratwin
