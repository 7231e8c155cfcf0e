// Per-layer costs of the parallel layouts the optimizer searches: one layer's passes with their
// TP/CP/EP collectives, prefix tables over the layers (shared by layouts alike in what they follow),
// where a layout's groups sit, and the model states a rank holds. Each is worked out once and cached.
#pragma once

#include <map>
#include <tuple>

#include "plan/cost/collectives.hpp"
#include "plan/cost/compute.hpp"
#include "plan/cost/layer_collectives.hpp"
#include "plan/cost/ring_attention.hpp"
#include "plan/cost/tp_overlap.hpp"
#include "plan/ir/program.hpp"
#include "plan/search/layout.hpp"
#include "plan/search/search_context.hpp"

namespace paratwin::search {

class LayerCosts {
 public:
  explicit LayerCosts(const SearchContext& context);

  // Per-layer times of one micro-batch of the layout on `pool`, each group packed into as few nodes
  // as it can be (no rank order places it better); additive lower bounds of the evaluator's times,
  // compute at gpu_pace.
  const LayerTimes& times(int pool, const ParallelLayout& layout);
  // The pace of the layout's compute on `pool`: the expected slowest of its GPUs, as the evaluator
  // takes it (analytic/evaluate.hpp's compute_pace).
  double gpu_pace(int pool, const ParallelLayout& layout) const;
  // One layer's model-parallel collectives per pass; `where(group, size)` places a group.
  template <class Where>
  LayerComm comm(const ParallelLayout& layout, const Where& where, const PoolSpec& pool) const;
  // The least pace of any MoE layer on `ep` EP ranks (plan/cost/expert_load.hpp): every MoE layer's
  // experts run at least that load, so bounds costed at it stay below the evaluator's times.
  double least_moe_pace(int ep) const;
  // A layer's work under the layout as the bounds take it: its experts at least_moe_pace, folded or not.
  cost::LayerWork layer_work(const ParallelLayout& layout) const;
  // A layer's forward and backward at the cheaper layer kind, as a chain of passes with their
  // collectives or on the compute stream alone, whichever is longer: below any mix of layers.
  double per_layer(const LayerTimes& t) const;
  // The layout's prefix tables.
  const CostTable& table(const ParallelLayout& layout);

  // Where a pipeline rank's group of `kind` sits on `pool` under rank order `order` (an index into
  // SearchContext::orders).
  const cost::GroupPlacement& placement(const ParallelLayout& layout, GroupKind kind, int pool, int order);
  const cost::GroupPlacement& dp_placement(const ParallelLayout& layout, int pool, int order) {
    return placement(layout, GroupKind::Dp, pool, order);
  }

  ChunkMemory chunk_memory(const ParallelLayout& layout) const;
  // Parameters of layers [begin, end) of chunk c on one rank, as lowering counts them.
  double chunk_params(const ParallelLayout& layout, int c, int begin, int end) const;
  // Device bytes of model states per parameter a rank holds (states are linear in the parameters).
  double state_bytes_per_parameter(const ParallelLayout& layout, const Variant& v) const;
  // Parameters of all transformer layers on one TP rank (experts split over ep), summed over the
  // pipeline ranks.
  double layer_parameters(const ParallelLayout& layout) const;
  // One MoE layer's parameters on one rank, experts included (moe_layer_share).
  double moe_layer_rank_parameters(const ParallelLayout& layout) const;
  // One MoE layer's expert parameters on one rank where they are apart (under EP or folded; none
  // otherwise).
  double expert_parameters(const ParallelLayout& layout) const;
  // A rank's memory for states and kept activations (the layout's tables made).
  double capacity(const ParallelLayout& layout, int rank) const;
  // Whether the variant's model states can fit on some partition.
  bool states_can_fit(const ParallelLayout& layout, const Variant& v) const;

 private:
  struct ComputeKey {
    int pool, tp, cp, ep, mb, gpus;
    bool sp, folded;
    Recompute recompute;
    auto operator<=>(const ComputeKey&) const = default;
  };
  CostTable make_table(const ParallelLayout& layout);
  // Whether layer `layer` recomputes under the layout (the request's recompute_every, fixed for the
  // search, picks the layers as StagePlan::layer_recompute does).
  bool recomputes(const ParallelLayout& layout, int layer) const {
    StagePlan st;
    st.recompute = layout.recompute;
    st.recompute_every = ctx_.req.recompute_every.value_or(1);
    return st.layer_recompute(layer) != Recompute::None;
  }

  const SearchContext& ctx_;
  std::map<ComputeKey, LayerTimes> times_;
  mutable std::map<int, double> least_moe_pace_;  // by ep
  std::map<std::tuple<int, int, int, int, int, bool, bool, Recompute, unsigned>, CostTable> tables_;
  // By (group, tp, cp, dp, pp, ep, folded, HSDP's replicas, pool, rank order).
  std::map<std::tuple<GroupKind, int, int, int, int, int, bool, int, int, int>, cost::GroupPlacement>
      placements_;
};

template <class Where>
LayerComm LayerCosts::comm(const ParallelLayout& layout, const Where& where, const PoolSpec& pool) const {
  auto coll = [&](cost::CollectiveKind kind, GroupKind group, int size, Bytes bytes) {
    if (size <= 1) return 0.0;
    return cost::collective_time(kind, bytes, where(group, size), pool, ctx_.s.cluster).time.value();
  };
  using cost::CollectiveKind;
  const cost::LayerWork work = layer_work(layout);
  const cost::LayerCollectiveBytes bytes = cost::layer_collective_bytes(ctx_.s.model, work);
  LayerComm out;
  const double gather =
      layout.sp ? coll(CollectiveKind::AllGather, GroupKind::Tp, layout.tp, bytes.tp_gather) : 0;
  const double input_grads = layout.sp
                                 ? coll(CollectiveKind::ReduceScatter, GroupKind::Tp, layout.tp, bytes.tp)
                                 : coll(CollectiveKind::AllReduce, GroupKind::Tp, layout.tp, bytes.tp);
  const bool beside = cost::tp_input_grads_beside_pass(work, ctx_.req.overlap_tp.value_or(false));
  out.tp = gather + input_grads;
  out.tp_backward = gather + (beside ? 0 : input_grads);
  if (layout.cp > 1 && cost::runs_ring_attention(work)) {
    // The ring (plan/ir/lower.cpp): its transfers may hide behind its blocks, but for the shifts it
    // leaves for after its last block (torch_ring's last dK/dV send per layer), which never hide.
    const cost::RingAttention ring = cost::ring_attention(ctx_.s.model, work, false);
    out.cp_forward = 0;
    out.cp_backward = ring.tail_shifts * coll(CollectiveKind::AllToAll, GroupKind::Cp, layout.cp,
                                              cost::shift_as_alltoall(ring.shift, layout.cp));
  } else {
    out.cp_forward = coll(CollectiveKind::AllGather, GroupKind::Cp, layout.cp, bytes.cp);
    out.cp_backward = coll(CollectiveKind::ReduceScatter, GroupKind::Cp, layout.cp, bytes.cp);
  }
  // Combined 1F1B runs most passes' all-to-alls beside the next pass (RoleBuilder::compute_with_comm):
  // none follows a pass in a bound.
  if (ctx_.s.model.moe && layout.ep > 1 && !layout.overlap_ep)
    out.ep = 2 * coll(CollectiveKind::AllToAll, GroupKind::Ep, layout.ep, bytes.ep);
  return out;
}

}  // namespace paratwin::search
