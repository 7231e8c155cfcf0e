// Starting the ranks of a live run: `paratwin run` starts paratwin-rank under mpirun.
#pragma once

#include <string>
#include <vector>

namespace paratwin::exec {

// Runs `mpirun -np ranks [--oversubscribe] [--allow-run-as-root] paratwin-rank args...` and returns
// mpirun's exit status (128 + signal if it was killed). Throws std::runtime_error when mpirun cannot
// be started.
int launch_ranks(int ranks, const std::vector<std::string>& args);

// Already a rank under mpirun: replaces this process with paratwin-rank args... Returns only on
// failure, by throwing std::runtime_error.
int replace_with_rank(const std::vector<std::string>& args);

}  // namespace paratwin::exec
