// The memory modes of the tensor/pipeline-parallel runner: ZeRO 3's parameter gathers, activation
// recomputation's policy, optimizer offload's copies and top-k compressed DP buckets, each run where
// the Program puts its tasks (see parallel_runner.hpp).
#include <stdexcept>

#include "exec/train/parallel_runner.hpp"

namespace paratwin::exec {

namespace {
constexpr int kNotMine = -2;  // start_memory_mode(): a task for start() itself
}

void ParallelRunner::set_up_memory_modes() {
  const Plan& p = setup_.plan;
  if (p.zero == 3) {
    // Gathers get a DP group of their own: they are issued as ranges become free, which need not keep
    // their order with the gradient buckets' collectives. The same ranks as dp_ (dp x cp under CP),
    // whose blocks the optimizer updates.
    std::vector<Zero3Gathers::Range> buckets;
    for (const auto& [index, range] : buckets_)
      if (range.second > range.first) buckets.push_back(range);
    auto group = setup_.world.split(at_.pp * p.tp + at_.tp);
    zero3_ = std::make_unique<Zero3Gathers>(model_.parameters(), std::move(buckets), std::move(group));
  }
  if (p.offload_optimizer) offload_ = std::make_unique<OptimizerOffload>(*adamw_);
  if (p.offload_activations) activations_ = std::make_unique<ActivationOffload>();
  if (p.compression.kind == CompressionKind::TopK)
    compressor_ = std::make_unique<TopKCompressor>(p.compression);
}

ActivationPolicy ParallelRunner::activation_policy(int chunk) const {
  switch (setup_.plan.stages.at(size_t(chunk)).recompute) {
    case Recompute::Full:
      return ActivationPolicy::RecomputeLayers;
    case Recompute::Selective:
      return ActivationPolicy::RecomputeAttention;
    default:
      return ActivationPolicy::KeepAll;
  }
}

// The local parameters a task names: its layers, else its chunk's, else the whole shard.
std::pair<size_t, size_t> ParallelRunner::parameter_range(const Task& task) const {
  if (task.layer_begin >= 0) return model_.range(task.layer_begin, task.layer_end);
  if (task.chunk >= 0) {
    const StagePlan& st = setup_.plan.stages.at(size_t(task.chunk));
    return model_.range(st.layer_begin, st.layer_end);
  }
  return {0, model_.size()};
}

void ParallelRunner::keep_output(const Task& forward) {
  if (!activations_ || forward.chunk == setup_.plan.chunks() - 1) return;
  const ChunkActivations& a = slot(forward.microbatch, forward.chunk);
  MemoryUseScope use(MemoryUse::Communication);
  outputs_[{forward.microbatch, forward.chunk}].assign(model_.output(a),
                                                       model_.output(a) + model_.boundary_size(a));
}

void ParallelRunner::pass_ended(const Task& task) {
  if (!zero3_) return;
  // A forward uses its layers once; a backward segment (from the top down) is done with everything
  // from its first layer to the chunk's top.
  const StagePlan& st = setup_.plan.stages.at(size_t(task.chunk));
  const int from = task.kind == TaskKind::Backward ? task.layer_begin : st.layer_begin;
  zero3_->release(model_.range(from, st.layer_end));
}

int ParallelRunner::start_memory_mode(int index, const Task& task) {
  const int handle = int(in_flight_.size());
  std::vector<Communicator::Handle> requests;
  std::vector<Communicator*> comms;
  if (task.kind == TaskKind::Copy && task.microbatch >= 0 && activations_) {
    // One micro-batch's activations, on the copy stream (the chunk's forward send reads a copy of its
    // output: see keep_output()).
    const int mb = task.microbatch, chunk = task.chunk;
    copies_[handle] = task.to_host ? activations_->to_host(mb, chunk, kept_buffers(slot(mb, chunk)))
                                   : activations_->to_device(mb, chunk);
  } else if (task.kind == TaskKind::Copy) {
    // The optimizer state's, synchronous (the step waits for it at once).
    if (!offload_ || task.name.find("optimizer") == std::string::npos)
      throw std::invalid_argument("task '" + task.name + "' is not an offload copy this plan asks for");
    if (task.to_host)
      offload_->to_host();
    else
      offload_->to_device();
  } else if (zero3_gathers_.count(index)) {
    const double before = zero3_->bytes();
    tickets_[handle] = zero3_->request(parameter_range(task));
    dp_bytes_ += zero3_->bytes() - before;
  } else if (compressor_ && buckets_.count(index)) {
    const auto [begin, end] = buckets_.at(index);
    float* g = model_.gradients().data() + begin;
    const size_t n = end - begin;
    if (n > 0 && compressor_->dense(step_)) {  // the warm-up: dense sums
      comms.push_back(dp_.get());
      requests.push_back(dp_->start_allreduce_sum(g, n));
      dp_bytes_ += double(n) * sizeof(float);
    } else if (n > 0) {
      // Every replica's (value, index) pairs to every replica; each sums them into the bucket.
      auto packed =
          std::make_shared<Buffer<float>>(compressor_->compress(index, g, n, dp_->rank(), dp_->size()));
      const size_t k = compressor_->pairs(n);
      comms.push_back(dp_.get());
      requests.push_back(
          dp_->start_allgather(packed->data(), std::vector<size_t>(size_t(dp_->size()), 2 * k)));
      dp_bytes_ += double(packed->size()) * sizeof(float);
      on_done_[handle] = [this, packed, g, n] { compressor_->decompress(*packed, g, n, dp_->size()); };
    }
  } else {
    return kNotMine;
  }
  in_flight_.push_back(std::move(requests));
  in_flight_comm_.push_back(std::move(comms));
  return handle;
}

bool ParallelRunner::complete(int handle, bool block) {
  if (auto c = copies_.find(handle); c != copies_.end()) {
    if (block)
      activations_->wait(c->second);
    else if (!activations_->done(c->second))
      return false;
    copies_.erase(c);
  }
  sending_.erase(handle);  // a forward send has ended: its copy of the output goes
  if (auto t = tickets_.find(handle); t != tickets_.end()) {
    if (block)
      zero3_->wait(t->second);
    else if (!zero3_->ready(t->second))
      return false;
    tickets_.erase(t);
  }
  if (auto f = on_done_.find(handle); f != on_done_.end()) {
    const std::function<void()> done = std::move(f->second);
    on_done_.erase(f);
    done();
  }
  return true;
}

}  // namespace paratwin::exec
