// The live training loop: one Program iteration per step, read top to bottom in Trainer::run().
#include "exec/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

#include "exec/checkpoint/background_writer.hpp"
#include "exec/data/loader.hpp"
#include "exec/data/token_file.hpp"
#include "exec/train/activation_offload.hpp"
#include "exec/train/optimizer_offload.hpp"
#include "exec/train/parallel_runner.hpp"
#include "exec/train/step_loop.hpp"
#include "exec/train/topk_compression.hpp"
#include "exec/train/zero3.hpp"

namespace paratwin::exec {

std::vector<std::string> live_cpu_limitations(const Plan& p, const ModelSpec& m) {
  // verify() says what no plan may do (tp dividing heads and FFN, CP's and SP's splits of a sequence);
  // beyond it, the live backend splits the vocabulary in whole rows (Megatron-LM pads it instead).
  std::vector<std::string> out;
  if (p.tp > 1 && m.vocab % p.tp != 0)
    out.push_back("tp " + std::to_string(p.tp) + " does not divide the model's vocabulary (" +
                  std::to_string(m.vocab) + " tokens): the live backend splits it in whole rows");
  return out;
}

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

// What each task of the role does on this rank during one step.
class Trainer::Runner final : public StepRunner {
 public:
  Runner(Trainer& t) : t_(t) {
    const Role& role = t.role();
    const Plan& plan = t.plan_;
    const int L = t.model_.config().layers;
    const bool topk = plan.compression.kind == CompressionKind::TopK;
    // Each DP bucket reduces the gradients of the backward segment it waits for (with the
    // embeddings when the segment reaches layer 0, the final norm and head when it starts at the top).
    size_t top = t.model_.layout().total;  // fallback without overlap: slices by size from the top
    std::map<int, std::pair<size_t, size_t>> buckets;  // task index -> gradient range
    for (size_t i = 0; i < role.tasks.size(); ++i) {
      const Task& task = role.tasks[i];
      if (task.kind != TaskKind::Collective || task.group != GroupKind::Dp) continue;
      if (task.collective == cost::CollectiveKind::AllGather && plan.zero == 3) {  // before a pass
        zero3_gathers_.insert(int(i));
        continue;
      }
      const bool after_step = std::any_of(task.deps.begin(), task.deps.end(), [&](int d) {
        return role.tasks[size_t(d)].kind == TaskKind::Optimizer;
      });
      if (task.collective == cost::CollectiveKind::AllGather && after_step) {  // ZeRO 1/2: the parameters
        gather_params_task_ = int(i);
        continue;
      }
      const Task* segment = task.deps.size() == 1 ? &role.tasks[task.deps[0]] : nullptr;
      std::pair<size_t, size_t> range;
      if (segment && segment->kind == TaskKind::Backward && segment->layer_end - segment->layer_begin < L) {
        range = t.model_.layout().range(segment->layer_begin, segment->layer_end);
      } else {
        // The lowering's size of the bucket: its gradients, or under top-k its gathered pairs.
        double elements = task.bytes.value() / sizeof(float);
        if (topk)
          elements = task.bytes.value() / (plan.dp * plan.compression.ratio *
                                           (cost::element_bytes(t.scenario_.training.precision) + 4));
        range = {top - std::min(top, size_t(elements)), top};
      }
      top = range.first;
      buckets[int(i)] = range;
    }
    // Whatever the sizes left below the last bucket belongs to it (the lowering does not count norms).
    if (!buckets.empty()) {
      auto last = std::min_element(buckets.begin(), buckets.end(),
                                   [](auto& a, auto& b) { return a.second.first < b.second.first; });
      last->second.first = 0;
    }
    // Each bucket is reduced (and under ZeRO sharded) over the DP group.
    std::vector<ShardedRange> sharded;
    for (const auto& [index, range] : buckets) sharded.push_back(buckets_[index] = {range, &t.comm_});
    // One rank has no DP buckets: its ZeRO "shard" is the whole model.
    if (sharded.empty()) sharded.push_back({{0, t.model_.layout().total}, &t.comm_});
    // This rank updates everything under ZeRO 0, its block of every bucket under ZeRO 1-3.
    if (plan.zero > 0)
      owned_ = owned_blocks(sharded);
    else
      owned_.push_back({0, t.model_.layout().total});
    if (plan.zero == 3)
      zero3_ = std::make_unique<Zero3Parameters>(t.model_.parameters(), std::move(sharded), t.comm_);
    if (topk) compressor_ = std::make_unique<TopKCompressor>(plan.compression);
    if (plan.offload_activations) activations_ = std::make_unique<ActivationOffload>();
  }

  // The parameters this rank's optimizer updates: everything under ZeRO 0, its blocks under 1 to 3.
  const ParameterRanges& owned() const { return owned_; }
  Zero3Parameters* zero3() { return zero3_.get(); }
  OptimizerOffload* offload() { return offload_.get(); }
  // Once the optimizer exists: with offload, its state moves to host buffers.
  void optimizer_ready() {
    if (t_.plan_.offload_optimizer) offload_ = std::make_unique<OptimizerOffload>(*t_.adamw_);
  }

  void begin_step(int64_t step) override {
    step_ = step;
    in_flight_.clear();
    losses_.clear();
    dp_bytes_ = 0;
    t_.model_.zero_gradients();
  }
  const std::vector<double>& losses() const override { return losses_; }
  double dp_bytes() const override { return dp_bytes_; }

  void compute(int, const Task& task) override {
    const Plan& p = t_.plan_;
    switch (task.kind) {
      case TaskKind::Forward: {
        Activations<float>& a = slot(task.microbatch, task.chunk);
        // This rank's share of the step's global sequences, micro-batch by micro-batch.
        const int64_t first =
            step_ * t_.scenario_.training.global_batch +
            (int64_t(t_.comm_.rank()) * p.num_microbatches + task.microbatch) * p.micro_batch;
        t_.data_->fill(first, p.micro_batch, a.tokens.data(), a.targets.data());
        losses_.push_back(t_.model_.forward(a));
        if (zero3_) zero3_->pass_ended();
        break;
      }
      case TaskKind::Recompute:
        // The activations of the first layer the backward needs; it recomputes each next one itself,
        // so one layer's recomputed activations exist at a time.
        t_.model_.recompute(slot(task.microbatch, task.chunk), task.layer_end - 1);
        break;
      case TaskKind::Backward: {
        Activations<float>& a = slot(task.microbatch, task.chunk);
        t_.model_.backward(a, task.layer_begin, task.layer_end, 1.0f / float(p.num_microbatches));
        if (task.layer_begin == p.stages[size_t(task.chunk)].layer_begin) {  // the pass's last segment
          release(task.microbatch);
          if (zero3_) zero3_->pass_ended();
        }
        break;
      }
      case TaskKind::Optimizer:
        optimizer_step();
        break;
      default:
        throw std::invalid_argument("task '" + task.name +
                                    "' is not a compute task the live CPU backend runs");
    }
  }

  int start(int index, const Task& task) override {
    InFlight f;
    if (task.kind == TaskKind::Copy) {
      copy(task, f);
    } else if (zero3_gathers_.count(index)) {
      f.zero3_ticket = zero3_->request();
      dp_bytes_ += held_bytes();
    } else if (index == gather_params_task_) {
      // ZeRO 1/2: every rank's updated blocks to every rank, bucket by bucket.
      float* w = t_.model_.parameters().data();
      for (const auto& [i, bucket] : buckets_)
        f.requests.push_back(
            t_.comm_.start_allgather(w + bucket.range.first, dp_blocks(bucket.range, t_.comm_.size())));
      dp_bytes_ += held_bytes();
    } else {
      auto it = buckets_.find(index);
      if (it == buckets_.end())
        throw std::invalid_argument("task '" + task.name + "' is not a collective the live CPU backend runs");
      const bool sparse = compressor_ && !compressor_->dense(step_);
      const bool all_reduce = task.collective == cost::CollectiveKind::AllReduce || compressor_;
      if (!sparse && !all_reduce && task.collective != cost::CollectiveKind::ReduceScatter)
        throw std::invalid_argument("task '" + task.name + "' is not a collective the live CPU backend runs");
      const auto range = it->second.range;
      float* g = t_.model_.gradients().data() + range.first;
      const size_t n = range.second - range.first;
      Communicator& comm = t_.comm_;
      if (sparse) {
        // This rank's pairs to every rank (the residual keyed by the bucket's task).
        f.packed = compressor_->compress(index, g, n, comm.rank(), comm.size());
        f.requests.push_back(comm.start_allgather(
            f.packed.data(), std::vector<size_t>(size_t(comm.size()), 2 * compressor_->pairs(n))));
        f.decode = it->second;
        dp_bytes_ += double(f.packed.size()) * sizeof(float);
      } else {
        dp_bytes_ += double(n) * sizeof(float);
        f.requests.push_back(all_reduce ? comm.start_allreduce_sum(g, n)
                                        : comm.start_reduce_scatter_sum(g, dp_blocks(range, comm.size())));
      }
    }
    in_flight_.push_back(std::move(f));
    return int(in_flight_.size()) - 1;
  }
  bool poll(int handle) override {
    InFlight& f = in_flight_[size_t(handle)];
    bool done = (f.zero3_ticket < 0 || zero3_->ready(f.zero3_ticket)) &&
                (f.copy_ticket < 0 || activations_->done(f.copy_ticket));
    for (auto h : f.requests) done = t_.comm_.test(h) && done;
    if (done) complete(f);
    return done;
  }
  void finish(int handle) override {
    InFlight& f = in_flight_[size_t(handle)];
    if (f.zero3_ticket >= 0) zero3_->wait(f.zero3_ticket);
    if (f.copy_ticket >= 0) activations_->wait(f.copy_ticket);
    for (auto h : f.requests) t_.comm_.wait(h);
    complete(f);
  }

 private:
  // A communication or copy task under way: its requests, and what to do once they have ended.
  struct InFlight {
    std::vector<Communicator::Handle> requests;  // over the DP group
    int zero3_ticket = -1;
    int copy_ticket = -1;                // activation offload: on the copy stream
    Buffer<float> packed;                // top-k: every rank's pairs, gathered
    std::optional<ShardedRange> decode;  // top-k: the bucket they sum into
  };
  void complete(InFlight& f) {
    if (f.decode) {
      const auto [range, comm] = *f.decode;
      compressor_->decompress(f.packed, t_.model_.gradients().data() + range.first,
                              range.second - range.first, comm->size());
    }
    f.decode.reset();
    Buffer<float>().swap(f.packed);
  }
  // Bytes of the parameters the buckets cover, which a gather brings whole, as the Program counts a
  // ZeRO gather.
  double held_bytes() const {
    size_t n = 0;
    for (const auto& [i, bucket] : buckets_) n += bucket.range.second - bucket.range.first;
    return double(n) * sizeof(float);
  }

  // Activation copies go to the copy stream; the optimizer state's run here, synchronously (the step
  // waits for them at once).
  void copy(const Task& task, InFlight& f) {
    if (task.microbatch >= 0 && activations_) {  // "copy d2h|h2d act": one micro-batch's
      Activations<float>& a = pool_[in_use_.at(task.microbatch)];
      f.copy_ticket = task.to_host ? activations_->to_host(task.microbatch, task.chunk, kept_buffers(a))
                                   : activations_->to_device(task.microbatch, task.chunk);
      return;
    }
    if (task.name.find("optimizer") != std::string::npos && offload_) {
      if (task.to_host)
        offload_->to_host();
      else
        offload_->to_device();
      return;
    }
    throw std::invalid_argument("task '" + task.name + "' is not an offload copy this plan asks for");
  }

  Activations<float>& slot(int microbatch, int chunk) {
    auto it = in_use_.find(microbatch);
    if (it != in_use_.end()) return pool_[it->second];
    size_t s = 0;
    while (s < busy_.size() && busy_[s]) ++s;
    if (s == pool_.size()) {
      pool_.emplace_back();
      busy_.push_back(false);
      allocated_.push_back(false);
    }
    if (!allocated_[s]) {
      allocated_[s] = true;
      const Recompute mode = t_.plan_.stages[size_t(chunk)].recompute;
      const ActivationPolicy policy = mode == Recompute::Full        ? ActivationPolicy::RecomputeLayers
                                      : mode == Recompute::Selective ? ActivationPolicy::RecomputeAttention
                                                                     : ActivationPolicy::KeepAll;
      MemoryUseScope use(MemoryUse::Activations);
      t_.model_.allocate(pool_[s], t_.plan_.micro_batch, t_.scenario_.training.seq_len, policy);
    }
    busy_[s] = true;
    in_use_[microbatch] = s;
    return pool_[s];
  }
  // The backward of the micro-batch is done: its activations are freed (as the Program's last backward
  // segment frees them), and the slot is allocated again by the next forward.
  void release(int microbatch) {
    const size_t s = in_use_.at(microbatch);
    busy_[s] = false;
    pool_[s] = Activations<float>{};
    allocated_[s] = false;
    in_use_.erase(microbatch);
  }

  void optimizer_step() {
    Buffer<float>& grads = t_.model_.gradients();
    // The buckets summed the gradients over the DP ranks: divide by their number for the mean.
    const float inverse_world = 1.0f / float(t_.comm_.size());
    double squares = 0;
    for (const auto& [begin, end] : owned_) {
      if (t_.comm_.size() > 1)
        for (size_t i = begin; i < end; ++i) grads[i] *= inverse_world;
      squares += sum_of_squares(grads.data(), begin, end);
    }
    // Under ZeRO each rank holds a block of the gradient, one rank each: the norm needs every rank's
    // share.
    if (t_.plan_.zero > 0) squares = t_.comm_.allreduce_sum(squares);
    const float scale = clip_scale(std::sqrt(squares), t_.options_.max_grad_norm);
    for (const auto& [begin, end] : owned_) {
      if (scale != 1.0f)
        for (size_t i = begin; i < end; ++i) grads[i] *= scale;
      float* w = zero3_ ? zero3_->shard(begin) : t_.model_.parameters().data() + begin;
      t_.adamw_->update(w, grads.data() + begin, begin, end, t_.lr_.at(step_), step_ + 1);
    }
  }

  Trainer& t_;
  int64_t step_ = 0;
  std::vector<double> losses_;
  double dp_bytes_ = 0;
  std::map<int, ShardedRange> buckets_;  // task index -> its gradients, over the DP group
  int gather_params_task_ = -1;          // ZeRO 1/2's "AG dp params"
  std::set<int> zero3_gathers_;          // ZeRO 3's "AG dp params F|B ..."
  ParameterRanges owned_;
  std::unique_ptr<Zero3Parameters> zero3_;
  std::unique_ptr<TopKCompressor> compressor_;
  std::unique_ptr<OptimizerOffload> offload_;
  std::vector<InFlight> in_flight_;      // per start(): its requests
  std::deque<Activations<float>> pool_;  // (a deque: the copy stream holds on to its slots)
  std::vector<bool> busy_, allocated_;
  std::map<int, size_t> in_use_;                    // micro-batch -> pool slot
  std::unique_ptr<ActivationOffload> activations_;  // last: its copies end before the pool goes
};

Trainer::Trainer(const ScenarioSpec& scenario, const Plan& plan, Communicator& comm, TrainOptions options)
    : scenario_(scenario),
      plan_(plan),
      comm_(comm),
      options_(std::move(options)),
      model_(gpt_config(scenario.model)) {
  std::vector<std::string> problems = verify(plan_, scenario.model, scenario.cluster, scenario.training);
  for (auto& p : live_cpu_limitations(plan_, scenario.model)) problems.push_back(p);
  if (plan_.dp * plan_.tp * plan_.pp * plan_.cp != comm_.size())
    problems.push_back(
        "the plan has dp x tp x pp x cp = " + std::to_string(plan_.dp * plan_.tp * plan_.pp * plan_.cp) +
        " but " + std::to_string(comm_.size()) + " ranks run it");
  if (!problems.empty()) {
    std::string all;
    for (const auto& p : problems) all += (all.empty() ? "" : "; ") + p;
    throw std::invalid_argument("the plan cannot run live: " + all);
  }
  program_ = lower(plan_, scenario.model, scenario.cluster, scenario.training);
  total_steps_ = options_.steps > 0 ? options_.steps : scenario_steps(scenario);
  if (total_steps_ <= 0) throw std::invalid_argument("the run has no steps: give training.steps or --steps");
  model_.initialize(options_.seed);
  std::vector<bool> decay(model_.layout().total, false);
  for (const auto& t : model_.layout().tensors)
    if (t.rows > 1 && t.name != "wpe")
      std::fill(decay.begin() + long(t.offset), decay.begin() + long(t.offset + t.size()), true);
  data_ = std::make_unique<DataLoader>(load_tokens(options_.data), scenario.training.seq_len,
                                       scenario.model.vocab);
  lr_.max = options_.learning_rate;
  lr_.total_steps = total_steps_;
  lr_.warmup_steps = std::max<int64_t>(1, total_steps_ / 10);
  // Data parallelism alone runs on the whole model; anything else (experts shared over EP ranks
  // included) on this rank's shard.
  if (plan_.tp * plan_.pp * plan_.cp * plan_.ep == 1) {
    runner_ = std::make_unique<Runner>(*this);  // (under ZeRO 3 it takes the shard of the weights)
    steps_ = runner_.get();
    adamw_ = std::make_unique<AdamW>(options_.adamw, std::move(decay), runner_->owned());
    runner_->optimizer_ready();
  } else {  // the parallel runner has its optimizer, over this rank's shard
    parallel_ = std::make_unique<ParallelRunner>(
        ParallelSetup{scenario_, plan_, program_, comm_, *data_, lr_, options_.adamw, options_.max_grad_norm},
        model_);
    steps_ = parallel_.get();
    pipeline_rank_ = parallel_->coordinates().pp;
    // The runner's shard is this rank's model: the whole one's buffers would only weigh on its memory.
    Buffer<float>().swap(model_.parameters());
    Buffer<float>().swap(model_.gradients());
  }
  timing_group_ = comm_.split(pipeline_rank_ == 0 ? 0 : -1);
}

Trainer::~Trainer() = default;

void Trainer::wait_for_checkpoints() {
  if (writer_) writer_->wait();
}

void Trainer::resume(RunResult& result) {
  const CheckpointSearch found = find_resume_checkpoint(options_, scenario_, model_.layout().total, result);
  if (!found.state) return;
  const TrainingState& s = *found.state;
  // Whole-model state, whatever layout and ZeRO stage wrote it: this rank takes what it holds (its
  // shard, its blocks under ZeRO). A top-k run's error-feedback residuals are not in checkpoints:
  // they restart at zero.
  if (parallel_) {
    parallel_->scatter_state(s.weights, s.adam_m, s.adam_v);
  } else {
    if (Zero3Parameters* z = runner_->zero3())
      z->assign_full(s.weights);
    else
      model_.parameters().assign(s.weights.begin(), s.weights.end());
    OptimizerOffload* offload = runner_->offload();
    if (offload) offload->to_device();
    adamw_->assign_full(s.adam_m, s.adam_v);
    if (offload) offload->to_host();
  }
  step_ = s.step;
  record_resume(s, options_, result);
  if (options_.on_message)
    options_.on_message("resumed from " + found.path + " (step " + std::to_string(s.step) + ", written by " +
                        std::to_string(s.dp) + " ranks; now " + std::to_string(plan_.dp) + " ranks x " +
                        std::to_string(plan_.num_microbatches) + " micro-batches)");
}

// Two phases: the state is copied to host memory here (the snapshot), and written to disk by rank
// 0's writer thread while the training goes on.
void Trainer::checkpoint(int64_t step, const std::vector<double>& losses, RunResult& result) {
  const auto t0 = std::chrono::steady_clock::now();
  // Every rank holds the same weights (under ZeRO 3 its blocks: gathered here). Under ZeRO 0 also
  // the same optimizer state; under ZeRO 1-3 each holds the moments of its blocks and zeros
  // elsewhere, so their sum is the whole state. Shards of TP/PP are gathered whole, so that any
  // layout resumes from the checkpoint.
  std::vector<float> weights, m, v;
  if (parallel_) {
    parallel_->gather_state(weights, m, v);
  } else {
    OptimizerOffload* offload = runner_->offload();
    if (offload) offload->to_device();
    m = adamw_->full_m();
    v = adamw_->full_v();
    if (offload) offload->to_host();
    if (Zero3Parameters* z = runner_->zero3()) weights = z->gather_all();
  }
  if (!parallel_ && plan_.zero > 0 && comm_.size() > 1) {
    comm_.wait(comm_.start_allreduce_sum(m.data(), m.size()));
    comm_.wait(comm_.start_allreduce_sum(v.data(), v.size()));
  }
  if (comm_.rank() == 0) {
    TrainingState s = snapshot_of(step, losses, scenario_, plan_, options_);
    if (!weights.empty())
      s.weights = std::move(weights);
    else
      s.weights.assign(model_.parameters().begin(), model_.parameters().end());
    s.adam_m = std::move(m);
    s.adam_v = std::move(v);
    writer_->submit(std::move(s), seconds_since(t0));
  }
  result.checkpoint_seconds += seconds_since(t0);
  ++result.checkpoints_written;
}

RunResult Trainer::run() {
  const auto run_start = std::chrono::steady_clock::now();
  RunResult result;
  if (options_.resume && !options_.checkpoint_dir.empty()) resume(result);
  writer_ = open_checkpoint_writer(options_, comm_.rank());
  StepLoop loop{
      scenario_,
      plan_,
      role(),
      comm_,
      options_,
      total_steps_,
      *steps_,
      [this](int64_t step, const std::vector<double>& losses, RunResult& r) { checkpoint(step, losses, r); },
      nullptr};
  if (parallel_)
    loop.after_iteration = [this](std::vector<TaskSpan>& spans) { parallel_->attribute_tp_time(spans); };
  reset_memory_peak();  // what the steps hold, not the set-up's temporaries
  run_steps(loop, step_, result, run_start);
  result.memory = read_memory();
  finish_checkpoints(loop, step_, writer_.get(), result);  // the run ends with its checkpoints on disk
  if (Zero3Parameters* z = runner_ ? runner_->zero3() : nullptr)
    z->materialize();  // the trained model, whole, on every rank
  result.seconds = seconds_since(run_start);
  return result;
}

}  // namespace paratwin::exec
