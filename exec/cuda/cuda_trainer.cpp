// The live training loop on GPUs: one Program iteration per step, as exec/train/trainer.cpp runs it
// on CPU, with the GPT on this rank's GPU. Compute tasks are queued on the compute stream and waited
// for at their end (so a task's measured span is its GPU time, which profiles and calibration need);
// DP collectives run on the communicator's own stream, ordered after the compute stream by CUDA
// events, while the backward of earlier layers goes on.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <stdexcept>

#include "exec/checkpoint/background_writer.hpp"
#include "exec/checkpoint/checkpoint.hpp"
#include "exec/cuda/device_choice.hpp"
#include "exec/cuda/gpu_communicators.hpp"
#include "exec/cuda/train_step.hpp"
#include "exec/data/loader.hpp"
#include "exec/data/token_file.hpp"
#include "exec/gpt/gemm_clock.hpp"
#include "exec/gpt/model.hpp"
#include "exec/optim/schedule.hpp"
#include "exec/run/launch_checks.hpp"
#include "exec/train/live_trainer.hpp"
#include "exec/train/step_loop.hpp"

namespace paratwin::exec::cuda {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Picks and initializes this rank's GPU before anything else touches CUDA: the host thread spins
// while it waits for the GPU, so the interpreter's thread CPU time of a task is its GPU time.
DeviceChoice select_device() {
  int count = 0;
  PARATWIN_CUDA_CHECK(cudaGetDeviceCount(&count));
  const DeviceChoice choice =
      choose_device(local_rank_from_environment(), local_size_from_environment(), count);
  // Spin flags must be given before the device's context exists; where something made it already,
  // the default (spin while this process has fewer contexts than cores) applies, which spins too.
  const cudaError_t init = cudaInitDevice(choice.device, cudaDeviceScheduleSpin, 0);
  if (init == cudaErrorSetOnActiveProcess)
    cudaGetLastError();
  else
    PARATWIN_CUDA_CHECK(init);
  PARATWIN_CUDA_CHECK(cudaSetDevice(choice.device));
  return choice;
}

class CudaTrainer final : public LiveTrainer {
 public:
  CudaTrainer(const ScenarioSpec& scenario, const Plan& plan, Communicator& comm, TrainOptions options)
      : scenario_(scenario),
        plan_(plan),
        host_(comm),
        options_(std::move(options)),
        choice_(select_device()) {
    std::vector<std::string> problems = verify(plan_, scenario.model, scenario.cluster, scenario.training);
    for (auto& p : live_cpu_limitations(plan_, scenario.model)) problems.push_back(p);
    // What the CPU backend runs and this one does not yet (refused before launch; checked again here).
    for (auto& p : live_cuda_limitations(plan_, scenario.model)) problems.push_back(p);
    if (plan_.dp != host_.size())
      problems.push_back("the plan has dp " + std::to_string(plan_.dp) + " but " +
                         std::to_string(host_.size()) + " ranks run it");
    if (!problems.empty()) {
      std::string all;
      for (const auto& p : problems) all += (all.empty() ? "" : "; ") + p;
      throw std::invalid_argument("the plan cannot run live: " + all);
    }
    program_ = lower(plan_, scenario.model, scenario.cluster, scenario.training);
    total_steps_ =
        options_.steps > 0        ? options_.steps
        : scenario.training.steps ? *scenario.training.steps
        : scenario.training.tokens
            ? int64_t(std::ceil(*scenario.training.tokens /
                                (double(scenario.training.global_batch) * scenario.training.seq_len)))
            : 0;
    if (total_steps_ <= 0)
      throw std::invalid_argument("the run has no steps: give training.steps or --steps");
    const GptConfig config = gpt_config(scenario.model);
    model_ = std::make_unique<CudaGpt>(config, compute_.get());
    {
      Gpt<float> host(config);  // the CPU model's initialization, so a seed gives the same weights on both
      host.initialize(options_.seed);
      model_->load_parameters(host.parameters().data());
    }
    adamw_ = std::make_unique<CudaAdamW>(options_.adamw, model_->layout(), compute_.get());
    data_ = std::make_unique<DataLoader>(load_tokens(options_.data), scenario.training.seq_len,
                                         scenario.model.vocab);
    lr_.max = options_.learning_rate;
    lr_.total_steps = total_steps_;
    lr_.warmup_steps = std::max<int64_t>(1, total_steps_ / 10);
    device_comm_ = make_gpu_communicator(host_, choice_.shared, compute_.get(), &nccl_);
    cudaDeviceProp prop{};
    PARATWIN_CUDA_CHECK(cudaGetDeviceProperties(&prop, choice_.device));
    device_name_ = prop.name;
    plan_buckets();
  }

  const Program& program() const override { return program_; }
  Communicator* timing_group() const override { return &host_; }  // data parallelism: one role
  int64_t total_steps() const override { return total_steps_; }
  std::string devices() const override {
    return "GPUs (" + device_name_ + ", " + (nccl_ ? "NCCL" : "MPI with host staging: ranks share a GPU") +
           ")";
  }
  void wait_for_checkpoints() override {
    if (writer_) writer_->wait();
  }

  RunResult run() override;

 private:
  class Runner;
  void plan_buckets();
  std::vector<size_t> blocks(std::pair<size_t, size_t> range) const {
    const size_t n = range.second - range.first, dp = size_t(host_.size());
    std::vector<size_t> counts(dp);
    for (size_t r = 0; r < dp; ++r) counts[r] = n / dp + (r < n % dp ? 1 : 0);
    return counts;
  }
  void resume(RunResult& result);
  void checkpoint(int64_t step, const std::vector<double>& losses, RunResult& result);

  const ScenarioSpec& scenario_;
  Plan plan_;
  Communicator& host_;
  TrainOptions options_;
  DeviceChoice choice_;
  Stream compute_;
  Program program_;
  int64_t total_steps_ = 0;
  int64_t step_ = 0;
  std::unique_ptr<CudaGpt> model_;
  std::unique_ptr<CudaAdamW> adamw_;
  std::unique_ptr<DataLoader> data_;
  std::unique_ptr<Communicator> device_comm_;
  bool nccl_ = false;
  std::string device_name_;
  LearningRate lr_;
  std::map<int, std::pair<size_t, size_t>> buckets_;  // task index -> gradient range
  int gather_params_task_ = -1;
  std::vector<std::pair<size_t, size_t>> owned_;  // what this rank's optimizer updates
  std::unique_ptr<BackgroundCheckpointWriter> writer_;
};

// Gradient buckets and ZeRO blocks exactly as the CPU trainer cuts them (exec/train/trainer.cpp), so
// both backends reduce the same ranges for the same Program.
void CudaTrainer::plan_buckets() {
  const Role& r = role();
  const int L = model_->config().layers;
  size_t top = model_->layout().total;
  for (size_t i = 0; i < r.tasks.size(); ++i) {
    const Task& task = r.tasks[i];
    if (task.kind != TaskKind::Collective || task.group != GroupKind::Dp) continue;
    if (task.collective == cost::CollectiveKind::AllGather) {
      gather_params_task_ = int(i);
      continue;
    }
    const Task* segment = task.deps.size() == 1 ? &r.tasks[task.deps[0]] : nullptr;
    std::pair<size_t, size_t> range;
    if (segment && segment->kind == TaskKind::Backward && segment->layer_end - segment->layer_begin < L)
      range = model_->layout().range(segment->layer_begin, segment->layer_end);
    else
      range = {top - std::min(top, size_t(task.bytes.value() / sizeof(float))), top};
    top = range.first;
    buckets_[int(i)] = range;
  }
  if (!buckets_.empty()) {
    auto last = std::min_element(buckets_.begin(), buckets_.end(),
                                 [](auto& a, auto& b) { return a.second.first < b.second.first; });
    last->second.first = 0;
  }
  if (plan_.zero == 0 || buckets_.empty()) {
    owned_.push_back({0, model_->layout().total});
  } else {
    for (const auto& [index, range] : buckets_) {
      const std::vector<size_t> counts = blocks(range);
      size_t begin = range.first;
      for (int k = 0; k < host_.rank(); ++k) begin += counts[k];
      owned_.push_back({begin, begin + counts[host_.rank()]});
    }
  }
}

// What each task of the role does on this rank's GPU during one step.
class CudaTrainer::Runner final : public StepRunner {
 public:
  explicit Runner(CudaTrainer& t) : t_(t) { t_.model_->gemm().set_timing(true); }

  void begin_step(int64_t step) override {
    step_ = step;
    in_flight_.clear();
    losses_.clear();
    dp_bytes_ = 0;
    // ZeRO: the master weights were gathered after the last update; refresh their bf16 copy.
    if (t_.plan_.zero > 0 && t_.host_.size() > 1)
      convert_to_bf16(t_.model_->params(), t_.model_->master(), int64_t(t_.model_->layout().total), stream());
    t_.model_->zero_gradients();
  }
  const std::vector<double>& losses() const override { return losses_; }
  double dp_bytes() const override { return dp_bytes_; }

  void compute(int, const Task& task) override {
    const Plan& p = t_.plan_;
    switch (task.kind) {
      case TaskKind::Forward: {
        CudaActivations& a = slot(task.microbatch);
        const int64_t first =
            step_ * t_.scenario_.training.global_batch +
            (int64_t(t_.host_.rank()) * p.num_microbatches + task.microbatch) * p.micro_batch;
        const size_t n = size_t(p.micro_batch) * t_.scenario_.training.seq_len;
        tokens_.resize(n);
        targets_.resize(n);
        t_.data_->fill(first, p.micro_batch, tokens_.data(), targets_.data());
        losses_.push_back(t_.model_->forward(a, tokens_.data(), targets_.data()));
        break;
      }
      case TaskKind::Backward: {
        CudaActivations& a = slot(task.microbatch);
        t_.model_->backward(a, task.layer_begin, task.layer_end, 1.0f / float(p.num_microbatches));
        if (task.layer_begin == 0) release(task.microbatch);
        break;
      }
      case TaskKind::Optimizer:
        optimizer_step();
        break;
      default:
        throw std::invalid_argument("task '" + task.name +
                                    "' is not a compute task the live CUDA backend runs");
    }
    PARATWIN_CUDA_CHECK(cudaStreamSynchronize(stream()));
    // GPU time inside GEMMs, where the profile expects it (the CPU backend's GEMM clock).
    const GemmGpuSeconds g = t_.model_->gemm().collect();
    gemm_seconds.dense_s += g.dense_s;
    gemm_seconds.attention_s += g.attention_s;
  }

  int start(int index, const Task& task) override {
    Communicator& comm = *t_.device_comm_;
    std::vector<Communicator::Handle> requests;
    if (index == t_.gather_params_task_) {
      for (const auto& [i, range] : t_.buckets_)
        requests.push_back(comm.start_allgather(t_.model_->master() + range.first, t_.blocks(range)));
      dp_bytes_ += double(t_.model_->layout().total) * sizeof(float);
    } else {
      auto it = t_.buckets_.find(index);
      if (it == t_.buckets_.end())
        throw std::invalid_argument("task '" + task.name +
                                    "' is not a collective the live CUDA backend runs");
      float* g = t_.model_->gradients() + it->second.first;
      dp_bytes_ += double(it->second.second - it->second.first) * sizeof(float);
      if (task.collective == cost::CollectiveKind::AllReduce)
        requests.push_back(comm.start_allreduce_sum(g, it->second.second - it->second.first));
      else if (task.collective == cost::CollectiveKind::ReduceScatter)
        requests.push_back(comm.start_reduce_scatter_sum(g, t_.blocks(it->second)));
      else
        throw std::invalid_argument("task '" + task.name +
                                    "' is not a collective the live CUDA backend runs");
    }
    in_flight_.push_back(std::move(requests));
    return int(in_flight_.size()) - 1;
  }
  bool poll(int handle) override {
    bool done = true;
    for (auto h : in_flight_[handle]) done = t_.device_comm_->test(h) && done;
    return done;
  }
  void finish(int handle) override {
    for (auto h : in_flight_[handle]) t_.device_comm_->wait(h);
  }

 private:
  cudaStream_t stream() const { return t_.compute_.get(); }

  CudaActivations& slot(int microbatch) {
    auto it = in_use_.find(microbatch);
    if (it != in_use_.end()) return *pool_[it->second];
    size_t s = 0;
    while (s < busy_.size() && busy_[s]) ++s;
    if (s == pool_.size()) {
      pool_.push_back(std::make_unique<CudaActivations>());
      busy_.push_back(false);
      t_.model_->allocate(*pool_.back(), t_.plan_.micro_batch, t_.scenario_.training.seq_len);
    }
    busy_[s] = true;
    in_use_[microbatch] = s;
    return *pool_[s];
  }
  void release(int microbatch) {
    busy_[in_use_.at(microbatch)] = false;
    in_use_.erase(microbatch);
  }

  // As the CPU trainer: the mean over DP ranks, the global norm over every rank's share, AdamW on the
  // blocks this rank owns. The scaling is folded into AdamW's grad_scale.
  void optimizer_step() {
    const float inverse_world = 1.0f / float(t_.host_.size());
    double squares = 0;
    for (const auto& [begin, end] : owned())
      squares += gradient_sum_of_squares(t_.model_->gradients(), begin, end, stream());
    squares *= double(inverse_world) * double(inverse_world);
    if (t_.plan_.zero > 0) squares = t_.host_.allreduce_sum(squares);
    const float scale = clip_scale(std::sqrt(squares), t_.options_.max_grad_norm);
    const float lr = t_.lr_.at(step_);
    for (const auto& [begin, end] : owned()) {
      t_.adamw_->update(*t_.model_, begin, end, lr, step_ + 1,
                        t_.host_.size() > 1 ? inverse_world * scale : scale);
    }
  }
  const std::vector<std::pair<size_t, size_t>>& owned() const { return t_.owned_; }

  CudaTrainer& t_;
  int64_t step_ = 0;
  std::vector<double> losses_;
  double dp_bytes_ = 0;  // this step's DP messages: fp32 gradients and master weights
  std::vector<int32_t> tokens_, targets_;
  std::vector<std::vector<Communicator::Handle>> in_flight_;
  std::vector<std::unique_ptr<CudaActivations>> pool_;
  std::vector<bool> busy_;
  std::map<int, size_t> in_use_;
};

void CudaTrainer::resume(RunResult& result) {
  const CheckpointSearch found = find_resume_checkpoint(options_, scenario_, model_->layout().total, result);
  if (!found.state) return;
  const TrainingState& s = *found.state;
  model_->load_parameters(s.weights.data());
  std::vector<float> m(s.adam_m), v(s.adam_v);
  if (plan_.zero > 0) {  // ZeRO: this rank keeps the moments of its blocks only, as on CPU
    std::vector<float> mm(m.size(), 0.0f), vv(v.size(), 0.0f);
    for (const auto& [begin, end] : owned_) {
      std::copy(m.begin() + long(begin), m.begin() + long(end), mm.begin() + long(begin));
      std::copy(v.begin() + long(begin), v.begin() + long(end), vv.begin() + long(begin));
    }
    m.swap(mm);
    v.swap(vv);
  }
  adamw_->load_state(m.data(), v.data());
  step_ = s.step;
  record_resume(s, options_, result);
  if (options_.on_message)
    options_.on_message("resumed from " + found.path + " (step " + std::to_string(s.step) + ", written by " +
                        std::to_string(s.dp) + " ranks; now " + std::to_string(host_.size()) + " GPU ranks)");
}

// The same TrainingState as the CPU backend (fp32 master weights and moments in the CPU layout), so a
// checkpoint written here resumes on CPU and the other way round.
void CudaTrainer::checkpoint(int64_t step, const std::vector<double>& losses, RunResult& result) {
  const auto t0 = std::chrono::steady_clock::now();
  const size_t P = model_->layout().total;
  std::vector<float> m(P), v(P);
  adamw_->store_state(m.data(), v.data());
  if (plan_.zero > 0 && host_.size() > 1) {
    host_.wait(host_.start_allreduce_sum(m.data(), m.size()));
    host_.wait(host_.start_allreduce_sum(v.data(), v.size()));
  }
  if (host_.rank() == 0) {
    TrainingState s = snapshot_of(step, losses, scenario_, plan_, options_);
    s.weights.resize(P);
    model_->store_parameters(s.weights.data());
    s.adam_m = std::move(m);
    s.adam_v = std::move(v);
    writer_->submit(std::move(s), seconds_since(t0));
  }
  result.checkpoint_seconds += seconds_since(t0);
  ++result.checkpoints_written;
}

RunResult CudaTrainer::run() {
  const auto run_start = std::chrono::steady_clock::now();
  RunResult result;
  if (options_.resume && !options_.checkpoint_dir.empty()) resume(result);
  writer_ = open_checkpoint_writer(options_, host_.rank());
  Runner runner(*this);
  const StepLoop loop{
      scenario_,
      plan_,
      role(),
      host_,
      options_,
      total_steps_,
      runner,
      [this](int64_t step, const std::vector<double>& losses, RunResult& r) { checkpoint(step, losses, r); },
      nullptr};
  run_steps(loop, step_, result, run_start);
  finish_checkpoints(loop, step_, writer_.get(), result);
  result.seconds = seconds_since(run_start);
  return result;
}

}  // namespace

}  // namespace paratwin::exec::cuda

namespace paratwin::exec {

std::unique_ptr<LiveTrainer> make_cuda_trainer(const ScenarioSpec& scenario, const Plan& plan,
                                               Communicator& comm, TrainOptions options) {
  return std::make_unique<cuda::CudaTrainer>(scenario, plan, comm, std::move(options));
}

}  // namespace paratwin::exec
