// `paratwin run` as the ranks see it. The rank processes are a separate executable, paratwin-rank:
// SimGrid's library defines the MPI symbols too (SMPI), so a process that links the simulator cannot
// call Open MPI; paratwin-rank links paratwin_exec and paratwin_plan only, and `paratwin run` starts
// it under mpirun with the same flags.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "plan/ir/plan.hpp"

namespace paratwin::exec {

struct LiveRunOptions {
  std::string scenario, plan_file, backend = "cpu", data, checkpoint_dir, profile, trace, json;
  std::vector<std::string> sets;
  int ranks = 0;
  int threads = 0;  // per rank; 0: the node's cores divided by its ranks
  int nodes = 0;    // hosts the job runs on (set by the supervisor); 0: this machine, the cluster as given
  long long steps = 0, checkpoint_every = 0, stop_after = -1;
  long long kill_after = -1;  // tests: rank 0 dies by SIGKILL after this step (a real crash)
  bool resume = false;
  unsigned long long seed = 1337;
  float lr = 3e-3f;
};

// Declares the flags of `paratwin run` on `cmd` (the subcommand, or paratwin-rank's app).
void add_live_run_options(CLI::App& cmd, LiveRunOptions& options);

// Loads a scenario for a live run on `ranks` data-parallel ranks (0: as the scenario says): sets
// plan.dp and, on a one-node single-pool cluster such as local-cpu, sizes the node to the ranks x tp
// x pp processes (one per "device"; tp and pp as the scenario or its --set overrides give them). On
// `nodes` hosts (0: this machine) such a cluster becomes that many nodes sharing the processes
// evenly. Throws InputError when the cluster cannot be resized that way.
ScenarioSpec load_live_scenario(const std::string& path, std::vector<Override> overrides, int ranks,
                                int nodes = 0);

// The --set overrides load_live_scenario adds for `ranks` on `nodes` (the twin's replay of a run uses
// them).
std::vector<std::string> live_rank_overrides(const std::string& path, int ranks,
                                             const std::vector<Override>& overrides = {}, int nodes = 0);

struct LiveRunSetup {
  ScenarioSpec scenario;
  Plan plan;
  // Threads per rank (CPU backend): --threads, else the cores divided by the ranks. The scenario's CPU
  // devices are sized to them (plan/topology/rank_threads.hpp), so the twin predicts the run as it goes.
  int threads = 1;
};

// Loads the scenario (with --set and --ranks as plan.dp), completes and verifies the plan, checks that
// the backend can run it and sizes CPU devices to the threads of a rank. Throws InputError listing every
// problem.
LiveRunSetup prepare_live_run(const LiveRunOptions& options);

// Runs this process as one rank of the job (MPI initialized here); rank 0 prints progress and writes
// the report, profile and trace. Returns the exit status; throws InputError and std::runtime_error.
int run_live_rank(const LiveRunOptions& options);

// paratwin-rank beside the running executable (build/bin/ or the install's bin/).
std::string rank_executable();

}  // namespace paratwin::exec
