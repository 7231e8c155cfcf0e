// The step loop of the training session that every backend's trainer shares (exec/train/session.cpp):
// one Program iteration per step, the step's loss over the job, progress, and checkpoints by steps or
// by time, written behind the training by rank 0.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "exec/checkpoint/background_writer.hpp"
#include "exec/checkpoint/checkpoint.hpp"
#include "exec/comm/communicator.hpp"
#include "exec/train/run_result.hpp"
#include "exec/train/step_runner.hpp"
#include "plan/ir/program.hpp"

namespace paratwin::exec {

struct StepLoop {
  const ScenarioSpec& scenario;
  const Plan& plan;
  const Role& role;     // this rank's tasks
  Communicator& world;  // every rank of the job: the loss is summed over it; rank 0 writes
  const TrainOptions& options;
  int64_t total_steps = 0;
  StepRunner& runner;
  // Every rank takes part; rank 0 hands the snapshot to the writer.
  std::function<void(int64_t step, const std::vector<double>& losses, RunResult&)> checkpoint;
  // Optional, after each step's tasks: adjusts their measured spans.
  std::function<void(std::vector<TaskSpan>&)> after_iteration;
};

// Rank 0 of a run with checkpoints: creates the directory (std::runtime_error when it cannot) and
// the writer. Null elsewhere.
std::unique_ptr<BackgroundCheckpointWriter> open_checkpoint_writer(const TrainOptions& options, int rank);

// Runs steps from `step` until total_steps (or options.stop_after), advancing `step` and filling
// `result`'s per-step figures; checkpoints on the way, none after the last step.
void run_steps(const StepLoop& loop, int64_t& step, RunResult& result,
               std::chrono::steady_clock::time_point run_start);

// After the steps: the final checkpoint when the run reached its end, then waits until rank 0's
// writer has every checkpoint on disk (the wait counted as checkpoint time).
void finish_checkpoints(const StepLoop& loop, int64_t step, BackgroundCheckpointWriter* writer,
                        RunResult& result);

// Resume: the newest complete checkpoint in options.checkpoint_dir (rejected ones reported through
// options.on_message and kept in `result`; no state when there is none, which is said too). Throws
// std::invalid_argument when it is of another model or global batch.
CheckpointSearch find_resume_checkpoint(const TrainOptions& options, const ScenarioSpec& scenario,
                                        size_t parameters, RunResult& result);
// Once a trainer has loaded `state`: the run's losses so far, the step it resumed from, and the steps
// the stopped run had done past it (its progress file).
void record_resume(const TrainingState& state, const TrainOptions& options, RunResult& result);

// A checkpoint of `step` with everything but the weights and the optimizer's moments.
TrainingState snapshot_of(int64_t step, const std::vector<double>& losses, const ScenarioSpec& scenario,
                          const Plan& plan, const TrainOptions& options);

}  // namespace paratwin::exec
