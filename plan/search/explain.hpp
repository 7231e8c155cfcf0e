// Messages of the search: why the best plan beats the runner-up, and what runs out when nothing fits.
#pragma once

#include <string>

#include "plan/search/optimizer.hpp"

namespace paratwin {

// "pp=8 instead of 16: ..." with iteration time, bubble, exposed communication, recompute and memory
// of both; ties within the model's precision say so; other objectives add their values.
std::string explain(const Candidate& best, const Candidate& runner_up, Objective objective);

// Under failures: why `faster`, faster per iteration, lost to `best` -- the expected goodput of both
// and what sets it (checkpoint cost and interval, GPUs a shrink loses, failure rate, lost work).
std::string explain_failures(const Candidate& best, const Candidate& faster, Objective objective);

// "no plan fits in memory: the closest plan (...) needs ... GiB on stage ..." -- `closest` is the
// evaluated plan that came nearest to fitting, if any.
std::string nothing_fits(const Report* closest);

}  // namespace paratwin
