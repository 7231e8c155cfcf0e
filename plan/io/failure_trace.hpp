// The failure trace of a live run: when which rank slot failed, and what detection, restart and
// checkpoints cost there. `paratwin run` writes it; `paratwin simulate --failure-trace` replays it on
// the twin (scripted failures, one failure domain per rank slot) to predict goodput and lost work.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/spec/scenario.hpp"

namespace paratwin {

struct TraceFailure {
  double at_s = 0;   // since the run began training
  int slot = 0;      // the rank slot (failure domain) that failed, 0 .. ranks-1
  std::string kind;  // kill, hang, exit
};

struct FailureTrace {
  std::string scenario;              // the scenario file the run trained
  std::vector<std::string> sets;     // the --set overrides that make its plan (dp and cluster size included)
  int ranks = 1;                     // slots of the job (the largest DP degree)
  int min_ranks = 1;                 // the smallest DP degree it may shrink to
  double horizon_s = 0;              // from the first step to the end of the run
  double checkpoint_interval_s = 0;  // 0: no checkpoints
  double checkpoint_cost_s = 0;      // training time a checkpoint holds up (its snapshot), mean
  double checkpoint_write_s = 0;     // then its write to disk behind the training, mean
  double detection_s = 0;            // mean, failure to decision
  double restart_s = 0;              // mean, decision to training again (capacity waits excluded)
  double down_s = 0;                 // how long a failed slot stays out
  std::vector<TraceFailure> failures;
};

nlohmann::json to_json(const FailureTrace& trace);

// Reads a trace file; throws InputError naming the file and the key that is missing or mistyped.
FailureTrace load_failure_trace(const std::string& path);
// The same from a document already read (fuzzing).
FailureTrace parse_failure_trace(const DocNode& document);

// The trace as scenario fields: its failures as scripted GPU failures (index = slot), no random
// ones, detection, restart and repair (= down time), the checkpoint interval, and the elasticity
// policy (shrink down to min_ranks, else restart).
void apply_failure_trace(const FailureTrace& trace, ScenarioSpec& scenario);

}  // namespace paratwin
