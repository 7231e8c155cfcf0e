// `paratwin sweep`: the options, loading the sweep, and the coordinator that runs its points on
// worker processes (and, under mpirun, on the other ranks), saves the results as they come and writes
// the table, JSON, CSV and PNG. Shared by `paratwin` and `paratwin-sweep-rank` (rank 0 of mpirun).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/sweep/channel.hpp"
#include "plan/sweep/grid.hpp"

namespace paratwin::cli {

struct SweepOptions {
  std::string scenario;
  std::vector<std::string> sets, grids;
  int jobs = 1;
  std::string json, csv, png;
  bool resume = false;
  int iterations = 1;   // simulated per point (with sweep.simulate)
  std::string rank_by;  // "" (none), or one of rank_keys(): the ranking printed after the table
  bool worker = false;  // hidden: evaluate the points named on standard input (started by the coordinator)
};

void add_sweep_options(CLI::App& command, SweepOptions& options);

struct LoadedSweep {
  ScenarioSpec scenario;  // its document without the sweep: section (each point copies it)
  SweepPoints points;
};

// The scenario with --set applied and --grid axes added, and its points. Throws InputError (bad input,
// or a scenario without a sweep).
LoadedSweep load_sweep(const SweepOptions& options);

// The worker's command line: paratwin sweep SCENARIO --set ... --grid ... --worker.
std::vector<std::string> worker_command(const SweepOptions& options);

// Runs the points not yet in the results (with --resume, those of --json FILE that did not fail) on
// `jobs` local workers plus the slots of `remote`. Each result goes to the sweep's journal (FILE.partial
// beside --json FILE, else a temporary file) as it finishes, in index order; the JSON and CSV files are
// rewritten from the journal now and then and at the end, the journal then removed. Memory does not
// grow with the number of points. Returns the exit status: 0 done, 1 when points failed (rerun with
// --resume), 130 interrupted (the journal kept for --resume). Throws InputError for results that cannot
// be resumed.
int run_sweep(const SweepOptions& options, const LoadedSweep& sweep,
              const std::vector<PointChannel*>& remote = {});

}  // namespace paratwin::cli
