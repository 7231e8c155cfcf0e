// `paratwin simulate`: a scenario's plan run as a discrete-event simulation (contention, stragglers),
// and over a long horizon, failures, checkpoints and restarts. The SimGrid part of each run happens in
// a child process (SimGrid allows one engine per process), so one call may simulate several
// configurations (the cluster shrunk after failures).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "plan/report/report.hpp"
#include "plan/report/spread.hpp"
#include "sim/reliability.hpp"

namespace paratwin::sim {

struct SimulateOptions {
  int iterations = 1;              // simulated back to back; the report gives their mean
  double slower_than_pct = 5;      // the x of "the probability that a step is more than x% slower"
  std::optional<Seconds> horizon;  // the second level: failures, checkpoints, restarts
  std::uint64_t seed = 1;          // stragglers and random failures
  bool trace = false;              // produce the Chrome trace
  bool all_ranks = false;  // simulate every rank (no folding of symmetric ranks, see RankLayout::fold)
  bool progress = false;   // report the iterations simulated on standard error
  // A live run's failure trace: each device is its own failure domain (a rank slot, not its node),
  // a checkpoint costs what the run measured instead of its bytes at the storage bandwidth, with
  // its write behind the training, and a shrunk job grows back at a checkpoint (see JobShape).
  bool device_failure_domains = false;
  std::optional<double> checkpoint_cost_s;
  double checkpoint_write_behind_s = 0;
  bool regrow_at_checkpoint = false;
};

struct SimulationResult {
  Report report;                           // evaluator "simulation"
  std::optional<Reliability> reliability;  // with a horizon
  nlohmann::json json;                     // the report's JSON, reliability and simulator figures added
  std::string trace;                       // Chrome trace JSON (when asked)
  long long activities = 0;                // executions, flows and delays simulated
  std::vector<int> straggler_nodes;
  // [role][task]: the last iteration's timings of each role's slowest observed rank, from that
  // iteration's start (empty for a role none of whose ranks was observed).
  std::vector<std::vector<TaskTiming>> role_timings;
  // With the scenario's variability or several iterations: their spread against the noise-free step.
  std::optional<IterationSpread> spread;
  bool unfolded_for_variability = false;  // every rank simulated: variability makes them differ
  std::string folding;                    // which ranks stood for others, in words (empty: none)
};

// Throws std::runtime_error when the child simulation fails (the message says why), and InputError
// before any work when the simulation, its horizon or its trace would pass their limits
// (plan/spec/limits.hpp), naming what brings it under.
SimulationResult simulate(const ScenarioSpec& scenario, const Plan& plan, const SimulateOptions& options);

// Text form of the reliability figures, appended to the report's table.
std::string to_text(const Reliability& reliability);

}  // namespace paratwin::sim
