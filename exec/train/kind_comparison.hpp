// The live report's comparison of measured with predicted, per kind of task: forward, backward,
// recompute, optimizer, offload copies, collectives inside one host and collectives across hosts
// (each a step's total on the profiled role), so a run across hosts shows where the network the twin
// assumed differs from the one measured.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "exec/train/measurements.hpp"

namespace paratwin::exec {

// [{"kind", "tasks", "measured_s", "predicted_s"}] per step, in the order above, kinds the Program
// has. measured_s: the median over the measured steps of the kind's total; compute and copies on
// rank 0 (wall time, as the breakdown), collectives as the transfer alone (on the rank that joined
// last, as the profile); compute kinds add measured_cpu_s, the same as rank 0's CPU time (what
// calibrate fits: time other processes took from the rank left out). predicted_s: the twin's task
// durations (plan/analytic/evaluate.hpp).
nlohmann::json by_kind_json(const ScenarioSpec& scenario, const Program& program, const RunTimings& timings);

// "per step, measured (CPU time) / predicted by the twin: forward 12.10 (11.90) / 10.30 ms, ..." for
// the end of a run.
std::string by_kind_text(const nlohmann::json& by_kind);

}  // namespace paratwin::exec
