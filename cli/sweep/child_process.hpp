// Child processes of the sweep (workers, the plotter): started with posix_spawn, which is safe in an
// MPI process too, with pipes to their standard input and, on request, from their standard output.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace paratwin::cli {

struct ChildProcess {
  pid_t pid = -1;
  int to = -1;    // its standard input
  int from = -1;  // its standard output, when asked for (else it shares ours)
};

// Starts argv[0] (a path) with argv. Throws std::runtime_error when it cannot be started.
ChildProcess spawn_child(std::vector<std::string> argv, bool read_output);

// Waits for the child to end and returns its wait status.
int wait_child(pid_t pid);

// The `paratwin` executable beside the running one (the sweep's worker).
std::string paratwin_executable();
// An executable of ParaTwin's beside the running one, e.g. "paratwin-plot".
std::string sibling_executable(const std::string& name);

}  // namespace paratwin::cli
