// The live trainer on GPUs: the training session (exec/train/session.hpp) with the GPT on this rank's
// GPU, one Program iteration per step as the CPU trainer runs it. Compute tasks are queued on the compute
// stream and waited for at their end (so a task's measured span is its GPU time, which profiles and
// calibration need); DP collectives run on the communicator's own stream, ordered after the compute stream by
// CUDA events, while the backward of earlier layers goes on.
#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "exec/cuda/device_choice.hpp"
#include "exec/cuda/gpu_communicators.hpp"
#include "exec/cuda/train_step.hpp"
#include "exec/data/loader.hpp"
#include "exec/gpt/kernel_clock.hpp"
#include "exec/gpt/model.hpp"
#include "exec/train/dp_blocks.hpp"
#include "exec/train/session.hpp"

namespace paratwin::exec::cuda {

namespace {

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

class CudaTrainer final : public TrainingSession {
 public:
  CudaTrainer(const ScenarioSpec& scenario, const Plan& plan, Communicator& comm, TrainOptions options);

  Communicator* timing_group() const override { return &world(); }  // data parallelism: one role
  std::string devices() const override {
    return "GPUs (" + device_name_ + ", " + (nccl_ ? "NCCL" : "MPI with host staging: ranks share a GPU") +
           ")";
  }

 private:
  class Runner;
  void take_buckets();
  StepRunner& steps() override;
  void gather_state(std::vector<float>& weights, std::vector<float>& m, std::vector<float>& v) override;
  void scatter_state(const TrainingState& state) override;

  DeviceChoice choice_;
  Stream compute_;
  std::unique_ptr<CudaGpt> model_;
  std::unique_ptr<CudaAdamW> adamw_;
  std::unique_ptr<Communicator> device_comm_;
  bool nccl_ = false;
  std::string device_name_;
  std::map<int, std::pair<size_t, size_t>> buckets_;  // task index -> gradient range
  ParameterRanges owned_;                             // what this rank's optimizer updates
  std::unique_ptr<Runner> runner_;
};

// The gradient buckets the Program names (its layers, plan/ir/buckets.hpp), as the CPU backend reduces
// them, and this rank's blocks of them under ZeRO.
void CudaTrainer::take_buckets() {
  const Role& r = role();
  std::vector<ShardedRange> ranges;
  for (size_t i = 0; i < r.tasks.size(); ++i)
    if (r.tasks[i].purpose == Purpose::GradientReduce) {
      buckets_[int(i)] = model_->layout().range(r.tasks[i].layer_begin, r.tasks[i].layer_end);
      ranges.push_back({buckets_[int(i)], &world()});
    }
  if (plan().zero == 0 || ranges.empty())
    owned_.push_back({0, model_->layout().total});
  else
    owned_ = owned_blocks(ranges);
}

// What each task of the role does on this rank's GPU during one step.
class CudaTrainer::Runner final : public StepRunner {
 public:
  explicit Runner(CudaTrainer& t) : t_(t) { t_.model_->gemm().set_timing(true); }

  void begin_step(int64_t step) override {
    step_ = step;
    skip_step_ = false;
    in_flight_.clear();
    batches_.clear();
    losses_.clear();
    dp_bytes_ = 0;
    // ZeRO: the master weights were gathered after the last update; refresh their bf16 copy.
    if (t_.plan().zero > 0 && t_.world().size() > 1)
      convert_to_bf16(t_.model_->params(), t_.model_->master(), int64_t(t_.model_->layout().total), stream());
    t_.model_->zero_gradients();
  }
  const std::vector<double>& losses() const override { return losses_; }
  double dp_bytes() const override { return dp_bytes_; }

  void compute(int, const Task& task) override {
    const Plan& p = t_.plan();
    switch (task.kind) {
      case TaskKind::Forward: {
        CudaActivations& a = slot(task.microbatch);
        // The ids go up on the compute stream before the forward's kernels, as PyTorch's non-blocking
        // .cuda() on the current stream does; the InputBatch task loaded them.
        const Batch& b = batches_.at(task.microbatch);
        losses_.push_back(t_.model_->forward(a, b.inputs.data(), b.targets.data()));
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
    kernel_seconds.dense_s += g.dense_s;
    kernel_seconds.attention_s += g.attention_s;
  }

  int start(int index, const Task& task) override {
    Communicator& comm = *t_.device_comm_;
    std::vector<Communicator::Handle> requests;
    if (task.purpose == Purpose::ParameterGather) {  // every bucket's blocks (the rank's parameters)
      for (const auto& [i, range] : t_.buckets_)
        requests.push_back(
            comm.start_allgather(t_.model_->master() + range.first, dp_blocks(range, comm.size())));
      dp_bytes_ += double(t_.model_->layout().total) * sizeof(float);
    } else if (task.purpose == Purpose::GradientReduce) {
      const auto range = t_.buckets_.at(index);
      float* g = t_.model_->gradients() + range.first;
      dp_bytes_ += double(range.second - range.first) * sizeof(float);
      if (task.collective == cost::CollectiveKind::AllReduce)
        requests.push_back(comm.start_allreduce_sum(g, range.second - range.first));
      else
        requests.push_back(comm.start_reduce_scatter_sum(g, dp_blocks(range, comm.size())));
    } else if (task.purpose == Purpose::OverflowCheck || task.purpose == Purpose::GradientNorm) {
      check_gradients(task);  // a few bytes, blocking: nothing is left in flight
    } else if (task.purpose == Purpose::InputBatch) {
      load_batch(task);  // on the host: nothing is left in flight
    } else {
      throw std::invalid_argument("task '" + task.name + "' is not a collective the live CUDA backend runs");
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
      t_.model_->allocate(*pool_.back(), t_.plan().micro_batch, t_.scenario().training.seq_len);
    }
    busy_[s] = true;
    in_use_[microbatch] = s;
    return *pool_[s];
  }
  void release(int microbatch) {
    busy_[in_use_.at(microbatch)] = false;
    in_use_.erase(microbatch);
  }

  // As the CPU trainer: whether any gradient overflowed (the step skipped on every rank), or the global
  // norm of the mean over DP ranks, over every rank's share.
  void check_gradients(const Task& task) {
    const float inverse_world = 1.0f / float(t_.world().size());
    double squares = 0;
    for (const auto& [begin, end] : owned())
      squares += gradient_sum_of_squares(t_.model_->gradients(), begin, end, stream());
    if (task.purpose == Purpose::OverflowCheck) {
      skip_step_ = t_.world().allreduce_sum(std::isfinite(squares) ? 0.0 : 1.0) > 0;
      return;
    }
    squares *= double(inverse_world) * double(inverse_world);
    // Without ZeRO every rank holds every (summed) gradient: the sum over the world counts each once
    // per rank.
    squares = t_.world().allreduce_sum(squares);
    if (t_.plan().zero == 0) squares /= t_.world().size();
    gradient_norm_ = std::sqrt(squares);
  }
  // This rank's share of the step's global sequences for the task's micro-batch (data parallelism).
  void load_batch(const Task& task) {
    const Plan& p = t_.plan();
    const int64_t first =
        DataLoader::first_sequence(step_, t_.scenario().training.global_batch, t_.world().rank(),
                                   p.num_microbatches, task.microbatch, p.micro_batch);
    batches_[task.microbatch] = t_.data().batch(first, p.micro_batch);
  }
  // AdamW on the blocks this rank owns; the mean and the clipping folded into its grad_scale.
  void optimizer_step() {
    if (skip_step_) return;
    const float inverse_world = 1.0f / float(t_.world().size());
    const float scale = clip_scale(gradient_norm_, t_.options().max_grad_norm);
    const float lr = t_.lr().at(step_);
    for (const auto& [begin, end] : owned()) {
      t_.adamw_->update(*t_.model_, begin, end, lr, step_ + 1,
                        t_.world().size() > 1 ? inverse_world * scale : scale);
    }
  }
  const std::vector<std::pair<size_t, size_t>>& owned() const { return t_.owned_; }

  CudaTrainer& t_;
  int64_t step_ = 0;
  std::vector<double> losses_;
  double dp_bytes_ = 0;           // this step's DP messages: fp32 gradients and master weights
  double gradient_norm_ = 0;      // this step's, over every rank (check_gradients)
  bool skip_step_ = false;        // a gradient overflowed on some rank
  std::map<int, Batch> batches_;  // this step's micro-batches as their InputBatch tasks loaded them
  std::vector<std::vector<Communicator::Handle>> in_flight_;
  std::vector<std::unique_ptr<CudaActivations>> pool_;
  std::vector<bool> busy_;
  std::map<int, size_t> in_use_;
};

CudaTrainer::CudaTrainer(const ScenarioSpec& scenario, const Plan& plan, Communicator& comm,
                         TrainOptions options)
    : TrainingSession(scenario, plan, comm, std::move(options), LiveBackend::Cuda), choice_(select_device()) {
  const GptConfig config = gpt_config(scenario.model);
  model_ = std::make_unique<CudaGpt>(config, compute_.get());
  {
    Gpt<float> host(config);  // the CPU model's initialization, so a seed gives the same weights on both
    host.initialize(this->options().seed);
    model_->load_parameters(host.parameters().data());
  }
  adamw_ = std::make_unique<CudaAdamW>(this->options().adamw, model_->layout(), compute_.get());
  device_comm_ = make_gpu_communicator(world(), choice_.shared, compute_.get(), &nccl_);
  cudaDeviceProp prop{};
  PARATWIN_CUDA_CHECK(cudaGetDeviceProperties(&prop, choice_.device));
  device_name_ = prop.name;
  take_buckets();
  runner_ = std::make_unique<Runner>(*this);
}

StepRunner& CudaTrainer::steps() {
  return *runner_;
}

void CudaTrainer::scatter_state(const TrainingState& s) {
  model_->load_parameters(s.weights.data());
  std::vector<float> m(s.adam_m), v(s.adam_v);
  if (plan().zero > 0) {  // ZeRO: this rank keeps the moments of its blocks only, as on CPU
    std::vector<float> mm(m.size(), 0.0f), vv(v.size(), 0.0f);
    for (const auto& [begin, end] : owned_) {
      std::copy(m.begin() + long(begin), m.begin() + long(end), mm.begin() + long(begin));
      std::copy(v.begin() + long(begin), v.begin() + long(end), vv.begin() + long(begin));
    }
    m.swap(mm);
    v.swap(vv);
  }
  adamw_->load_state(m.data(), v.data());
}

// The same state as the CPU backend's (fp32 master weights and moments in the CPU layout), so a
// checkpoint written here resumes on CPU and the other way round.
void CudaTrainer::gather_state(std::vector<float>& weights, std::vector<float>& m, std::vector<float>& v) {
  const size_t P = model_->layout().total;
  m.resize(P);
  v.resize(P);
  adamw_->store_state(m.data(), v.data());
  if (plan().zero > 0 && world().size() > 1) {
    world().wait(world().start_allreduce_sum(m.data(), m.size()));
    world().wait(world().start_allreduce_sum(v.data(), v.size()));
  }
  if (world().rank() == 0) {  // every rank holds the same weights
    weights.resize(P);
    model_->store_parameters(weights.data());
  }
}

}  // namespace

}  // namespace paratwin::exec::cuda

namespace paratwin::exec {

std::unique_ptr<TrainingSession> make_cuda_trainer(const ScenarioSpec& scenario, const Plan& plan,
                                                   Communicator& comm, TrainOptions options) {
  return std::make_unique<cuda::CudaTrainer>(scenario, plan, comm, std::move(options));
}

}  // namespace paratwin::exec
