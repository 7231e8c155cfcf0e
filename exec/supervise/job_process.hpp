// The processes of one launch of the job: mpirun and its ranks, watched and stopped from outside.
// Open MPI puts every rank in a process group of its own, so stopping the job means mpirun's group
// and each of its children.
#pragma once

#include <sys/types.h>

#include <optional>
#include <vector>

namespace paratwin::exec {

// mpirun's exit status once it has ended (128 + signal when killed); nullopt while it runs.
std::optional<int> exit_status_if_ended(pid_t mpirun);

// Stops the job: SIGTERM to mpirun's rank children and `ranks` (pids from the control channel; 0 is
// skipped; on other hosts mpirun stops them), then to mpirun's group if it has not ended by itself within
// `grace_s`, SIGKILL to whatever still lives after that; returns mpirun's exit status once it is reaped.
int stop_job(pid_t mpirun, const std::vector<int>& ranks, double grace_s = 1.0);

// Whether a process is alive (exists and is not a zombie).
bool process_alive(pid_t pid);

// SIGKILL to `pid` if it is a live paratwin-rank (a pid from the control channel may have been
// reused since); whether it was sent.
bool kill_rank(pid_t pid);

}  // namespace paratwin::exec
