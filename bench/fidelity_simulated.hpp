// A run of the validation set (bench/fidelity_set.hpp) through the simulator: the same scenario and
// fixed plan as the analytic evaluation, run by SimGrid (contention on the cluster's links, every task
// of the Program as its own activity). bench_fidelity --simulate reports it beside the analytic
// prediction; tests/sim/test_sim_fidelity checks that the two agree.
#pragma once

#include "bench/fidelity_set.hpp"

namespace paratwin::fidelity {

// The simulated iteration time of a checked or held-out run, in seconds. Throws InputError as
// evaluate_run does, std::runtime_error when the simulation fails.
double simulated_iteration_time(const Run& run, const Catalog& catalog);

}  // namespace paratwin::fidelity
