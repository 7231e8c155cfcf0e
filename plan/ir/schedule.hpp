// The order in which one pipeline rank runs the forward and backward passes of its micro-batches
// under GPipe, 1F1B and interleaved 1F1B (Narayanan et al. 2021, section 2.2).
#pragma once

#include <vector>

#include "plan/spec/scenario.hpp"

namespace paratwin {

struct PipelineStep {
  bool forward = true;
  int microbatch = 0;
  int chunk = 0;  // model chunk in model order: the pipeline rank's j-th chunk is j x pp + rank
};

// pp pipeline ranks, v chunks per rank (1 unless interleaved), m micro-batches per iteration.
//   gpipe:        all forwards, then all backwards
//   1f1b:         pp - rank - 1 warm-up forwards, then one forward and one backward in turn, then the
//                 remaining backwards
//   interleaved:  as 1f1b over m x v micro-steps with (pp - rank - 1) x 2 + (v - 1) x pp warm-up
//                 steps; micro-step k runs chunk (k / pp) mod v of micro-batch (k / (pp v)) pp + k mod pp
//                 (backwards take the chunks in reverse). Needs m to be a multiple of pp.
std::vector<PipelineStep> pipeline_order(Schedule schedule, int pp, int v, int m, int rank);

// Megatron-Core's combined 1F1B without pipelining (combined_1f1b_schedule_for_no_pipelining, under
// Plan::overlap_ep at pp 1): one more forward before the first backward, so that each later forward runs
// beside the backward of the micro-batch before it: F0 F1 B0 F2 B1 ... B(m-1) from 1f1b's F0 B0 F1 B1 ...
std::vector<PipelineStep> combined_1f1b_order(std::vector<PipelineStep> order);

// The order pipeline rank `rank` runs its passes in: pipeline_order's, combined 1F1B's where Plan::overlap_ep
// runs without pipelining (under the interleaved schedule it keeps the schedule's order). Lowering and the
// optimizer's pass graph both take it from here.
std::vector<PipelineStep> pass_order(Schedule schedule, int pp, int v, int m, int rank, bool overlap_ep);

}  // namespace paratwin
