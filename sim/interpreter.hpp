// One iteration (or several) of a Program as a SimGrid simulation: one actor per rank and stream runs
// its role's tasks in order once their dependencies have ended; compute tasks execute on the rank's
// GPU host, transfers and collectives are flows on the platform's links. Creates the process's one
// SimGrid engine: call it once per process.
#pragma once

#include <string>
#include <vector>

#include "plan/analytic/evaluate.hpp"
#include "plan/cost/time_noise.hpp"
#include "plan/topology/rank_layout.hpp"
#include "sim/flows.hpp"

namespace paratwin::sim {

struct LinkSeries {
  std::string link;
  double capacity_Bps = 0;                           // of the watched half, as simulated
  std::vector<std::pair<double, double>> usage_Bps;  // (simulated time, bytes/s in use)
};

struct InterpretOptions {
  int iterations = 1;
  std::vector<double> gpu_slowdown;  // by GPU index; empty: all nominal
  // Every GPU's slowdown drawn from a distribution (variability.ranks): of each role, only the first
  // instance and its slowest rank are observed (not every rank whose slowdown is not 1).
  bool slowdown_drawn = false;
  // Compute at the pace of the job's expected slowest GPU (the device's speed_cv, task_durations);
  // false where each GPU's own factor is drawn instead (variability.ranks).
  bool at_slowest_gpu = true;
  KernelNoise kernel_noise;    // each compute kernel's time factor per execution
  bool progress = false;       // print the iterations done to standard error
  double sample_period_s = 0;  // link usage sampling; 0: none
};

struct Interpretation {
  std::vector<double> iteration_end_s;  // when the last rank ended each iteration
  // Per role, the task timings of its slowest observed rank (first instance, and any on a straggler),
  // during the last iteration, relative to that iteration's start.
  std::vector<std::vector<TaskTiming>> role_timings;
  std::vector<int> role_rank;  // which global rank each role's timings come from
  long long activities = 0;    // executions, flows and delays the engine ran
  std::vector<LinkSeries> links;
};

Interpretation interpret(const Program& program, const ClusterSpec& cluster, const TrainingSpec& training,
                         const RankLayout& layout, const InterpretOptions& options);

// One job of several that share a cluster: its Program on its ranks, placed by its layout (built on the
// whole cluster with the job's first node, not folded), for this many iterations.
struct JobProgram {
  const Program* program = nullptr;
  const TrainingSpec* training = nullptr;
  const RankLayout* layout = nullptr;
  int iterations = 1;
};

struct JobsInterpretation {
  std::vector<Interpretation> jobs;
  std::vector<LinkBytes> links;  // every link any job's flows crossed, by name
};

// All jobs together in one engine on one platform of `cluster`, sharing its links; a job that ends
// first leaves the fabric to the others. Creates the process's one SimGrid engine: call it once per
// process.
JobsInterpretation interpret_jobs(const std::vector<JobProgram>& jobs, const ClusterSpec& cluster);

}  // namespace paratwin::sim
