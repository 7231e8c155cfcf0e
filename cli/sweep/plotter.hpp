// The sweep's and the simulation's pictures, drawn by paratwin-plot (a separate executable, so that paratwin
// and its workers do not load Qt at every start).
#pragma once

#include <string>

namespace paratwin::cli {

// False when paratwin-plot was not built (no Qt 6 Gui) or is missing beside this executable.
bool png_available();

// Runs paratwin-plot on a results file (what `sweep --json` writes). Throws std::runtime_error when it
// fails.
void write_sweep_png(const std::string& results_json, const std::string& path);

// Runs paratwin-plot spread on a simulation's report (what `simulate --json` writes): the iteration
// times' histogram and distribution function. Throws std::runtime_error when it fails.
void write_spread_png(const std::string& report_json, const std::string& path);

// Runs paratwin-plot jobs on a simulation of several jobs (what `simulate --json` writes for a scenario
// with `jobs:`): each job's iteration time alone and together. Throws std::runtime_error when it fails.
void write_jobs_png(const std::string& report_json, const std::string& path);

}  // namespace paratwin::cli
