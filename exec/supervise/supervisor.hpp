// `paratwin run` as the supervisor of its ranks: it starts them under mpirun, follows their
// heartbeats over the control channel, and when a rank dies or hangs it stops the job, re-plans for
// the rank slots still up (a smaller data-parallel degree, the global batch kept by gradient
// accumulation), restarts from the newest complete checkpoint, and grows back at the next
// checkpoint once slots return. It also injects faults (--inject, --chaos) and, after failures,
// replays their trace on the twin to predict the goodput it measured.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "exec/run/live_run.hpp"
#include "exec/supervise/hosts.hpp"

namespace paratwin::exec {

struct SuperviseOptions {
  std::vector<std::string> inject;  // KIND@STEP:RANK
  std::optional<uint64_t> chaos_seed;
  int chaos_kills = 3;
  std::string chaos_mtbf = "5s";  // mean running time between chaos kills
  int min_ranks = 0;              // 0: the job's ranks (no shrinking)
  std::string down_time = "0s";   // how long a failed rank's slot stays out
  std::string hang_timeout = "60s";
  int max_restarts = 10;        // 0: a failure ends the run
  std::string control_address;  // empty: 127.0.0.1, or the first host's address on several hosts
  std::string hostfile, hosts;  // --hostfile FILE, --hosts h1:4,h2:4
  std::string failure_trace;    // write the run's failure trace here
};

// Declares the supervisor's flags on `cmd` (`paratwin run`; the ranks never see them).
void add_supervise_options(CLI::App& cmd, SuperviseOptions& options);

// Runs the job under supervision, on `hosts` (resolve_hosts; none: this machine): a failed rank takes
// its host out for --down-time, and the job shrinks to whole hosts that are up. `setup` is the job on
// all --ranks (prepared with LiveRunOptions::nodes = the hosts); `args` the flags after `run`.
// Returns the exit status: 0 when the run finished, 1 when it could not recover (restarts used up,
// no capacity), 2 when a rank found the job's input bad (never restarted), 130 when interrupted. Throws
// InputError for bad supervision flags (before starting anything).
int supervise_run(const LiveRunOptions& live, const LiveRunSetup& setup, const SuperviseOptions& options,
                  const std::vector<std::string>& args, const std::vector<Host>& hosts = {});

}  // namespace paratwin::exec
