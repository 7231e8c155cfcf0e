// Per-layer costs of a parallel layout: times of a layer's passes with their collectives, prefix
// tables over the layers, where the groups sit, and the memory a rank holds.
#include "plan/search/layer_costs.hpp"

#include <algorithm>
#include <limits>

#include "plan/cost/expert_load.hpp"
#include "plan/cost/slowest_gpu.hpp"
#include "plan/cost/tp_overlap.hpp"
#include "plan/ir/buckets.hpp"

namespace paratwin::search {

LayerCosts::LayerCosts(const SearchContext& context) : ctx_(context) {}

double LayerCosts::least_moe_pace(int ep) const {
  auto it = least_moe_pace_.find(ep);
  if (it == least_moe_pace_.end())
    it = least_moe_pace_.emplace(ep, cost::least_pace(cost::layer_routing(ctx_.s.model, ep))).first;
  return it->second;
}

cost::LayerWork LayerCosts::layer_work(const ParallelLayout& layout) const {
  cost::LayerWork w = cost::layer_work(ctx_.s.training, layout.mb, layout.tp, layout.cp, layout.sp, layout.ep,
                                       ctx_.req.overlap_tp.value_or(false));
  w.expert_load = least_moe_pace(layout.ep);
  w.expert_tp = layout.folded ? 1 : 0;
  return w;
}

const LayerTimes& LayerCosts::times(int pool, const ParallelLayout& layout) {
  const ComputeKey key{pool,          layout.tp, layout.cp,     layout.ep,       layout.mb,
                       layout.gpus(), layout.sp, layout.folded, layout.recompute};
  auto it = times_.find(key);
  if (it != times_.end()) return it->second;
  const PoolSpec& p = ctx_.s.cluster.pools[pool];
  const DeviceSpec& d = ctx_.s.cluster.device_of(p);
  const Precision prec = ctx_.s.training.precision;
  cost::LayerWork w = layer_work(layout);
  // Every layer at the least attention work of the model's layers (a windowed layer's, where it has
  // some), so that the bound stays below any mix of full and windowed layers.
  for (int l = 0; l < ctx_.s.model.layers; ++l)
    if (const int window = ctx_.s.model.attention_window(l); window > 0) w.attention_window = window;
  // Additive lower bounds (see compute_time_bound), so that sums over any partition stay below the
  // evaluator's time for the aggregated work of a chunk.
  const double pace = gpu_pace(pool, layout);
  auto compute = [&](const cost::KernelCost& k) {
    return pace * cost::compute_time_bound(cost::launched_as_trained(k, ctx_.s.training), d, prec).value();
  };
  // Each group at its cheapest feasible placement: no rank order places it better. Packed into as few
  // nodes as it can be is not always that one: a node's measured curves hold a latency that a spread
  // group's NIC alpha-beta form may undercut on small messages.
  LayerComm best;
  bool first = true;
  for (int per_node = 1; per_node <= p.gpus_per_node; ++per_node) {
    const LayerComm c = comm(
        layout,
        [&](GroupKind, int size) {
          // `per_node` members a node where the group divides so; packed otherwise.
          const bool fits = size % per_node == 0 && size / per_node <= p.nodes;
          return fits ? cost::GroupPlacement{size, per_node, false}
                      : cost::GroupPlacement{size, std::min(size, p.gpus_per_node), false};
        },
        p);
    best = first ? c
                 : LayerComm{std::min(best.tp, c.tp), std::min(best.tp_backward, c.tp_backward),
                             std::min(best.cp_forward, c.cp_forward),
                             std::min(best.cp_backward, c.cp_backward), std::min(best.ep, c.ep)};
    first = false;
  }
  const auto [tp_pass, tp_backward, cp_f, cp_b, ep] = best;
  // A pass's collectives follow its GEMMs and the next pass waits for them. TP overlap under sequence
  // parallelism (plan/cost/tp_overlap.hpp) decomposes the GEMMs next to its all-gathers and
  // reduce-scatters into pieces, which cost what `decomposed` says, and runs its TP collectives beside
  // the pieces: a chunk's pass takes at least its compute, and at least its lead pieces and collectives.
  // That maximum of sums is no sum of per-layer maxima, so the per-layer bound keeps the compute alone;
  // the pass graph's bound takes the maximum chunk by chunk. Its CP and EP collectives still follow.
  // Synchronous launches run nothing beside the GEMMs (training.launch_blocking).
  const bool pieces =
      ctx_.req.overlap_tp.value_or(false) && cost::tp_overlap_decomposes(layout.tp, layout.sp);
  const bool beside = pieces && !ctx_.s.training.launch_blocking;
  auto work = [&](bool forward, bool moe) {
    const cost::KernelCost k =
        forward ? cost::layer_forward(ctx_.s.model, w, moe) : cost::layer_backward(ctx_.s.model, w, moe);
    return pieces ? cost::decomposed(k, cost::tp_overlap_pieces(ctx_.s.model, w, forward, moe)) : k;
  };
  auto pass = [&](double compute, double tp, double other) { return compute + (beside ? 0 : tp) + other; };
  LayerTimes t;
  t.forward_compute = compute(work(true, false));
  t.backward_compute = compute(work(false, false));
  t.moe_forward_compute = compute(work(true, true));
  t.moe_backward_compute = compute(work(false, true));
  t.forward = pass(t.forward_compute, 2 * tp_pass, cp_f);
  t.backward = pass(t.backward_compute, 2 * tp_backward, cp_b);
  const double moe_collectives = tp_layer_collectives(1, 1, layout.folded);
  t.moe_forward = pass(t.moe_forward_compute, moe_collectives * tp_pass, cp_f + ep);
  t.moe_backward = pass(t.moe_backward_compute, moe_collectives * tp_backward, cp_b + ep);
  if (layout.recompute == Recompute::Full) {
    t.recompute = t.forward;
    t.moe_recompute = t.moe_forward;
  } else if (layout.recompute != Recompute::None) {
    // Selective and op: compute alone (op's repeated TP gathers are left out of the bound).
    const RecomputeModules modules = ctx_.req.recompute_modules.value_or(RecomputeModules{});
    t.recompute = compute(cost::recompute_forward(ctx_.s.model, w, layout.recompute, false, modules));
    t.moe_recompute = compute(cost::recompute_forward(ctx_.s.model, w, layout.recompute, true, modules));
  }
  const bool collectives = tp_pass + cp_f + cp_b + ep > 0;
  // Lowering lets selective and op recomputation start after the previous pass's compute, beside its
  // collectives.
  const bool hidden =
      layout.recompute != Recompute::Full && layout.recompute != Recompute::None && collectives;
  t.chain_recompute = hidden ? 0 : t.recompute;
  t.moe_chain_recompute = hidden ? 0 : t.moe_recompute;
  t.backward_pure = t.backward_compute;
  t.moe_backward_pure = t.moe_backward_compute;
  const bool full_recompute = layout.recompute == Recompute::Full;
  t.recompute_compute = full_recompute ? t.forward_compute : t.recompute;
  t.moe_recompute_compute = full_recompute ? t.moe_forward_compute : t.moe_recompute;
  t.backward_compute += full_recompute ? t.forward_compute : t.recompute;
  t.moe_backward_compute += full_recompute ? t.moe_forward_compute : t.moe_recompute;
  // The embedding's backward without the gradient buffer's accumulation (ZeRO is not part of the key):
  // a lower bound of what lowering costs under any ZeRO stage.
  t.embedding_forward = compute(cost::embedding_forward(ctx_.s.model, w));
  t.embedding_backward = compute(cost::embedding_backward(ctx_.s.model, w, 0));
  t.head_forward = compute(cost::head_forward(ctx_.s.model, w));
  t.head_backward = compute(cost::head_backward(ctx_.s.model, w));
  return times_.emplace(key, t).first->second;
}

double LayerCosts::gpu_pace(int pool, const ParallelLayout& layout) const {
  return cost::expected_slowest(layout.gpus(), ctx_.s.cluster.device_of(ctx_.s.cluster.pools[pool]).speed_cv);
}

double LayerCosts::per_layer(const LayerTimes& t) const {
  // The cheaper layer kind, so that the bound stays below any mix of layers.
  // Either the chain of passes with their collectives or the compute stream alone. With
  // recompute_every, the cheaper kind is a layer that does not recompute.
  const bool some = ctx_.req.recompute_every.value_or(1) > 1;
  double chain = t.forward + t.backward + (some ? 0 : t.chain_recompute),
         alone = t.forward_compute + (some ? t.backward_pure : t.backward_compute);
  if (ctx_.s.model.moe) {
    chain = std::min(chain, t.moe_forward + t.moe_backward + (some ? 0 : t.moe_chain_recompute));
    alone = std::min(alone, t.moe_forward_compute + (some ? t.moe_backward_pure : t.moe_backward_compute));
  }
  return std::max(chain, alone);
}

// The tables follow the layers' times and memory on the layout's pools alone: layouts that differ only
// in dp, pp or the schedule share them where their GPUs (the slowest one's pace) are the same (a table
// is some kilobytes, and thousands of layouts are refined).
const CostTable& LayerCosts::table(const ParallelLayout& layout) {
  unsigned pools_used = 0;
  for (int pool : layout.rank_pool) pools_used |= 1u << pool;
  const auto key = std::tuple{layout.tp, layout.cp,     layout.ep,        layout.mb, layout.gpus(),
                              layout.sp, layout.folded, layout.recompute, pools_used};
  auto it = tables_.find(key);
  if (it == tables_.end()) it = tables_.emplace(key, make_table(layout)).first;
  return it->second;
}

CostTable LayerCosts::make_table(const ParallelLayout& layout) {
  const int L = ctx_.s.model.layers;
  CostTable c;
  const size_t pools = ctx_.s.cluster.pools.size();
  c.forward.resize(pools);
  c.backward.resize(pools);
  c.chain_backward.resize(pools);
  c.compute_forward.resize(pools);
  c.compute_backward.resize(pools);
  c.passes.resize(pools);
  c.ends.resize(pools);
  for (int pool : layout.rank_pool) {
    if (!c.forward[pool].empty()) continue;
    const LayerTimes& t = times(pool, layout);
    auto& f = c.forward[pool];
    auto& bw = c.backward[pool];
    auto& chain = c.chain_backward[pool];
    f.assign(L + 1, 0);
    bw.assign(L + 1, 0);
    chain.assign(L + 1, 0);
    auto& cf = c.compute_forward[pool];
    auto& cb = c.compute_backward[pool];
    auto& passes = c.passes[pool];
    cf.assign(L + 1, 0);
    cb.assign(L + 1, 0);
    passes.assign(L + 1, {});
    for (int l = 0; l < L; ++l) {
      const bool moe = ctx_.s.model.is_moe_layer(l);
      const double rc = recomputes(layout, l) ? 1 : 0;
      f[l + 1] = f[l] + (moe ? t.moe_forward : t.forward);
      bw[l + 1] = bw[l] + (moe ? t.moe_backward + rc * t.moe_recompute : t.backward + rc * t.recompute);
      chain[l + 1] = chain[l] + (moe ? t.moe_backward + rc * t.moe_chain_recompute
                                     : t.backward + rc * t.chain_recompute);
      cf[l + 1] = cf[l] + (moe ? t.moe_forward_compute : t.forward_compute);
      cb[l + 1] = cb[l] + (moe ? t.moe_backward_pure + rc * t.moe_recompute_compute
                               : t.backward_pure + rc * t.recompute_compute);
      const CostTable::PassPrefix& before = passes[l];
      passes[l + 1] = {before.backward_pure + (moe ? t.moe_backward_pure : t.backward_pure),
                       before.recompute_compute + rc * (moe ? t.moe_recompute_compute : t.recompute_compute),
                       before.moe_layers + (moe ? 1 : 0)};
    }
    c.ends[pool] = t;
  }
  const cost::ActivationConfig act{layout.mb,
                                   ctx_.s.training.seq_len,
                                   layout.tp,
                                   layout.cp,
                                   layout.sp,
                                   layout.recompute,
                                   ctx_.s.training.precision,
                                   ctx_.s.training.attention,
                                   ctx_.s.training.cross_entropy,
                                   ctx_.s.training.tensor_parallel,
                                   ctx_.req.recompute_modules.value_or(RecomputeModules{}),
                                   ctx_.s.training.projections,
                                   ctx_.s.training.fp8_recipe};
  cost::ActivationConfig kept_all = act;
  kept_all.recompute = Recompute::None;
  auto activations = [&](const cost::ActivationConfig& a, bool moe) {
    return moe && !ctx_.s.model.moe ? 0.0 : cost::layer_activation_bytes(ctx_.s.model, a, moe).value();
  };
  const double dense_act = activations(act, false), moe_act = activations(act, true);
  const double dense_all = activations(kept_all, false), moe_all = activations(kept_all, true);
  const double moe_params = moe_layer_rank_parameters(layout);
  const double moe_experts = expert_parameters(layout);
  c.activations.assign(L + 1, 0);
  c.params.assign(L + 1, 0);
  c.experts.assign(L + 1, 0);
  c.recompute_working = std::numeric_limits<double>::infinity();
  for (int l = 0; l < L; ++l) {
    const bool moe = ctx_.s.model.is_moe_layer(l), rc = recomputes(layout, l);
    c.recompute_working = std::min(c.recompute_working,
                                   rc ? cost::recompute_working_bytes(ctx_.s.model, act, moe).value() : 0.0);
    c.activations[l + 1] = c.activations[l] + (moe ? (rc ? moe_act : moe_all) : (rc ? dense_act : dense_all));
    c.params[l + 1] = c.params[l] + (moe ? moe_params : ctx_.params.per_dense_layer / layout.tp);
    c.experts[l + 1] = c.experts[l] + (moe ? moe_experts : 0);
  }
  c.embedding_activations = cost::embedding_activation_bytes(ctx_.s.model, act).value();
  c.head_activations = cost::head_activation_bytes(ctx_.s.model, act).value();
  return c;
}

const cost::GroupPlacement& LayerCosts::placement(const ParallelLayout& layout, GroupKind kind, int pool,
                                                  int order) {
  const auto key = std::tuple{kind,      layout.tp,     layout.cp,        layout.dp, layout.pp,
                              layout.ep, layout.folded, layout.replicate, pool,      order};
  auto it = placements_.find(key);
  if (it == placements_.end())
    it = placements_
             .emplace(key, group_placement(layout.degrees(ctx_.orders[order]), kind,
                                           ctx_.s.cluster.pools[pool], ctx_.s.cluster))
             .first;
  return it->second;
}

ChunkMemory LayerCosts::chunk_memory(const ParallelLayout& layout) const {
  return {double(ctx_.s.model.vocab) * ctx_.s.model.hidden / layout.tp,
          !ctx_.s.model.tied_embeddings || layout.pp > 1};
}

double LayerCosts::chunk_params(const ParallelLayout& layout, int c, int begin, int end) const {
  return search::chunk_params(layout, chunk_memory(layout), c, begin, end);
}

// Device bytes of model states per parameter a rank holds (states are linear in the parameters).
double LayerCosts::state_bytes_per_parameter(const ParallelLayout& layout, const Variant& v) const {
  const auto st = cost::held_model_state_bytes(1, layout.shards(), v.zero,
                                               reduces_every_microbatch(layout, v), ctx_.s.training);
  return (st.weights + st.gradients + (v.offload ? Bytes(0) : st.optimizer)).value();
}

// Parameters of all transformer layers on one TP rank (experts split over ep), summed over the
// pipeline ranks.
double LayerCosts::layer_parameters(const ParallelLayout& layout) const {
  return (ctx_.s.model.layers - ctx_.moe_layers) * ctx_.params.per_dense_layer / layout.tp +
         ctx_.moe_layers * moe_layer_rank_parameters(layout);
}

// As lowering counts them (plan/ir/buckets.cpp).
double LayerCosts::moe_layer_rank_parameters(const ParallelLayout& layout) const {
  if (!ctx_.s.model.moe) return 0;
  const MoeLayerShare share = moe_layer_share(ctx_.params, layout.tp, layout.ep, layout.expert_tp());
  return share.dense + share.experts;
}

double LayerCosts::expert_parameters(const ParallelLayout& layout) const {
  if (!ctx_.s.model.moe || (layout.ep == 1 && !layout.folded)) return 0;
  return moe_layer_share(ctx_.params, layout.tp, layout.ep, layout.expert_tp()).experts;
}

// A rank's memory for states and kept activations: its device's, less what recomputing a layer
// holds while the backward runs (the least any layer holds, so that no partition that fits is lost).
double LayerCosts::capacity(const ParallelLayout& layout, int rank) const {
  return ctx_.devices[layout.rank_pool[rank]]->memory.value() - layout.costs->recompute_working;
}

// Whatever the partition, some pipeline rank holds at least 1/pp of the layers' parameters.
bool LayerCosts::states_can_fit(const ParallelLayout& layout, const Variant& v) const {
  const double per_rank = layer_parameters(layout) / layout.pp * (1 - 1e-9);
  auto states = cost::held_model_state_bytes(per_rank, layout.shards(), v.zero,
                                             reduces_every_microbatch(layout, v), ctx_.s.training);
  const double device =
      (states.weights + states.gradients + (v.offload ? Bytes(0) : states.optimizer)).value();
  double largest_capacity = 0;
  for (int pool : layout.rank_pool)
    largest_capacity = std::max(largest_capacity, ctx_.devices[pool]->memory.value());
  return device <= largest_capacity;
}

}  // namespace paratwin::search
