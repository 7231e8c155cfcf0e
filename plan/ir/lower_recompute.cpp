// Activation recomputation in the Program: what a backward runs again first, by each layer's recompute
// mode (StagePlan::layer_recompute: the stage's mode on every recompute_every-th layer, none on the
// others) and what it repeats of the forward's collectives. Work from cost::recompute_forward, memory
// from cost::layer_activation_bytes and cost::recompute_working_bytes: one rule for the Program, the
// analytic evaluator, the simulator and the optimizer's bounds.
#include "plan/cost/layer_collectives.hpp"
#include "plan/ir/role_builder.hpp"

namespace paratwin::lowering {

cost::ActivationConfig RoleBuilder::activation_config(int chunk, int layer) const {
  return {p_.micro_batch,
          t_.seq_len,
          p_.tp,
          p_.cp,
          p_.sequence_parallel,
          layer >= 0 ? stage(chunk).layer_recompute(layer) : stage(chunk).recompute,
          t_.precision,
          t_.attention,
          t_.cross_entropy,
          t_.tensor_parallel,
          stage(chunk).recompute_modules,
          t_.projections,
          t_.fp8_recipe};
}

cost::KernelCost RoleBuilder::recompute_work(int chunk, int begin, int end) {
  const auto key = std::pair{begin, end};
  if (auto known = recompute_work_.find(key); known != recompute_work_.end()) return known->second;
  const StagePlan& st = stage(chunk);
  // Recomputed layers by kind: dense or MoE (by pace), full or windowed attention.
  cost::KernelCost k;
  const auto recomputed = [&st](int l) { return st.layer_recompute(l) != Recompute::None; };
  for (const auto& [kind, layers] : layers_by_kind(begin, end, recomputed))
    k += cost::recompute_forward(m_, work_of(layer_work(), kind), st.recompute, kind.moe,
                                 st.recompute_modules) *
         layers;
  return recompute_work_.emplace(key, k).first->second;
}

TaskDeps RoleBuilder::recompute(int mb, int chunk, int begin, int end, std::string name, TaskDeps deps,
                                Bytes& working) {
  const StagePlan& st = stage(chunk);
  int first = -1, layers = 0;  // the first recomputed layer of [begin, end) and how many there are
  working = Bytes(0);
  for (int l = begin; l < end; ++l) {
    if (st.layer_recompute(l) == Recompute::None) continue;
    if (first < 0) first = l;
    ++layers;
    // The layer being recomputed, until its backward has used it; one layer at a time.
    working =
        std::max(working, cost::recompute_working_bytes(m_, activation_config(chunk, l), m_.is_moe_layer(l)));
  }
  if (layers == 0) return deps;
  Task r = pass_task(TaskKind::Recompute, mb, chunk, begin, end, std::move(name));
  r.work = recompute_work(chunk, begin, end);
  r.recompute_flops = r.work.gemm_flops;
  r.alloc = working;
  r.deps = std::move(deps);
  switch (st.recompute) {
    case Recompute::Full:
      // The forward again, its collectives too: those of `layers` layers like the first recomputed one
      // (with recompute_every, every recomputed layer of a model whose MoE layers alternate alike).
      return end - begin == layers
                 ? compute_with_comm(std::move(r), chunk, begin, end, true, mb, 1)
                 : compute_with_comm(std::move(r), chunk, first, first + 1, true, mb, layers);
    case Recompute::Op: {
      // torchtitan's policy keeps the reduce-scatters' outputs, not the all-gathers' (SP) nor the
      // all-reduces' (without SP). Under SP a layer's two all-gathers run again (the norms' outputs feed
      // the recomputed QKV and MLP linears and their weight gradients); without it the output
      // projection's all-reduce (its sum feeds the second norm), not the down projection's, which is
      // past the last tensor the backward needs (op_checkpoint.hpp).
      const int id = add(std::move(r));
      if (p_.tp == 1) return {id};
      const cost::LayerCollectiveBytes sizes = cost::layer_collective_bytes(m_, layer_work());
      const Bytes bytes = p_.sequence_parallel ? sizes.tp_gather : sizes.tp;
      const CollectiveKind kind =
          p_.sequence_parallel ? CollectiveKind::AllGather : CollectiveKind::AllReduce;
      const int comm =
          add(collective(kind, GroupKind::Tp, tp_, bytes, (p_.sequence_parallel ? 2 : 1) * layers,
                         StreamKind::Tp, names_ ? named("tp R ", mb, chunk) : std::string(), {id}));
      return {id, comm};
    }
    default:
      // Selective: the attention core alone, no collective; it may run beside the previous pass's.
      return {add(std::move(r))};
  }
}

}  // namespace paratwin::lowering
