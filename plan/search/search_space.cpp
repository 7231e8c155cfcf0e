// The space the optimizer searches: the parallel layouts a scenario allows and their variants, with
// the reason each excluded choice is rejected.
#include "plan/search/search_space.hpp"

#include <algorithm>
#include <numeric>

namespace paratwin::search {
namespace {

std::vector<int> divisors(long long n, long long limit) {
  std::vector<int> out;
  for (long long d = 1; d <= std::min(n, limit); ++d)
    if (n % d == 0) out.push_back(static_cast<int>(d));
  return out;
}

// The recompute modes the framework behind the scenario runs: Megatron-LM's selective (the attention
// core) or torchtitan's per-operator policy (DTensor's TP), beside none and full.
std::vector<Recompute> recompute_modes(TensorParallelImpl framework) {
  return {Recompute::None, framework == TensorParallelImpl::DTensor ? Recompute::Op : Recompute::Selective,
          Recompute::Full};
}

}  // namespace

SearchSpace::SearchSpace(const SearchContext& context, const LayerCosts& costs,
                         std::map<std::string, long>& rejected)
    : ctx_(context), costs_(costs), rejected_(rejected) {}

void SearchSpace::enumerate(const std::function<void(ParallelLayout, int)>& visit) {
  const auto& m = ctx_.s.model;
  const auto& c = ctx_.s.cluster;
  const int gpus_cap = std::min(c.gpus(), ctx_.s.search.max_gpus.value_or(c.gpus()));
  int min_gpus_per_node = 1 << 30;
  for (const auto& p : c.pools) min_gpus_per_node = std::min(min_gpus_per_node, p.gpus_per_node);
  const int tp_limit = ctx_.s.search.tp_across_nodes ? 1024 : min_gpus_per_node;
  std::vector<int> tps;
  for (int tp : fixed_or(ctx_.req.tp, divisors(std::gcd(m.heads, m.kv_heads), tp_limit))) {
    bool fits = ctx_.s.search.tp_across_nodes;
    if (!fits) {
      fits = true;
      for (const auto& p : c.pools) fits = fits && p.gpus_per_node % tp == 0;
    }
    if (fits && m.heads % tp == 0 && m.kv_heads % tp == 0 && m.ffn_hidden % tp == 0)
      tps.push_back(tp);
    else
      reject("tp does not divide the heads, the FFN or the node");
  }
  std::vector<int> cps;
  for (int cp : fixed_or(ctx_.req.cp, std::vector<int>{1, 2, 4, 8}))
    if (ctx_.s.training.seq_len % (2 * cp) == 0 || cp == 1)
      cps.push_back(cp);
    else
      reject("cp does not divide the sequence");
  std::vector<int> eps = fixed_or(ctx_.req.ep, m.moe ? divisors(m.moe->experts, 64) : std::vector<int>{1});
  // Combined 1F1B where the request asks it: every layout of the search runs it (the cost tables' keys
  // leave it out), so only those it runs under are searched.
  const bool overlap_ep = ctx_.req.overlap_ep.value_or(false);

  for (int tp : tps)
    for (int cp : cps)
      for (int ep : eps)
        for (const auto& [pp, dp, pools] : pipeline_shapes(tp, cp, gpus_cap)) {
          if (pp > m.layers) {
            reject("pp exceeds the layers");
            continue;
          }
          const std::vector<bool> foldings = folding_choices(tp, cp, ep, dp);
          if (foldings.empty()) {
            reject("ep does not divide dp (nor, folded, tp x cp x dp)");
            continue;
          }
          const std::vector<int> replicates = hsdp_choices(tp, cp, ep, dp, pools);
          if (replicates.empty()) {
            reject("dp_replicate does not divide dp, or HSDP with ep");
            continue;
          }
          if (ctx_.s.training.global_batch % dp != 0) {
            reject("global batch does not divide over dp");
            continue;
          }
          const long long per_replica = ctx_.s.training.global_batch / dp;
          for (int mb : fixed_or(ctx_.req.micro_batch, divisors(per_replica, 16))) {
            if (per_replica % mb != 0) {
              reject("global batch does not split into micro-batches");
              continue;
            }
            const int microbatches = static_cast<int>(per_replica / mb);
            for (const auto& [schedule, v] : schedules(pp, microbatches)) {
              for (Recompute rc :
                   fixed_or(ctx_.req.recompute, recompute_modes(ctx_.s.training.tensor_parallel)))
                for (bool sp :
                     fixed_or(ctx_.req.sequence_parallel, tp > 1 && (ctx_.s.training.seq_len / cp) % tp == 0
                                                              ? std::vector<bool>{false, true}
                                                              : std::vector<bool>{false}))
                  for (int replicate : replicates)
                    for (bool folded : foldings) {
                      // Folding dispatches each rank's sequence share (Megatron-Core's MoE under TP needs
                      // SP) and keeps its experts apart from the dense state (no HSDP).
                      if (folded && (!sp || replicate > 1 || rc == Recompute::Op)) continue;
                      if (overlap_ep && !combined_1f1b_runs(ep, pp, schedule, rc)) continue;
                      ParallelLayout layout{.tp = tp,
                                            .cp = cp,
                                            .ep = ep,
                                            .pp = pp,
                                            .dp = dp,
                                            .mb = mb,
                                            .v = v,
                                            .schedule = schedule,
                                            .recompute = rc,
                                            .sp = sp,
                                            .replicate = replicate,
                                            .folded = folded,
                                            .overlap_ep = overlap_ep,
                                            .rank_pool = pools};
                      visit(std::move(layout), microbatches);
                    }
            }
          }
        }
}

// (pp, dp, pool of each pipeline rank) that use the cluster: all GPUs (up to max_gpus) of a
// one-pool cluster; on several pools, pipeline ranks placed on pools in either order.
std::vector<std::tuple<int, int, std::vector<int>>> SearchSpace::pipeline_shapes(int tp, int cp,
                                                                                 int gpus_cap) {
  std::vector<std::tuple<int, int, std::vector<int>>> out;
  const auto& pools = ctx_.s.cluster.pools;
  if (pools.size() == 1) {
    for (int pp : fixed_or(ctx_.req.pp, divisors(gpus_cap / (tp * cp), 1 << 20))) {
      if (gpus_cap % (tp * cp * pp) != 0) {
        reject("degrees do not divide the GPUs");
        continue;
      }
      const int dp = gpus_cap / (tp * cp * pp);
      if (ctx_.req.dp && *ctx_.req.dp != dp) continue;
      out.push_back({pp, dp, std::vector<int>(pp, 0)});
    }
    return out;
  }
  // Heterogeneous: every pipeline rank uses dp x tp x cp GPUs of one pool; try each split of the
  // pipeline ranks over the pools, in each order of the pools (first pool holds the embedding).
  std::vector<int> pool_order(pools.size());
  std::iota(pool_order.begin(), pool_order.end(), 0);
  do {
    const long long largest = std::max_element(pools.begin(), pools.end(), [](auto& x, auto& y) {
                                return x.gpus() < y.gpus();
                              })->gpus();
    for (int dp : fixed_or(ctx_.req.dp, divisors(largest / (tp * cp), 1 << 20))) {
      const long long per_rank = static_cast<long long>(dp) * tp * cp;
      std::vector<int> capacity;
      for (int p : pool_order) capacity.push_back(static_cast<int>(pools[p].gpus() / per_rank));
      // Use as many pipeline ranks as the pools hold: idle GPUs would only cost.
      std::vector<int> ranks;
      for (size_t i = 0; i < pool_order.size(); ++i)
        for (int k = 0; k < capacity[i]; ++k) ranks.push_back(pool_order[i]);
      const int pp = static_cast<int>(ranks.size());
      if (pp == 0 || (ctx_.req.pp && *ctx_.req.pp != pp)) continue;
      out.push_back({pp, dp, ranks});
    }
  } while (std::next_permutation(pool_order.begin(), pool_order.end()) && pools.size() <= 3);
  return out;
}

std::vector<std::pair<Schedule, int>> SearchSpace::schedules(int pp, int microbatches) {
  std::vector<std::pair<Schedule, int>> out;
  auto allowed = [&](Schedule s) { return !ctx_.req.schedule || *ctx_.req.schedule == s; };
  if (pp == 1) {
    if (allowed(Schedule::OneFOneB) || allowed(Schedule::GPipe))
      out.push_back({ctx_.req.schedule.value_or(Schedule::OneFOneB), 1});
    return out;
  }
  if (allowed(Schedule::OneFOneB)) out.push_back({Schedule::OneFOneB, 1});
  if (allowed(Schedule::GPipe)) out.push_back({Schedule::GPipe, 1});
  if (allowed(Schedule::Interleaved)) {
    for (int v : fixed_or(ctx_.req.virtual_stages, std::vector<int>{2, 3, 4, 6, 8})) {
      if (v < 2) continue;
      if (pp * v > ctx_.s.model.layers)
        reject("pp x virtual_stages exceeds the layers");
      else if (microbatches % pp != 0)
        reject("interleaved needs micro-batches in multiples of pp");
      else
        out.push_back({Schedule::Interleaved, v});
    }
  }
  return out;
}

std::vector<bool> SearchSpace::compression_choices(const ParallelLayout& layout, int zero) {
  if (ctx_.req.compression) return {ctx_.req.compression->kind == CompressionKind::TopK};
  if (layout.replicas() > 1 && zero <= 1) return {false, true};
  return {false};
}

std::vector<int> SearchSpace::hsdp_choices(int tp, int cp, int ep, int dp,
                                           const std::vector<int>& pools) const {
  if (ctx_.req.dp_replicate) {
    const int r = *ctx_.req.dp_replicate;
    if (dp % r != 0 || (r > 1 && ep > 1)) return {};
    return {r};
  }
  std::vector<int> out{1};
  if (ep > 1 || (ctx_.req.zero && *ctx_.req.zero != 3) || ctx_.s.cluster.pools.size() > 1) return out;
  const int per_node = ctx_.s.cluster.pools[size_t(pools.front())].gpus_per_node;
  if (per_node % (tp * cp) != 0) return out;
  const int shard = per_node / (tp * cp);
  if (dp % shard == 0 && dp / shard > 1) out.push_back(dp / shard);
  return out;
}

bool SearchSpace::combined_1f1b_runs(int ep, int pp, Schedule schedule, Recompute recompute) {
  // ZeRO 3 is left out where the variants are chosen (for_each_variant).
  switch (combined_1f1b_conflict(true, ep, pp, schedule, recompute == Recompute::Full, 0)) {
    case Combined1F1BConflict::None:
      return true;
    case Combined1F1BConflict::NoExperts:
      reject("overlap.ep needs ep > 1");
      return false;
    case Combined1F1BConflict::Schedule:
      reject("overlap.ep runs under pp 1 or the interleaved schedule");
      return false;
    default:
      reject("overlap.ep does not run beside full recompute");
      return false;
  }
}

std::vector<bool> SearchSpace::folding_choices(int tp, int cp, int ep, int dp) const {
  const std::optional<int> etp = ctx_.req.expert_tp;
  const bool can_fold = ctx_.s.model.moe && tp > 1 &&
                        ctx_.s.training.tensor_parallel == TensorParallelImpl::Megatron &&
                        static_cast<long long>(tp) * cp * dp % ep == 0;
  std::vector<bool> out;
  if ((ep == 1 || dp % ep == 0) && (!etp || *etp == tp)) out.push_back(false);
  if (can_fold && etp == 1) out.push_back(true);
  return out;
}

// Rank orders worth trying: the other order only where it places some group differently (else its
// Program is the same and the default order wins the tie).
// Indices into SearchContext::orders: 0 is the requested order or the default, 1 the other one.
std::vector<int> SearchSpace::orders(const ParallelLayout& layout) {
  if (ctx_.req.order || ctx_.s.cluster.pools.size() > 1 || layout.pp == 1 || layout.dp == 1) return {0};
  if (ctx_.exhaustive) return {0, 1};
  const auto key =
      std::tuple{layout.tp, layout.cp, layout.dp, layout.pp, layout.ep, layout.replicate, layout.folded};
  auto it = same_placements_.find(key);
  if (it == same_placements_.end())
    it = same_placements_.emplace(key, same_placements(layout, ctx_.orders[0], ctx_.orders[1])).first;
  if (it->second) return {0};
  return {0, 1};
}

// Whether two rank orders place every group of the layout alike: TP, CP, DP and EP groups, pipeline
// neighbours on one node or not, and the pair of ranks that share tied embeddings.
bool SearchSpace::same_placements(const ParallelLayout& layout, const std::string& x,
                                  const std::string& y) const {
  const Plan px = layout.degrees(x), py = layout.degrees(y);
  auto same = [](const cost::GroupPlacement& a, const cost::GroupPlacement& c) {
    return a.size == c.size && a.per_node == c.per_node && a.crosses_pods == c.crosses_pods;
  };
  const long long sx = pp_stride(layout, x), sy = pp_stride(layout, y);
  for (int pool : layout.rank_pool) {
    const PoolSpec& p = ctx_.s.cluster.pools[pool];
    for (GroupKind kind : {GroupKind::Tp, GroupKind::Cp, GroupKind::Dp, GroupKind::Ep, GroupKind::ExpertDp})
      if (!same(group_placement(px, kind, p, ctx_.s.cluster), group_placement(py, kind, p, ctx_.s.cluster)))
        return false;
    if ((sx < p.gpus_per_node) != (sy < p.gpus_per_node)) return false;
    const auto span = [&](long long stride) { return stride * (layout.pp - 1) < p.gpus_per_node; };
    if (span(sx) != span(sy)) return false;
  }
  return true;
}

}  // namespace paratwin::search
