// `paratwin run SCENARIO --backend cpu --ranks N`: trains the scenario's model for real. It checks
// the plan here (bad input exits 2 before any rank starts), then starts N paratwin-rank processes
// under mpirun (or becomes one, when mpirun started it) and returns their exit status.
#include <algorithm>

#include "cli/commands.hpp"
#include "exec/comm/communicator.hpp"
#include "exec/launch.hpp"
#include "exec/run/live_run.hpp"

namespace paratwin::cli {

void add_run_command(CLI::App& app, int& exit_status, const std::vector<std::string>& argv) {
  auto opts = std::make_shared<exec::LiveRunOptions>();
  auto* cmd = app.add_subcommand("run", "train the scenario's plan for real (CPU: Eigen + MPI)");
  exec::add_live_run_options(*cmd, *opts);
  cmd->callback([opts, &exit_status, argv] {
    const exec::LiveRunSetup setup = exec::prepare_live_run(*opts);
    print_diagnostics(setup.scenario.warnings);
    // The flags after `run`, handed on to every rank unchanged.
    auto run = std::find(argv.begin(), argv.end(), "run");
    const std::vector<std::string> args(run == argv.end() ? argv.end() : run + 1, argv.end());
    if (exec::under_mpirun())
      exit_status = exec::replace_with_rank(args);
    else
      exit_status = exec::launch_ranks(setup.plan.dp, args);
  });
}

}  // namespace paratwin::cli
