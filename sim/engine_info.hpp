// Which SimGrid the simulator runs on, for `paratwin --version` and bug reports.
#pragma once

#include <string>

namespace paratwin::sim {

// "SimGrid 3.32.0" as the loaded library reports it (may differ from the headers built against).
std::string simgrid_version();

}  // namespace paratwin::sim
