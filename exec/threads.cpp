// The threads of a rank (see threads.hpp): OpenMP's, which Eigen's GEMMs use as well.
#include "exec/threads.hpp"

#include <sched.h>

#include <thread>

#include <omp.h>
#include <Eigen/Core>

namespace paratwin::exec {

void set_rank_threads(int threads);

namespace {
int threads_ = 1;
// One thread until told otherwise: OpenMP and Eigen would take every core, and tests run several
// ranks on two cores.
[[maybe_unused]] const bool one_thread_at_start = (set_rank_threads(1), true);
}  // namespace

void set_rank_threads(int threads) {
  threads_ = std::max(1, threads);
  omp_set_num_threads(threads_);
  Eigen::setNbThreads(threads_);
}

int rank_threads() {
  return threads_;
}

int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, int(std::thread::hardware_concurrency()));
}

int default_rank_threads(int ranks_on_node) {
  return std::max(1, available_cores() / std::max(1, ranks_on_node));
}

}  // namespace paratwin::exec
