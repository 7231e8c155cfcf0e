// The Timeline as Chrome trace event JSON (opens in Perfetto and chrome://tracing): one process per
// pipeline stage (role), one thread per stream.
#pragma once

#include <string>

#include "plan/analytic/evaluate.hpp"
#include "plan/ir/program.hpp"

namespace paratwin {

std::string chrome_trace(const Program& program, const Evaluation& evaluation);

}  // namespace paratwin
