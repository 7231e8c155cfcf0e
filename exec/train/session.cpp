// The training session every live backend shares (see session.hpp).
#include "exec/train/session.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "exec/checkpoint/background_writer.hpp"
#include "exec/data/loader.hpp"
#include "exec/data/token_file.hpp"
#include "exec/gpt/config.hpp"
#include "exec/train/step_loop.hpp"

namespace paratwin::exec {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Steps of the run: the scenario's steps, else its token budget over the tokens of one step.
int64_t scenario_steps(const ScenarioSpec& s) {
  if (s.training.steps) return *s.training.steps;
  if (s.training.tokens)
    return int64_t(std::ceil(*s.training.tokens / (double(s.training.global_batch) * s.training.seq_len)));
  return 0;
}

}  // namespace

TrainingSession::TrainingSession(const ScenarioSpec& scenario, const Plan& plan, Communicator& world,
                                 TrainOptions options, LiveBackend backend)
    : scenario_(scenario), plan_(plan), world_(world), options_(std::move(options)) {
  std::vector<std::string> problems = verify(plan_, scenario.model, scenario.cluster, scenario.training);
  for (auto& p : live_limitations(plan_, scenario.model, backend)) problems.push_back(p);
  if (plan_.gpus() != world_.size())
    problems.push_back("the plan has dp x tp x pp x cp = " + std::to_string(plan_.gpus()) + " but " +
                       std::to_string(world_.size()) + " ranks run it");
  if (!problems.empty()) {
    std::string all;
    for (const auto& p : problems) all += (all.empty() ? "" : "; ") + p;
    // prepare_live_run refused the same problems before launch: here they are the launcher's bug.
    throw std::invalid_argument("the plan cannot run live: " + all);
  }
  program_ = lower(plan_, scenario.model, scenario.cluster, scenario.training);
  // The backends run DP tasks by what the Program says of them: a Program that says it wrongly is
  // lowering's bug, not the user's.
  if (const auto broken = verify(program_); !broken.empty())
    throw std::logic_error("lowering made an unsound Program: " + broken.front());
  total_steps_ = options_.steps > 0 ? options_.steps : scenario_steps(scenario);
  if (total_steps_ <= 0)
    throw InputError(Location{scenario.file}, "the run has no steps: give training.steps or --steps");
  data_ = std::make_unique<DataLoader>(load_tokens(options_.data), scenario.training.seq_len,
                                       scenario.model.vocab);
  lr_.max = options_.learning_rate;
  lr_.total_steps = total_steps_;
  lr_.warmup_steps = std::max<int64_t>(1, total_steps_ / 10);
}

TrainingSession::~TrainingSession() = default;

void TrainingSession::wait_for_checkpoints() {
  if (writer_) writer_->wait();
}

void TrainingSession::resume(RunResult& result) {
  const size_t parameters = parameter_layout(gpt_config(scenario_.model)).total;
  const CheckpointSearch found = find_resume_checkpoint(options_, scenario_, parameters, result);
  if (!found.state) return;
  // Whole-model state, whatever layout and ZeRO stage wrote it: this rank takes what it holds. A top-k
  // run's error-feedback residuals are not in checkpoints: they restart at zero.
  const TrainingState& s = *found.state;
  scatter_state(s);
  step_ = s.step;
  record_resume(s, options_, result);
  if (options_.on_message)
    options_.on_message("resumed from " + found.path + " (step " + std::to_string(s.step) + ", written by " +
                        std::to_string(s.dp) + " ranks; now " + std::to_string(plan_.dp) + " ranks x " +
                        std::to_string(plan_.num_microbatches) + " micro-batches)");
}

// Two phases: the state is copied to host memory here (the snapshot), and written to disk by rank
// 0's writer thread while the training goes on.
void TrainingSession::checkpoint(int64_t step, const std::vector<double>& losses, RunResult& result) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<float> weights, m, v;
  gather_state(weights, m, v);
  if (world_.rank() == 0) {
    TrainingState s = snapshot_of(step, losses, scenario_, plan_, options_);
    s.weights = std::move(weights);
    s.adam_m = std::move(m);
    s.adam_v = std::move(v);
    writer_->submit(std::move(s), seconds_since(t0));
  }
  result.checkpoint_seconds += seconds_since(t0);
  ++result.checkpoints_written;
}

RunResult TrainingSession::run() {
  const auto run_start = std::chrono::steady_clock::now();
  RunResult result;
  if (options_.resume && !options_.checkpoint_dir.empty()) resume(result);
  writer_ = open_checkpoint_writer(options_, world_.rank());
  const StepLoop loop{
      scenario_,
      plan_,
      role(),
      world_,
      options_,
      total_steps_,
      steps(),
      [this](int64_t step, const std::vector<double>& losses, RunResult& r) { checkpoint(step, losses, r); },
      [this](std::vector<TaskSpan>& spans) { after_iteration(spans); }};
  steps_starting();
  run_steps(loop, step_, result, run_start);
  steps_ended(result);
  finish_checkpoints(loop, step_, writer_.get(), result);  // the run ends with its checkpoints on disk
  result.seconds = seconds_since(run_start);
  return result;
}

}  // namespace paratwin::exec
