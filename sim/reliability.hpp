// The second level of a long-horizon simulation: the iteration simulated in detail is replayed as
// timed blocks of training and checkpointing, cut by failures (sampled per component, or scripted),
// detection, restarts and repairs, under the restart, spares or shrink policy. No SimGrid here.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "plan/reliability/job_shape.hpp"
#include "plan/spec/scenario.hpp"

namespace paratwin::sim {

struct ReliabilityEvent {
  double at_s = 0;
  // "failure gpu 1234 (node 154)", "restart on 16376 GPUs", or "checkpoint" (a finished one; at most
  // 1,000 per horizon are recorded, as samples of the progress)
  std::string what;
  double useful_tokens = 0;  // trained and not lost, as of this event (goodput over time)
};

struct Reliability {
  double horizon_s = 0;
  double goodput = 0;                        // useful tokens / (horizon x full-configuration tokens/s)
  double effective_training_time_ratio = 0;  // training time whose work survived / horizon
  int failures = 0;
  int restarts = 0;
  double lost_work_s = 0;                    // training time since the last checkpoint, lost at failures
  double checkpoint_interval_s = 0;          // used (given, or the goodput-maximizing one)
  double optimal_checkpoint_interval_s = 0;  // goodput-maximizing, among a grid around Young/Daly
  double young_daly_interval_s = 0;          // sqrt(2 x MTBF x checkpoint cost); 0 without failure rates
  double job_mtbf_s = 0;                     // from the rates; 0 without
  double checkpoint_cost_s = 0;
  double checkpoint_overhead_s = 0;  // time spent writing checkpoints (finished or not)
  double downtime_s = 0;             // detection, restart and waiting for repairs
  double productive_s = 0;
  double useful_tokens = 0;
  int min_gpus = 0;            // fewest GPUs the job ran on
  double time_to_train_s = 0;  // tokens to train / (goodput x full tokens/s); 0 unknown
  std::vector<ReliabilityEvent> events;
};

// Failure times of every component over the horizon, deterministic for a seed: per component,
// lifetimes drawn from its distribution (mean mtbf), renewed after each repair; scripted events added.
// Each failure is mapped to the node it takes down.
struct Failure {
  double at_s = 0;
  Component component = Component::Gpu;
  int index = 0;
  int node = 0;
};
std::vector<Failure> sample_failures(const FailureSpec& failures, const JobShape& job, double horizon_s,
                                     std::uint64_t seed);

// Tokens per second of the job on `dp` replicas (the detailed simulation of that configuration).
using Throughput = std::function<double(int dp)>;

// Replays the horizon. With `checkpoint.interval` unset, tries a grid of intervals around Young/Daly
// on the same failures and keeps the one with the best goodput.
Reliability replay(const ScenarioSpec& scenario, const JobShape& job, double horizon_s, std::uint64_t seed,
                   const Throughput& throughput);

// What replay() will walk through, expected before it samples anything (for the budgets of
// plan/spec/limits.hpp): the failures of the horizon (each component's lifetimes and repairs, and the
// scripted ones) and the blocks of training between checkpoints over every interval it tries.
struct HorizonWork {
  double failures = 0;
  double blocks = 0;
};
HorizonWork expected_horizon_work(const ScenarioSpec& scenario, const JobShape& job, double horizon_s);

}  // namespace paratwin::sim
