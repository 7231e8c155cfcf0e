// `paratwin run SCENARIO --backend cpu --ranks N`: trains the scenario's model for real. It checks
// the plan here (bad input exits 2 before any rank starts), then starts N paratwin-rank processes
// under mpirun and supervises them (exec/supervise/), or becomes one when mpirun started it.
#include <algorithm>

#include "cli/commands.hpp"
#include "exec/comm/communicator.hpp"
#include "exec/launch.hpp"
#include "exec/run/launch_checks.hpp"
#include "exec/run/live_run.hpp"
#include "exec/supervise/supervisor.hpp"

namespace paratwin::cli {

void add_run_command(CLI::App& app, int& exit_status, const std::vector<std::string>& argv) {
  auto opts = std::make_shared<exec::LiveRunOptions>();
  auto* cmd = app.add_subcommand(
      "run", "train the scenario's plan for real (CPU: Eigen + MPI; CUDA: cuBLASLt + NCCL)");
  exec::add_live_run_options(*cmd, *opts);
  auto supervision = std::make_shared<exec::SuperviseOptions>();
  exec::add_supervise_options(*cmd, *supervision);
  cmd->callback([opts, supervision, &exit_status, argv] {
    // On several hosts (--hosts, --hostfile, a Slurm allocation) the plan's cluster has one node each.
    std::vector<exec::Host> hosts;
    if (!exec::under_mpirun()) {
      hosts = exec::resolve_hosts(supervision->hostfile, supervision->hosts);
      opts->nodes = int(hosts.size());
    }
    const exec::LiveRunSetup setup = exec::prepare_live_run(*opts);
    print_diagnostics(setup.scenario.warnings);
    // The flags after `run`, handed on to every rank unchanged.
    auto run = std::find(argv.begin(), argv.end(), "run");
    const std::vector<std::string> args(run == argv.end() ? argv.end() : run + 1, argv.end());
    if (exec::under_mpirun()) {
      exit_status = exec::replace_with_rank(args);
    } else {
      exec::check_before_launch(*opts, setup);
      exit_status = exec::supervise_run(*opts, setup, *supervision, args, hosts);
    }
  });
}

}  // namespace paratwin::cli
