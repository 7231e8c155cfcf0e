// What a live training run is asked (TrainOptions) and what it returns (RunResult), on every backend.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "exec/memory/memory_meter.hpp"
#include "exec/optim/adamw.hpp"
#include "exec/train/interpreter.hpp"

namespace paratwin::exec {

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
  // Tokens this rank routed to each expert over this invocation's steps, [layer x experts] (MoE only).
  std::vector<double> routed_tokens;
  MemoryReading memory;  // this rank's buffers over the steps (peak, and its make-up)
};

}  // namespace paratwin::exec
