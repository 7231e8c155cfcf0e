// `paratwin simulate` on a scenario of several jobs: every job alone on its placement, then all of them
// together on the shared fabric in one SimGrid simulation; each job's slowdown, and the links where
// their traffic meets. Each simulation is a child process (one SimGrid engine per process).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/ir/plan.hpp"
#include "plan/spec/jobs.hpp"
#include "sim/flows.hpp"

namespace paratwin::sim {

struct JobsSimulateOptions {
  int iterations = 2;  // of the slowest job; faster jobs run more, so that all overlap throughout
};

struct JobOutcome {
  std::string name;
  double alone_s = 0;     // mean iteration time, the job alone on its nodes
  double together_s = 0;  // mean iteration time beside the other jobs
  int iterations_together = 0;
  double tokens_per_iteration = 0;
  int gpus = 0;

  double slowdown() const { return alone_s > 0 ? together_s / alone_s : 1.0; }
};

struct JobsSimulation {
  std::vector<JobOutcome> jobs;
  // Links that carried more than one job's traffic together, with each job's bytes (by name).
  std::vector<LinkBytes> shared_links;
  long long activities = 0;
  nlohmann::json json;
};

// `plans[j]` is job j's plan, verified for its own cluster (job_cluster); placements must be complete
// (place_jobs). Ranks are not folded (RankLayout::fold): every rank of every job is simulated. Throws
// InputError before any work when the runs together would pass the simulation's size limit, and
// std::runtime_error when a child simulation fails.
JobsSimulation simulate_jobs(const JobsScenario& scenario, const std::vector<Plan>& plans,
                             const JobsSimulateOptions& options);

// The per-job table and the shared links, as the terminal shows them.
std::string to_text(const JobsSimulation& simulation);

}  // namespace paratwin::sim
