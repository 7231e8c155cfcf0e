// What `paratwin run` needs of a backend's trainer, so that one rank's loop, progress and output files
// (exec/run/live_run.cpp) serve the CPU and the CUDA backends alike.
#pragma once

#include <memory>
#include <string>

#include "exec/comm/communicator.hpp"
#include "exec/train/trainer.hpp"

namespace paratwin::exec {

class LiveTrainer {
 public:
  virtual ~LiveTrainer() = default;
  virtual RunResult run() = 0;
  virtual void wait_for_checkpoints() = 0;
  virtual const Program& program() const = 0;
  // This rank's role: its pipeline rank's.
  virtual const Role& role() const { return program().roles.front(); }
  // The ranks whose timings share this rank's tasks (those of its pipeline rank), for the profile;
  // null on ranks that take no part in it.
  virtual Communicator* timing_group() const = 0;
  virtual int64_t total_steps() const = 0;
  // "CPU ranks", "GPUs (NVIDIA H200, NCCL)": what the ranks run on, for the progress line.
  virtual std::string devices() const = 0;
};

// The CUDA backend's trainer (exec/cuda/cuda_trainer.cpp): this rank on its GPU, DP collectives over
// NCCL (or MPI with host staging when ranks share a GPU). Where the CUDA backend was not built it
// throws std::runtime_error saying so. Throws std::invalid_argument as Trainer does for plans it
// cannot run.
std::unique_ptr<LiveTrainer> make_cuda_trainer(const ScenarioSpec& scenario, const Plan& plan,
                                               Communicator& comm, TrainOptions options);

}  // namespace paratwin::exec
