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

// Runs paratwin-plot FIGURE on a simulation's report (`report_json`, the text `simulate --json` writes),
// through a temporary file beside the picture: `spread`, the iteration times' histogram and distribution
// function; `jobs`, several jobs' iteration times alone and together. Throws std::runtime_error when it
// fails.
void write_report_png(const std::string& figure, const std::string& report_json, const std::string& path);

}  // namespace paratwin::cli
