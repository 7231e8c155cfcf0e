// Failure sampling and the timed-block replay of a horizon.
#include "sim/reliability.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>

#include "plan/util/seeded_random.hpp"

namespace paratwin::sim {
namespace {

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

// Replays the horizon with one checkpoint interval: the job trains, snapshots every interval (written
// behind the training when the job says so), fails, waits for detection and enough repaired nodes
// for its elastic policy, restarts, and under `shrink` grows back at a checkpoint.
class Replay {
 public:
  Replay(const Timeline& tl, double interval_s)
      : tl_(tl),
        fs_(tl.scenario.failures),
        el_(tl.scenario.elasticity),
        job_(tl.job),
        interval_s_(interval_s),
        full_rate_(tl.throughput(job_.dp)),
        dp_(job_.dp),
        rate_(full_rate_) {
    r_.horizon_s = tl.horizon_s;
    r_.checkpoint_interval_s = interval_s;
    r_.checkpoint_cost_s = job_.checkpoint_cost_s;
    r_.min_gpus = job_.dp * job_.replica_gpus;
  }

  Reliability run() {
    for (const Failure& f : tl_.failures) {
      if (f.at_s >= tl_.horizon_s) break;
      if (auto it = repaired_at_.find(f.node); it != repaired_at_.end() && it->second > f.at_s)
        continue;                                                  // already out
      if (!running_ && resume_at_ <= f.at_s) restart(resume_at_);  // back before this failure
      fail(f);
    }
    if (!running_ && resume_at_ < tl_.horizon_s) restart(resume_at_);
    if (running_)
      advance(tl_.horizon_s);
    else
      r_.downtime_s += tl_.horizon_s - t_;
    return summary();
  }

 private:
  int failed_at(double x) const {
    int n = 0;
    for (const auto& [node, back] : repaired_at_) n += back > x ? 1 : 0;
    return n;
  }

  // Replicas the job can run at time x under its policy (0: it cannot run).
  int runnable_dp(double x) const { return runnable_replicas(el_, job_, failed_at(x)); }

  // The earliest time from `x` on when the job can run: now, or when enough repairs are done.
  double earliest_run(double x) const {
    if (runnable_dp(x) > 0) return x;
    std::vector<double> backs;
    for (const auto& [node, back] : repaired_at_)
      if (back > x) backs.push_back(back);
    std::sort(backs.begin(), backs.end());
    for (double b : backs)
      if (runnable_dp(b) > 0) return b;
    return std::numeric_limits<double>::infinity();
  }

  void note(double at, std::string what) {
    if (tl_.record_events && r_.events.size() < kMaxEvents)
      r_.events.push_back({at, std::move(what), committed_ + uncommitted_});
  }

  std::string gpus_now() const { return std::to_string(dp_ * job_.replica_gpus) + " GPUs"; }

  void restart(double at) {
    r_.downtime_s += at - t_;
    t_ = at;
    running_ = true;
    ++r_.restarts;
    note(t_, "restart on " + gpus_now());
  }

  // A checkpoint is on disk; the training since its snapshot is `since_checkpoint_`.
  void committed_checkpoint(double tokens) {
    committed_ += tokens;
    // At most kCheckpointNotes over the horizon (samples of the progress, not every one).
    if (t_ >= next_checkpoint_note_) {
      note(t_, "checkpoint");
      next_checkpoint_note_ = t_ + tl_.horizon_s / kCheckpointNotes;
    }
    if (!job_.regrow_at_checkpoint || el_.policy != ElasticPolicy::Shrink || runnable_dp(t_) <= dp_) return;
    r_.lost_work_s += since_checkpoint_;  // stopping to grow loses what came after the snapshot
    since_checkpoint_ = uncommitted_ = 0;
    checkpointing_ = false;
    dp_ = runnable_dp(t_);
    rate_ = tl_.throughput(dp_);
    regrowing_ = true;
    resume_at_ = t_ + fs_.restart.value();
    note(t_, "stop to grow back to " + gpus_now());
  }

  // The snapshot is taken: written behind the training, or on disk now.
  void snapshot_taken() {
    checkpointing_ = false;
    if (job_.checkpoint_write_behind_s > 0) {
      writing_ = true;
      write_end_ = t_ + job_.checkpoint_write_behind_s;
      writing_tokens_ = uncommitted_;
      writing_s_ = since_checkpoint_;
      uncommitted_ = since_checkpoint_ = 0;
    } else {
      const double tokens = uncommitted_;
      uncommitted_ = since_checkpoint_ = 0;
      committed_checkpoint(tokens);
    }
  }

  // Runs the job from t_ to `to` with no failure in between.
  void advance(double to) {
    while (t_ < to) {
      if (regrowing_) {
        const double end = std::min(to, resume_at_);
        r_.downtime_s += end - t_;
        t_ = end;
        if (t_ >= resume_at_) {
          regrowing_ = false;
          ++r_.restarts;
          note(t_, "restart on " + gpus_now());
        }
        continue;
      }
      if (writing_ && t_ >= write_end_) {
        writing_ = false;
        committed_checkpoint(writing_tokens_);
        continue;
      }
      const double until_written = writing_ ? write_end_ - t_ : to - t_;
      if (checkpointing_) {
        const double end = std::min({to, checkpoint_end_, t_ + until_written});
        r_.checkpoint_overhead_s += end - t_;
        t_ = end;
        if (t_ >= checkpoint_end_) snapshot_taken();
        continue;
      }
      const double step = std::min({to - t_, interval_s_ - since_checkpoint_, until_written});
      t_ += step;
      since_checkpoint_ += step;
      trained_ += step;
      uncommitted_ += step * rate_;
      if (since_checkpoint_ >= interval_s_) {
        checkpointing_ = true;
        // The snapshot waits for the write before it (one write at a time).
        checkpoint_end_ = (writing_ ? std::max(t_, write_end_) : t_) + job_.checkpoint_cost_s;
      }
    }
  }

  // A node fails: the work since the last snapshot on disk is lost; the job waits for detection and
  // for enough nodes for its policy, then restarts.
  void fail(const Failure& f) {
    if (running_) {
      advance(f.at_s);
      r_.lost_work_s += since_checkpoint_ + (writing_ ? writing_s_ : 0);
      since_checkpoint_ = uncommitted_ = 0;
      checkpointing_ = writing_ = regrowing_ = false;
      running_ = false;
    } else {
      r_.downtime_s += f.at_s - t_;
      t_ = f.at_s;
    }
    ++r_.failures;
    repaired_at_[f.node] = f.at_s + fs_.repair.value();
    note(f.at_s, "failure " + enum_name(f.component, kComponentNames) + " " + std::to_string(f.index) +
                     " (node " + std::to_string(f.node) + ")");
    const double can_run = earliest_run(f.at_s + fs_.detection.value());
    resume_at_ = can_run + fs_.restart.value();
    if (std::isfinite(can_run)) {
      dp_ = runnable_dp(can_run);
      rate_ = tl_.throughput(dp_);
      r_.min_gpus = std::min(r_.min_gpus, dp_ * job_.replica_gpus);
    }
  }

  Reliability summary() {
    r_.useful_tokens = committed_ + uncommitted_ + (writing_ ? writing_tokens_ : 0);
    r_.productive_s = trained_ - r_.lost_work_s;
    r_.effective_training_time_ratio = r_.productive_s / tl_.horizon_s;
    r_.goodput = full_rate_ > 0 ? r_.useful_tokens / (tl_.horizon_s * full_rate_) : 0;
    if (job_.tokens_to_train > 0 && r_.goodput > 0)
      r_.time_to_train_s = job_.tokens_to_train / (r_.goodput * full_rate_);
    return std::move(r_);
  }

  const Timeline& tl_;
  const FailureSpec& fs_;
  const ElasticitySpec& el_;
  const JobShape& job_;
  const double interval_s_;
  const double full_rate_;
  Reliability r_;
  int dp_;
  double rate_;
  std::map<int, double> repaired_at_;  // failed node -> when it is back
  double t_ = 0;
  bool running_ = true, checkpointing_ = false, regrowing_ = false;  // regrowing: stopped to grow back
  double checkpoint_end_ = 0, resume_at_ = 0, since_checkpoint_ = 0, uncommitted_ = 0, committed_ = 0,
         trained_ = 0;
  // A snapshot being written behind the training: its work (tokens, training time) counts at write_end_.
  bool writing_ = false;
  double write_end_ = 0, writing_tokens_ = 0, writing_s_ = 0;
  double next_checkpoint_note_ = 0;
};

Reliability replay_once(const Timeline& tl, double interval_s) {
  return Replay(tl, interval_s).run();
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
  s.rate_per_s = job_failure_rate_per_s(scenario.failures, job);
  s.mtbf_s = s.rate_per_s > 0 ? 1 / s.rate_per_s : 0;
  const double cost = job.checkpoint_cost_s;
  s.young_daly_s = young_daly_interval_s(s.mtbf_s, cost);
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
