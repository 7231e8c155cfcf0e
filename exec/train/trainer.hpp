// A live training run on this rank: lowers the plan, takes this rank's role in the Program and runs
// its tasks step after step (forward and backward of the GPT, DP gradient buckets all-reduced while
// the backward goes on, the AdamW step), with checkpoints, resume and per-task timings.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "exec/comm/communicator.hpp"
#include "exec/gpt/model.hpp"
#include "exec/memory/memory_meter.hpp"
#include "exec/optim/adamw.hpp"
#include "exec/optim/schedule.hpp"
#include "exec/train/interpreter.hpp"
#include "exec/train/step_runner.hpp"
#include "plan/ir/program.hpp"

namespace paratwin::exec {

class DataLoader;
class BackgroundCheckpointWriter;
class ParallelRunner;

struct StepReport {
  int64_t step = 0;  // 1-based: steps done
  int64_t steps = 0;
  double loss = 0;
  double step_s = 0;
  double tokens_per_s = 0;
  double eta_s = 0;
};

struct TrainOptions {
  int64_t steps = 0;             // total steps of the run; 0: the scenario's (training.steps or tokens)
  std::string data;              // a token file (.bin) or a text file
  std::string checkpoint_dir;    // empty: no checkpoints
  int64_t checkpoint_every = 0;  // steps; 0: the plan's checkpoint_interval in seconds, and at the end
  bool resume = false;           // start from the newest complete checkpoint in checkpoint_dir
  uint64_t seed = 1337;
  float learning_rate = 3e-3f;
  float max_grad_norm = 1.0f;
  AdamWSettings adamw;
  int64_t stop_after = -1;  // tests: stop after this step, as if killed (no final checkpoint)
  std::function<void(const StepReport&)> on_step;      // called on every rank
  std::function<void(const std::string&)> on_message;  // resume and rejected checkpoints
  // Rank 0, on the checkpoint writer's thread: a checkpoint is complete on disk.
  std::function<void(int64_t step, double snapshot_s, double write_s)> on_checkpoint;
};

struct RunResult {
  std::vector<double> losses;  // per step, from step 1 (steps before a resume come from the checkpoint)
  int64_t resumed_from = -1;   // the step of the checkpoint resumed from; -1 for a fresh start
  int64_t lost_steps = 0;      // steps done after that checkpoint by the run that stopped
  std::vector<std::string> rejected_checkpoints;
  std::vector<double> step_seconds;          // this invocation's steps
  std::vector<double> step_start_s;          // when each began, since the run started
  std::vector<std::vector<TaskSpan>> spans;  // per step of this invocation, per task of the role
  std::vector<double> step_cpu_s;            // CPU time of this rank's thread in each step's tasks
  double checkpoint_seconds = 0;             // training held up: snapshots (and waits for a previous write)
  int checkpoints_written = 0;
  double seconds = 0;  // the whole run
  // Bytes of this rank's DP collectives in each step of this invocation, counted as the Program counts
  // a collective's bytes (the whole message; top-k: every rank's pairs).
  std::vector<double> dp_bytes;
  MemoryReading memory;  // this rank's buffers over the steps (peak, and its make-up)
};

// What the live CPU backend cannot run in this plan and model, in words; empty when it can.
std::vector<std::string> live_cpu_limitations(const Plan& plan, const ModelSpec& model);

class Trainer {
 public:
  // comm.size() must be the plan's dp x tp x pp; with tp or pp above 1 each rank holds its shard
  // (exec/train/parallel_runner.hpp). Throws std::invalid_argument with live_cpu_limitations()
  // when the plan cannot run, and when the corpus cannot feed the model.
  Trainer(const ScenarioSpec& scenario, const Plan& plan, Communicator& comm, TrainOptions options);
  ~Trainer();

  RunResult run();
  // Returns when the checkpoints handed to the writer are on disk (rank 0; elsewhere at once).
  void wait_for_checkpoints();

  const Program& program() const { return program_; }
  const Role& role() const { return program_.roles.at(size_t(pipeline_rank_)); }
  // The ranks of this rank's pipeline rank (their timings have the same tasks); null elsewhere.
  Communicator* timing_group() const { return timing_group_.get(); }
  // The whole model as trained (tp = pp = cp = 1); under tp, pp or cp the shards hold the weights and
  // this model's buffers are empty.
  const Gpt<float>& model() const { return model_; }
  const AdamW& optimizer() const { return *adamw_; }
  int64_t total_steps() const { return total_steps_; }

 private:
  class Runner;
  void resume(RunResult& result);
  void checkpoint(int64_t step, const std::vector<double>& losses, RunResult& result);

  const ScenarioSpec& scenario_;
  Plan plan_;
  Communicator& comm_;
  TrainOptions options_;
  Program program_;
  Gpt<float> model_;
  std::unique_ptr<AdamW> adamw_;
  std::unique_ptr<DataLoader> data_;
  std::unique_ptr<Runner> runner_;
  std::unique_ptr<ParallelRunner> parallel_;  // tp or pp above 1
  StepRunner* steps_ = nullptr;               // whichever of the two runs
  int pipeline_rank_ = 0;
  std::unique_ptr<Communicator> timing_group_;
  std::unique_ptr<BackgroundCheckpointWriter> writer_;  // rank 0, with checkpoints
  LearningRate lr_;
  int64_t total_steps_ = 0;
  int64_t step_ = 0;  // steps done
};

}  // namespace paratwin::exec
