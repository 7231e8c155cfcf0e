// The sweep's picture, drawn by paratwin-plot (a separate executable, so that paratwin and its workers
// do not load Qt at every start).
#pragma once

#include <string>

#include "plan/sweep/results.hpp"

namespace paratwin::cli {

// False when paratwin-plot was not built (no Qt 6 Gui) or is missing beside this executable.
bool png_available();

// Runs paratwin-plot with the results on its standard input. Throws std::runtime_error when it fails.
void write_sweep_png(const SweepResults& results, const std::string& path);

}  // namespace paratwin::cli
