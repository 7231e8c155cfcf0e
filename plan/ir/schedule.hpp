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

}  // namespace paratwin
