// `paratwin plan SCENARIO --emit chakra DIR`: the Program as Chakra execution traces (MLCommons), the
// workload format ASTRA-sim replays. One file per world rank, DIR/<prefix>.<rank>.et: a GlobalMetadata
// message, then a metadata node listing the rank's process groups (as PyTorch's `process_group:init`
// node does, which ASTRA-sim reads), then the rank's tasks as nodes, each message prefixed by its length
// as a varint. Beside them DIR/<prefix>.comm_groups.json, every group's members by id (ASTRA-sim's
// --comm-group-configuration file).
//
// Node kinds: forward, backward, recompute and optimizer tasks are COMP_NODEs (num_ops: their FLOPs,
// tensor_size: the bytes their kernels move); collectives COMM_COLL_NODEs (comm_type, comm_size, pg_name),
// a task folding `count` identical collectives giving `count` nodes in a row; sends and receives
// COMM_SEND_NODE / COMM_RECV_NODE with comm_src, comm_dst, comm_tag (the transfer's index,
// plan/ir/program.hpp) and comm_size; host copies MEM_STORE_NODE (to the host) or MEM_LOAD_NODE. A
// task's dependencies are data_deps; the task before it on its stream is a ctrl_dep (streams run their
// tasks in order). Durations are the analytic evaluator's: duration_micros, and exactly in the
// attribute duration_ns; start_time_micros is its schedule's start (`simulate --emit chakra DIR`: the
// simulation's).
#pragma once

#include <cstdint>
#include <string>

#include "plan/analytic/evaluate.hpp"
#include "plan/ir/program.hpp"
#include "plan/spec/cluster.hpp"
#include "plan/spec/scenario.hpp"

namespace paratwin::chakra {

// The version written in GlobalMetadata: the Chakra schema release the .proto follows.
inline constexpr const char* kSchemaVersion = "0.0.4";

// The name of a trace's metadata node that lists the rank's process groups, and of the attribute
// carrying a node's exact duration.
inline constexpr const char* kProcessGroupNode = "## process_group:init ##";
inline constexpr const char* kDurationAttr = "duration_ns";

struct ChakraSummary {
  std::string prefix;
  int ranks = 0;
  long long nodes = 0;  // over all files, metadata nodes included
  int process_groups = 0;
};

// A file name prefix from a scenario name: letters, digits, '-' and '_' kept, anything else '_'
// ("paratwin" for an empty name).
std::string trace_prefix(const std::string& scenario_name);

// Nodes in all ranks' files of `program`, metadata nodes included.
std::int64_t chakra_nodes(const Program& program);

// Writes the traces of `program` (lowered with task names) into `dir`, created with its parents when
// missing; each file appears whole or not at all, and files of the same prefix for ranks beyond this
// world (an earlier, larger plan's) are removed. Throws InputError naming the directory when it cannot
// be created or is not a directory, and before writing anything when the traces would pass
// kChakraNodesLimit (plan/spec/limits.hpp). `simulated` ([role][task], relative to the iteration's
// start; a role left empty keeps the analytic times): a simulation's timings, whose starts and whose
// compute, copy and send durations the nodes then carry (the metadata's `durations` attribute says
// "simulation" instead of "analytic").
ChakraSummary write_chakra_traces(const std::string& dir, const std::string& prefix, const Program& program,
                                  const ScenarioSpec& scenario,
                                  const std::vector<std::vector<TaskTiming>>& simulated = {});

}  // namespace paratwin::chakra
