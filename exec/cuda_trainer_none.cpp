// Built when the CUDA toolkit is absent: `--backend cuda` is refused before any rank starts
// (prepare_live_run); this is the rank's last word if one gets here anyway.
#include <stdexcept>

#include "exec/train/session.hpp"

namespace paratwin::exec {

std::unique_ptr<TrainingSession> make_cuda_trainer(const ScenarioSpec&, const Plan&, Communicator&,
                                                   TrainOptions) {
  throw std::runtime_error("--backend cuda: this paratwin was built without the CUDA toolkit");
}

}  // namespace paratwin::exec
