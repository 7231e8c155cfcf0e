// ZeRO 1's parameter gather as Megatron-LM runs it under --overlap-param-gather (plan.overlap.param_gather;
// Megatron-Core's DistributedOptimizer): the optimizer step does not gather. The next step's zero_grad
// issues the all-gather of the bucket the forward needs first, and a forward pre-hook on each module
// waits for its bucket's gather and issues the next bucket's, one at a time (so that the communication
// kernels do not block the compute kernels under CUDA_DEVICE_MAX_CONNECTIONS=1). Each step's gathers
// bring the parameters the previous step updated, so a Program iteration holds them before its first
// forward: the first bucket's gather is exposed, each next one runs beside the forward of the bucket
// before it. The buckets are the gradient buckets (plan/ir/buckets.hpp), gathered in the forward's
// order: the role's chunks in model order, each chunk's buckets from its first layers on.
#include "plan/ir/role_builder.hpp"

namespace paratwin::lowering {

bool RoleBuilder::gathers_in_forward() const {
  return gathers_params_in_forward(p_.overlap_param_gather, p_.zero, replicas());
}

void RoleBuilder::gather_order() {
  // buckets_ holds each chunk's buckets in gradient order (from its last layers), chunks ascending.
  for (size_t first = 0; first < buckets_.size();) {
    size_t end = first;
    while (end < buckets_.size() && buckets_[end].chunk == buckets_[first].chunk) ++end;
    for (size_t b = end; b > first; --b) gather_order_.push_back(buckets_[b - 1]);
    first = end;
  }
  gather_ids_.assign(gather_order_.size(), {});
}

TaskDeps RoleBuilder::bucket_gather(size_t g, TaskDeps deps) {
  if (!gather_ids_[g].empty()) return gather_ids_[g];
  const GradientBucket& b = gather_order_[g];
  // The bucket's parameters (a bucket's gradient elements may count a tied lookup's rows instead).
  Bytes dense, experts;
  for (int l = b.layer_begin; l < b.layer_end; ++l) {
    dense += unit_dense_bytes(l);
    experts += unit_expert_bytes(l);
  }
  if (g > 0)
    for (int id : gather_ids_[g - 1]) deps.push_back(id);
  Task t = collective(CollectiveKind::AllGather, GroupKind::Dp, dp_, dense + experts, 1, StreamKind::Dp,
                      names_ ? "AG dp params bucket" + std::to_string(g) : std::string(), std::move(deps));
  t.purpose = Purpose::ParameterGather;  // the parameters of its layers, updated by the previous step
  t.chunk = b.chunk;
  t.layer_begin = b.layer_begin;
  t.layer_end = b.layer_end;
  return gather_ids_[g] = add_dp(std::move(t), dense, experts);
}

void RoleBuilder::gathered_forward(int chunk, TaskDeps deps) {
  const StagePlan& st = stage(chunk);
  TaskDeps done;
  bool first = true;
  for (size_t g = 0; g < gather_order_.size(); ++g) {
    const GradientBucket& b = gather_order_[g];
    if (b.chunk != chunk) continue;
    // Where the forward reaches this bucket's first module: after the pass's inputs and the compute
    // before it. The step's first bucket is gathered from zero_grad on, before any of it.
    TaskDeps reached = first ? deps : done;
    if (first && !previous_compute_.empty()) reached.push_back(previous_compute_.front());
    const TaskDeps gather = bucket_gather(g, {});
    // The pre-hook waits for this bucket's gather, then issues the next bucket's.
    if (g + 1 < gather_order_.size()) {
      TaskDeps next = reached;
      for (int id : gather) next.push_back(id);
      bucket_gather(g + 1, std::move(next));
    }
    const int lo = b.layer_begin, hi = b.layer_end;
    // The chunk's last bucket's task is the pass's for the live engines (its span the chunk's, run
    // once every part before it has waited for its gather); the parts before are its shares.
    const bool last = hi == st.layer_end;
    Task f =
        last ? pass_task(TaskKind::Forward, 0, chunk, st.layer_begin, hi, named("F ", 0, chunk))
             : pass_task(TaskKind::Forward, 0, chunk, lo, hi,
                         names_ ? named("F ", 0, chunk) + " L" + std::to_string(lo) + "-" + std::to_string(hi)
                                : std::string());
    if (!last) f.purpose = Purpose::GatheredForwardPart;
    f.work =
        pass_work(lo, hi, true, chunk == 0 && lo == st.layer_begin, last_chunk(chunk) && hi == st.layer_end);
    if (first) f.alloc = activations(chunk);
    f.deps = first ? deps : done;
    for (int id : gather) f.deps.push_back(id);
    done = compute_with_comm(std::move(f), chunk, lo, hi, true, 0, 1);
    first = false;
  }
  forward_done_[forward_slot(0, chunk)] = done;
}

}  // namespace paratwin::lowering
