// Starting the ranks of a live run: `paratwin run` starts paratwin-rank under mpirun.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace paratwin::exec {

// Starts `mpirun -np ranks [--oversubscribe] [--allow-run-as-root] paratwin-rank args...` without
// waiting for it: in a process group of its own, standard input from /dev/null, standard output onto
// standard error when asked, and `environment` (name, value) set and exported to the ranks. Returns
// mpirun's process id; throws std::runtime_error when mpirun cannot be started. With a
// `rank_hostfile` (one host a line, line r for rank r: exec/supervise/hosts.hpp), mpirun places the
// ranks on those hosts by its sequential mapper; without, on this machine.
pid_t start_ranks(int ranks, const std::vector<std::string>& args,
                  const std::vector<std::pair<std::string, std::string>>& environment, bool output_to_stderr,
                  const std::string& rank_hostfile = "");

// Already a rank under mpirun: replaces this process with paratwin-rank args... Returns only on
// failure, by throwing std::runtime_error.
int replace_with_rank(const std::vector<std::string>& args);

}  // namespace paratwin::exec
