// Lower bounds of a candidate's objective in closed forms, per iteration second: for every layer
// partition (a layout's coarse bound, a variant's), and following one partition per pipeline rank
// (the refined bound). The pass graph (pass_graph.hpp) bounds tighter still.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "plan/ir/buckets.hpp"
#include "plan/search/layer_costs.hpp"
#include "plan/search/layout.hpp"
#include "plan/search/search_context.hpp"

namespace paratwin::search {

// What a rank holding some parameters on a pool spends beside its passes (Bounds::rank_tails, per
// rank; Bounds::variant_bound, all ranks' parameters at once).
// Parameters on one rank, and of them the experts' (under EP).
struct BucketElements {
  double all = 0, experts = 0;
  bool operator==(const BucketElements&) const = default;
};

struct StateCosts {
  double step = 0;       // the optimizer step, offload's copies in and out, ZeRO 1/2's gather after it
  double gradients = 0;  // the DP collective of all their gradients
  // ZeRO 3: one all-gather of them (twice per micro-batch); ZeRO 1 gathering in the forward: once a step
  double gather = 0;
  // HSDP: one all-reduce over the replicas of their gradients' shard, on a stream of its own (after
  // every micro-batch's reduce-scatters, once under reshard after_step).
  double replica_sums = 0;
};
// By variant (ZeRO, offload, top-k, rank order; see Bounds::variant_bound), for all of a layout's ranks.
using VariantCosts = std::array<std::optional<StateCosts>, 32>;

// Per pipeline rank, what does not depend on the passes' times (see Bounds::partition_bound): the
// step with what follows it, one gradient collective of all its parameters, ZeRO-3's gathers, the DP
// tail, HSDP's all-reduces over the replicas (all of the step's: the step waits for them), and the
// DP stream's whole step (the gathers and every reduction of the gradients: under ZeRO 2 and 3 one a
// micro-batch).
struct RankTails {
  std::vector<double> steps, gradients, gathers, dp_tails, replica_sums, dp_streams;
};

class Bounds {
 public:
  Bounds(const SearchContext& context, LayerCosts& costs);

  // The coarse bound of a layout's iteration time, valid for every variant and partition.
  double time_lower_bound(const ParallelLayout& layout, int microbatches);
  // The pipeline's fill and drain over integer layer counts (one pool, 1F1B or GPipe).
  double pipeline_bound(const ParallelLayout& layout, int microbatches);
  // What is worked out so far for the variants of the layout's (tp, cp, dp, pp, ep, HSDP's replicas).
  VariantCosts& variant_costs(const ParallelLayout& layout) {
    return variant_costs_[std::tuple{layout.tp, layout.cp, layout.dp, layout.pp, layout.ep, layout.replicate,
                                     layout.folded}];
  }
  // A variant's bound valid for every partition; `layout_costs` from variant_costs(layout).
  double variant_bound(const ParallelLayout& layout, int microbatches, const Variant& v,
                       VariantCosts& layout_costs);
  // The bound that follows partition `partition` (its `ranges`), per pipeline rank.
  double partition_bound(ParallelLayout& layout, const Variant& v, int partition, const Ranges& ranges);
  RankTails rank_tails(const ParallelLayout& layout, const Variant& v, const Ranges& ranges);

 private:
  double microbatch_work(const ParallelLayout& layout);
  double optimizer_bound(const ParallelLayout& layout);
  // `experts`: of `params`, the experts' (under EP).
  StateCosts state_costs(const ParallelLayout& layout, const Variant& v, int pool, double params,
                         double experts);
  // A DP collective as lowering's add_dp issues it: `dense_bytes` over the DP group, then `expert_bytes`
  // (none: no such part) over the experts' replicas.
  double dp_collective(const ParallelLayout& layout, const Variant& v, int pool, cost::CollectiveKind kind,
                       double dense_bytes, double expert_bytes);
  double gradient_collective(const ParallelLayout& layout, const Variant& v, int pool, double elements,
                             double experts);
  // The experts' parameters that DP moves (lowering's dp_experts): none where each expert has a single
  // holder.
  static double moved_experts(const ParallelLayout& layout, double experts) {
    return experts_replicated(layout.expert_replicas()) ? experts : 0;
  }
  PartitionTerms partition_terms(const ParallelLayout& layout, const Ranges& ranges) const;
  static void last_microbatch_terms(const ParallelLayout& layout, const std::vector<double>& forward,
                                    const std::vector<double>& backward,
                                    const std::vector<double>& forward_prefixes,
                                    PartitionTerms::Costing& out);
  BucketElements last_bucket_elements(const ParallelLayout& layout, int c, int begin, int end,
                                      double bucket_elements) const;

  const SearchContext& ctx_;
  LayerCosts& costs_;
  std::map<std::tuple<const LayerTimes*, int, int>, double> pipeline_bounds_;  // by (times, pp, m)
  // By (tp, cp, dp, pp, ep, HSDP's replicas).
  std::map<std::tuple<int, int, int, int, int, int, bool>, VariantCosts> variant_costs_;
};

}  // namespace paratwin::search
