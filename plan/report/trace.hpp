// The Timeline as Chrome trace event JSON (opens in Perfetto and chrome://tracing): one process per
// pipeline stage (role), one thread per stream. Written event by event, so that a large Program's trace
// is never held as a document.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "plan/analytic/evaluate.hpp"
#include "plan/ir/program.hpp"

namespace paratwin {

// Writes the trace of `program`; `extra` may add events of its own (a simulator's link usage) through
// the function it is given, each a JSON object.
using TraceEventSink = std::function<void(const nlohmann::json& event)>;
void write_chrome_trace(std::ostream& out, const Program& program, const Evaluation& evaluation,
                        const std::function<void(const TraceEventSink&)>& extra = {});
std::string chrome_trace(const Program& program, const Evaluation& evaluation);

// The events write_chrome_trace writes for `program` (without extras): for the trace budget.
std::int64_t chrome_trace_events(const Program& program);
// Empty when a trace of `events` events is within kTraceEventsLimit; else why not and what brings it
// under, for an InputError at `--trace`.
std::string trace_size_problem(std::int64_t events, std::int64_t tasks);

}  // namespace paratwin
