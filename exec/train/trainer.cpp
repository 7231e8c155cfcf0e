// The live training loop: one Program iteration per step, read top to bottom in Trainer::run().
#include "exec/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "exec/checkpoint/background_writer.hpp"
#include "exec/data/loader.hpp"
#include "exec/data/token_file.hpp"
#include "exec/train/parallel_runner.hpp"

namespace paratwin::exec {

std::vector<std::string> live_cpu_limitations(const Plan& p, const ModelSpec& m, const TrainingSpec& t) {
  std::vector<std::string> out;
  if (p.cp != 1 || p.ep != 1)
    out.push_back(
        "the live CPU backend runs no context or expert parallelism (cp = ep = 1); this plan has cp " +
        std::to_string(p.cp) + ", ep " + std::to_string(p.ep));
  for (auto [n, what] : {std::pair{m.heads, "heads"},
                         {m.kv_heads, "kv_heads"},
                         {m.ffn_hidden, "ffn_hidden"},
                         {m.vocab, "vocab"}})
    if (p.tp > 1 && n % p.tp != 0)
      out.push_back("tp " + std::to_string(p.tp) + " does not divide the model's " + what + " (" +
                    std::to_string(n) +
                    "): the live backend splits whole heads, FFN units and vocabulary rows");
  if (p.tp > 1 && p.sequence_parallel && (int64_t(p.micro_batch) * t.seq_len) % p.tp != 0)
    out.push_back("sequence parallelism splits the " + std::to_string(int64_t(p.micro_batch) * t.seq_len) +
                  " tokens of a micro-batch over tp " + std::to_string(p.tp) + ": they must divide evenly");
  if (p.zero == 3)
    out.push_back(
        "ZeRO 3 (parameters gathered before every pass) is not implemented live; use zero 0, 1 or 2");
  if (p.compression.kind != CompressionKind::None)
    out.push_back("gradient compression is not implemented live");
  if (p.offload_optimizer || p.offload_activations)
    out.push_back("offload is not implemented live (CPU memory is host memory)");
  for (const auto& st : p.stages)
    if (st.recompute != Recompute::None) {
      out.push_back("recomputation is not implemented live; use recompute none");
      break;
    }
  if (m.moe) out.push_back("mixture-of-experts models are not implemented live");
  if (t.seq_len > m.seq_len)
    out.push_back("training.seq_len " + std::to_string(t.seq_len) + " exceeds the model's " +
                  std::to_string(m.seq_len));
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

// What each task of the role does on this rank during one step.
class Trainer::Runner final : public StepRunner {
 public:
  Runner(Trainer& t) : t_(t) {
    const Role& role = t.role();
    const int L = t.model_.config().layers;
    // Each DP bucket reduces the gradients of the backward segment it waits for (with the
    // embeddings when the segment reaches layer 0, the final norm and head when it starts at the top).
    size_t top = t.model_.layout().total;  // fallback without overlap: slices by size from the top
    for (size_t i = 0; i < role.tasks.size(); ++i) {
      const Task& task = role.tasks[i];
      if (task.kind != TaskKind::Collective || task.group != GroupKind::Dp) continue;
      if (task.collective == cost::CollectiveKind::AllGather) {  // ZeRO: the parameters after the step
        gather_params_task_ = int(i);
        continue;
      }
      const Task* segment = task.deps.size() == 1 ? &role.tasks[task.deps[0]] : nullptr;
      std::pair<size_t, size_t> range;
      if (segment && segment->kind == TaskKind::Backward && segment->layer_end - segment->layer_begin < L)
        range = t.model_.layout().range(segment->layer_begin, segment->layer_end);
      else
        range = {top - std::min(top, size_t(task.bytes.value() / sizeof(float))), top};
      top = range.first;
      buckets_[int(i)] = range;
    }
    // Whatever the sizes left below the last bucket belongs to it (the lowering does not count norms).
    if (!buckets_.empty()) {
      auto last = std::min_element(buckets_.begin(), buckets_.end(),
                                   [](auto& a, auto& b) { return a.second.first < b.second.first; });
      last->second.first = 0;
    }
    // ZeRO 1/2: this rank updates its block of every bucket (all parameters without buckets).
    const int dp = t.comm_.size(), r = t.comm_.rank();
    if (t.plan_.zero == 0 || buckets_.empty()) {
      owned_.push_back({0, t.model_.layout().total});
    } else {
      for (const auto& [index, range] : buckets_) {
        std::vector<size_t> counts = blocks(range);
        size_t begin = range.first;
        for (int k = 0; k < r; ++k) begin += counts[k];
        owned_.push_back({begin, begin + counts[r]});
      }
    }
    (void)dp;
  }

  // The parameters this rank's optimizer updates: everything under ZeRO 0, its blocks under 1 and 2.
  const std::vector<std::pair<size_t, size_t>>& owned() const { return owned_; }

  void begin_step(int64_t step) override {
    step_ = step;
    in_flight_.clear();
    losses_.clear();
    t_.model_.zero_gradients();
  }
  const std::vector<double>& losses() const override { return losses_; }

  void compute(int, const Task& task) override {
    const Plan& p = t_.plan_;
    switch (task.kind) {
      case TaskKind::Forward: {
        Activations<float>& a = slot(task.microbatch);
        // This rank's share of the step's global sequences, micro-batch by micro-batch.
        const int64_t first =
            step_ * t_.scenario_.training.global_batch +
            (int64_t(t_.comm_.rank()) * p.num_microbatches + task.microbatch) * p.micro_batch;
        t_.data_->fill(first, p.micro_batch, a.tokens.data(), a.targets.data());
        losses_.push_back(t_.model_.forward(a));
        break;
      }
      case TaskKind::Backward: {
        Activations<float>& a = slot(task.microbatch);
        t_.model_.backward(a, task.layer_begin, task.layer_end, 1.0f / float(p.num_microbatches));
        if (task.layer_begin == 0) release(task.microbatch);
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
    std::vector<Communicator::Handle> requests;
    if (index == gather_params_task_) {
      // ZeRO: every rank's updated blocks to every rank, bucket by bucket.
      float* w = t_.model_.parameters().data();
      for (const auto& [i, range] : buckets_)
        requests.push_back(t_.comm_.start_allgather(w + range.first, blocks(range)));
    } else {
      auto it = buckets_.find(index);
      if (it == buckets_.end())
        throw std::invalid_argument("task '" + task.name + "' is not a collective the live CPU backend runs");
      float* g = t_.model_.gradients().data() + it->second.first;
      if (task.collective == cost::CollectiveKind::AllReduce)
        requests.push_back(t_.comm_.start_allreduce_sum(g, it->second.second - it->second.first));
      else if (task.collective == cost::CollectiveKind::ReduceScatter)
        requests.push_back(t_.comm_.start_reduce_scatter_sum(g, blocks(it->second)));
      else
        throw std::invalid_argument("task '" + task.name + "' is not a collective the live CPU backend runs");
    }
    in_flight_.push_back(std::move(requests));
    return int(in_flight_.size()) - 1;
  }
  bool poll(int handle) override {
    bool done = true;
    for (auto h : in_flight_[handle]) done = t_.comm_.test(h) && done;
    return done;
  }
  void finish(int handle) override {
    for (auto h : in_flight_[handle]) t_.comm_.wait(h);
  }

 private:
  Activations<float>& slot(int microbatch) {
    auto it = in_use_.find(microbatch);
    if (it != in_use_.end()) return pool_[it->second];
    size_t s = 0;
    while (s < busy_.size() && busy_[s]) ++s;
    if (s == pool_.size()) {
      pool_.emplace_back();
      busy_.push_back(false);
      t_.model_.allocate(pool_.back(), t_.plan_.micro_batch, t_.scenario_.training.seq_len);
    }
    busy_[s] = true;
    in_use_[microbatch] = s;
    return pool_[s];
  }
  void release(int microbatch) {
    busy_[in_use_.at(microbatch)] = false;
    in_use_.erase(microbatch);
  }

  // Block sizes of a bucket over the DP ranks: as even as possible, the first ones one larger.
  std::vector<size_t> blocks(std::pair<size_t, size_t> range) const {
    const size_t n = range.second - range.first, dp = size_t(t_.comm_.size());
    std::vector<size_t> counts(dp);
    for (size_t r = 0; r < dp; ++r) counts[r] = n / dp + (r < n % dp ? 1 : 0);
    return counts;
  }

  void optimizer_step() {
    Buffer<float>& grads = t_.model_.gradients();
    Buffer<float>& params = t_.model_.parameters();
    // The buckets summed the gradients over the DP ranks: divide by their number for the mean.
    const float inverse_world = 1.0f / float(t_.comm_.size());
    double squares = 0;
    for (const auto& [begin, end] : owned_) {
      if (t_.comm_.size() > 1)
        for (size_t i = begin; i < end; ++i) grads[i] *= inverse_world;
      squares += sum_of_squares(grads.data(), begin, end);
    }
    // Under ZeRO each rank holds a block of the gradient: the norm needs every rank's share.
    if (t_.plan_.zero > 0) squares = t_.comm_.allreduce_sum(squares);
    const float scale = clip_scale(std::sqrt(squares), t_.options_.max_grad_norm);
    for (const auto& [begin, end] : owned_) {
      if (scale != 1.0f)
        for (size_t i = begin; i < end; ++i) grads[i] *= scale;
      t_.adamw_->update(params.data(), grads.data(), begin, end, t_.lr_.at(step_), step_ + 1);
    }
  }

  Trainer& t_;
  int64_t step_ = 0;
  std::vector<double> losses_;
  std::map<int, std::pair<size_t, size_t>> buckets_;  // task index -> gradient range
  int gather_params_task_ = -1;                       // ZeRO's "AG dp params"
  std::vector<std::pair<size_t, size_t>> owned_;
  std::vector<std::vector<Communicator::Handle>> in_flight_;  // per start(): its requests
  std::vector<Activations<float>> pool_;
  std::vector<bool> busy_;
  std::map<int, size_t> in_use_;  // micro-batch -> pool slot
};

Trainer::Trainer(const ScenarioSpec& scenario, const Plan& plan, Communicator& comm, TrainOptions options)
    : scenario_(scenario),
      plan_(plan),
      comm_(comm),
      options_(std::move(options)),
      model_(gpt_config(scenario.model)) {
  std::vector<std::string> problems = verify(plan_, scenario.model, scenario.cluster, scenario.training);
  for (auto& p : live_cpu_limitations(plan_, scenario.model, scenario.training)) problems.push_back(p);
  if (plan_.dp * plan_.tp * plan_.pp * plan_.cp != comm_.size())
    problems.push_back("the plan has dp x tp x pp = " + std::to_string(plan_.dp * plan_.tp * plan_.pp) +
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
  adamw_ = std::make_unique<AdamW>(options_.adamw, std::move(decay));
  data_ = std::make_unique<DataLoader>(load_tokens(options_.data), scenario.training.seq_len,
                                       scenario.model.vocab);
  lr_.max = options_.learning_rate;
  lr_.total_steps = total_steps_;
  lr_.warmup_steps = std::max<int64_t>(1, total_steps_ / 10);
  if (plan_.tp * plan_.pp == 1) {
    runner_ = std::make_unique<Runner>(*this);
    steps_ = runner_.get();
  } else {
    parallel_ = std::make_unique<ParallelRunner>(
        ParallelSetup{scenario_, plan_, program_, comm_, *data_, lr_, options_.adamw, options_.max_grad_norm},
        model_);
    steps_ = parallel_.get();
    pipeline_rank_ = parallel_->coordinates().pp;
  }
  timing_group_ = comm_.split(pipeline_rank_ == 0 ? 0 : -1);
}

Trainer::~Trainer() = default;

void Trainer::wait_for_checkpoints() {
  if (writer_) writer_->wait();
}

void Trainer::resume(RunResult& result) {
  const CheckpointSearch found = load_latest_checkpoint(options_.checkpoint_dir, model_.layout().total);
  result.rejected_checkpoints = found.rejected;
  if (options_.on_message)
    for (const auto& r : found.rejected) options_.on_message("checkpoint rejected: " + r);
  if (!found.state) {
    if (options_.on_message)
      options_.on_message("no complete checkpoint in " + options_.checkpoint_dir + "; starting fresh");
    return;
  }
  const TrainingState& s = *found.state;
  if (s.model != scenario_.model.name || s.global_batch != scenario_.training.global_batch)
    throw std::invalid_argument("checkpoint " + found.path + " is of model " + s.model +
                                " with global batch " + std::to_string(s.global_batch) +
                                "; this run trains " + scenario_.model.name + " with global batch " +
                                std::to_string(scenario_.training.global_batch));
  model_.parameters().assign(s.weights.begin(), s.weights.end());
  adamw_->m().assign(s.adam_m.begin(), s.adam_m.end());
  adamw_->v().assign(s.adam_v.begin(), s.adam_v.end());
  if (parallel_) {
    parallel_->scatter_state(s.weights, s.adam_m, s.adam_v);
  } else if (plan_.zero > 0) {
    // ZeRO: this rank keeps the moments of its blocks only (the others stay zero, see checkpoint()).
    Buffer<float> m(s.adam_m.size(), 0.0f), v(s.adam_v.size(), 0.0f);
    for (const auto& [begin, end] : runner_->owned()) {
      std::copy(s.adam_m.begin() + long(begin), s.adam_m.begin() + long(end), m.begin() + long(begin));
      std::copy(s.adam_v.begin() + long(begin), s.adam_v.begin() + long(end), v.begin() + long(begin));
    }
    adamw_->m() = std::move(m);
    adamw_->v() = std::move(v);
  }
  step_ = s.step;
  result.losses = s.losses;
  result.resumed_from = s.step;
  // The progress file says how far the stopped run got past its last checkpoint.
  std::ifstream progress(std::filesystem::path(options_.checkpoint_dir) / "progress.json");
  if (progress) {
    try {
      const auto j = nlohmann::json::parse(progress);
      result.lost_steps = std::max<int64_t>(0, j.at("step").get<int64_t>() - s.step);
    } catch (const std::exception&) {
    }
  }
  if (options_.on_message)
    options_.on_message("resumed from " + found.path + " (step " + std::to_string(s.step) + ", written by " +
                        std::to_string(s.dp) + " ranks; now " + std::to_string(plan_.dp) + " ranks x " +
                        std::to_string(plan_.num_microbatches) + " micro-batches)");
}

// Two phases: the state is copied to host memory here (the snapshot), and written to disk by rank
// 0's writer thread while the training goes on.
void Trainer::checkpoint(int64_t step, const std::vector<double>& losses, RunResult& result) {
  const auto t0 = std::chrono::steady_clock::now();
  // Every rank holds the same weights. Under ZeRO 0 also the same optimizer state; under ZeRO 1/2
  // each holds the moments of its blocks and zeros elsewhere, so their sum is the whole state.
  std::vector<float> m(adamw_->m().begin(), adamw_->m().end()), v(adamw_->v().begin(), adamw_->v().end());
  if (parallel_) {  // shards of the model: gathered whole, so that any layout resumes from it
    std::vector<float> weights;
    parallel_->gather_state(weights, m, v);
    model_.parameters().assign(weights.begin(), weights.end());
  } else if (plan_.zero > 0 && comm_.size() > 1) {
    comm_.wait(comm_.start_allreduce_sum(m.data(), m.size()));
    comm_.wait(comm_.start_allreduce_sum(v.data(), v.size()));
  }
  if (comm_.rank() == 0) {
    TrainingState s;
    s.step = step;
    s.data_sequence = step * scenario_.training.global_batch;
    s.seed = options_.seed;
    s.dp = plan_.dp;
    s.global_batch = scenario_.training.global_batch;
    s.model = scenario_.model.name;
    s.plan_yaml = to_yaml(plan_);
    s.losses = losses;
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
  StepRunner& runner = *steps_;
  const double tokens_per_step = double(scenario_.training.global_batch) * scenario_.training.seq_len;
  const double interval_s = plan_.checkpoint_interval ? plan_.checkpoint_interval->value() : 0;
  auto last_checkpoint = std::chrono::steady_clock::now();
  const bool checkpoints = !options_.checkpoint_dir.empty();
  if (checkpoints && comm_.rank() == 0) {
    std::error_code ec;
    std::filesystem::create_directories(options_.checkpoint_dir, ec);
    if (ec)
      throw std::runtime_error("cannot create checkpoint directory " + options_.checkpoint_dir + ": " +
                               ec.message());
    writer_ = std::make_unique<BackgroundCheckpointWriter>(options_.checkpoint_dir, options_.on_checkpoint);
  }
  while (step_ < total_steps_) {
    const auto t0 = std::chrono::steady_clock::now();
    result.step_start_s.push_back(seconds_since(run_start));
    runner.begin_step(step_);
    const double cpu_before = thread_cpu_seconds();
    result.spans.push_back(run_iteration(role(), runner));
    if (parallel_) parallel_->attribute_tp_time(result.spans.back());
    result.step_cpu_s.push_back(thread_cpu_seconds() - cpu_before);
    // The step's loss: the mean over every micro-batch of every DP replica.
    double local = 0;
    for (double l : runner.losses()) local += l;
    const double loss = comm_.allreduce_sum(local) / (double(plan_.num_microbatches) * plan_.dp);
    ++step_;
    result.losses.push_back(loss);
    if (checkpoints && comm_.rank() == 0) write_progress(options_.checkpoint_dir, step_);
    const double step_s = seconds_since(t0);
    result.step_seconds.push_back(step_s);
    if (options_.on_step) {
      double mean = 0;
      for (double s : result.step_seconds) mean += s;
      mean /= double(result.step_seconds.size());
      options_.on_step(
          {step_, total_steps_, loss, step_s, tokens_per_step / step_s, mean * double(total_steps_ - step_)});
    }
    if (options_.stop_after >= 0 && step_ >= options_.stop_after) break;
    const bool by_steps = options_.checkpoint_every > 0 && step_ % options_.checkpoint_every == 0;
    const bool by_time =
        options_.checkpoint_every <= 0 && interval_s > 0 && seconds_since(last_checkpoint) >= interval_s;
    if (checkpoints && step_ < total_steps_ && (by_steps || by_time)) {
      checkpoint(step_, result.losses, result);
      last_checkpoint = std::chrono::steady_clock::now();
    }
  }
  if (checkpoints && step_ == total_steps_ && options_.stop_after < 0)
    checkpoint(step_, result.losses, result);
  if (writer_) {  // the run ends with its checkpoints on disk
    const auto t0 = std::chrono::steady_clock::now();
    writer_->wait();
    result.checkpoint_seconds += seconds_since(t0);
  }
  result.seconds = seconds_since(run_start);
  return result;
}

}  // namespace paratwin::exec
