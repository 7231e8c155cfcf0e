// The bounds ParaTwin keeps on what its input may make it do: how large a YAML document may expand,
// how many points a sweep, tasks a Program, activities a simulation and events a trace may hold.
// One home for every limit; docs/limits.md says what each bounds and when to raise it.
#pragma once

#include <cstdint>
#include <string>

namespace paratwin {

// A limit and the environment variable that raises (or lowers) it for one run.
struct InputLimit {
  const char* variable;  // PARATWIN_MAX_...
  std::int64_t default_value;
  const char* what;  // "YAML nodes in one document", for messages
};

inline constexpr InputLimit kYamlNodesLimit{"PARATWIN_MAX_YAML_NODES", 500'000,
                                            "YAML nodes in one document (aliases expanded)"};
inline constexpr InputLimit kYamlDepthLimit{"PARATWIN_MAX_YAML_DEPTH", 64, "levels of YAML nesting"};
inline constexpr InputLimit kInputBytesLimit{"PARATWIN_MAX_INPUT_BYTES", 16 << 20,
                                             "bytes in one YAML or JSON input file"};
inline constexpr InputLimit kSweepPointsLimit{"PARATWIN_MAX_SWEEP_POINTS", 10'000'000, "points in one sweep"};
inline constexpr InputLimit kProgramTasksLimit{"PARATWIN_MAX_PROGRAM_TASKS", 5'000'000,
                                               "tasks in one Program (all its roles)"};
inline constexpr InputLimit kSimActivitiesLimit{"PARATWIN_MAX_SIM_ACTIVITIES", 50'000'000,
                                                "activities in one simulated iteration"};
inline constexpr InputLimit kHorizonFailuresLimit{"PARATWIN_MAX_HORIZON_FAILURES", 10'000'000,
                                                  "failures sampled over a simulated horizon"};
inline constexpr InputLimit kHorizonBlocksLimit{"PARATWIN_MAX_HORIZON_BLOCKS", 1'000'000'000,
                                                "blocks of training between checkpoints replayed over a "
                                                "horizon (all the intervals tried)"};
inline constexpr InputLimit kTraceEventsLimit{"PARATWIN_MAX_TRACE_EVENTS", 1'000'000,
                                              "events in one Chrome trace"};
inline constexpr InputLimit kChakraNodesLimit{"PARATWIN_MAX_CHAKRA_NODES", 20'000'000,
                                              "nodes in one set of Chakra traces (all ranks' files)"};

// Tasks lowering makes for one of `pp` pipeline ranks of `virtual_stages` chunks, `microbatches` per
// step and `layers` layers: about 24 per pass pair (compute, collectives, transfers, offload copies,
// bucket segments) and 4 per layer (buckets, the optimizer); under ZeRO 2 and 3, 3 more per layer of
// the rank and micro-batch (ZeRO 3's two gathers and reduce-scatter, ZeRO 2's bucket reduce-scatters).
// Saturates at INT64_MAX.
std::int64_t estimated_role_tasks(std::int64_t virtual_stages, std::int64_t microbatches, std::int64_t layers,
                                  std::int64_t pp = 1, int zero = 0);
// The same for all `pp` pipeline ranks: a Program's tasks.
std::int64_t estimated_program_tasks(std::int64_t pp, std::int64_t virtual_stages, std::int64_t microbatches,
                                     std::int64_t layers, int zero = 0);
// Empty when such a Program is within kProgramTasksLimit; else why not, and the knobs that shrink it.
std::string program_size_problem(std::int64_t pp, std::int64_t virtual_stages, std::int64_t microbatches,
                                 std::int64_t layers, int zero = 0);

// The limit in force: the variable's value when set, else the default. A variable that is not a
// positive whole number throws InputError at "<PARATWIN_MAX_...>".
std::int64_t limit_value(const InputLimit& limit);

// "; ParaTwin's limit is 1000000 YAML nodes in one document (set PARATWIN_MAX_YAML_NODES to raise
// it; docs/limits.md)" for the end of a message.
std::string limit_note(const InputLimit& limit);

}  // namespace paratwin
