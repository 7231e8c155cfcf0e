// ZeRO 2 and 3 in the CPU runner (ParallelRunner), as DeepSpeed and FSDP run them and the Program
// lowers them (plan/ir/lower_sharded.cpp): ZeRO 3's gathers of one unit's parameters before each
// forward and backward, released by the pass that used them; gradients reduce-scattered every
// micro-batch into the rank's partition, a backward writing into unsharded windows of the spans that
// its micro-batch's reduce-scatters name (see parallel_runner.hpp); under HSDP each reduced block summed
// over the replicas before it joins the partition.
#include <algorithm>
#include <map>
#include <stdexcept>

#include "exec/train/parallel_runner.hpp"
#include "plan/ir/reshard_rule.hpp"

namespace paratwin::exec {

namespace {

using Range = std::pair<size_t, size_t>;

bool overlap(int a_begin, int a_end, int b_begin, int b_end) {
  return std::max(a_begin, b_begin) < std::min(a_end, b_end);
}

bool inside(Range inner, Range outer) {
  return inner.first >= outer.first && inner.second <= outer.second;
}

}  // namespace

void ParallelRunner::set_up_sharding() {
  const Plan& p = setup_.plan;
  if (p.zero == 3) {
    // Gathers get groups of their own: they are issued as ranges become free, which need not keep
    // their order with the gradient buckets' collectives. The same ranks as the buckets' parts (dp x cp
    // under CP; an expert's replicas), whose blocks the optimizer updates.
    std::vector<std::unique_ptr<Communicator>> groups;
    std::map<Communicator*, Communicator*> own;  // a part's group -> the gathers' copy of it
    for (Communicator* c : {dp_.get(), expert_replicas_.get()})
      if (c) own[c] = groups.emplace_back(c->split(0)).get();
    std::vector<ShardedRange> parts;
    for (const auto& [range, comm] : parts_) parts.push_back({range, own.at(comm)});
    zero3_ = std::make_unique<Zero3Gathers>(model_.parameters(), std::move(parts), std::move(groups));
  }
  // The Program reduce-scatters every micro-batch's gradients (ZeRO 2 and 3 over several replicas,
  // uncompressed): the rank holds its partition of them, and no whole gradient buffer.
  bool every_microbatch = false;
  for (const Task& t : role().tasks)
    every_microbatch |= t.purpose == Purpose::GradientReduce && t.microbatch >= 0;
  if (every_microbatch) {
    sharded_ = std::make_unique<ShardedGradients>(parts_, model_.size(), replicas_.get());
    Buffer<float>().swap(model_.gradients());
    plan_gradient_windows();
  }
  model_.use_windows(zero3_ ? &zero3_->windows() : nullptr, sharded_ ? &sharded_->windows() : nullptr);
}

bool ParallelRunner::runs_head(const Task& task) const {
  return at_.pp == setup_.plan.pp - 1 && task.layer_end == model_.config().layers;
}

std::vector<Range> ParallelRunner::pass_ranges(const Task& task) const {
  const Range span = parameter_range(task);
  std::vector<Range> out{span};
  // Tied embeddings on one stage: the head is the embedding, which lies in the first layer's span. Where
  // forwards reshard (after_forward) a pass through the head gathers it again, as DeepSpeed fetches a
  // shared parameter for every module that uses it; otherwise the first layer's copy is held through
  // its micro-batch's backward (after_backward) or the step (after_step), around every head pass.
  const Range head = model_.head_range();
  if (runs_head(task) && head.second > head.first && !inside(head, span) &&
      pass_reshards(setup_.plan.reshard, true, false))
    out.insert(out.begin(), head);
  return out;
}

void ParallelRunner::plan_gradient_windows() {
  const std::vector<Task>& tasks = role().tasks;
  const Range head = model_.head_range();
  for (size_t i = 0; i < tasks.size(); ++i) {
    const Task& b = tasks[i];
    if (b.kind != TaskKind::Backward || is_pass_share(b.purpose)) continue;
    std::vector<Range>& open = backward_parts_[int(i)];
    // The parts of the reduce-scatters that take the gradients it computes: those of the layers it
    // computes in its micro-batch, or the first one after it (under reshard after_step one a step; the
    // windows of the earlier micro-batches' backwards stay open and accumulate).
    const auto takes = [&b](const Task& r) {
      return r.chunk == b.chunk && overlap(r.layer_begin, r.layer_end, b.layer_begin, b.layer_end);
    };
    int by = -1;
    for (const auto& [index, parts] : buckets_) {
      const Task& r = tasks[size_t(index)];
      if (takes(r) && r.microbatch >= b.microbatch && (by < 0 || r.microbatch < by)) by = r.microbatch;
    }
    for (const auto& [index, parts] : buckets_)
      if (takes(tasks[size_t(index)]) && tasks[size_t(index)].microbatch == by)
        for (const auto& part : parts) open.push_back(part.range);
    // A tied head on one stage adds to the embedding's gradients, which the first layer's reduce-scatter
    // takes: their window opens here and stays open until then.
    if (runs_head(b) && !inside(head, parameter_range(b)))
      for (const auto& part : parts_)
        if (inside(part.range, head)) open.push_back(part.range);
  }
}

void ParallelRunner::open_gradient_windows(int index) {
  if (!sharded_) return;
  if (auto parts = backward_parts_.find(index); parts != backward_parts_.end())
    for (const Range& part : parts->second) sharded_->open(part);
}

float* ParallelRunner::gradient_at(size_t offset) {
  return sharded_ ? sharded_->at(offset) : model_.gradients().data() + offset;
}

int ParallelRunner::reduce_sharded(int index, const Task& task) {
  if (task.collective != cost::CollectiveKind::ReduceScatter || task.microbatch < 0)
    throw std::logic_error("task '" + task.name + "' reduces the step's gradients, which are held sharded");
  // This micro-batch's gradients of the span, summed into the partition (see sharded_gradients.hpp).
  return each_sharded_part(index, &ShardedGradients::reduced,
                           [this](Range range, Communicator* comm, auto& started) {
                             if (comm->size() > 1)
                               dp_bytes_ += double(range.second - range.first) * sizeof(float);
                             return sharded_->reduce(range, comm, started);
                           });
}

int ParallelRunner::sum_over_replicas(const Task& task) {
  // The blocks of the reduce-scatter it follows (verify(Program): its one dependency).
  return each_sharded_part(task.deps.front(), &ShardedGradients::replicas_summed,
                           [this](Range range, Communicator* comm, auto& started) {
                             dp_bytes_ +=
                                 double(dp_blocks(range, comm->size())[size_t(comm->rank())]) * sizeof(float);
                             return sharded_->sum_over_replicas(range, started);
                           });
}

int ParallelRunner::each_sharded_part(int bucket, void (ShardedGradients::*done)(int),
                                      const StartPart& start) {
  std::vector<int> ids;
  std::vector<std::pair<Communicator*, Communicator::Handle>> started;
  for (const auto& [range, comm] : buckets_.at(bucket)) ids.push_back(start(range, comm, started));
  Requests requests;
  for (const auto& [comm, h] : started) requests.add(comm, h);
  const int handle = launched(std::move(requests));
  on_done_[handle] = [this, ids, done] {
    for (int id : ids) (sharded_.get()->*done)(id);
  };
  reductions_.push_back({handle, computes_});
  return handle;
}

// MPI's non-blocking collectives advance on the CPU only inside MPI calls, so a reduce-scatter that the
// twin ends within the next unit's compute (a unit's gradients are far quicker to send than to
// compute) could otherwise linger for several, its unsharded gradients with it. The runner drives each
// one to its end before the second compute task after it starts, and before a gather that follows it
// on the DP stream (which, as the twin's, runs one task at a time), so that the gradients are freed
// where the Program frees them.
void ParallelRunner::settle_reductions(bool all) {
  while (!reductions_.empty() && (all || reductions_.front().second < computes_)) {
    finish(reductions_.front().first);
    reductions_.pop_front();
  }
}

void ParallelRunner::request_pass_gather(int handle, int index, const Task& task) {
  if (!zero3_)
    throw std::invalid_argument("task '" + task.name + "' is a ZeRO-3 gather in a plan without ZeRO 3");
  settle_reductions(true);
  const double before = zero3_->bytes();
  const int ticket = zero3_->request(moved_ranges(task, pass_ranges(task)));
  dp_bytes_ += zero3_->bytes() - before;
  tickets_[handle] = ticket;
  pass_tickets_.push_back({index, task.chunk, task.layer_begin, task.layer_end, ticket});
}

void ParallelRunner::pass_ended(int index, const Task& task) {
  if (!zero3_) return;
  // A forward or backward that frees its layers' parameters (every pass, backwards, or the chunk's last
  // backward of the step) gives back the copies gathered before it: a later pass's prefetched gather
  // stays (a recompute uses the backward's).
  const bool forward = task.kind == TaskKind::Forward;
  const bool last = !forward && task.microbatch == setup_.plan.num_microbatches - 1;
  if (!pass_reshards(setup_.plan.reshard, forward, last)) return;
  for (auto it = pass_tickets_.begin(); it != pass_tickets_.end();) {
    if (it->gather < index && it->chunk == task.chunk && it->layer_begin >= task.layer_begin &&
        it->layer_end <= task.layer_end) {
      zero3_->release(it->ticket);
      it = pass_tickets_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace paratwin::exec
