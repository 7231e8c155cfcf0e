// The CPU runner's activations, unit by unit (see ActivationUnit in parallel_runner.hpp): where each
// micro-batch's forward and backward of one unit keep what they need, how the residual stream and its
// gradient pass from one unit to the next inside a chunk, and when a unit's activations go.
#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>

#include "exec/data/loader.hpp"
#include "exec/memory/memory_meter.hpp"
#include "exec/train/parallel_runner.hpp"

namespace paratwin::exec {

std::vector<ActivationUnit> activation_units(const Plan& plan, const Role& role) {
  std::set<std::tuple<int, int, int>> spans;  // (first layer, end, chunk)
  for (const Task& t : role.tasks)
    if (t.kind == TaskKind::Forward && !is_pass_share(t.purpose))
      spans.insert({t.layer_begin, t.layer_end, t.chunk});
  std::vector<ActivationUnit> units;
  for (const auto& [begin, end, chunk] : spans) units.push_back({chunk, begin, end});
  // Each of the role's chunks cut into contiguous units, none overlapping.
  for (const int c : plan.chunks_of(role.pipeline_rank)) {
    const StagePlan& st = plan.stages.at(size_t(c));
    int at = st.layer_begin;
    for (const ActivationUnit& u : units)
      if (u.chunk == c) {
        if (u.layer_begin != at)
          throw std::logic_error("the forward tasks of chunk " + std::to_string(c) + " of role " +
                                 std::to_string(role.pipeline_rank) +
                                 " do not run its layers once each, in order");
        at = u.layer_end;
      }
    if (at != st.layer_end)
      throw std::logic_error("the forward tasks of chunk " + std::to_string(c) + " of role " +
                             std::to_string(role.pipeline_rank) + " leave layers from " + std::to_string(at) +
                             " out");
  }
  return units;
}

int ParallelRunner::unit_of(int chunk, int layer) const {
  for (size_t u = 0; u < units_.size(); ++u)
    if (units_[u].chunk == chunk && layer >= units_[u].layer_begin && layer < units_[u].layer_end)
      return int(u);
  throw std::logic_error("layer " + std::to_string(layer) + " of chunk " + std::to_string(chunk) +
                         " is in none of the rank's activation units");
}

int ParallelRunner::first_unit(int chunk) const {
  return unit_of(chunk, setup_.plan.stages.at(size_t(chunk)).layer_begin);
}

int ParallelRunner::last_unit(int chunk) const {
  return unit_of(chunk, setup_.plan.stages.at(size_t(chunk)).layer_end - 1);
}

ChunkActivations& ParallelRunner::slot(int microbatch, int unit) {
  auto [it, fresh] = slots_.try_emplace({microbatch, unit});
  if (fresh || released_.erase({microbatch, unit})) {
    MemoryUseScope use(MemoryUse::Activations);  // the memory report's make-up, as on one shard
    model_.allocate(it->second, unit, setup_.plan.micro_batch,
                    setup_.scenario.training.seq_len / setup_.plan.cp, activation_policies(unit),
                    setup_.plan.stages.at(size_t(units_.at(size_t(unit)).chunk)).recompute_modules);
  }
  return it->second;
}

void ParallelRunner::release(int microbatch, int unit) {
  // The next stage has used the sent forward (its gradient came back); the send has ended in effect.
  const int chunk = units_.at(size_t(unit)).chunk;
  if (unit == last_unit(chunk))
    if (auto s = forward_sends_.find({microbatch, chunk}); s != forward_sends_.end()) pp_->wait(s->second);
  ChunkActivations& a = slots_.at({microbatch, unit});
  for (Buffer<float>* b : kept_buffers(a)) Buffer<float>().swap(*b);
  // The model's first unit has put its input's gradient into the embedding: nothing goes back.
  if (units_.at(size_t(unit)).layer_begin == 0) Buffer<float>().swap(a.dresidual);
  released_.insert({microbatch, unit});
}

std::vector<Buffer<float>*> ParallelRunner::chunk_buffers(int microbatch, int chunk) {
  std::vector<Buffer<float>*> out;
  for (int u = first_unit(chunk); u <= last_unit(chunk); ++u)
    for (Buffer<float>* b : kept_buffers(slot(microbatch, u))) out.push_back(b);
  return out;
}

void ParallelRunner::run_forward(int index, const Task& task) {
  const Plan& p = setup_.plan;
  const int unit = unit_of(task.chunk, task.layer_begin);
  const ActivationUnit& u = units_.at(size_t(unit));
  if (task.layer_end != u.layer_end)
    throw std::logic_error("forward '" + task.name + "' runs part of an activation unit");
  ChunkActivations& a = slot(task.microbatch, unit);
  if (u.layer_begin == 0 || u.layer_end == model_.config().layers) {  // the embedding or the loss
    const Batch& b = batches_.at(task.microbatch);
    std::copy(b.inputs.begin(), b.inputs.end(), a.tokens.begin());
    std::copy(b.targets.begin(), b.targets.end(), a.targets.begin());
  }
  if (unit != first_unit(task.chunk)) {  // the unit below's output is this one's input
    const ChunkActivations& below = slots_.at({task.microbatch, unit - 1});
    std::copy_n(model_.output(below), model_.boundary_size(a), model_.input(a));
  }
  const double loss = model_.forward(a);  // at the model's top: the micro-batch's (summed over CP)
  if (unit == last_unit(task.chunk)) {
    keep_output(task);
    if (task.chunk == p.chunks() - 1 && at_.tp == 0 && at_.cp == 0) losses_.push_back(loss);
  }
  pass_ended(index, task);
}

void ParallelRunner::load_batch(const Task& task) {
  const Plan& p = setup_.plan;
  const int64_t first = DataLoader::first_sequence(step_, setup_.scenario.training.global_batch, at_.dp,
                                                   p.num_microbatches, task.microbatch, p.micro_batch);
  Batch& b = batches_[task.microbatch] = setup_.data.batch(first, p.micro_batch);
  if (context_) {  // this CP rank's tokens of each sequence
    const size_t share = b.inputs.size() / size_t(p.cp);
    Batch mine{std::vector<int32_t>(share), std::vector<int32_t>(share)};
    context_->take(b.inputs.data(), p.micro_batch, mine.inputs.data());
    context_->take(b.targets.data(), p.micro_batch, mine.targets.data());
    b = std::move(mine);
  }
}

void ParallelRunner::run_backward(int index, const Task& task) {
  const int unit = unit_of(task.chunk, task.layer_end - 1);
  const ActivationUnit& u = units_.at(size_t(unit));
  if (task.layer_begin < u.layer_begin)
    throw std::logic_error("backward '" + task.name + "' runs layers of two activation units");
  ChunkActivations& a = slots_.at({task.microbatch, unit});
  if (task.layer_end == u.layer_end && unit != last_unit(task.chunk)) {
    // The unit above's input gradient is this one's output gradient; the unit above needs it no more.
    ChunkActivations& above = slots_.at({task.microbatch, unit + 1});
    MemoryUseScope use(MemoryUse::Activations);
    a.dresidual.assign(above.dresidual.begin(), above.dresidual.end());
    Buffer<float>().swap(above.dresidual);
  }
  open_gradient_windows(index);
  model_.backward(a, task.layer_begin, task.layer_end, 1.0f / float(setup_.plan.num_microbatches));
  pass_ended(index, task);
  if (task.layer_begin == u.layer_begin) release(task.microbatch, unit);
}

void ParallelRunner::recompute_first(const Task& task) {
  const StagePlan& stage = setup_.plan.stages.at(size_t(task.chunk));
  for (int l = task.layer_end - 1; l >= task.layer_begin; --l)
    if (stage.layer_recompute(l) != Recompute::None) {
      model_.recompute(slot(task.microbatch, unit_of(task.chunk, l)), l);
      return;
    }
}

}  // namespace paratwin::exec
