#include "exec/train/step_loop.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "plan/spec/diagnostics.hpp"

namespace paratwin::exec {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// How far the run got past its last checkpoint, for the resume to report. Renamed into place but
// not flushed to disk: it is advisory, and an fsync every step would hold every rank up (behind a
// checkpoint being written, for as long as that write).
void write_progress(const std::string& dir, int64_t step) {
  const std::filesystem::path path = std::filesystem::path(dir) / "progress.json";
  const std::filesystem::path tmp = std::filesystem::path(dir) / ".progress.json.tmp";
  std::ofstream(tmp) << nlohmann::json{{"step", step}}.dump() << "\n";
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
}

}  // namespace

std::unique_ptr<BackgroundCheckpointWriter> open_checkpoint_writer(const TrainOptions& options, int rank) {
  if (options.checkpoint_dir.empty() || rank != 0) return nullptr;
  std::error_code ec;
  std::filesystem::create_directories(options.checkpoint_dir, ec);
  // The user's directory: refused like any bad input (exit 2), not counted as a failure and retried.
  if (ec)
    throw InputError(Location{"<--checkpoint-dir " + options.checkpoint_dir + ">"},
                     "cannot create the checkpoint directory: " + ec.message());
  return std::make_unique<BackgroundCheckpointWriter>(options.checkpoint_dir, options.on_checkpoint);
}

void run_steps(const StepLoop& loop, int64_t& step, RunResult& result,
               std::chrono::steady_clock::time_point run_start) {
  const TrainOptions& options = loop.options;
  const double tokens_per_step = double(loop.scenario.training.global_batch) * loop.scenario.training.seq_len;
  const double interval_s = loop.plan.checkpoint_interval ? loop.plan.checkpoint_interval->value() : 0;
  const bool checkpoints = !options.checkpoint_dir.empty();
  auto last_checkpoint = std::chrono::steady_clock::now();
  while (step < loop.total_steps) {
    const auto t0 = std::chrono::steady_clock::now();
    result.step_start_s.push_back(seconds_since(run_start));
    loop.runner.begin_step(step);
    const double cpu_before = thread_cpu_seconds();
    result.spans.push_back(run_iteration(loop.role, loop.runner));
    if (loop.after_iteration) loop.after_iteration(result.spans.back());
    result.step_cpu_s.push_back(thread_cpu_seconds() - cpu_before);
    result.dp_bytes.push_back(loop.runner.dp_bytes());
    result.routed_tokens = loop.runner.routed_tokens();
    // The step's loss: the mean over every micro-batch of every DP replica.
    double local = 0;
    for (double l : loop.runner.losses()) local += l;
    const double loss = loop.world.allreduce_sum(local) / (double(loop.plan.num_microbatches) * loop.plan.dp);
    ++step;
    result.losses.push_back(loss);
    if (checkpoints && loop.world.rank() == 0) write_progress(options.checkpoint_dir, step);
    const double step_s = seconds_since(t0);
    result.step_seconds.push_back(step_s);
    if (options.on_step) {
      double mean = 0;
      for (double s : result.step_seconds) mean += s;
      mean /= double(result.step_seconds.size());
      options.on_step({step, loop.total_steps, loss, step_s, tokens_per_step / step_s,
                       mean * double(loop.total_steps - step)});
    }
    if (options.stop_after >= 0 && step >= options.stop_after) break;
    const bool by_steps = options.checkpoint_every > 0 && step % options.checkpoint_every == 0;
    const bool by_time =
        options.checkpoint_every <= 0 && interval_s > 0 && seconds_since(last_checkpoint) >= interval_s;
    if (checkpoints && step < loop.total_steps && (by_steps || by_time)) {
      loop.checkpoint(step, result.losses, result);
      last_checkpoint = std::chrono::steady_clock::now();
    }
  }
}

void finish_checkpoints(const StepLoop& loop, int64_t step, BackgroundCheckpointWriter* writer,
                        RunResult& result) {
  if (!loop.options.checkpoint_dir.empty() && step == loop.total_steps && loop.options.stop_after < 0)
    loop.checkpoint(step, result.losses, result);
  if (writer) {
    const auto t0 = std::chrono::steady_clock::now();
    writer->wait();
    result.checkpoint_seconds += seconds_since(t0);
  }
}

CheckpointSearch find_resume_checkpoint(const TrainOptions& options, const ScenarioSpec& scenario,
                                        size_t parameters, RunResult& result) {
  CheckpointSearch found = load_latest_checkpoint(options.checkpoint_dir, parameters);
  result.rejected_checkpoints = found.rejected;
  if (options.on_message)
    for (const auto& r : found.rejected) options.on_message("checkpoint rejected: " + r);
  if (!found.state) {
    if (options.on_message)
      options.on_message("no complete checkpoint in " + options.checkpoint_dir + "; starting fresh");
    return found;
  }
  const TrainingState& s = *found.state;
  if (s.model != scenario.model.name || s.global_batch != scenario.training.global_batch)
    throw InputError(Location{found.path}, "the checkpoint is of model " + s.model + " with global batch " +
                                               std::to_string(s.global_batch) + "; this run trains " +
                                               scenario.model.name + " with global batch " +
                                               std::to_string(scenario.training.global_batch));
  return found;
}

void record_resume(const TrainingState& state, const TrainOptions& options, RunResult& result) {
  result.losses = state.losses;
  result.resumed_from = state.step;
  std::ifstream progress(std::filesystem::path(options.checkpoint_dir) / "progress.json");
  if (!progress) return;
  try {
    result.lost_steps =
        std::max<int64_t>(0, nlohmann::json::parse(progress).at("step").get<int64_t>() - state.step);
  } catch (const std::exception&) {
    // advisory: a progress file cut short by the kill tells nothing
  }
}

TrainingState snapshot_of(int64_t step, const std::vector<double>& losses, const ScenarioSpec& scenario,
                          const Plan& plan, const TrainOptions& options) {
  TrainingState s;
  s.step = step;
  s.data_sequence = step * scenario.training.global_batch;
  s.seed = options.seed;
  s.dp = plan.dp;
  s.global_batch = scenario.training.global_batch;
  s.model = scenario.model.name;
  s.plan_yaml = to_yaml(plan);
  s.losses = losses;
  return s;
}

}  // namespace paratwin::exec
