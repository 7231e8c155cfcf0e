// Failure sampling and the timed-block replay of a horizon.
#include "sim/reliability.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "plan/util/seeded_random.hpp"

namespace paratwin::sim {
namespace {

int component_count(Component c, const JobShape& job) {
  switch (c) {
    case Component::Gpu:
      return job.nodes * job.gpus_per_node;
    case Component::Host:
      return job.nodes;
    case Component::Nic:
    case Component::Link:
      return job.nodes * job.nics_per_node;
    case Component::Switch:
      return job.switches;
  }
  return 0;
}

int node_of(Component c, int index, const JobShape& job) {
  switch (c) {
    case Component::Gpu:
      return index / job.gpus_per_node;
    case Component::Host:
      return index;
    case Component::Nic:
    case Component::Link:
      return index / job.nics_per_node;
    case Component::Switch:
      return static_cast<int>(static_cast<long long>(index) * job.nodes / job.switches);
  }
  return 0;
}

// A lifetime with mean `mtbf`: exponential, or Weibull of the given shape scaled to that mean.
double lifetime(const ComponentFailures& f, SeededRandom& rng) {
  const double u = rng.uniform_open();
  if (f.distribution == FailureDistribution::Exponential) return -f.mtbf.value() * std::log(u);
  const double scale = f.mtbf.value() / std::tgamma(1 + 1 / f.shape);
  return scale * std::pow(-std::log(u), 1 / f.shape);
}

constexpr size_t kMaxEvents = 10000;       // recorded for the trace
constexpr double kCheckpointNotes = 1000;  // finished checkpoints recorded per horizon, at most

struct Timeline {
  const ScenarioSpec& scenario;
  const JobShape& job;
  const std::vector<Failure>& failures;
  double horizon_s;
  const Throughput& throughput;
  bool record_events;
};

// Replays the horizon with one checkpoint interval.
Reliability replay_once(const Timeline& tl, double interval_s) {
  const FailureSpec& fs = tl.scenario.failures;
  const ElasticitySpec& el = tl.scenario.elasticity;
  const JobShape& job = tl.job;
  const double detection = fs.detection.value(), restart = fs.restart.value(), repair = fs.repair.value();
  const double cost = job.checkpoint_cost_s;
  const int spare_nodes = el.spares / std::max(1, job.gpus_per_node);
  const int min_gpus = el.min_gpus ? *el.min_gpus : job.replica_gpus;

  Reliability r;
  r.horizon_s = tl.horizon_s;
  r.checkpoint_interval_s = interval_s;
  r.checkpoint_cost_s = cost;
  const double full_rate = tl.throughput(job.dp);
  int dp = job.dp;
  double rate = full_rate;
  r.min_gpus = job.dp * job.replica_gpus;

  std::map<int, double> repaired_at;  // failed node -> when it is back
  auto failed_at = [&](double x) {
    int n = 0;
    for (const auto& [node, back] : repaired_at) n += back > x ? 1 : 0;
    return n;
  };
  // Replicas the job can run at time x under its policy (0: it cannot run).
  auto runnable_dp = [&](double x) {
    const int failed = failed_at(x);
    switch (el.policy) {
      case ElasticPolicy::Restart:
        return failed == 0 ? job.dp : 0;
      case ElasticPolicy::Spares:
        return failed <= spare_nodes ? job.dp : 0;
      case ElasticPolicy::Shrink: {
        const long long healthy = static_cast<long long>(job.nodes - failed) * job.gpus_per_node;
        const int d = static_cast<int>(std::min<long long>(job.dp, healthy / job.replica_gpus));
        return d * job.replica_gpus >= min_gpus ? d : 0;
      }
    }
    return 0;
  };
  // The earliest time from `x` on when the job can run: now, or when enough repairs are done.
  auto earliest_run = [&](double x) {
    if (runnable_dp(x) > 0) return x;
    std::vector<double> backs;
    for (const auto& [node, back] : repaired_at)
      if (back > x) backs.push_back(back);
    std::sort(backs.begin(), backs.end());
    for (double b : backs)
      if (runnable_dp(b) > 0) return b;
    return std::numeric_limits<double>::infinity();
  };

  double t = 0;
  bool running = true, checkpointing = false;
  double checkpoint_end = 0, resume_at = 0, since_checkpoint = 0, uncommitted = 0, committed = 0, trained = 0;
  // A snapshot being written behind the training: its work (tokens, training time) counts at write_end.
  bool writing = false;
  double write_end = 0, writing_tokens = 0, writing_s = 0;
  const double write_behind = job.checkpoint_write_behind_s;
  bool regrowing = false;  // stopped to grow back, until resume_at

  double next_checkpoint_note = 0;
  auto note = [&](double at, std::string what) {
    if (tl.record_events && r.events.size() < kMaxEvents)
      r.events.push_back({at, std::move(what), committed + uncommitted});
  };
  // A checkpoint is on disk; the training since its snapshot is `since_checkpoint`.
  auto committed_checkpoint = [&](double tokens) {
    committed += tokens;
    // At most kCheckpointNotes over the horizon (samples of the progress, not every one).
    if (t >= next_checkpoint_note) {
      note(t, "checkpoint");
      next_checkpoint_note = t + tl.horizon_s / kCheckpointNotes;
    }
    if (!job.regrow_at_checkpoint || el.policy != ElasticPolicy::Shrink || runnable_dp(t) <= dp) return;
    r.lost_work_s += since_checkpoint;  // stopping to grow loses what came after the snapshot
    since_checkpoint = uncommitted = 0;
    checkpointing = false;
    dp = runnable_dp(t);
    rate = tl.throughput(dp);
    regrowing = true;
    resume_at = t + restart;
    note(t, "stop to grow back to " + std::to_string(dp * job.replica_gpus) + " GPUs");
  };

  auto advance = [&](double to) {
    while (t < to) {
      if (regrowing) {
        const double end = std::min(to, resume_at);
        r.downtime_s += end - t;
        t = end;
        if (t >= resume_at) {
          regrowing = false;
          ++r.restarts;
          note(t, "restart on " + std::to_string(dp * job.replica_gpus) + " GPUs");
        }
        continue;
      }
      if (writing && t >= write_end) {
        writing = false;
        committed_checkpoint(writing_tokens);
        continue;
      }
      const double until_written = writing ? write_end - t : to - t;
      if (checkpointing) {
        const double end = std::min({to, checkpoint_end, t + until_written});
        r.checkpoint_overhead_s += end - t;
        t = end;
        if (t >= checkpoint_end) {
          checkpointing = false;
          if (write_behind > 0) {
            writing = true;
            write_end = t + write_behind;
            writing_tokens = uncommitted;
            writing_s = since_checkpoint;
            uncommitted = 0;
            since_checkpoint = 0;
          } else {
            const double tokens = uncommitted;
            uncommitted = 0;
            since_checkpoint = 0;
            committed_checkpoint(tokens);
          }
        }
        continue;
      }
      const double step = std::min({to - t, interval_s - since_checkpoint, until_written});
      t += step;
      since_checkpoint += step;
      trained += step;
      uncommitted += step * rate;
      if (since_checkpoint >= interval_s) {
        checkpointing = true;
        // The snapshot waits for the write before it (one write at a time).
        checkpoint_end = (writing ? std::max(t, write_end) : t) + cost;
      }
    }
  };
  for (const Failure& f : tl.failures) {
    if (f.at_s >= tl.horizon_s) break;
    if (auto it = repaired_at.find(f.node); it != repaired_at.end() && it->second > f.at_s)
      continue;  // already out
    // Resume first if the job came back before this failure.
    if (!running && resume_at <= f.at_s) {
      r.downtime_s += resume_at - t;
      t = resume_at;
      running = true;
      ++r.restarts;
      note(t, "restart on " + std::to_string(dp * job.replica_gpus) + " GPUs");
    }
    if (running) {
      advance(f.at_s);
      r.lost_work_s += since_checkpoint + (writing ? writing_s : 0);
      since_checkpoint = 0;
      uncommitted = 0;
      checkpointing = writing = regrowing = false;
      running = false;
    } else {
      r.downtime_s += f.at_s - t;
      t = f.at_s;
    }
    ++r.failures;
    repaired_at[f.node] = f.at_s + repair;
    note(f.at_s, "failure " + enum_name(f.component, kComponentNames) + " " + std::to_string(f.index) +
                     " (node " + std::to_string(f.node) + ")");
    const double can_run = earliest_run(f.at_s + detection);
    resume_at = can_run + restart;
    if (std::isfinite(can_run)) {
      dp = runnable_dp(can_run);
      rate = tl.throughput(dp);
      r.min_gpus = std::min(r.min_gpus, dp * job.replica_gpus);
    }
  }
  if (!running && resume_at < tl.horizon_s) {
    r.downtime_s += resume_at - t;
    t = resume_at;
    running = true;
    ++r.restarts;
    note(t, "restart on " + std::to_string(dp * job.replica_gpus) + " GPUs");
  }
  if (running)
    advance(tl.horizon_s);
  else
    r.downtime_s += tl.horizon_s - t;

  r.useful_tokens = committed + uncommitted + (writing ? writing_tokens : 0);
  r.productive_s = trained - r.lost_work_s;
  r.effective_training_time_ratio = r.productive_s / tl.horizon_s;
  r.goodput = full_rate > 0 ? r.useful_tokens / (tl.horizon_s * full_rate) : 0;
  if (job.tokens_to_train > 0 && r.goodput > 0)
    r.time_to_train_s = job.tokens_to_train / (r.goodput * full_rate);
  return r;
}

}  // namespace

std::vector<Failure> sample_failures(const FailureSpec& fs, const JobShape& job, double horizon_s,
                                     std::uint64_t seed) {
  std::vector<Failure> out;
  for (const auto& [component, rate] : fs.rates) {
    SeededRandom rng(seed * 0x100000001b3ULL + static_cast<std::uint64_t>(component) + 1);
    const int count = component_count(component, job);
    for (int i = 0; i < count; ++i) {
      for (double at = lifetime(rate, rng); at < horizon_s; at += fs.repair.value() + lifetime(rate, rng))
        out.push_back({at, component, i, node_of(component, i, job)});
    }
  }
  for (const FailureEvent& e : fs.events)
    if (e.at.value() < horizon_s)
      out.push_back({e.at.value(), e.component, e.index, node_of(e.component, e.index, job)});
  std::sort(out.begin(), out.end(), [](const Failure& a, const Failure& b) {
    return std::tie(a.at_s, a.component, a.index) < std::tie(b.at_s, b.component, b.index);
  });
  return out;
}

namespace {

// The job's failure rate from the per-component rates, and the centre of the checkpoint intervals
// replay() tries: Young/Daly (or, without rates, as if the horizon were the MTBF).
struct IntervalSearch {
  double rate_per_s = 0, mtbf_s = 0, young_daly_s = 0, centre_s = 0;
};
constexpr int kIntervalSteps = 12;  // candidates centre x 2^(k/4), k = -12..12

IntervalSearch interval_search(const ScenarioSpec& scenario, const JobShape& job, double horizon_s) {
  IntervalSearch s;
  for (const auto& [component, f] : scenario.failures.rates)
    s.rate_per_s += component_count(component, job) / f.mtbf.value();
  s.mtbf_s = s.rate_per_s > 0 ? 1 / s.rate_per_s : 0;
  const double cost = job.checkpoint_cost_s;
  s.young_daly_s = s.mtbf_s > 0 ? std::sqrt(2 * s.mtbf_s * cost) : 0;
  s.centre_s = s.young_daly_s > 0 ? s.young_daly_s : std::sqrt(2 * horizon_s * std::max(cost, 1e-3));
  return s;
}

}  // namespace

HorizonWork expected_horizon_work(const ScenarioSpec& scenario, const JobShape& job, double horizon_s) {
  const IntervalSearch search = interval_search(scenario, job, horizon_s);
  HorizonWork work;
  for (int k = -kIntervalSteps; k <= kIntervalSteps; ++k)
    work.blocks += horizon_s / (search.centre_s * std::pow(2.0, k / 4.0));
  if (scenario.checkpoint.interval) work.blocks += horizon_s / scenario.checkpoint.interval->value();
  // As sample_failures draws them: each component fails, is repaired, lives again.
  for (const auto& [component, f] : scenario.failures.rates)
    work.failures +=
        component_count(component, job) * horizon_s / (f.mtbf.value() + scenario.failures.repair.value());
  work.failures += double(scenario.failures.events.size());
  return work;
}

Reliability replay(const ScenarioSpec& scenario, const JobShape& job, double horizon_s, std::uint64_t seed,
                   const Throughput& throughput) {
  const std::vector<Failure> failures = sample_failures(scenario.failures, job, horizon_s, seed);
  const IntervalSearch search = interval_search(scenario, job, horizon_s);
  const double mtbf = search.mtbf_s;
  const double young_daly = search.young_daly_s;

  const Timeline quiet{scenario, job, failures, horizon_s, throughput, false};
  const double centre = search.centre_s;
  double best_interval = centre, best_goodput = -1;
  for (int k = -kIntervalSteps; k <= kIntervalSteps; ++k) {
    const double interval = centre * std::pow(2.0, k / 4.0);
    const double g = replay_once(quiet, interval).goodput;
    if (g > best_goodput + 1e-12) {
      best_goodput = g;
      best_interval = interval;
    }
  }
  const double used = scenario.checkpoint.interval ? scenario.checkpoint.interval->value() : best_interval;
  Reliability r = replay_once({scenario, job, failures, horizon_s, throughput, true}, used);
  r.optimal_checkpoint_interval_s = best_interval;
  r.young_daly_interval_s = young_daly;
  r.job_mtbf_s = mtbf;
  return r;
}

}  // namespace paratwin::sim
