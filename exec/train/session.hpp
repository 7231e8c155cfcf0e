// One live training session on this rank, whatever the backend: the plan checked (verify() and the
// backend's limits), lowered to the Program and the Program checked, the steps of the run (given, or
// the scenario's steps or tokens), the data, the learning-rate schedule, resume, checkpoints and the
// step loop around them. A backend's trainer derives from it and brings the model: its step runner and
// its state as the whole model's (exec/train/trainer.hpp on CPU, exec/cuda/cuda_trainer.cpp on GPUs).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exec/checkpoint/checkpoint.hpp"
#include "exec/comm/communicator.hpp"
#include "exec/optim/schedule.hpp"
#include "exec/train/live_limits.hpp"
#include "exec/train/run_result.hpp"
#include "exec/train/step_runner.hpp"
#include "plan/ir/program.hpp"
#include "plan/spec/scenario.hpp"

namespace paratwin::exec {

class BackgroundCheckpointWriter;
class DataLoader;

class TrainingSession {
 public:
  virtual ~TrainingSession();

  RunResult run();
  // Returns when the checkpoints handed to the writer are on disk (rank 0; elsewhere at once).
  void wait_for_checkpoints();

  const Program& program() const { return program_; }
  int64_t total_steps() const { return total_steps_; }
  // This rank's role: its pipeline rank's.
  virtual const Role& role() const { return program_.roles.front(); }
  // The ranks whose timings share this rank's tasks (those of its pipeline rank), for the profile;
  // null on ranks that take no part in it.
  virtual Communicator* timing_group() const = 0;
  // "CPU ranks", "GPUs (NVIDIA H200, NCCL)": what the ranks run on, for the progress line.
  virtual std::string devices() const = 0;

 protected:
  // Throws std::invalid_argument, every problem in one message, when the plan cannot run live on
  // `backend` or on world.size() ranks, when the run has no steps, and when the corpus cannot feed the
  // model. `scenario` must outlive the session.
  TrainingSession(const ScenarioSpec& scenario, const Plan& plan, Communicator& world, TrainOptions options,
                  LiveBackend backend);

  const ScenarioSpec& scenario() const { return scenario_; }
  const Plan& plan() const { return plan_; }
  Communicator& world() const { return world_; }
  const TrainOptions& options() const { return options_; }
  const DataLoader& data() const { return *data_; }
  const LearningRate& lr() const { return lr_; }

  // The backend's part. The runner of this rank's tasks, step after step.
  virtual StepRunner& steps() = 0;
  // Collective over the world: the whole model's weights and AdamW moments, laid out as exec/gpt's
  // parameter_layout (complete on rank 0, which writes them).
  virtual void gather_state(std::vector<float>& weights, std::vector<float>& m, std::vector<float>& v) = 0;
  // Takes what this rank holds of a checkpoint's whole-model state.
  virtual void scatter_state(const TrainingState& state) = 0;
  // After each step's tasks: adjusts their measured spans.
  virtual void after_iteration(std::vector<TaskSpan>&) {}
  // Before the first step and after the last (before the final checkpoint).
  virtual void steps_starting() {}
  virtual void steps_ended(RunResult&) {}

 private:
  void resume(RunResult& result);
  void checkpoint(int64_t step, const std::vector<double>& losses, RunResult& result);

  const ScenarioSpec& scenario_;
  Plan plan_;
  Communicator& world_;
  TrainOptions options_;
  Program program_;
  std::unique_ptr<DataLoader> data_;
  LearningRate lr_;
  int64_t total_steps_ = 0;
  int64_t step_ = 0;                                    // steps done
  std::unique_ptr<BackgroundCheckpointWriter> writer_;  // rank 0, with checkpoints
};

// The CUDA backend's trainer (exec/cuda/cuda_trainer.cpp): this rank on its GPU, DP collectives over
// NCCL (or MPI with host staging when ranks share a GPU). Where the CUDA backend was not built it
// throws std::runtime_error saying so. Throws std::invalid_argument as the session does.
std::unique_ptr<TrainingSession> make_cuda_trainer(const ScenarioSpec& scenario, const Plan& plan,
                                                   Communicator& comm, TrainOptions options);

}  // namespace paratwin::exec
