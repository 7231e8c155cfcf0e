// The space the optimizer searches: every parallel layout the scenario allows (degrees, micro-batch,
// schedule and virtual stages, recompute, sequence parallelism, pools of the pipeline ranks) and
// each layout's variants (ZeRO, optimizer offload, top-k compression, rank order). Fixed fields of
// the scenario's plan are honoured; each excluded choice is counted by the reason it fails.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "plan/search/layer_costs.hpp"
#include "plan/search/layout.hpp"
#include "plan/search/search_context.hpp"

namespace paratwin::search {

// The scenario's fixed value, else every choice.
template <class T>
std::vector<T> fixed_or(const std::optional<T>& fixed, std::vector<T> choices) {
  return fixed ? std::vector<T>{*fixed} : choices;
}

class SearchSpace {
 public:
  // `rejected`: reason -> candidates, counted as the space is walked.
  SearchSpace(const SearchContext& context, const LayerCosts& costs, std::map<std::string, long>& rejected);

  // visit(layout, micro-batches per replica) for each layout, in enumeration order.
  void enumerate(const std::function<void(ParallelLayout, int)>& visit);
  // visit(variant, whether its states can fit) for each variant of the layout, in enumeration order.
  template <class Visit>
  void for_each_variant(const ParallelLayout& layout, const Visit& visit);

  void reject(const std::string& reason, long n = 1) { rejected_[reason] += n; }

 private:
  // (pp, dp, pool of each pipeline rank) that use the cluster.
  std::vector<std::tuple<int, int, std::vector<int>>> pipeline_shapes(int tp, int cp, int gpus_cap);
  std::vector<std::pair<Schedule, int>> schedules(int pp, int microbatches);
  std::vector<bool> compression_choices(const ParallelLayout& layout, int zero);
  // HSDP's replicas to try: the one asked (where it divides dp and there is no EP), else 1 and, where ZeRO
  // 3 may be chosen, the replicas of a one-node shard group (FSDP's HYBRID_SHARD default). Empty: none.
  std::vector<int> hsdp_choices(int tp, int cp, int ep, int dp, const std::vector<int>& pools) const;
  // MoE parallel folding as the request asks (Plan::expert_tp): left out, EP carved out of dp where ep
  // divides dp (Megatron-Core's default, the one the live engines run); expert_tp 1, folded over
  // tp x cp x dp where ep divides those (an MoE model under tp > 1 and Megatron's tensor parallelism).
  // Empty: no layout.
  std::vector<bool> folding_choices(int tp, int cp, int ep, int dp) const;
  // Whether combined 1F1B (plan.overlap.ep) runs under these choices (combined_1f1b_conflict, plan.hpp);
  // the reason counted where not.
  bool combined_1f1b_runs(int ep, int pp, Schedule schedule, Recompute recompute);
  std::vector<int> orders(const ParallelLayout& layout);
  bool same_placements(const ParallelLayout& layout, const std::string& x, const std::string& y) const;

  const SearchContext& ctx_;
  const LayerCosts& costs_;
  std::map<std::string, long>& rejected_;
  std::map<std::tuple<int, int, int, int, int, int, bool>, bool>
      same_placements_;  // by (tp, cp, dp, pp, ep, replicate, folded)
};

template <class Visit>
void SearchSpace::for_each_variant(const ParallelLayout& layout, const Visit& visit) {
  const std::vector<int> rank_orders = orders(layout);
  // A reshard other than after_forward, and HSDP, are ZeRO 3's alone: asked for, they fix zero 3.
  const std::vector<int> stages = ctx_.reshard() != Reshard::AfterForward || layout.replicate > 1
                                      ? std::vector<int>{3}
                                  : layout.replicas() > 1 ? std::vector<int>{0, 1, 2, 3}
                                                          : std::vector<int>{0};
  for (int zero : fixed_or(ctx_.req.zero, stages)) {
    // Combined 1F1B's pairs of passes do not follow ZeRO 3, which the twin lowers a layer at a time.
    if (layout.overlap_ep && zero == 3) continue;
    for (bool offload : fixed_or(ctx_.req.offload_optimizer, {false, true})) {
      const bool fits = costs_.states_can_fit(layout, {zero, offload, false, 0});
      for (bool topk : compression_choices(layout, zero))
        for (int order : rank_orders) visit(Variant{zero, offload, topk, order}, fits);
    }
  }
}

}  // namespace paratwin::search
