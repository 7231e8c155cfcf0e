// Threads inside one rank of the live CPU backend: the element-wise kernels, the norms, attention, the
// loss and the optimizer run their loops on this many OpenMP threads, and Eigen's GEMMs use the same.
// Work is cut into pieces whose bounds depend on the sizes only, never on the number of threads, so
// a kernel whose pieces are independent gives the same bits on 1 thread as on 8, and sums are added
// piece by piece in a fixed order.
#pragma once

#include <algorithm>
#include <vector>

namespace paratwin::exec {

// Sets the threads of this process's kernels and GEMMs (values below 1 count as 1).
void set_rank_threads(int threads);
int rank_threads();

// The cores this process may run on (its CPU affinity; at least 1).
int available_cores();
// A rank's threads when none are asked for: the cores divided by the ranks that share them, at least 1.
int default_rank_threads(int ranks_on_node);

// Runs body(begin, end) over [0, n) cut into pieces of `grain` (the last one shorter), on the rank's
// threads, each taking the next piece when it is free (on shared cores a thread that loses its core
// leaves its pieces to the others); one piece, or one thread, runs inline.
template <class Body>
void parallel_for(long n, long grain, Body&& body) {
  grain = std::max(1L, grain);
  const long pieces = (n + grain - 1) / grain;
  const int threads = rank_threads();
  if (pieces <= 1 || threads == 1) {
    for (long p = 0; p < pieces; ++p) body(p * grain, std::min(n, (p + 1) * grain));
    return;
  }
#pragma omp parallel for schedule(dynamic) num_threads(threads)
  for (long p = 0; p < pieces; ++p) body(p * grain, std::min(n, (p + 1) * grain));
}

// The sum over [0, n) of piece(begin, end) (a double per piece of `grain`), the pieces' sums added in
// their order: the same bits on any number of threads.
template <class Piece>
double parallel_sum(long n, long grain, Piece&& piece) {
  grain = std::max(1L, grain);
  std::vector<double> sums(size_t((n + grain - 1) / grain), 0.0);
  parallel_for(long(sums.size()), 1,
               [&](long p, long) { sums[size_t(p)] = piece(p * grain, std::min(n, (p + 1) * grain)); });
  double total = 0;
  for (double s : sums) total += s;
  return total;
}

}  // namespace paratwin::exec
