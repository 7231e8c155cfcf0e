// When ZeRO 3 frees a unit's gathered parameters (plan.reshard): the one rule that lowering
// (lower_sharded.cpp) and the Program's verifier (verify_program.cpp) both follow.
#pragma once

#include "plan/spec/scenario.hpp"

namespace paratwin {

// Whether a pass frees the parameters gathered for its unit: a forward, or a backward (`last_backward`:
// the chunk's last of the step). after_forward: every pass; after_backward: backwards; after_step: the
// chunk's last backward of the step.
inline bool pass_reshards(Reshard reshard, bool forward, bool last_backward) {
  switch (reshard) {
    case Reshard::AfterForward:
      return true;
    case Reshard::AfterBackward:
      return !forward;
    case Reshard::AfterStep:
      break;
  }
  return !forward && last_backward;
}

}  // namespace paratwin
