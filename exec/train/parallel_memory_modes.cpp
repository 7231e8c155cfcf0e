// The memory modes of the CPU runner (ParallelRunner) beside ZeRO (parallel_sharding.cpp): activation
// recomputation's policy, optimizer offload's copies and top-k compressed DP buckets, each run where
// the Program puts its tasks (see parallel_runner.hpp).
#include <map>
#include <stdexcept>

#include "exec/train/parallel_runner.hpp"

namespace paratwin::exec {

void ParallelRunner::set_up_memory_modes() {
  const Plan& p = setup_.plan;
  if (p.offload_optimizer) offload_ = std::make_unique<OptimizerOffload>(*adamw_);
  if (p.offload_activations) activations_ = std::make_unique<ActivationOffload>();
  if (p.compression.kind == CompressionKind::TopK)
    compressor_ = std::make_unique<TopKCompressor>(p.compression);
}

std::vector<ActivationPolicy> ParallelRunner::activation_policies(int unit) const {
  const ActivationUnit& u = units_.at(size_t(unit));
  const StagePlan& stage = setup_.plan.stages.at(size_t(u.chunk));
  std::vector<ActivationPolicy> out;
  for (int l = u.layer_begin; l < u.layer_end; ++l) {
    const Recompute mode = stage.layer_recompute(l);
    out.push_back(mode == Recompute::Full        ? ActivationPolicy::RecomputeLayers
                  : mode == Recompute::Selective ? ActivationPolicy::RecomputeSelective
                  : mode == Recompute::Op        ? ActivationPolicy::RecomputeOps
                                                 : ActivationPolicy::KeepAll);
  }
  return out;
}

void ParallelRunner::keep_output(const Task& forward) {
  if (!activations_ || forward.chunk == setup_.plan.chunks() - 1) return;
  const ChunkActivations& a = slot(forward.microbatch, last_unit(forward.chunk));
  MemoryUseScope use(MemoryUse::Communication);
  outputs_[{forward.microbatch, forward.chunk}].assign(model_.output(a),
                                                       model_.output(a) + model_.boundary_size(a));
}

int ParallelRunner::start_memory_mode(int index, const Task& task) {
  const int handle = int(in_flight_.size());
  Requests requests;
  if (task.purpose == Purpose::ActivationOffload) {
    if (!activations_)
      throw std::invalid_argument("task '" + task.name + "' is not an offload copy this plan asks for");
    // One micro-batch's activations, on the copy stream (the chunk's forward send reads a copy of its
    // output: see keep_output()).
    const int mb = task.microbatch, chunk = task.chunk;
    copies_[handle] = task.to_host ? activations_->to_host(mb, chunk, chunk_buffers(mb, chunk))
                                   : activations_->to_device(mb, chunk);
  } else if (task.purpose == Purpose::OptimizerOffload) {
    // The optimizer state's, synchronous (the step waits for it at once).
    if (!offload_)
      throw std::invalid_argument("task '" + task.name + "' is not an offload copy this plan asks for");
    if (task.to_host)
      offload_->to_host();
    else
      offload_->to_device();
  } else if (task.purpose == Purpose::PassGather) {
    request_pass_gather(handle, index, task);
  } else if (task.purpose == Purpose::GradientTopK) {
    if (!compressor_)
      throw std::invalid_argument("task '" + task.name + "' is a top-k exchange in a plan without it");
    // Each part's (value, index) pairs to the ranks that sum it (its residual keyed by where it begins);
    // each rank sums every rank's pairs into the part. In the warm-up, dense sums.
    const std::vector<ShardedRange>& parts = buckets_.at(index);
    auto packed = std::make_shared<std::vector<Buffer<float>>>();
    packed->reserve(parts.size());  // their data stay put while the gathers run
    float* grads = model_.gradients().data();
    for (const auto& [range, comm] : parts) {
      float* g = grads + range.first;
      const size_t n = range.second - range.first;
      const bool sent = comm->size() > 1;  // not an expert's with a single holder
      if (compressor_->dense(step_)) {
        if (sent) {
          dp_bytes_ += double(n) * sizeof(float);
          requests.add(comm, comm->start_allreduce_sum(g, n));
        }
        continue;
      }
      Buffer<float>& pairs =
          packed->emplace_back(compressor_->compress(int(range.first), g, n, comm->rank(), comm->size()));
      if (sent) {
        dp_bytes_ += double(pairs.size()) * sizeof(float);
        requests.add(comm,
                     comm->start_allgather(
                         pairs.data(), std::vector<size_t>(size_t(comm->size()), 2 * compressor_->pairs(n))));
      }
    }
    if (!packed->empty())
      on_done_[handle] = [this, packed, grads, &parts] {
        for (size_t i = 0; i < parts.size(); ++i) {
          const auto [range, comm] = parts[i];
          compressor_->decompress((*packed)[i], grads + range.first, range.second - range.first,
                                  comm->size());
        }
      };
  } else {
    throw std::logic_error("start_memory_mode: task '" + task.name + "' is not one of a memory mode");
  }
  return launched(std::move(requests));
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
