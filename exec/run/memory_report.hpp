// What a live run measured of memory and DP traffic per rank, beside the twin's prediction for the
// same Program: the "memory_measured" and "dp_traffic" parts of `paratwin run`'s report.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "exec/comm/communicator.hpp"
#include "exec/train/run_result.hpp"
#include "plan/ir/program.hpp"

namespace paratwin::exec {

// Collective (every rank of comm): each rank's buffers at its peak, by use, and its DP bytes per step;
// on rank 0 the JSON, elsewhere null. Bytes throughout.
//   memory_measured{ranks[{rank, peak_bytes, parameters, gradients, optimizer, activations,
//     communication, other, host_peak_bytes}], predicted{peak_bytes, weights, gradients, optimizer,
//     activations, buffers, host}}
//   dp_traffic{measured_bytes_per_step[] (rank 0), predicted_bytes_per_step}
nlohmann::json measured_memory_json(Communicator& comm, const ScenarioSpec& scenario, const Program& program,
                                    const RunResult& result);

// Two lines for the terminal: the largest measured peak per rank and its make-up against the twin's,
// and DP bytes per step measured against predicted.
std::string measured_memory_text(const nlohmann::json& report);

}  // namespace paratwin::exec
