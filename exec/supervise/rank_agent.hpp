// A rank's part in supervision: heartbeats and finished checkpoints go to the supervisor over the
// control channel, and the faults injected into this rank fire at the end of their step.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "exec/supervise/control_channel.hpp"
#include "exec/supervise/fault_plan.hpp"
#include "exec/train/trainer.hpp"

namespace paratwin::exec {

// What `paratwin run` tells its ranks, in their environment (mpirun -x).
inline constexpr const char* kControlEndpointVariable = "PARATWIN_CONTROL";     // host:port
inline constexpr const char* kControlTokenVariable = "PARATWIN_CONTROL_TOKEN";  // this job's
inline constexpr const char* kFaultsVariable = "PARATWIN_FAULTS";               // kill@12:3,slow@4:0

class RankAgent {
 public:
  // From the environment; nullptr when the rank is not supervised. A supervisor that cannot be
  // reached is reported on standard error and the rank trains on without one.
  static std::unique_ptr<RankAgent> from_environment(int rank);

  RankAgent(std::unique_ptr<ControlClient> channel, int rank, std::vector<Injection> faults);

  // After every step: the heartbeat, then a fault injected at this step. Before a kill or a hang on
  // any rank, every rank calls `settle`, which lets the checkpoints still being written finish (a
  // collective), so that what an injected fault loses is exactly the steps since the last
  // checkpoint. (Chaos kills strike at any moment instead.)
  void after_step(const StepReport& report, const std::function<void()>& settle);
  // Rank 0, from the checkpoint writer's thread.
  void checkpoint_done(int64_t step, double snapshot_s, double write_s);
  void done();
  // The rank cannot run the job (bad input, such as data or a checkpoint of another model): the
  // supervisor stops the job and exits 2 instead of restarting it.
  void refused(const std::string& reason);

 private:
  std::unique_ptr<ControlClient> channel_;
  int rank_;
  std::vector<Injection> faults_;  // every rank's
  bool slow_ = false;
};

}  // namespace paratwin::exec
