// ZeRO 2 and 3 as DeepSpeed and PyTorch FSDP run them.
//
// ZeRO 3 (FSDP full sharding): the unit is one transformer layer, the chunk's first layer with the
// embedding and its last with the head. A unit's parameters are all-gathered right before its forward
// and freed after it, all-gathered again before its backward, and its gradients reduce-scattered as
// soon as its backward ends, every micro-batch: no gradient is held whole. The next unit's gather is
// issued on the DP stream once the unit two before it has ended (FSDP's forward and backward
// prefetch), so it overlaps the current unit's compute and at most two gathered units exist at a time.
//
// Under training.fsdp, each unit's forward and backward also carry PyTorch FSDP's memory-bound copies
// around its gather and reduce-scatter (plan/cost/fsdp_copies.hpp): those of the compute stream, and
// those of FSDP's side streams, which read and write the same HBM beside the unit's kernels; the twin
// has no model of two kernels sharing a device's bandwidth, so it charges them to the unit's compute
// task too (an upper bound for the side streams' part, a dp-th of the unit but FSDP1's cast and
// pre-divide of the whole flat gradient).
//
// plan.reshard says when a unit's gathered parameters go (its pass frees them): after_forward as above;
// after_backward keeps them from the forward to the backward (no backward gather); after_step from the
// first forward of the step to the unit's last backward, with the unsharded gradients accumulated over
// the micro-batches and reduce-scattered once, after that backward. A unit is gathered whenever a pass
// needs it and it is not held: the forwards of micro-batches in flight share one gathered copy, and
// under after_backward a backward that follows another's reshard (the pipeline's cool-down) gathers
// again, as FSDP's unshard() does when its state is sharded.
//
// HSDP (plan.dp_replicate): the DP group of all the above is the rank's shard group; each reduce-scatter
// is followed by an all-reduce of its shard over the replicas.
//
// ZeRO 2 (DeepSpeed): every micro-batch's backward is cut where the DP buckets end, and each bucket is
// reduce-scattered into the rank's partition as soon as its layers are done: a rank holds 1/dp of the
// gradients. Megatron-LM's distributed optimizer (one reduce-scatter after the last micro-batch) is
// ZeRO 1.
#include "plan/cost/fsdp_copies.hpp"
#include "plan/ir/reshard_rule.hpp"
#include "plan/ir/role_builder.hpp"

namespace paratwin::lowering {

bool RoleBuilder::reduces_every_microbatch() const {
  return paratwin::reduces_every_microbatch(p_);
}

Bytes RoleBuilder::unit_activations(int chunk, int layer) const {
  const StagePlan& st = stage(chunk);
  const cost::ActivationConfig a = activation_config(chunk, layer);
  Bytes bytes = cost::layer_activation_bytes(m_, a, m_.is_moe_layer(layer));
  if (chunk == 0 && layer == st.layer_begin) bytes += cost::embedding_activation_bytes(m_, a);
  if (last_chunk(chunk) && layer == st.layer_end - 1) bytes += cost::head_activation_bytes(m_, a);
  return bytes;
}

std::pair<Bytes, Bytes> RoleBuilder::segment_gradients(int begin, int end) const {
  double dense = 0, experts = 0;
  for (int l = begin; l < end; ++l) {
    dense += unit_params_.at(l) - unit_experts_.at(l);
    experts += unit_experts_.at(l);
  }
  return {Bytes(dense * grad_elem_), Bytes(dp_experts(experts) * grad_elem_)};
}

void RoleBuilder::add_fsdp_copies(Task& pass, int mb, int layer, bool gathered, bool reduced) const {
  const cost::FsdpCopyBytes c = cost::fsdp_copy_bytes(t_, unit_params_.at(layer), dp_.size, gathered, reduced,
                                                      mb > 0 && !once_a_step());
  pass.work.elementwise_bytes += c.total();
  pass.work.launches += c.compute_launches + c.side_launches;
}

bool RoleBuilder::once_a_step() const {
  return p_.zero == 3 && p_.reshard == Reshard::AfterStep;
}

TaskDeps RoleBuilder::gather_unless_held(int mb, int chunk, int layer, bool forward, TaskDeps deps) {
  if (unsharded_.count(layer)) return {};
  unsharded_.insert(layer);
  return unit_gather(mb, chunk, layer, forward, std::move(deps));
}

TaskDeps RoleBuilder::unit_gather(int mb, int chunk, int layer, bool forward, TaskDeps deps) {
  Task t = collective(CollectiveKind::AllGather, GroupKind::Dp, dp_, unit_bytes(layer), 1, StreamKind::Dp,
                      names_ ? named(forward ? "AG dp params F " : "AG dp params B ", mb, chunk) + " L" +
                                   std::to_string(layer)
                             : std::string(),
                      std::move(deps));
  t.alloc = t.bytes;  // freed by the pass that used it
  t.purpose = Purpose::PassGather;
  t.direction = forward ? Direction::Forward : Direction::Backward;
  t.microbatch = mb;
  t.chunk = chunk;
  t.layer_begin = layer;
  t.layer_end = layer + 1;
  return add_dp(std::move(t), unit_dense_bytes(layer), unit_expert_bytes(layer));
}

void RoleBuilder::unit_reduce(int mb, int chunk, int begin, int end, int after) {
  const std::string layers =
      names_ ? " L" + std::to_string(begin) + "-" + std::to_string(end) : std::string();
  // A gradient task of this micro-batch's span on the DP streams.
  auto gradient_task = [&](CollectiveKind kind, GroupKind group, const cost::GroupPlacement& where,
                           Bytes bytes, StreamKind stream, std::string_view name, Purpose purpose, int dep) {
    Task t = collective(kind, group, where, bytes, 1, stream, names_ ? named(name, mb, chunk) + layers : "",
                        {dep});
    t.purpose = purpose;
    t.microbatch = mb;
    t.chunk = chunk;
    t.layer_begin = begin;
    t.layer_end = end;
    return t;
  };
  const auto [dense, experts] = segment_gradients(begin, end);
  Task rs = gradient_task(CollectiveKind::ReduceScatter, GroupKind::Dp, dp_, dense + experts, StreamKind::Dp,
                          "RS dp grads ", Purpose::GradientReduce, after);
  rs.free = rs.bytes;  // the unsharded gradients the backward left, now in the rank's partition
  const Bytes shard = dense / shards();
  const TaskDeps ids = add_dp(std::move(rs), dense, experts);
  for (int id : ids) reduce_ids_.push_back(id);
  if (p_.dp_replicate == 1) return;
  // HSDP (no experts' part: checks refuse it beside ep > 1): the shard the reduce-scatter left, summed
  // over the replicas in place once it ends, on a stream of its own (FSDP's post-backward all-reduce
  // over the replicate group).
  reduce_ids_.push_back(
      add(gradient_task(CollectiveKind::AllReduce, GroupKind::DpReplicate, replicate_, shard,
                        StreamKind::DpReplicate, "AR replica grads ", Purpose::ReplicaReduce, ids.front())));
}

void RoleBuilder::sharded_forward(int mb, int chunk, TaskDeps deps) {
  const StagePlan& st = stage(chunk);
  std::vector<int> unit_compute;  // this pass's units, in order
  TaskDeps done;
  for (int l = st.layer_begin; l < st.layer_end; ++l) {
    // The first unit's gather follows the previous pass's compute; each next one, the unit two before.
    TaskDeps after;
    if (l == st.layer_begin) {
      if (!previous_compute_.empty()) after.push_back(previous_compute_.front());
    } else if (unit_compute.size() >= 2) {
      after.push_back(unit_compute[unit_compute.size() - 2]);
    }
    const TaskDeps gather = gather_unless_held(mb, chunk, l, true, std::move(after));
    Task f = pass_task(TaskKind::Forward, mb, chunk, l, l + 1, unit_name("F ", mb, chunk, l));
    const bool first = l == st.layer_begin, last = l == st.layer_end - 1;
    f.work = pass_work(l, l + 1, true, chunk == 0 && first, last_chunk(chunk) && last);
    add_fsdp_copies(f, mb, l, !gather.empty(), false);
    f.alloc = unit_activations(chunk, l);
    if (pass_reshards(p_.reshard, true, false)) {
      f.free = unit_bytes(l);
      unsharded_.erase(l);
    }
    f.deps = first ? deps : TaskDeps{};
    for (int id : gather) f.deps.push_back(id);
    done = compute_with_comm(std::move(f), chunk, l, l + 1, true, mb, 1);
    unit_compute.push_back(done.front());
  }
  forward_done_[forward_slot(mb, chunk)] = done;
}

TaskDeps RoleBuilder::sharded_backward(int mb, int chunk, TaskDeps deps, bool final) {
  const StagePlan& st = stage(chunk);
  std::vector<int> unit_compute;
  // A unit's gather follows the backward of the unit two after it (the first, the previous pass's
  // compute), and is issued before the unit after it runs its backward: ahead of that unit's
  // reduce-scatter on the DP stream, as FSDP's backward prefetch (issued from the pre-backward hook of
  // the unit after, or, BACKWARD_POST, from its post-backward hook before _reduce_grad), FSDP2's and
  // DeepSpeed's parameter prefetch all order them. Issued after that reduce-scatter instead, it would
  // wait for the unit after's whole backward. None where the unit is still held (plan.reshard).
  auto gather = [&](int l) {
    TaskDeps after;
    if (l == st.layer_end - 1) {
      if (!previous_compute_.empty()) after.push_back(previous_compute_.front());
    } else if (l + 2 < st.layer_end) {
      after.push_back(unit_compute[st.layer_end - 1 - (l + 2)]);
    }
    return gather_unless_held(mb, chunk, l, false, std::move(after));
  };
  // Reduce-scattered every micro-batch, or under reshard after_step after the unit's last backward.
  const bool reduce = reduces_every_microbatch() && (!once_a_step() || final);
  const bool reshard = pass_reshards(p_.reshard, false, final);
  TaskDeps next_gather = gather(st.layer_end - 1);
  for (int l = st.layer_end - 1; l >= st.layer_begin; --l) {
    const TaskDeps this_gather = next_gather;
    for (int id : this_gather) deps.push_back(id);
    if (l > st.layer_begin) next_gather = gather(l - 1);
    // Activation checkpointing per unit: the layer's recomputation, right before its backward.
    Bytes working;
    deps = recompute(mb, chunk, l, l + 1, unit_name("R ", mb, chunk, l), std::move(deps), working);
    Task b = pass_task(TaskKind::Backward, mb, chunk, l, l + 1, unit_name("B ", mb, chunk, l));
    const bool first = l == st.layer_begin, last = l == st.layer_end - 1;
    b.work = pass_work(l, l + 1, false, chunk == 0 && first, last_chunk(chunk) && last);
    // Its gather's copies, and its gradient's where it is reduce-scattered now.
    add_fsdp_copies(b, mb, l, !this_gather.empty(), reduce);
    // The unit's unsharded gradient exists from its backward to its reduce-scatter (compression
    // accumulates into the whole gradient buffer instead, exchanged once a step); under reshard
    // after_step from its first backward of the step, accumulated by the others.
    const bool held = accumulating_.count(l) > 0;
    if (once_a_step() && reduces_every_microbatch()) {
      b.work.elementwise_bytes += cost::fsdp_accumulation_bytes(t_, unit_params_.at(l), !held);
      b.work.launches += t_.fsdp == FsdpCopies::None ? 0 : 1;
      if (!reduce) accumulating_.insert(l);
    }
    b.alloc = reduces_every_microbatch() && !held ? segment_gradient_bytes(l, l + 1) : Bytes(0);
    if (reduce) accumulating_.erase(l);
    b.free = unit_activations(chunk, l) + working + (reshard ? unit_bytes(l) : Bytes(0));
    if (last && last_chunk(chunk)) hold_loss_transients(b, chunk);
    if (reshard) unsharded_.erase(l);
    b.deps = deps;
    deps = compute_with_comm(std::move(b), chunk, l, l + 1, false, mb, 1);
    unit_compute.push_back(deps.front());
    if (reduce) unit_reduce(mb, chunk, l, l + 1, deps.front());
  }
  return deps;
}

}  // namespace paratwin::lowering
