// `paratwin sweep SCENARIO`: capacity planning over a grid or list of scenario variants. Plans and
// evaluates (or simulates) every point in worker processes, `--jobs` at a time; under mpirun it
// becomes paratwin-sweep-rank, which shares the points among the ranks (this process links SimGrid,
// whose SMPI defines the MPI symbols, so the MPI side is its own executable).
#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/sweep/sweep_command.hpp"
#include "exec/comm/communicator.hpp"
#include "plan/sweep/point.hpp"
#include "plan/util/child_process.hpp"
#include "sim/simulate.hpp"

namespace paratwin::cli {
namespace {

SimulatedPoint simulate_point(const ScenarioSpec& scenario, const Plan& plan, std::optional<Seconds> horizon,
                              int iterations) {
  sim::SimulateOptions options;
  options.horizon = horizon;
  options.iterations = iterations;
  const sim::SimulationResult result = sim::simulate(scenario, plan, options);
  return {result.report.metrics,
          result.reliability ? std::optional<double>(result.reliability->goodput) : std::nullopt,
          result.spread ? std::optional<double>(result.spread->p95_s) : std::nullopt};
}

// A worker: reads point indices on standard input, answers one JSON line per point. Anything else the
// libraries print goes to standard error, so that standard output carries results only.
int run_worker(const SweepOptions& options) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the coordinator gone (killed), nobody reads the results
  const int results_fd = ::dup(STDOUT_FILENO);
  ::dup2(STDERR_FILENO, STDOUT_FILENO);
  FILE* results = ::fdopen(results_fd, "w");
  if (!results) throw std::runtime_error("cannot open the worker's result stream");
  const LoadedSweep sweep = load_sweep(options);
  const int iterations = options.iterations;
  const PointSimulator simulator =
      sweep.scenario.sweep.simulate
          ? PointSimulator([iterations](const ScenarioSpec& s, const Plan& p, std::optional<Seconds> h) {
              return simulate_point(s, p, h, iterations);
            })
          : PointSimulator();
  for (std::string line; std::getline(std::cin, line);) {
    const int index = std::atoi(line.c_str());
    if (index < 0 || index >= sweep.points.size()) throw std::runtime_error("no sweep point " + line);
    const SweepPoint point = sweep.points.at(index);
    PointResult result;
    try {
      result = evaluate_point(sweep.scenario, point, simulator);
    } catch (const std::exception& e) {
      result = failed_point(point, e.what());
    }
    std::fputs((to_json(result).dump() + "\n").c_str(), results);
    std::fflush(results);
  }
  return kExitOk;
}

// Under mpirun: becomes paratwin-sweep-rank with the same arguments.
int replace_with_sweep_rank(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {sibling_executable("paratwin-sweep-rank")};
  argv.insert(argv.end(), args.begin(), args.end());
  replace_process(std::move(argv), "built with paratwin when Open MPI is found");
}

}  // namespace

void add_sweep_command(CLI::App& app, int& exit_status, const std::vector<std::string>& argv) {
  auto opts = std::make_shared<SweepOptions>();
  auto* cmd = app.add_subcommand("sweep",
                                 "capacity planning: plan every point of a grid of scenarios; "
                                 "time to train, cost, Pareto front, the goal's cheapest point");
  add_sweep_options(*cmd, *opts);
  cmd->callback([opts, &exit_status, argv] {
    if (opts->worker) {
      exit_status = run_worker(*opts);
      return;
    }
    if (exec::under_mpirun()) {
      auto sweep = std::find(argv.begin(), argv.end(), "sweep");
      exit_status = replace_with_sweep_rank(std::vector<std::string>(sweep + 1, argv.end()));
      return;
    }
    const LoadedSweep sweep = load_sweep(*opts);
    print_diagnostics(sweep.scenario.warnings);
    exit_status = run_sweep(*opts, sweep);
  });
}

}  // namespace paratwin::cli
