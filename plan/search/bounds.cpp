// Lower bounds of a candidate's objective, in closed forms: valid for every layer partition, or
// following one partition per pipeline rank.
//
// Lower bound of a candidate's iteration time (valid for every layer partition): each pipeline rank
// runs its micro-batches' passes one after another on its compute stream, and each pass waits for the
// previous one's TP/CP/EP collectives, so the slowest rank needs at least m x (its layers' forward +
// backward + recompute time). Spreading L layers over ranks of per-layer times t_r gives a bottleneck
// of at least L / sum_r(1 / t_r). Every micro-batch also crosses all layers once forward and once
// backward. Embedding, head, optimizer, DP communication and bubbles only add time.
#include "plan/search/bounds.hpp"

#include "plan/analytic/evaluate.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace paratwin::search {

using cost::CollectiveKind;

namespace {

// The optimizer step over `params` parameters on a device of `pool`, launched as the training does, at
// the pace of the layout's slowest GPU (`pace`, LayerCosts::gpu_pace).
double optimizer_step_bound(const SearchContext& ctx, double params, int pool, double pace) {
  const cost::KernelCost step =
      cost::launched_as_trained(cost::optimizer_step(params, ctx.s.training), ctx.s.training);
  return pace * cost::compute_time_bound(step, *ctx.devices[pool], ctx.s.training.precision).value();
}

// The units a rank's every-micro-batch DP collectives go in, at least: ZeRO 3's layers (one gather and
// one reduce-scatter each), ZeRO 2's buckets (walked from each chunk's last layer as lowering closes them,
// ir/buckets.cpp, without the head's and embedding's elements, which only close them sooner), each
// closing at `bucket_elements`.
int dp_units(const ParallelLayout& layout, const Variant& v, const Ranges& ranges, int r,
             double bucket_elements) {
  int units = 0;
  const std::vector<double>& prefix = layout.costs->params;
  for (int c = r; c < layout.pp * layout.v; c += layout.pp) {
    const auto [begin, end] = ranges[c];
    if (v.zero == 3) {
      units += end - begin;
      continue;
    }
    double filled = 0;
    for (int l = end - 1; l >= begin; --l) {
      filled += prefix[l + 1] - prefix[l];
      if (filled >= bucket_elements || l == begin) ++units, filled = 0;
    }
  }
  return units;
}

// How many times a step reduces each gradient over the DP group: every micro-batch where ZeRO 2 and 3
// do (reduces_every_microbatch), but under ZeRO 3's reshard after_step once.
double gradient_reductions(const SearchContext& ctx, const ParallelLayout& layout, const Variant& v, int m) {
  if (!reduces_every_microbatch(layout, v)) return 1;
  return v.zero == 3 ? ctx.zero3_reductions(m) : m;
}

}  // namespace

Bounds::Bounds(const SearchContext& context, LayerCosts& costs) : ctx_(context), costs_(costs) {}

// See the file comment. On one pool a micro-batch's whole work W (layers, embedding, head) splits
// over pp ranks; rank r cannot finish before the ranks ahead of it have passed one micro-batch on
// and it has run all of its own: X >= P_r + m T_r for every r with sum T_r = W, which gives
// X >= W / (1 - (1 - 1/m)^pp) (part of the pipeline bubble; refine() takes the integer version).
// Interleaving and several pools get the plain m W / pp (per-layer speeds combined as a harmonic sum).
double Bounds::time_lower_bound(const ParallelLayout& layout, int microbatches) {
  const double L = ctx_.s.model.layers, m = microbatches;
  if (ctx_.s.cluster.pools.size() == 1) {
    const double W = microbatch_work(layout);
    if (layout.pp == 1) return m * W + optimizer_bound(layout);
    if (layout.schedule == Schedule::Interleaved) return m * W / layout.pp;
    return W / (1 - std::pow(1 - 1 / m, layout.pp));
  }
  double speed = 0;
  for (int pool : layout.rank_pool) speed += 1 / costs_.per_layer(costs_.times(pool, layout));
  return m * L / speed;
}

// One micro-batch's forward and backward through the whole model at the cheaper layer kind's time
// per layer (one pool).
double Bounds::microbatch_work(const ParallelLayout& layout) {
  const LayerTimes& t = costs_.times(layout.rank_pool.front(), layout);
  return ctx_.s.model.layers * costs_.per_layer(t) + t.embedding() + t.head();
}

// The optimizer step of a single pipeline rank holding every parameter (pp = 1), at ZeRO-0 or
// sharded: the smaller of the two, so that it bounds every ZeRO stage.
double Bounds::optimizer_bound(const ParallelLayout& layout) {
  const int pool = layout.rank_pool.front();
  return optimizer_step_bound(ctx_, ctx_.params.total / layout.tp / layout.replicas(), pool,
                              costs_.gpu_pace(pool, layout));
}

// min over partitions of max_r (sum_{r' < r} T_r' + m T_r): rank r starts after the first
// micro-batch's forward reached it, runs m forwards and backwards, and its last backward still has to
// travel back through the ranks before it. T_r counts forward + backward (+ recompute) of its layers,
// the embedding on rank 0 and the head on the last. A DP over (rank, layers used) with the running
// prefix; ties resolved by the smaller prefix, which only ever helps later ranks. One pool, so the
// per-layer time is the cheaper layer kind's. Layouts with the same layer times, pp and micro-batches
// share it.
double Bounds::pipeline_bound(const ParallelLayout& layout, int microbatches) {
  const int L = ctx_.s.model.layers, pp = layout.pp;
  const double m = microbatches;
  const LayerTimes& t = costs_.times(layout.rank_pool.front(), layout);
  const auto key = std::tuple{&t, pp, microbatches};
  if (const auto it = pipeline_bounds_.find(key); it != pipeline_bounds_.end()) return it->second;
  const double layer = costs_.per_layer(t);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[l] = (worst, prefix) after some ranks covering l layers.
  std::vector<std::pair<double, double>> best(L + 1, {kInf, kInf}), next(L + 1);
  best[0] = {0, 0};
  for (int r = 0; r < pp; ++r) {
    std::fill(next.begin(), next.end(), std::pair{kInf, kInf});
    for (int begin = r; begin <= L - (pp - r); ++begin) {
      if (best[begin].first == kInf) continue;
      for (int e = begin + 1; e <= L - (pp - r - 1); ++e) {
        double T = (e - begin) * layer + (r == 0 ? t.embedding() : 0) + (r == pp - 1 ? t.head() : 0);
        const std::pair<double, double> cand{std::max(best[begin].first, best[begin].second + m * T),
                                             best[begin].second + T};
        if (cand < next[e]) next[e] = cand;
      }
    }
    std::swap(best, next);
  }
  return pipeline_bounds_[key] = best[L].first;
}

// A variant's bound valid for every partition (one pool; 0 on several): every rank r ends after
// m load_r + step_r and after gathers_r + gradients_r + step_r on its DP stream (partition_bound), so
// the slowest rank after the average of either over the ranks. The ranks' loads add up to at
// least m micro-batches through the model; their steps, copies and collectives to at least those of
// all their parameters at once, as optimizer steps and copies are affine and collectives concave
// in their size, all with non-negative intercepts (so f(x) + f(y) >= f(x + y)).
// `layout_costs`: what is worked out so far for the layout's (tp, cp, dp, pp, ep).
double Bounds::variant_bound(const ParallelLayout& layout, int microbatches, const Variant& v,
                             VariantCosts& layout_costs) {
  if (ctx_.s.cluster.pools.size() > 1) return 0;
  const size_t index = ((size_t(v.zero) * 2 + v.offload) * 2 + v.topk) * ctx_.orders.size() + v.order;
  std::optional<StateCosts>& costs = layout_costs[index];
  if (!costs) {
    const ChunkMemory memory = costs_.chunk_memory(layout);
    costs = state_costs(
        layout, v, 0,
        (costs_.layer_parameters(layout) + memory.embedding * (memory.untied_last ? 2 : 1)) * (1 - 1e-9),
        ctx_.moe_layers * costs_.expert_parameters(layout) * (1 - 1e-9));
  }
  const StateCosts& t = *costs;
  const double m = microbatches;
  return std::max({m * microbatch_work(layout) + t.step,
                   gradient_reductions(ctx_, layout, v, microbatches) * t.gradients +
                       (v.zero == 3 ? ctx_.zero3_gathers(microbatches) : 1) * t.gather + t.step,
                   ctx_.zero3_reductions(microbatches) * t.replica_sums + t.step}) /
         layout.pp;
}

StateCosts Bounds::state_costs(const ParallelLayout& layout, const Variant& v, int pool, double params,
                               double experts) {
  // ZeRO shards the dense states over the DP group, the experts' over their holders (lowering's shard,
  // with the DP group's replicas for HSDP's smaller shard groups).
  const double shard =
      v.zero >= 1 ? (params - experts) / layout.replicas() + experts / layout.expert_replicas() : params;
  StateCosts out;
  const double step = optimizer_step_bound(ctx_, shard, pool, costs_.gpu_pace(pool, layout));
  const double copy = v.offload ? shard *
                                      cost::optimizer_bytes_per_parameter(ctx_.s.training.optimizer,
                                                                          ctx_.s.training.precision) /
                                      ctx_.s.cluster.pools[pool].pcie_bandwidth.value()
                                : 0;
  double gather = 0;
  if (layout.replicas() > 1) {
    out.gradients = gradient_collective(layout, v, pool, params, experts);
    const double gathered =
        dp_collective(layout, v, pool, CollectiveKind::AllGather, (params - experts) * ctx_.gather_elem,
                      moved_experts(layout, experts) * ctx_.gather_elem);
    // ZeRO 1 and 2 gather the updated parameters after the step, but where ZeRO 1 gathers them in the
    // next forward, on the DP stream before its reduce-scatters (a gather once a step, as ZeRO 3's).
    const bool in_forward =
        gathers_params_in_forward(ctx_.req.overlap_param_gather.value_or(false), v.zero, layout.replicas());
    if ((v.zero == 1 && !in_forward) || v.zero == 2) gather = gathered;
    if (v.zero == 3 || in_forward) out.gather = gathered;
    if (layout.replicate > 1)
      out.replica_sums =
          cost::collective_time(CollectiveKind::AllReduce, Bytes(params * ctx_.grad_elem / layout.shards()),
                                costs_.placement(layout, GroupKind::DpReplicate, pool, v.order),
                                ctx_.s.cluster.pools[pool], ctx_.s.cluster)
              .time.value();
  }
  out.step = step + copy + std::max(copy, gather);
  return out;
}

double Bounds::dp_collective(const ParallelLayout& layout, const Variant& v, int pool, CollectiveKind kind,
                             double dense_bytes, double expert_bytes) {
  const auto time = [&](double bytes, GroupKind group) {
    return cost::collective_time(kind, Bytes(bytes), costs_.placement(layout, group, pool, v.order),
                                 ctx_.s.cluster.pools[pool], ctx_.s.cluster)
        .time.value();
  };
  return time(dense_bytes, GroupKind::Dp) + (expert_bytes > 0 ? time(expert_bytes, GroupKind::ExpertDp) : 0);
}

// The DP collective of `elements` gradients (`experts` of them the experts'): all-reduced,
// reduce-scattered, or top-k pairs gathered.
double Bounds::gradient_collective(const ParallelLayout& layout, const Variant& v, int pool, double elements,
                                   double experts) {
  const double dense = elements - experts, moved = moved_experts(layout, experts);
  if (v.topk) {
    const double ratio = ctx_.req.compression ? ctx_.req.compression->ratio : kSearchedTopkRatio;
    const double pair = ratio * (ctx_.grad_elem + 4);
    return dp_collective(layout, v, pool, CollectiveKind::AllGather, layout.replicas() * dense * pair,
                         double(layout.expert_replicas()) * moved * pair);
  }
  return dp_collective(layout, v, pool,
                       v.zero == 0 ? CollectiveKind::AllReduce : CollectiveKind::ReduceScatter,
                       dense * ctx_.grad_elem, moved * ctx_.grad_elem);
}

// For one partition, bounds per pipeline rank r, with the passes' times either as a chain of passes
// with their TP/CP/EP collectives (each pass waits for the previous one's; selective recompute as in
// LayerTimes::chain_recompute) or on the rank's one compute stream alone (recompute included):
// - it starts once the first micro-batch's forward has passed the chunks before its first one, runs
//   m passes of each of its chunks, and then either the last backward still travels back through
//   those chunks or the rank runs its step: m load_r + max(prefix_r, step_r);
// - its DP gradient collectives start no earlier than the first backward that finishes a chunk's
//   gradients, run one after another on the DP stream, and the step waits for them all:
//   forward prefix_r + passes before that backward + sum of its buckets' collectives + step_r.
//   Collective times are concave in the bytes (a minimum of affine functions of them), so the
//   collective of all the rank's gradients at once costs no more than its buckets together.
// - with ZeRO-3 the DP stream also gathers every chunk's parameters twice per micro-batch (once a
//   step at least under plan.reshard after_backward and after_step: SearchContext::zero3_gathers).
// - the critical path through its last passes (last_microbatch_terms).
// step_r: the optimizer step, with offload the copy of the states in before it and out after it,
// and with ZeRO 1/2 the all-gather of the updated parameters after it.
double Bounds::partition_bound(ParallelLayout& layout, const Variant& v, int partition,
                               const Ranges& ranges) {
  auto terms = layout.partition_terms.find(partition);
  if (terms == layout.partition_terms.end())
    terms = layout.partition_terms.emplace(partition, partition_terms(layout, ranges)).first;
  const auto [steps, gradients, gathers, dp_tails, replica_sums, dp_streams] = rank_tails(layout, v, ranges);
  double bound = 0;
  for (int r = 0; r < layout.pp; ++r)
    bound = std::max({bound, dp_streams[r] + steps[r], replica_sums[r] + steps[r]});
  // Compute beside the DP streams' collectives runs on the SMs they leave (analytic/evaluate.hpp's
  // comm_sm_share): a rank's compute of C seconds alone, beside a stream of collectives that run D
  // seconds in all holding a share s of the SMs each, is busy C + s O, O the time they run beside it;
  // they run beside it but while it idles, so O >= D - I, and the step T = C + s O + I >= C + s D +
  // (1 - s) I, summed over the streams (the DP stream, HSDP's replica stream). It idles at least while
  // its passes wait for their TP, CP and EP collectives (the chain's load less the compute's, selective
  // recomputation beside them taken off). The evaluator settles its durations to a millionth of the
  // step a task: the margin covers that.
  constexpr double kSettledMargin = 0.995;
  const auto& [chain, alone] = terms->second.costings;
  for (int r = 0; r < layout.pp; ++r) {
    const PoolSpec& pool = ctx_.s.cluster.pools[layout.rank_pool[r]];
    const double streams = (dp_streams[r] > 0 ? 1 : 0) + (replica_sums[r] > 0 ? 1 : 0);
    // The evaluator caps what all the kernels beside a task hold at kMostHeldSms of it: the streams'
    // shares together stay under that cap.
    const double share = std::min(least_collective_sm_share(pool, *ctx_.devices[layout.rank_pool[r]]),
                                  kMostHeldSms / std::max(1.0, streams));
    // T >= busy + s (D_1 + ... + D_n) + (1 - n s) idle, less the margin.
    const double streams_busy = dp_streams[r] + replica_sums[r];
    const auto beside_streams = [&](double busy, double idle) {
      return kSettledMargin * (busy + share * streams_busy + (1 - streams * share) * idle);
    };
    bound = std::max(bound, beside_streams(alone.load[r], std::max(0.0, chain.load[r] - alone.load[r])));
    // The same along a path through the rank's last passes: between the rank's first pass (at a >= the
    // path's forward prefix) and its pass on the path (at b), the compute stream runs those passes,
    // busy P (alone) + s O and idle I >= their waits; after b come the rest of the path and a step, X.
    // Each stream runs D_i in all, at most a before the window, X after it and I while the compute
    // idles, so O >= sum D_i - n (a + X + I) over n streams, and T = a + P + s O + I + X >= P + s sum D_i
    // + (1 - n s)(a + I + X).
    if (streams > 0)
      for (size_t k = 0; k < alone.paths[r].size(); ++k) {
        const PartitionTerms::Path &on_chain = chain.paths[r][k], &path = alone.paths[r][k];
        const double idle =
            on_chain.rest + std::max(0.0, on_chain.own - path.own) + steps[on_chain.to_own_step ? r : 0];
        bound = std::max(bound, beside_streams(path.own, idle));
      }
  }
  for (const PartitionTerms::Costing& t : terms->second.costings)
    for (int r = 0; r < layout.pp; ++r) {
      bound = std::max(bound, t.load[r] + std::max(t.prefix[r], steps[r]));
      bound = std::max(bound, t.before_buckets[r] + gradients[r] + steps[r]);
      bound = std::max(bound, t.to_first_step[r] + steps[0]);
      bound = std::max(bound, t.to_own_step[r] + steps[r]);
      if (&t == &terms->second.costings[1] && layout.replicas() > 1)
        bound = std::max(bound, t.to_dp_tail[r] + dp_tails[r] + steps[r]);
      // ZeRO 2's DP stream holds the reduce-scatters alone, none before the rank's first backward.
      if (v.zero == 2 && !v.topk) bound = std::max(bound, t.to_first_backward[r] + dp_streams[r] + steps[r]);
    }
  return bound;
}

PartitionTerms Bounds::partition_terms(const ParallelLayout& layout, const Ranges& ranges) const {
  const int chunks = layout.pp * layout.v;
  const int m = ctx_.microbatches(layout.dp, layout.mb);
  PartitionTerms out;
  std::vector<double> forward(chunks), backward(chunks), forward_prefixes(layout.pp);
  for (bool alone : {false, true}) {
    PartitionTerms::Costing& t = out.costings[alone ? 1 : 0];
    t.load.assign(layout.pp, 0);
    t.prefix.assign(layout.pp, 0);
    t.before_buckets.assign(layout.pp, 0);
    for (int c = 0; c < chunks; ++c) {
      const int r = c % layout.pp;
      forward[c] = chunk_bound_forward(layout, alone, c, ranges[c].first, ranges[c].second);
      backward[c] = chunk_bound_backward(layout, alone, c, ranges[c].first, ranges[c].second);
      t.load[r] += forward[c] + backward[c];
      const auto& passes = layout.counts->before_buckets[r][c / layout.pp];
      t.before_buckets[r] += passes[0] * forward[c] + passes[1] * backward[c];
    }
    const double all_forward = std::accumulate(forward.begin(), forward.end(), 0.0);
    t.to_first_backward.assign(layout.pp, all_forward);
    for (int c = chunks - 1; c >= chunks - layout.pp; --c)
      for (int above = c + 1; above < chunks; ++above) t.to_first_backward[c % layout.pp] += backward[above];
    double prefix = 0, forward_prefix = 0;
    for (int r = 0; r < layout.pp; ++r) {
      t.load[r] *= m;
      t.prefix[r] = prefix;
      t.before_buckets[r] = forward_prefix + t.before_buckets[r];
      forward_prefixes[r] = forward_prefix;
      double warm_up = forward_prefix;
      const PassCounts& before = layout.counts->before_backward[r];
      for (int j = 0; j < layout.v; ++j) warm_up += before[j][0] * forward[j * layout.pp + r];
      t.to_first_backward[r] = std::max(t.to_first_backward[r], warm_up);
      prefix += forward[r] + backward[r];
      forward_prefix += forward[r];
    }
    last_microbatch_terms(layout, forward, backward, forward_prefixes, t);
  }
  return out;
}

RankTails Bounds::rank_tails(const ParallelLayout& layout, const Variant& v, const Ranges& ranges) {
  const int chunks = layout.pp * layout.v;
  const int m = ctx_.microbatches(layout.dp, layout.mb);
  const std::vector<double>& expert_prefix = layout.costs->experts;
  const auto chunk_experts = [&](int c) {
    return expert_prefix[ranges[c].second] - expert_prefix[ranges[c].first];
  };
  std::vector<double> params(layout.pp, 0), experts(layout.pp, 0);
  for (int c = 0; c < chunks; ++c) {
    params[c % layout.pp] += costs_.chunk_params(layout, c, ranges[c].first, ranges[c].second);
    experts[c % layout.pp] += chunk_experts(c);
  }
  const std::vector<double> zeros(layout.pp, 0);
  RankTails out{zeros, zeros, zeros, zeros, zeros, zeros};
  auto& [steps, gradients, gathers, dp_tails, replica_sums, dp_streams] = out;
  const bool every_microbatch = reduces_every_microbatch(layout, v);
  const double reductions = gradient_reductions(ctx_, layout, v, m);
  // Ranks alike (pool, parameters, the elements of their DP tail, their units) have the same tails:
  // most of them.
  std::vector<std::tuple<int, double, double, BucketElements, int, int>> worked_out;
  for (int r = 0; r < layout.pp; ++r) {
    // Where lowering closes the rank's DP buckets (ir/buckets.hpp).
    const double bucket_elements = dp_bucket_elements(
        r, ctx_.s.training.dp_buckets, ctx_.req.bucket_size.value_or(Plan().bucket_size), ctx_.grad_elem);
    const int units = every_microbatch ? dp_units(layout, v, ranges, r, bucket_elements) : 1;
    const double first_chunk = costs_.chunk_params(layout, r, ranges[r].first, ranges[r].second);
    // Reduced every micro-batch, the other chunks' buckets run during their own backward; ZeRO 3's
    // last one is a single layer's, left out.
    BucketElements tail;
    if (v.zero != 3 || v.topk) {
      tail = last_bucket_elements(layout, r, ranges[r].first, ranges[r].second, bucket_elements);
      if (!every_microbatch) {
        tail.all += std::max(0.0, params[r] - first_chunk);
        tail.experts += std::max(0.0, experts[r] - chunk_experts(r));
      }
    }
    const auto alike = std::find_if(worked_out.begin(), worked_out.end(), [&](const auto& w) {
      return std::get<0>(w) == layout.rank_pool[r] && std::get<1>(w) == params[r] &&
             std::get<2>(w) == experts[r] && std::get<3>(w) == tail && std::get<5>(w) == units;
    });
    if (alike != worked_out.end()) {
      const int q = std::get<4>(*alike);
      steps[r] = steps[q], gradients[r] = gradients[q], gathers[r] = gathers[q], dp_tails[r] = dp_tails[q],
      replica_sums[r] = replica_sums[q], dp_streams[r] = dp_streams[q];
      continue;
    }
    worked_out.push_back({layout.rank_pool[r], params[r], experts[r], tail, r, units});
    const int pool = layout.rank_pool[r];
    const StateCosts costs = state_costs(layout, v, pool, params[r], experts[r]);
    steps[r] = costs.step;
    gradients[r] = costs.gradients;
    // Every micro-batch's collectives go a unit (ZeRO 3's layer, ZeRO 2's bucket) at a time: together at
    // least one collective of them all and each other unit's latency (a concave f of the bytes, f(0) >= 0,
    // has f(x) + f(y) >= f(x + y) + f(0)).
    double gather = costs.gather, gradient = costs.gradients;
    if (units > 1 && layout.replicas() > 1) {
      gradient += (units - 1) * gradient_collective(layout, v, pool, 1, 0);
      if (v.zero == 3)
        gather += (units - 1) * dp_collective(layout, v, pool, CollectiveKind::AllGather, 1, 0);
    }
    // ZeRO-3 gathers each chunk's parameters before its every forward and backward, on the DP stream
    // (under plan.reshard after_backward and after_step at least once a step); ZeRO 1 in the forward
    // once a step.
    gathers[r] = (v.zero == 3 ? ctx_.zero3_gathers(m) : 1) * gather;
    replica_sums[r] = ctx_.zero3_reductions(m) * costs.replica_sums;
    dp_streams[r] = gathers[r] + reductions * gradient;
    // The DP stream runs the buckets in issue order: the rank's first chunk's (bottom layers last),
    // then its other chunks'. So the first chunk's last bucket, ready only when the rank's last
    // backward of that chunk ends, and every bucket of its other chunks still run after that
    // backward (concavity again: together at least one collective of their elements). The factor
    // absorbs the rounding of the prefix sums.
    if (layout.replicas() > 1 && tail.all > 0)
      dp_tails[r] = gradient_collective(layout, v, layout.rank_pool[r], tail.all * (1 - 1e-9),
                                        tail.experts * (1 - 1e-9));
  }
  return out;
}

// The critical path through the rank's last passes: rank r starts once the first micro-batch's
// forward has reached it (forward prefix_r) and runs its passes in its schedule's order, one after
// another on its compute stream, each waiting for the previous one's TP/CP/EP collectives (the
// per-pass bounds of the tables, as in m load_r). After its last forward of chunk c, that
// micro-batch still runs forward through chunks c+1 .. C-1 and backward through all chunks, each
// pass after the previous one's send (a receive ends no earlier than its send starts, and a send
// waits for its pass and collectives); after its last backward of chunk c, backward through chunks
// c-1 .. 0. Chunk 0's backwards run on pipeline rank 0, whose optimizer step (compute stream, after
// all its passes and their collectives, which run in issue order on the TP stream) and what follows
// it (step_0) come after. After its own last pass, rank r runs its own step_r.
// On the compute stream alone, the end of the rank's last backward of its first chunk is when that
// chunk's last DP bucket becomes ready, and the DP collectives that follow it (partition_bound) and
// the step come after. The terms leave out the steps and the DP tail (partition_bound adds them).
void Bounds::last_microbatch_terms(const ParallelLayout& layout, const std::vector<double>& forward,
                                   const std::vector<double>& backward,
                                   const std::vector<double>& forward_prefixes,
                                   PartitionTerms::Costing& out) {
  const int chunks = layout.pp * layout.v;
  // forward_after[c]: forwards of chunks > c; backward_below[c]: backwards of chunks < c.
  std::vector<double> forward_after(chunks, 0), backward_below(chunks, 0);
  for (int c = chunks - 2; c >= 0; --c) forward_after[c] = forward_after[c + 1] + forward[c + 1];
  for (int c = 1; c < chunks; ++c) backward_below[c] = backward_below[c - 1] + backward[c - 1];
  const double all_backward = backward_below[chunks - 1] + backward[chunks - 1];
  out.to_first_step.assign(layout.pp, 0);
  out.to_own_step.assign(layout.pp, 0);
  out.to_dp_tail.assign(layout.pp, 0);
  out.paths.resize(layout.pp);
  for (int r = 0; r < layout.pp; ++r) {
    auto run = [&](const PassCounts& n) {
      double t = 0;
      for (int j = 0; j < layout.v; ++j)
        t += n[j][0] * forward[j * layout.pp + r] + n[j][1] * backward[j * layout.pp + r];
      return t;
    };
    std::vector<PartitionTerms::Path>& paths = out.paths[r];
    paths.clear();
    for (int j = 0; j < layout.v; ++j) {
      const int c = j * layout.pp + r;
      const auto& through = layout.counts->through_last[r][j];
      const double until_backward = run(through[1]);
      paths.push_back({run(through[0]), forward_prefixes[r] + forward_after[c] + all_backward, false});
      paths.push_back({until_backward, forward_prefixes[r] + backward_below[c], false});
      paths.push_back({until_backward, forward_prefixes[r], true});
      if (j == 0) out.to_dp_tail[r] = forward_prefixes[r] + until_backward;
    }
    for (const PartitionTerms::Path& path : paths) {
      double& to_step = path.to_own_step ? out.to_own_step[r] : out.to_first_step[r];
      to_step = std::max(to_step, path.own + path.rest);
    }
  }
}

// Elements of the DP bucket that lowering closes last in chunk c (the one holding its first layer),
// walked from the chunk's last layer as lowering walks it, buckets closing at `bucket_elements` (learned
// positions left out: a bound).
BucketElements Bounds::last_bucket_elements(const ParallelLayout& layout, int c, int begin, int end,
                                            double bucket_elements) const {
  const ChunkMemory memory = costs_.chunk_memory(layout);
  const double layer_experts = costs_.expert_parameters(layout);
  BucketElements filled;
  filled.all = c == layout.pp * layout.v - 1 && memory.untied_last ? memory.embedding : 0;
  for (int l = end - 1; l >= begin; --l) {
    const bool moe = ctx_.s.model.is_moe_layer(l);
    filled.all += moe ? costs_.moe_layer_rank_parameters(layout) : ctx_.params.per_dense_layer / layout.tp;
    filled.experts += moe ? layer_experts : 0;
    if (l == begin) {
      filled.all += c == 0 ? memory.embedding : 0;
      return filled;
    }
    if (filled.all >= bucket_elements) filled = {};
  }
  return {};
}

}  // namespace paratwin::search
