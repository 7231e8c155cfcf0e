// Plan search by branch and bound over the modeled space.
//
// Lower bound of a candidate's iteration time (valid for every layer partition): each pipeline rank
// runs its micro-batches' passes one after another on its compute stream, and each pass waits for the
// previous one's TP/CP/EP collectives, so the slowest rank needs at least m x (its layers' forward +
// backward + recompute time). Spreading L layers over ranks of per-layer times t_r gives a bottleneck
// of at least L / sum_r(1 / t_r). Every micro-batch also crosses all layers once forward and once
// backward. Embedding, head, optimizer, DP communication and bubbles only add time.
#include "plan/search/optimizer.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "plan/analytic/evaluate.hpp"
#include "plan/ir/schedule.hpp"
#include "plan/search/explain.hpp"
#include "plan/search/objective.hpp"
#include "plan/search/partition.hpp"

namespace paratwin {
namespace {

using cost::CollectiveKind;

// The density of top-k compression when the search chooses it.
constexpr double kSearchedTopkRatio = 0.01;

std::vector<int> divisors(long long n, long long limit) {
  std::vector<int> out;
  for (long long d = 1; d <= std::min(n, limit); ++d)
    if (n % d == 0) out.push_back(static_cast<int>(d));
  return out;
}

template <class T>
std::vector<T> fixed_or(const std::optional<T>& fixed, std::vector<T> choices) {
  return fixed ? std::vector<T>{*fixed} : choices;
}

// Per-layer times of one micro-batch on one pool for one compute configuration; mirrors lowering.
struct LayerTimes {
  double forward = 0, backward = 0, recompute = 0;  // dense layer, comm included
  double moe_forward = 0, moe_backward = 0, moe_recompute = 0;
  // The part of recompute that lengthens the chain of passes (for bounds). Selective recompute waits
  // for its pass's inputs but not for the previous pass's TP/CP/EP collectives (lowering adds it
  // outside compute_with_comm), so it can run entirely beside them: where a pass has collectives it
  // adds nothing to the chain. Full recompute waits for them, as a pass does.
  double chain_recompute = 0, moe_chain_recompute = 0;
  // Compute alone (no collectives), recompute included: every pass of a rank also runs on its one
  // compute stream, so these add up along a rank's passes and along a micro-batch's passes as well.
  double forward_compute = 0, backward_compute = 0, moe_forward_compute = 0, moe_backward_compute = 0;
  // For the pass graph (Search::pass_bounds): a pass's compute and collectives apart, the backward's
  // compute without recompute, and the recompute's compute and collectives.
  double backward_pure = 0, moe_backward_pure = 0, recompute_compute = 0, moe_recompute_compute = 0;
  double embedding_forward = 0, embedding_backward = 0, head_forward = 0, head_backward = 0;
  double embedding() const { return embedding_forward + embedding_backward; }
  double head() const { return head_forward + head_backward; }
};

// One layer's model-parallel collectives per pass, as lowering issues them: TP (or SP), CP forward
// and backward, and on MoE layers EP's dispatch and combine.
struct LayerComm {
  double tp = 0, cp_forward = 0, cp_backward = 0, ep = 0;
};

struct ComputeKey {
  int pool, tp, cp, ep, mb;
  bool sp;
  Recompute recompute;
  auto operator<=>(const ComputeKey&) const = default;
};

// Prefix sums over the layers of one base's per-layer costs, so that a chunk's time, activations and
// parameters cost O(1) in the partition DP.
struct CostTable {
  // [pool][l]: one micro-batch's forward, and backward + recompute, through layers < l; for bounds,
  // backward + the recompute that lengthens the chain of passes (LayerTimes::chain_recompute)
  std::vector<std::vector<double>> forward, backward, chain_backward;
  // [pool][l]: the same on the compute stream alone (LayerTimes::forward_compute, backward_compute)
  std::vector<std::vector<double>> compute_forward, compute_backward;
  // [pool][l]: the pass graph's figures through layers < l (LayerTimes::forward_comm and the rest)
  struct PassPrefix {
    double backward_pure = 0, recompute_compute = 0;
    int moe_layers = 0;
  };
  std::vector<std::vector<PassPrefix>> passes;
  std::vector<LayerTimes> ends;     // [pool]: embedding and head
  std::vector<double> activations;  // [l]: bytes of layers < l, one micro-batch
  double embedding_activations = 0, head_activations = 0;
  double recompute_working = 0;  // the least one layer's recomputation holds (every rank runs one)
  std::vector<double> params;    // [l]: parameters of layers < l on one rank (tp, ep split)
};

// How many forwards and backwards of each chunk of a pipeline rank its schedule runs before given
// points, shared by the bases of one (schedule, pp, v, micro-batches). Counts: [j] = {forwards,
// backwards} of the rank's chunk j (chunk j x pp + rank).
using PassCounts = std::vector<std::array<int, 2>>;
struct PipelineCounts {
  // [r]: before the first backward that finishes a chunk's gradients (when the first bucket is ready).
  std::vector<PassCounts> before_buckets;
  // [r][j][d]: up to and including the rank's last pass of its chunk j in direction d (0 forward,
  // 1 backward).
  std::vector<std::vector<std::array<PassCounts, 2>>> through_last;
};

// Every pipeline rank's passes in its schedule's order as one graph: a pass waits for the rank's pass
// before it and for the same micro-batch's pass through the neighbouring chunk (a forward for the
// forward through the chunk before, a backward for the backward through the chunk after, the last
// chunk's backward for its forward). Nodes in a topological order; shared by the bases of one
// (schedule, pp, v, micro-batches).
struct PassGraph {
  struct Node {
    int previous = -1;     // the rank's pass before, -1 for its first
    int input = -1;        // the pass whose output it takes, -1 for none
    int own_forward = -1;  // a backward's forward (whose activations it takes)
    int chunk = 0;
    bool forward = true;
  };
  std::vector<Node> nodes;
  std::vector<int> last;               // [r]: rank r's last pass
  std::vector<int> first_chunk_final;  // [r]: rank r's last backward of its first chunk (chunk r)
};

// Per pipeline rank, lower bounds of when its last pass ends and when its first chunk's last DP bucket
// becomes ready, for one partition (Search::pass_bounds).
struct PassBounds {
  std::vector<double> last_end, bucket_ready;
};

// The terms of Search::partition_bound that follow from the partition alone, per pipeline rank r, with the
// passes as a chain with their collectives ([0]) or on the compute stream alone ([1]): m load_r;
// prefix_r; forward prefix_r + the passes before the first bucket; and through the rank's last
// passes (Search::last_microbatch_terms) to rank 0's step, to its own step and to its first chunk's DP tail.
struct PartitionTerms {
  struct Costing {
    std::vector<double> load, prefix, before_buckets, to_first_step, to_own_step, to_dp_tail;
  };
  std::array<Costing, 2> costings;
};

struct Base {
  int tp, cp, ep, pp, dp, mb, v;
  Schedule schedule;
  Recompute recompute;
  bool sp;
  std::vector<int> rank_pool;  // pool index of each pipeline rank
  double free_bound = 0;       // valid for every partition; tightened when the base is refined
  double scale = 1;            // objective per second of iteration time (objective_scale)
  long first_candidate = 0;    // the sequence number of its first variant
  // The ranks that reduce each gradient and share ZeRO's blocks: dp x cp, as the Program lowers them.
  int replicas() const { return dp * cp; }
  // Filled when the base is refined: cost tables, its layer partitions (indices into the search's
  // list; -1: none fits) -- the time-optimal one, memory aside, and by the device bytes of model
  // states per parameter, that one where it fits, else the best that fits -- and, per pipeline rank
  // and chunk j, the
  // forwards and backwards the rank runs before the first backward that finishes a chunk's gradients
  // (when the first DP bucket becomes ready).
  bool refined = false;
  const CostTable* costs = nullptr;  // shared by bases alike in what the tables follow (cost_table)
  int time_optimal = -1;
  std::map<double, int> fitted{};
  std::map<int, PartitionTerms> partition_terms{};  // by partition (Search::partition_terms)
  const PipelineCounts* counts = nullptr;           // shared by bases of one pipeline order
  // By (partition, rank order, ZeRO 3), once a candidate of it reaches the front.
  std::map<std::tuple<int, int, bool>, PassBounds> pass_bounds{};
};

struct Variant {
  int zero;
  bool offload;
  bool topk;
  int order;  // index into Search::orders_ (a plain value: the queue moves candidates a lot)
};

class Search {
 public:
  Search(const ScenarioSpec& s, const SearchOptions& o)
      : s_(s), o_(o), req_(s.plan), orders_{s.plan.order.value_or(Plan().order), "tp-cp-pp-dp"} {
    elem_ = cost::element_bytes(s.training.precision);
    for (const PoolSpec& pool : s.cluster.pools) devices_.push_back(&s.cluster.device_of(pool));
    params_ = count_parameters(s.model);
    for (int l = 0; l < s.model.layers; ++l) moe_layers_ += s.model.is_moe_layer(l) ? 1 : 0;
  }

  SearchResult run() {
    const auto t0 = std::chrono::steady_clock::now();
    enumerate();
    // Best first by bound: a candidate with the coarse bound is refined (partition and its bound) and
    // queued again; then bounded through its pass graph and queued again; then evaluated exactly. Stop
    // when the smallest bound cannot beat the N-th best -- every candidate left has at least that bound.
    std::make_heap(queue_.begin(), queue_.end(), later);
    while (!queue_.empty()) {
      std::pop_heap(queue_.begin(), queue_.end(), later);
      const Entry e = queue_.back();
      queue_.pop_back();
      if (!o_.exhaustive && cutoff() > 0 && e.bound > cutoff()) break;
      if (e.level == Level::Base) {
        expand(e);
        continue;
      }
      if (e.level == Level::Coarse) {
        refine(e);
        continue;
      }
      if (e.level == Level::Partition) {
        bound_passes(e);
        continue;
      }
      evaluate(e);
      if (o_.progress && !o_.progress(progress(e.bound))) {
        result_.stopped = true;
        break;
      }
    }
    result_.top = best_;
    result_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (best_.empty() && !result_.stopped)
      throw InputError(s_.document.location, nothing_fits(closest_ ? &*closest_ : nullptr));
    if (best_.size() > 1) result_.explanation = explain(best_[0], best_[1], s_.search.objective);
    return std::move(result_);
  }

 private:
  // How far a candidate's bound has come: valid for every variant of its base (an entry for all of
  // them), for every partition, following its partition through closed forms (partition_bound),
  // through its pass graph (bound_passes).
  enum class Level { Base, Coarse, Partition, Graph };
  struct Entry {
    double bound;   // lower bound of the objective
    long sequence;  // enumeration order, for a deterministic order among equal bounds
    size_t base;
    Variant variant;
    Level level = Level::Coarse;
    int partition = -1;  // index into partitions_ once refined
  };
  // Heap order: the smallest bound on top.
  static bool later(const Entry& a, const Entry& b) {
    return std::tie(a.bound, a.sequence) > std::tie(b.bound, b.sequence);
  }

  void reject(const std::string& reason, long n = 1) { result_.rejected[reason] += n; }

  // The bound past which no candidate can enter the top N (0 until N plans are known). Ties within
  // 0.1% go to the simpler plan, so the search goes on until the bound is past them too.
  double cutoff() const {
    return static_cast<int>(best_.size()) >= o_.top ? best_.back().objective * 1.002 : 0;
  }

  SearchProgress progress(double front_bound) const {
    return {result_.enumerated, result_.evaluated, front_bound, cutoff()};
  }

  // ---- the space ---------------------------------------------------------------------------------
  void enumerate() {
    const auto& m = s_.model;
    const auto& c = s_.cluster;
    const int gpus_cap = std::min(c.gpus(), s_.search.max_gpus.value_or(c.gpus()));
    int min_gpus_per_node = 1 << 30;
    for (const auto& p : c.pools) min_gpus_per_node = std::min(min_gpus_per_node, p.gpus_per_node);
    const int tp_limit = s_.search.tp_across_nodes ? 1024 : min_gpus_per_node;
    std::vector<int> tps;
    for (int tp : fixed_or(req_.tp, divisors(std::gcd(m.heads, m.kv_heads), tp_limit))) {
      bool fits = s_.search.tp_across_nodes;
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
    for (int cp : fixed_or(req_.cp, std::vector<int>{1, 2, 4, 8}))
      if (s_.training.seq_len % (2 * cp) == 0 || cp == 1)
        cps.push_back(cp);
      else
        reject("cp does not divide the sequence");
    std::vector<int> eps = fixed_or(req_.ep, m.moe ? divisors(m.moe->experts, 64) : std::vector<int>{1});

    for (int tp : tps)
      for (int cp : cps)
        for (int ep : eps)
          for (const auto& [pp, dp, pools] : layouts(tp, cp, gpus_cap)) {
            if (pp > m.layers) {
              reject("pp exceeds the layers");
              continue;
            }
            if (ep > 1 && dp % ep != 0) {
              reject("ep does not divide dp");
              continue;
            }
            if (s_.training.global_batch % dp != 0) {
              reject("global batch does not divide over dp");
              continue;
            }
            const long long per_replica = s_.training.global_batch / dp;
            for (int mb : fixed_or(req_.micro_batch, divisors(per_replica, 16))) {
              if (per_replica % mb != 0) {
                reject("global batch does not split into micro-batches");
                continue;
              }
              const int microbatches = static_cast<int>(per_replica / mb);
              for (const auto& [schedule, v] : schedules(pp, microbatches)) {
                for (Recompute rc :
                     fixed_or(req_.recompute, {Recompute::None, Recompute::Selective, Recompute::Full}))
                  for (bool sp :
                       fixed_or(req_.sequence_parallel, tp > 1 && (s_.training.seq_len / cp) % tp == 0
                                                            ? std::vector<bool>{false, true}
                                                            : std::vector<bool>{false})) {
                    bases_.push_back({.tp = tp,
                                      .cp = cp,
                                      .ep = ep,
                                      .pp = pp,
                                      .dp = dp,
                                      .mb = mb,
                                      .v = v,
                                      .schedule = schedule,
                                      .recompute = rc,
                                      .sp = sp,
                                      .rank_pool = pools});
                    add_variants(bases_.size() - 1, microbatches);
                  }
              }
            }
          }
  }

  // (pp, dp, pool of each pipeline rank) that use the cluster: all GPUs (up to max_gpus) of a
  // one-pool cluster; on several pools, pipeline ranks placed on pools in either order.
  std::vector<std::tuple<int, int, std::vector<int>>> layouts(int tp, int cp, int gpus_cap) {
    std::vector<std::tuple<int, int, std::vector<int>>> out;
    const auto& pools = s_.cluster.pools;
    if (pools.size() == 1) {
      for (int pp : fixed_or(req_.pp, divisors(gpus_cap / (tp * cp), 1 << 20))) {
        if (gpus_cap % (tp * cp * pp) != 0) {
          reject("degrees do not divide the GPUs");
          continue;
        }
        const int dp = gpus_cap / (tp * cp * pp);
        if (req_.dp && *req_.dp != dp) continue;
        out.push_back({pp, dp, std::vector<int>(pp, 0)});
      }
      return out;
    }
    // Heterogeneous: every pipeline rank uses dp x tp x cp GPUs of one pool; try each split of the
    // pipeline ranks over the pools, in each order of the pools (first pool holds the embedding).
    std::vector<int> pool_order(pools.size());
    std::iota(pool_order.begin(), pool_order.end(), 0);
    do {
      const long long largest = std::max_element(pools.begin(), pools.end(), [](auto& a, auto& b) {
                                  return a.gpus() < b.gpus();
                                })->gpus();
      for (int dp : fixed_or(req_.dp, divisors(largest / (tp * cp), 1 << 20))) {
        const long long per_rank = static_cast<long long>(dp) * tp * cp;
        std::vector<int> capacity;
        for (int p : pool_order) capacity.push_back(static_cast<int>(pools[p].gpus() / per_rank));
        // Use as many pipeline ranks as the pools hold: idle GPUs would only cost.
        std::vector<int> ranks;
        for (size_t i = 0; i < pool_order.size(); ++i)
          for (int k = 0; k < capacity[i]; ++k) ranks.push_back(pool_order[i]);
        const int pp = static_cast<int>(ranks.size());
        if (pp == 0 || (req_.pp && *req_.pp != pp)) continue;
        out.push_back({pp, dp, ranks});
      }
    } while (std::next_permutation(pool_order.begin(), pool_order.end()) && pools.size() <= 3);
    return out;
  }

  std::vector<std::pair<Schedule, int>> schedules(int pp, int microbatches) {
    std::vector<std::pair<Schedule, int>> out;
    auto allowed = [&](Schedule s) { return !req_.schedule || *req_.schedule == s; };
    if (pp == 1) {
      if (allowed(Schedule::OneFOneB) || allowed(Schedule::GPipe))
        out.push_back({req_.schedule.value_or(Schedule::OneFOneB), 1});
      return out;
    }
    if (allowed(Schedule::OneFOneB)) out.push_back({Schedule::OneFOneB, 1});
    if (allowed(Schedule::GPipe)) out.push_back({Schedule::GPipe, 1});
    if (allowed(Schedule::Interleaved)) {
      for (int v : fixed_or(req_.virtual_stages, std::vector<int>{2, 3, 4, 6, 8})) {
        if (v < 2) continue;
        if (pp * v > s_.model.layers)
          reject("pp x virtual_stages exceeds the layers");
        else if (microbatches % pp != 0)
          reject("interleaved needs micro-batches in multiples of pp");
        else
          out.push_back({Schedule::Interleaved, v});
      }
    }
    return out;
  }

  // The base's candidates are counted here but queued as one entry with the base's bound, the
  // smallest of theirs: most bases never reach the front, and a quarter of a million entries in the
  // queue cost more than the bounds. expand() queues them when it does, with the sequence numbers
  // they have here, so they are taken in the same order as if they had been queued now.
  void add_variants(size_t base_index, int microbatches) {
    Base& b = bases_[base_index];
    b.free_bound = time_lower_bound(b, microbatches);
    b.scale = objective_scale(b);
    b.first_candidate = result_.enumerated + 1;
    bool any_fits = false;
    for_each_variant(b, [&](const Variant&, bool fits) {
      ++result_.enumerated;
      if (!fits) reject("model states exceed device memory");
      any_fits = any_fits || fits;
    });
    if (any_fits) queue_.push_back({b.free_bound * b.scale, b.first_candidate, base_index, {}, Level::Base});
  }

  void expand(const Entry& e) {
    const Base& b = bases_[e.base];
    const int microbatches = static_cast<int>(s_.training.global_batch / b.dp / b.mb);
    long sequence = b.first_candidate;
    VariantCosts& costs = variant_costs_[std::tuple{b.tp, b.cp, b.dp, b.pp, b.ep}];
    for_each_variant(b, [&](const Variant& v, bool fits) {
      const long candidate = sequence++;
      if (!fits) return;
      const double bound = std::max(b.free_bound, variant_bound(b, microbatches, v, costs)) * b.scale;
      queue_.push_back({bound, candidate, e.base, v});
      std::push_heap(queue_.begin(), queue_.end(), later);
    });
  }

  // visit(variant, whether its states can fit) for each variant of the base, in enumeration order.
  template <class Visit>
  void for_each_variant(const Base& b, const Visit& visit) {
    const std::vector<int> rank_orders = orders(b);
    for (int zero :
         fixed_or(req_.zero, b.replicas() > 1 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0}))
      for (bool offload : fixed_or(req_.offload_optimizer, {false, true})) {
        const bool fits = states_can_fit(b, {zero, offload, false, 0});
        for (bool topk : compression_choices(b, zero))
          for (int order : rank_orders) visit(Variant{zero, offload, topk, order}, fits);
      }
  }

  // The base's cost tables, integer pipeline bound and time-optimal partition (once), then the
  // candidate's partition -- the time-optimal one when its states fit, else the best that fits -- and
  // the bound that follows that very partition.
  void refine(Entry e) {
    ++result_.refined;
    Base& b = bases_[e.base];
    const int microbatches = static_cast<int>(s_.training.global_batch / b.dp / b.mb);
    if (!b.refined) {
      b.refined = true;
      b.costs = &cost_table(b);
      if (s_.cluster.pools.size() == 1 && b.pp > 1 && b.schedule != Schedule::Interleaved)
        b.free_bound = std::max(b.free_bound, pipeline_bound(b, microbatches));
      // The time-optimal partition follows the per-layer times alone: bases that differ only in dp,
      // the micro-batch count or the schedule's memory share it.
      const TimeKey time_key{b.tp, b.cp, b.ep, b.mb, b.pp, b.v, b.sp, b.recompute, b.rank_pool};
      auto optimal = time_optimal_.find(time_key);
      if (optimal == time_optimal_.end())
        optimal = time_optimal_.emplace(time_key, store(partition(b, nullptr, microbatches))).first;
      b.time_optimal = optimal->second;
      const auto order_key = std::tuple{b.schedule, b.pp, b.v, microbatches};
      auto counts = pipeline_counts_.find(order_key);
      if (counts == pipeline_counts_.end())
        counts = pipeline_counts_.emplace(order_key, pipeline_counts(b, microbatches)).first;
      b.counts = &counts->second;
    }
    e.level = Level::Partition;
    // Variants with the same states per parameter (ZeRO 1 and 2 hold the same; compression and rank
    // order change nothing) share their partition; none fits where none fits with fewer bytes per
    // parameter.
    const double key = state_bytes_per_parameter(b, e.variant);
    auto it = b.fitted.find(key);
    if (it == b.fitted.end()) {
      int fitted = b.time_optimal;
      if (fitted < 0 || !partition_fits(b, e.variant, partitions_[fitted], microbatches)) {
        const bool hopeless = std::any_of(b.fitted.begin(), b.fitted.upper_bound(key),
                                          [](const auto& fit) { return fit.second < 0; });
        fitted = hopeless ? -1 : store(partition(b, &e.variant, microbatches));
      }
      it = b.fitted.emplace(key, fitted).first;
    }
    e.partition = it->second;
    if (e.partition < 0) {
      reject("out of memory");
      return;
    }
    const double bound = std::max(b.free_bound, partition_bound(b, e.variant, e.partition));
    e.bound = std::max(e.bound, bound * b.scale);
    queue_.push_back(e);
    std::push_heap(queue_.begin(), queue_.end(), later);
  }

  // The candidate's bound through its partition's pass graph (pass_bounds) and its tails, queued again.
  void bound_passes(Entry e) {
    Base& b = bases_[e.base];
    const int microbatches = static_cast<int>(s_.training.global_batch / b.dp / b.mb);
    const auto& ranges = partitions_[e.partition];
    // Transfers and ZeRO 3's gathers depend on where the groups sit (the rank order).
    const bool zero3 = e.variant.zero == 3 && b.replicas() > 1;
    const std::tuple key{e.partition, e.variant.order, zero3};
    auto bounds = b.pass_bounds.find(key);
    if (bounds == b.pass_bounds.end()) {
      const auto order_key = std::tuple{b.schedule, b.pp, b.v, microbatches};
      auto graph = pass_graphs_.find(order_key);
      if (graph == pass_graphs_.end())
        graph = pass_graphs_.emplace(order_key, pass_graph(b, microbatches)).first;
      std::vector<double> gathers;
      for (int c = 0; zero3 && c < b.pp * b.v; ++c) {
        const int pool = b.rank_pool[c % b.pp];
        const double bytes = chunk_params(b, c, ranges[c].first, ranges[c].second) * elem_;
        gathers.push_back(cost::collective_time(CollectiveKind::AllGather, Bytes(bytes),
                                                dp_placement(b, pool, e.variant.order),
                                                s_.cluster.pools[pool], s_.cluster)
                              .time.value());
      }
      bounds =
          b.pass_bounds.emplace(key, pass_bounds(b, graph->second, ranges, e.variant.order, gathers)).first;
    }
    const auto tails = rank_tails(b, e.variant, ranges);
    double bound = 0;
    for (int r = 0; r < b.pp; ++r) {
      bound = std::max(bound, bounds->second.last_end[r] + tails.steps[r]);
      if (b.replicas() > 1)
        bound = std::max(bound, bounds->second.bucket_ready[r] + tails.dp_tails[r] + tails.steps[r]);
    }
    e.level = Level::Graph;
    e.bound = std::max(e.bound, bound * b.scale);
    queue_.push_back(e);
    std::push_heap(queue_.begin(), queue_.end(), later);
  }

  static PassGraph pass_graph(const Base& b, int microbatches) {
    const int chunks = b.pp * b.v, m = microbatches;
    std::vector<std::vector<PipelineStep>> orders(b.pp);
    for (int r = 0; r < b.pp; ++r) orders[r] = pipeline_order(b.schedule, b.pp, b.v, m, r);
    auto key = [&](bool forward, int mb, int chunk) {
      return (static_cast<size_t>(forward ? 0 : 1) * chunks + chunk) * m + mb;
    };
    // Ranks run ahead until a pass's input is not placed yet; the one rank waiting for a pass (its
    // input feeds one pass only) resumes once it is placed.
    std::vector<int> index(static_cast<size_t>(2) * chunks * m, -1), waiting(index.size(), -1);
    PassGraph g;
    g.nodes.reserve(index.size());
    g.last.assign(b.pp, -1);
    g.first_chunk_final.assign(b.pp, -1);
    std::vector<size_t> next(b.pp, 0);
    std::vector<int> ready(b.pp);
    std::iota(ready.begin(), ready.end(), 0);
    while (!ready.empty()) {
      const int r = ready.back();
      ready.pop_back();
      for (; next[r] < orders[r].size(); ++next[r]) {
        const PipelineStep& s = orders[r][next[r]];
        int input = -1;
        if (!s.forward || s.chunk > 0) {
          const size_t from = s.forward               ? key(true, s.microbatch, s.chunk - 1)
                              : s.chunk == chunks - 1 ? key(true, s.microbatch, s.chunk)
                                                      : key(false, s.microbatch, s.chunk + 1);
          input = index[from];
          if (input < 0) {
            waiting[from] = r;
            break;
          }
        }
        const int id = static_cast<int>(g.nodes.size());
        const int own_forward = s.forward ? -1 : index[key(true, s.microbatch, s.chunk)];
        g.nodes.push_back({g.last[r], input, own_forward, s.chunk, s.forward});
        g.last[r] = id;
        if (!s.forward && s.chunk == r) g.first_chunk_final[r] = id;
        const size_t placed = key(s.forward, s.microbatch, s.chunk);
        index[placed] = id;
        if (waiting[placed] >= 0) ready.push_back(std::exchange(waiting[placed], -1));
      }
    }
    if (g.nodes.size() != index.size()) throw std::logic_error("search: a pipeline order deadlocks");
    return g;
  }

  // One pass through a chunk for the pass graph: compute and collectives apart (additive lower bounds,
  // as in the cost tables); ZeRO 3's gather of the chunk before each pass; the sends of its output to
  // the chunk after (forward) and before (backward), -1 where there is none.
  struct ChunkPasses {
    double forward = 0, forward_comm = 0, backward = 0, backward_comm = 0, recompute = 0, recompute_comm = 0;
    double gather = 0, forward_send = -1, backward_send = -1;
  };
  // `comm`: one layer's collectives where the rank order places the groups.
  static ChunkPasses chunk_passes(const Base& b, int c, int begin, int end, const LayerComm& comm) {
    const int pool = b.rank_pool[c % b.pp];
    const auto& x = b.costs->passes[pool];
    const bool first = c == 0, last = c == b.pp * b.v - 1;
    const LayerTimes& ends = b.costs->ends[pool];
    // Two TP collectives per layer, one more on the first chunk for the vocabulary-parallel embedding.
    const double layers = end - begin, moe = x[end].moe_layers - x[begin].moe_layers;
    const double shared = (2 * layers + (first ? 1 : 0)) * comm.tp + moe * comm.ep;
    const double forward_comm = shared + layers * comm.cp_forward;
    return {chunk_bound_forward(b, true, c, begin, end),
            forward_comm,
            x[end].backward_pure - x[begin].backward_pure + (first ? ends.embedding_backward : 0) +
                (last ? ends.head_backward : 0),
            shared + layers * comm.cp_backward,
            x[end].recompute_compute - x[begin].recompute_compute,
            b.recompute == Recompute::Full ? forward_comm : 0};
  }

  // Lower bounds of when every pass's compute ends and when its collectives end, pass by pass in the
  // graph's order, as lowering orders them: a pass waits for its input (a send waits for its pass's
  // collectives; a receive ends with its send, and each rank's sends and receives run in issue order
  // on their stream) and for the rank's previous pass and its collectives; selective recompute waits for the
  // previous compute alone, so it can run beside those collectives; full recompute is a forward of its own
  // before the backward; ZeRO 3's gather starts after the previous compute, and the pass waits for it; with
  // TP overlap the collectives start with the compute. The DP and copy streams are left out: they only delay.
  // A rank's first chunk's last DP bucket is ready when that chunk's last backward's compute ends. `gathers`:
  // ZeRO 3's gather time per chunk, or empty.
  PassBounds pass_bounds(const Base& b, const PassGraph& g, const std::vector<std::pair<int, int>>& ranges,
                         int order, const std::vector<double>& gathers) {
    const int chunks = b.pp * b.v;
    std::vector<ChunkPasses> passes(chunks);
    std::map<int, LayerComm> comm;  // by pool
    for (int pool : b.rank_pool)
      if (!comm.count(pool))
        comm[pool] = layer_comm(
            b, [&](GroupKind group, int) { return placement(b, group, pool, order); },
            s_.cluster.pools[pool]);
    for (int c = 0; c < chunks; ++c) {
      passes[c] = chunk_passes(b, c, ranges[c].first, ranges[c].second, comm[b.rank_pool[c % b.pp]]);
      if (!gathers.empty()) passes[c].gather = gathers[c];
      if (c + 1 < chunks) passes[c].forward_send = transfer_time(b, order, c, c + 1);
      if (c > 0) passes[c].backward_send = transfer_time(b, order, c, c - 1);
    }
    const bool overlap = req_.overlap_tp.value_or(false);
    std::vector<double> compute_end(g.nodes.size()), done(g.nodes.size()), sent(g.nodes.size());
    std::vector<double> pp_free(b.pp, 0);  // the rank's send-and-receive stream
    auto run = [overlap](double start, double compute, double comm, double& compute_end, double& done) {
      compute_end = start + compute;
      done = overlap ? std::max(compute_end, start + comm) : compute_end + comm;
    };
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const PassGraph::Node& n = g.nodes[i];
      const ChunkPasses& k = passes[n.chunk];
      const double previous_compute = n.previous >= 0 ? compute_end[n.previous] : 0;
      const int r = n.chunk % b.pp;
      double ready = 0;
      if (n.input >= 0 && n.input != n.own_forward) ready = pp_free[r] = std::max(pp_free[r], sent[n.input]);
      if (n.own_forward >= 0) ready = std::max(ready, done[n.own_forward]);
      if (k.gather > 0) ready = std::max(ready, previous_compute + k.gather);
      double start = std::max(n.previous >= 0 ? done[n.previous] : 0, ready);
      if (n.forward) {
        run(start, k.forward, k.forward_comm, compute_end[i], done[i]);
      } else {
        if (b.recompute == Recompute::Selective) {
          start = std::max(start, std::max(previous_compute, ready) + k.recompute);
        } else if (b.recompute == Recompute::Full) {
          double recompute_end = 0, recompute_done = 0;
          run(start, k.recompute, k.recompute_comm, recompute_end, recompute_done);
          start = recompute_done;
        }
        run(start, k.backward, k.backward_comm, compute_end[i], done[i]);
      }
      const double send = n.forward ? k.forward_send : k.backward_send;
      if (send >= 0) sent[i] = pp_free[r] = std::max(pp_free[r], done[i]) + send;
    }
    PassBounds out{std::vector<double>(b.pp), std::vector<double>(b.pp)};
    for (int r = 0; r < b.pp; ++r) {
      out.last_end[r] = done[g.last[r]];
      out.bucket_ready[r] = compute_end[g.first_chunk_final[r]];
    }
    return out;
  }

  // A micro-batch's activations (or their gradients) sent from chunk `from` to chunk `to`, as lowering
  // costs the send.
  double transfer_time(const Base& b, int order, int from, int to) const {
    const int sender = from % b.pp, receiver = to % b.pp;
    if (sender == receiver) return 0;
    const PoolSpec& pool = s_.cluster.pools[b.rank_pool[sender]];
    const bool same_node = pp_stride(b, orders_[order]) * std::abs(receiver - sender) < pool.gpus_per_node &&
                           b.rank_pool[receiver] == b.rank_pool[sender];
    double tokens = double(b.mb) * s_.training.seq_len / b.cp;
    if (b.sp) tokens /= b.tp;
    return cost::p2p_time(Bytes(tokens * s_.model.hidden * elem_), same_node, pool, s_.cluster).value();
  }

  // Ranks between pipeline neighbours: the product of the sizes of the dimensions before pp in the order.
  static long long pp_stride(const Base& b, const std::string& order) {
    long long stride = 1;
    for (const auto& [name, size] : {std::pair{"tp", b.tp}, {"cp", b.cp}, {"dp", b.dp}})
      if (order.find(name) < order.find("pp")) stride *= size;
    return stride;
  }

  int store(std::optional<std::vector<std::pair<int, int>>> ranges) {
    if (!ranges) return -1;
    partitions_.push_back(std::move(*ranges));
    return static_cast<int>(partitions_.size()) - 1;
  }

  static PipelineCounts pipeline_counts(const Base& b, int microbatches) {
    PipelineCounts out;
    out.before_buckets.assign(b.pp, PassCounts(b.v, {0, 0}));
    out.through_last.assign(b.pp, std::vector<std::array<PassCounts, 2>>(b.v));
    for (int r = 0; r < b.pp; ++r) {
      const auto order = pipeline_order(b.schedule, b.pp, b.v, microbatches, r);
      std::vector<std::array<size_t, 2>> last(b.v, {0, 0});  // index of the last pass per (j, d)
      for (size_t k = 0; k < order.size(); ++k) last[order[k].chunk / b.pp][order[k].forward ? 0 : 1] = k;
      PassCounts running(b.v, {0, 0});
      bool bucket_ready = false;
      for (size_t k = 0; k < order.size(); ++k) {
        const int j = order[k].chunk / b.pp, d = order[k].forward ? 0 : 1;
        // The last backward of a chunk finishes its gradients.
        if (d == 1 && last[j][1] == k && !bucket_ready) {
          out.before_buckets[r] = running;
          bucket_ready = true;
        }
        ++running[j][d];
        if (last[j][d] == k) out.through_last[r][j][d] = running;
      }
    }
    return out;
  }

  std::vector<bool> compression_choices(const Base& b, int zero) {
    if (req_.compression) return {req_.compression->kind == CompressionKind::TopK};
    if (b.replicas() > 1 && zero <= 1) return {false, true};
    return {false};
  }

  // Rank orders worth trying: the other order only where it places some group differently (else its
  // Program is the same and the default order wins the tie).
  // Indices into orders_: 0 is the requested order or the default, 1 the other one.
  std::vector<int> orders(const Base& b) {
    if (req_.order || s_.cluster.pools.size() > 1 || b.pp == 1 || b.dp == 1) return {0};
    if (o_.exhaustive) return {0, 1};
    const auto key = std::tuple{b.tp, b.cp, b.dp, b.pp, b.ep};
    auto it = same_placements_.find(key);
    if (it == same_placements_.end())
      it = same_placements_.emplace(key, same_placements(b, orders_[0], orders_[1])).first;
    if (it->second) return {0};
    return {0, 1};
  }

  // Whether two rank orders place every group of the base alike: TP, CP, DP and EP groups, pipeline
  // neighbours on one node or not, and the pair of ranks that share tied embeddings.
  bool same_placements(const Base& b, const std::string& x, const std::string& y) const {
    Plan px, py;
    for (Plan* p : {&px, &py}) p->tp = b.tp, p->cp = b.cp, p->dp = b.dp, p->pp = b.pp, p->ep = b.ep;
    px.order = x;
    py.order = y;
    auto same = [](const cost::GroupPlacement& a, const cost::GroupPlacement& c) {
      return a.size == c.size && a.per_node == c.per_node && a.crosses_pods == c.crosses_pods;
    };
    const long long sx = pp_stride(b, x), sy = pp_stride(b, y);
    for (int pool : b.rank_pool) {
      const PoolSpec& p = s_.cluster.pools[pool];
      for (GroupKind kind : {GroupKind::Tp, GroupKind::Cp, GroupKind::Dp, GroupKind::Ep})
        if (!same(group_placement(px, kind, p, s_.cluster), group_placement(py, kind, p, s_.cluster)))
          return false;
      if ((sx < p.gpus_per_node) != (sy < p.gpus_per_node)) return false;
      const auto span = [&](long long stride) { return stride * (b.pp - 1) < p.gpus_per_node; };
      if (span(sx) != span(sy)) return false;
    }
    return true;
  }

  // ---- costs ---------------------------------------------------------------------------------------
  const LayerTimes& layer_times(int pool, const Base& b) {
    const ComputeKey key{pool, b.tp, b.cp, b.ep, b.mb, b.sp, b.recompute};
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    const PoolSpec& p = s_.cluster.pools[pool];
    const DeviceSpec& d = s_.cluster.device_of(p);
    const Precision prec = s_.training.precision;
    const cost::LayerWork w{b.mb, s_.training.seq_len, b.tp, b.cp, b.sp, prec, s_.training.attention};
    // Additive lower bounds (see compute_time_bound), so that sums over any partition stay below the
    // evaluator's time for the aggregated work of a chunk.
    auto compute = [&](const cost::KernelCost& k) { return cost::compute_time_bound(k, d, prec).value(); };
    // Each group packed into as few nodes as it can be: no rank order places it better.
    const auto [tp_pass, cp_f, cp_b, ep] = layer_comm(
        b,
        [&](GroupKind, int size) {
          return cost::GroupPlacement{size, std::min(size, p.gpus_per_node), false};
        },
        p);
    // A pass's collectives follow its GEMMs and the next pass waits for them; with TP overlap they run
    // beside the GEMMs, so a pass takes the longer of the two (on a model with one layer kind; mixed
    // layer kinds keep only the GEMMs, as the maximum of sums is not a sum of maxima).
    const bool overlap = req_.overlap_tp.value_or(false);
    auto pass = [&](double gemms, double comm) {
      if (!overlap) return gemms + comm;
      return s_.model.moe ? gemms : std::max(gemms, comm);
    };
    LayerTimes t;
    t.forward_compute = compute(cost::layer_forward(s_.model, w, false));
    t.backward_compute = compute(cost::layer_backward(s_.model, w, false));
    t.moe_forward_compute = compute(cost::layer_forward(s_.model, w, true));
    t.moe_backward_compute = compute(cost::layer_backward(s_.model, w, true));
    t.forward = pass(t.forward_compute, 2 * tp_pass + cp_f);
    t.backward = pass(t.backward_compute, 2 * tp_pass + cp_b);
    t.moe_forward = pass(t.moe_forward_compute, 2 * tp_pass + cp_f + ep);
    t.moe_backward = pass(t.moe_backward_compute, 2 * tp_pass + cp_b + ep);
    if (b.recompute == Recompute::Full) {
      t.recompute = t.forward;
      t.moe_recompute = t.moe_forward;
    } else if (b.recompute == Recompute::Selective) {
      t.recompute = t.moe_recompute = compute(cost::attention_core_forward(s_.model, w));
    }
    const bool collectives = tp_pass + cp_f + cp_b + ep > 0;
    const bool hidden = b.recompute == Recompute::Selective && collectives;
    t.chain_recompute = hidden ? 0 : t.recompute;
    t.moe_chain_recompute = hidden ? 0 : t.moe_recompute;
    t.backward_pure = t.backward_compute;
    t.moe_backward_pure = t.moe_backward_compute;
    const bool full_recompute = b.recompute == Recompute::Full;
    t.recompute_compute = full_recompute ? t.forward_compute : t.recompute;
    t.moe_recompute_compute = full_recompute ? t.moe_forward_compute : t.moe_recompute;
    t.backward_compute += full_recompute ? t.forward_compute : t.recompute;
    t.moe_backward_compute += full_recompute ? t.moe_forward_compute : t.moe_recompute;
    t.embedding_forward = t.embedding_backward = compute(cost::embedding_forward(s_.model, w));
    t.head_forward = compute(cost::head_forward(s_.model, w));
    t.head_backward = compute(cost::head_backward(s_.model, w));
    return cache_.emplace(key, t).first->second;
  }

  // One layer's model-parallel collectives per pass (LayerComm); `where(group, size)` places a
  // group.
  template <class Where>
  LayerComm layer_comm(const Base& b, const Where& where, const PoolSpec& pool) const {
    auto coll = [&](CollectiveKind kind, GroupKind group, int size, double bytes) {
      if (size <= 1) return 0.0;
      return cost::collective_time(kind, Bytes(bytes), where(group, size), pool, s_.cluster).time.value();
    };
    LayerComm out;
    const double full = double(b.mb) * s_.training.seq_len / b.cp * s_.model.hidden * elem_;
    out.tp = b.sp ? coll(CollectiveKind::AllGather, GroupKind::Tp, b.tp, full) +
                        coll(CollectiveKind::ReduceScatter, GroupKind::Tp, b.tp, full)
                  : coll(CollectiveKind::AllReduce, GroupKind::Tp, b.tp, full);
    const double kv =
        double(b.mb) * s_.training.seq_len * 2 * double(s_.model.kv_heads) * s_.model.head_dim / b.tp * elem_;
    out.cp_forward = coll(CollectiveKind::AllGather, GroupKind::Cp, b.cp, kv);
    out.cp_backward = coll(CollectiveKind::ReduceScatter, GroupKind::Cp, b.cp, kv);
    if (s_.model.moe && b.ep > 1) {
      const double sent =
          double(b.mb) * s_.training.seq_len / b.cp * s_.model.moe->top_k * s_.model.hidden * elem_;
      out.ep = 2 * coll(CollectiveKind::AllToAll, GroupKind::Ep, b.ep, sent);
    }
    return out;
  }

  double per_layer(const LayerTimes& t) const {
    // The cheaper layer kind, so that the bound stays below any mix of layers.
    // Either the chain of passes with their collectives or the compute stream alone.
    double chain = t.forward + t.backward + t.chain_recompute, alone = t.forward_compute + t.backward_compute;
    if (s_.model.moe) {
      chain = std::min(chain, t.moe_forward + t.moe_backward + t.moe_chain_recompute);
      alone = std::min(alone, t.moe_forward_compute + t.moe_backward_compute);
    }
    return std::max(chain, alone);
  }

  // See the file comment. On one pool a micro-batch's whole work W (layers, embedding, head) splits
  // over pp ranks; rank r cannot finish before the ranks ahead of it have passed one micro-batch on
  // and it has run all of its own: X >= P_r + m T_r for every r with sum T_r = W, which gives
  // X >= W / (1 - (1 - 1/m)^pp) (part of the pipeline bubble; refine() takes the integer version).
  // Interleaving and several pools get the plain m W / pp (per-layer speeds combined as a harmonic sum).
  double time_lower_bound(const Base& b, int microbatches) {
    const double L = s_.model.layers, m = microbatches;
    if (s_.cluster.pools.size() == 1) {
      const double W = microbatch_work(b);
      if (b.pp == 1) return m * W + optimizer_bound(b);
      if (b.schedule == Schedule::Interleaved) return m * W / b.pp;
      return W / (1 - std::pow(1 - 1 / m, b.pp));
    }
    double speed = 0;
    for (int pool : b.rank_pool) speed += 1 / per_layer(layer_times(pool, b));
    return m * L / speed;
  }

  // One micro-batch's forward and backward through the whole model at the cheaper layer kind's time
  // per layer (one pool).
  double microbatch_work(const Base& b) {
    const LayerTimes& t = layer_times(b.rank_pool.front(), b);
    return s_.model.layers * per_layer(t) + t.embedding() + t.head();
  }

  // What a rank holding `params` parameters on `pool` spends beside its passes (rank_tails, per
  // rank; variant_bound, all ranks' parameters at once).
  struct StateCosts {
    double step = 0;       // the optimizer step, offload's copies in and out, ZeRO 1/2's gather after it
    double gradients = 0;  // the DP collective of all their gradients
    double gather = 0;     // ZeRO 3: one all-gather of them (twice per micro-batch)
  };
  // By variant (ZeRO, offload, top-k, rank order; see variant_bound), for all of a layout's ranks.
  using VariantCosts = std::array<std::optional<StateCosts>, 32>;

  // A variant's bound valid for every partition (one pool; 0 on several): every rank r ends after
  // m load_r + step_r and after gathers_r + gradients_r + step_r on its DP stream (partition_bound), so
  // the slowest rank after the average of either over the ranks. The ranks' loads add up to at
  // least m micro-batches through the model; their steps, copies and collectives to at least those of
  // all their parameters at once, as optimizer steps and copies are affine and collectives concave
  // in their size, all with non-negative intercepts (so f(x) + f(y) >= f(x + y)).
  // `layout_costs`: what is worked out so far for the base's (tp, cp, dp, pp, ep).
  double variant_bound(const Base& b, int microbatches, const Variant& v, VariantCosts& layout_costs) {
    if (s_.cluster.pools.size() > 1) return 0;
    const size_t index = ((size_t(v.zero) * 2 + v.offload) * 2 + v.topk) * orders_.size() + v.order;
    std::optional<StateCosts>& costs = layout_costs[index];
    if (!costs) {
      const ChunkMemory memory = chunk_memory(b);
      costs = state_costs(
          b, v, 0, (layer_parameters(b) + memory.embedding * (memory.untied_last ? 2 : 1)) * (1 - 1e-9));
    }
    const StateCosts& t = *costs;
    const double m = microbatches;
    return std::max(m * microbatch_work(b) + t.step, t.gradients + 2 * m * t.gather + t.step) / b.pp;
  }
  StateCosts state_costs(const Base& b, const Variant& v, int pool, double params) {
    const double shard = params / (v.zero >= 1 ? b.replicas() : 1);
    StateCosts out;
    const double step =
        cost::compute_time_bound(cost::optimizer_step(shard, s_.training.optimizer, s_.training.precision),
                                 *devices_[pool], s_.training.precision)
            .value();
    const double copy =
        v.offload
            ? shard * cost::optimizer_bytes_per_parameter(s_.training.optimizer, s_.training.precision) /
                  s_.cluster.pools[pool].pcie_bandwidth.value()
            : 0;
    double gather = 0;
    if (b.replicas() > 1) {
      out.gradients = gradient_collective(b, v, pool, params);
      if (v.zero == 1 || v.zero == 2)
        gather = dp_collective(b, v, pool, CollectiveKind::AllGather, params * elem_);
      if (v.zero == 3) out.gather = dp_collective(b, v, pool, CollectiveKind::AllGather, params * elem_);
    }
    out.step = step + copy + std::max(copy, gather);
    return out;
  }
  double dp_collective(const Base& b, const Variant& v, int pool, CollectiveKind kind, double bytes) {
    return cost::collective_time(kind, Bytes(bytes), dp_placement(b, pool, v.order), s_.cluster.pools[pool],
                                 s_.cluster)
        .time.value();
  }
  // The DP collective of `elements` gradients: all-reduced, reduce-scattered, or top-k pairs gathered.
  double gradient_collective(const Base& b, const Variant& v, int pool, double elements) {
    if (v.topk) {
      const double ratio = req_.compression ? req_.compression->ratio : kSearchedTopkRatio;
      return dp_collective(b, v, pool, CollectiveKind::AllGather,
                           topk_gatherers(b) * ratio * elements * (elem_ + 4));
    }
    return dp_collective(b, v, pool, v.zero == 0 ? CollectiveKind::AllReduce : CollectiveKind::ReduceScatter,
                         elements * elem_);
  }

  // Ranks whose top-k pairs a rank gathers: under EP the experts' pairs go to their dp / ep replicas
  // only, so for bounds every element is counted so.
  static double topk_gatherers(const Base& b) {
    return b.ep > 1 ? double(b.replicas()) / b.ep : b.replicas();
  }

  // Parameters of all transformer layers on one TP rank (experts split over ep), summed over the
  // pipeline ranks.
  double layer_parameters(const Base& b) const {
    const double moe = moe_layers_ > 0 ? moe_layer_parameters(params_, b.ep) : 0;
    return ((s_.model.layers - moe_layers_) * params_.per_dense_layer + moe_layers_ * moe) / b.tp;
  }

  // min over partitions of max_r (sum_{r' < r} T_r' + m T_r): rank r starts after the first
  // micro-batch's forward reached it, runs m forwards and backwards, and its last backward still has to
  // travel back through the ranks before it. T_r counts forward + backward (+ recompute) of its layers,
  // the embedding on rank 0 and the head on the last. A DP over (rank, layers used) with the running
  // prefix; ties resolved by the smaller prefix, which only ever helps later ranks. One pool, so the
  // per-layer time is the cheaper layer kind's. Bases with the same layer times, pp and micro-batches
  // share it.
  double pipeline_bound(const Base& b, int microbatches) {
    const int L = s_.model.layers, pp = b.pp;
    const double m = microbatches;
    const LayerTimes& t = layer_times(b.rank_pool.front(), b);
    const auto key = std::tuple{&t, pp, microbatches};
    if (const auto it = pipeline_bounds_.find(key); it != pipeline_bounds_.end()) return it->second;
    const double layer = per_layer(t);
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

  // The tables follow the layers' times and memory on the base's pools alone: bases that differ only
  // in dp, pp or the schedule share them (a table is some kilobytes, and thousands of bases are
  // refined).
  const CostTable& cost_table(const Base& b) {
    unsigned pools_used = 0;
    for (int pool : b.rank_pool) pools_used |= 1u << pool;
    const auto key = std::tuple{b.tp, b.cp, b.ep, b.mb, b.sp, b.recompute, pools_used};
    auto it = cost_tables_.find(key);
    if (it == cost_tables_.end()) it = cost_tables_.emplace(key, make_cost_table(b)).first;
    return it->second;
  }
  CostTable make_cost_table(const Base& b) {
    const int L = s_.model.layers;
    CostTable c;
    const size_t pools = s_.cluster.pools.size();
    c.forward.resize(pools);
    c.backward.resize(pools);
    c.chain_backward.resize(pools);
    c.compute_forward.resize(pools);
    c.compute_backward.resize(pools);
    c.passes.resize(pools);
    c.ends.resize(pools);
    for (int pool : b.rank_pool) {
      if (!c.forward[pool].empty()) continue;
      const LayerTimes& t = layer_times(pool, b);
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
        const bool moe = s_.model.is_moe_layer(l);
        f[l + 1] = f[l] + (moe ? t.moe_forward : t.forward);
        bw[l + 1] = bw[l] + (moe ? t.moe_backward + t.moe_recompute : t.backward + t.recompute);
        chain[l + 1] =
            chain[l] + (moe ? t.moe_backward + t.moe_chain_recompute : t.backward + t.chain_recompute);
        cf[l + 1] = cf[l] + (moe ? t.moe_forward_compute : t.forward_compute);
        cb[l + 1] = cb[l] + (moe ? t.moe_backward_compute : t.backward_compute);
        const CostTable::PassPrefix& before = passes[l];
        passes[l + 1] = {before.backward_pure + (moe ? t.moe_backward_pure : t.backward_pure),
                         before.recompute_compute + (moe ? t.moe_recompute_compute : t.recompute_compute),
                         before.moe_layers + (moe ? 1 : 0)};
      }
      c.ends[pool] = t;
    }
    const cost::ActivationConfig act{b.mb,        s_.training.seq_len,   b.tp, b.cp, b.sp,
                                     b.recompute, s_.training.precision, s_.training.attention};
    const double dense_act = cost::layer_activation_bytes(s_.model, act, false).value();
    const double moe_act = s_.model.moe ? cost::layer_activation_bytes(s_.model, act, true).value() : 0;
    const double moe_params = s_.model.moe ? moe_layer_parameters(params_, b.ep) : 0;
    c.activations.assign(L + 1, 0);
    c.params.assign(L + 1, 0);
    c.recompute_working = std::numeric_limits<double>::infinity();
    for (int l = 0; l < L; ++l) {
      const bool moe = s_.model.is_moe_layer(l);
      c.recompute_working =
          std::min(c.recompute_working, cost::recompute_working_bytes(s_.model, act, moe).value());
      c.activations[l + 1] = c.activations[l] + (moe ? moe_act : dense_act);
      c.params[l + 1] = c.params[l] + (moe ? moe_params : params_.per_dense_layer) / b.tp;
    }
    c.embedding_activations = cost::embedding_activation_bytes(s_.model, act).value();
    c.head_activations = cost::head_activation_bytes(s_.model, act).value();
    return c;
  }

  // The optimizer step of a single pipeline rank holding every parameter (pp = 1), at ZeRO-0 or
  // sharded: the smaller of the two, so that it bounds every ZeRO stage.
  double optimizer_bound(const Base& b) {
    const double params = params_.total / b.tp / b.replicas();
    const auto& d = *devices_[b.rank_pool.front()];
    return cost::compute_time_bound(
               cost::optimizer_step(params, s_.training.optimizer, s_.training.precision), d,
               s_.training.precision)
        .value();
  }

  // objective_per_second for a base configuration.
  double objective_scale(const Base& b) const {
    std::vector<const PoolSpec*> pools;
    for (int pool : b.rank_pool) pools.push_back(&s_.cluster.pools[pool]);
    return objective_per_second(s_, pools, static_cast<long long>(b.dp) * b.tp * b.cp);
  }

  // Whatever the partition, some pipeline rank holds at least 1/pp of the layers' parameters.
  bool states_can_fit(const Base& b, const Variant& v) const {
    const double per_rank = layer_parameters(b) / b.pp * (1 - 1e-9);
    auto states = cost::held_model_state_bytes(per_rank, b.replicas(), v.zero, s_.training.optimizer,
                                               s_.training.precision);
    const double device =
        (states.weights + states.gradients + (v.offload ? Bytes(0) : states.optimizer)).value();
    double largest_capacity = 0;
    for (int pool : b.rank_pool)
      largest_capacity = std::max(largest_capacity, devices_[pool]->memory.value());
    return device <= largest_capacity;
  }

  // ---- exact evaluation ----------------------------------------------------------------------------
  void evaluate(const Entry& e) {
    if (dominated(e)) return;
    const Base& b = bases_[e.base];
    const int microbatches = static_cast<int>(s_.training.global_batch / b.dp / b.mb);
    Plan plan;
    plan.dp = b.dp, plan.tp = b.tp, plan.pp = b.pp, plan.cp = b.cp, plan.ep = b.ep;
    plan.order = orders_[e.variant.order];
    plan.micro_batch = b.mb;
    plan.num_microbatches = microbatches;
    plan.schedule = b.schedule;
    plan.virtual_stages = b.v;
    plan.sequence_parallel = b.sp;
    plan.zero = e.variant.zero;
    plan.offload_optimizer = e.variant.offload;
    if (req_.offload_activations) plan.offload_activations = *req_.offload_activations;
    if (req_.compression)
      plan.compression = *req_.compression;
    else if (e.variant.topk)
      plan.compression = {CompressionKind::TopK, kSearchedTopkRatio, true, 0};
    if (req_.bucket_size) plan.bucket_size = *req_.bucket_size;
    plan.overlap_dp = req_.overlap_dp.value_or(true);
    plan.overlap_tp = req_.overlap_tp.value_or(false);
    plan.overlap_pp = req_.overlap_pp.value_or(true);
    plan.checkpoint_interval = s_.checkpoint.interval;
    const auto* ranges = &partitions_[e.partition];
    for (int c = 0; c < plan.chunks(); ++c)
      plan.stages.push_back({(*ranges)[c].first, (*ranges)[c].second,
                             s_.cluster.pools[b.rank_pool[c % b.pp]].name, b.recompute});
    if (auto problems = verify(plan, s_.model, s_.cluster, s_.training); !problems.empty()) {
      reject(problems.front());
      return;
    }
    ++result_.evaluated;
    // Without task names: nothing here reads them (the report neither).
    const Program program = lower(plan, s_.model, s_.cluster, s_.training, {.task_names = false});
    auto timings = schedule_tasks(program, s_.cluster, s_.training);
    double end = 0;
    for (const auto& role_timings : timings)
      for (const TaskTiming& t : role_timings) end = std::max(end, t.end_s);
    // The brute force (tests) checks every bound against the exact figure it bounds.
    if (o_.exhaustive && objective_value(s_, plan, end) < e.bound * (1 - 1e-12))
      throw std::logic_error("search: the lower bound of a plan is above its evaluated objective:\n" +
                             to_yaml(plan));
    // Most candidates cannot enter the top list: their time and memory come from the schedule alone,
    // and only the others are summarized into a report (the same figures, by the same functions).
    if (!best_.empty()) {
      // Past the cutoff the candidate ranks after the N-th best (see cutoff()), and so do its twins
      // (no faster, and the cutoff only falls): whether it fits does not matter.
      if (cutoff() > 0 && objective_value(s_, plan, end) > cutoff()) {
        cannot_win_.insert(twin_key(e, e.variant));
        return;
      }
      bool fits = true;
      for (size_t r = 0; r < program.roles.size(); ++r) {
        const Role& role = program.roles[r];
        const PoolSpec& pool = s_.cluster.pools[b.rank_pool[r]];
        fits = fits &&
               peak_memory(role, activations_peak(role, timings[r])) <= s_.cluster.device_of(pool).memory;
      }
      // Out of memory: with a plan in the list, the closest miss is never reported.
      if (!fits) {
        reject("out of memory");
        return;
      }
    }
    const Evaluation ev = summarize_timings(program, s_.cluster, s_.training, std::move(timings));
    Report report = make_report(s_.name, program, ev);
    if (!report.metrics.fits) {
      reject("out of memory");
      const double ratio = report.metrics.peak_memory_gib / report.metrics.memory_capacity_gib;
      if (!closest_ || ratio < closest_ratio_) closest_ = report, closest_ratio_ = ratio;
      return;
    }
    cannot_win_.insert(twin_key(e, e.variant));
    Candidate cand{plan, std::move(report), 0};
    cand.objective = objective_value(s_, plan, cand.report);
    best_.push_back(std::move(cand));
    std::stable_sort(best_.begin(), best_.end(), [](auto& x, auto& y) { return ranking(x) < ranking(y); });
    if (static_cast<int>(best_.size()) > o_.top) best_.pop_back();
  }

  using TwinKey = std::tuple<size_t, int, bool, bool, int, int>;
  static TwinKey twin_key(const Entry& e, const Variant& v) {
    return {e.base, v.zero, v.offload, v.topk, v.order, e.partition};
  }

  // A candidate whose simpler twin on the same partition was evaluated and fits cannot beat it (nor
  // can it enter the top list when that twin's time was past the cutoff): with
  // offload its Program has the twin's tasks plus copies the step waits for (list scheduling only gets
  // later when tasks are added), and ZeRO-2 runs ZeRO-1's very tasks (it only holds fewer gradients),
  // a tie that the simpler plan wins. The twin's bound is never above this one's, so it came first.
  bool dominated(const Entry& e) {
    if (o_.exhaustive) return false;
    const Variant& v = e.variant;
    const bool by_offload = v.offload && cannot_win_.count(twin_key(e, {v.zero, false, v.topk, v.order}));
    const bool by_zero1 = v.zero == 2 && cannot_win_.count(twin_key(e, {1, v.offload, v.topk, v.order}));
    if (!by_offload && !by_zero1) return false;
    ++result_.dominated;
    return true;
  }

  // Among plans within 0.1% of each other (below the model's precision) the simpler wins: no compression, no
  // offload, ZeRO-1 before 0, 2 and 3, the default rank order.
  static std::tuple<double, double, double> ranking(const Candidate& c) {
    const Plan& p = c.plan;
    const double zero_cost[] = {0.5, 0, 1, 2};
    const double complexity = (p.compression.kind == CompressionKind::TopK ? 4 : 0) +
                              (p.offload_optimizer ? 3 : 0) + zero_cost[p.zero] +
                              (p.order == Plan().order ? 0 : 0.5);
    return {std::floor(std::log(std::max(c.objective, 1e-300)) * 1e3), complexity, c.objective};
  }

  // One micro-batch's forward, and backward + recompute, through layers [begin, end) of chunk c, with
  // the embedding on chunk 0 and the head on the last chunk (additive lower bounds).
  static double chunk_forward(const Base& b, int c, int begin, int end) {
    const int pool = b.rank_pool[c % b.pp];
    const auto& f = b.costs->forward[pool];
    return f[end] - f[begin] + (c == 0 ? b.costs->ends[pool].embedding_forward : 0) +
           (c == b.pp * b.v - 1 ? b.costs->ends[pool].head_forward : 0);
  }
  static double chunk_backward(const Base& b, int c, int begin, int end) {
    const int pool = b.rank_pool[c % b.pp];
    const auto& bw = b.costs->backward[pool];
    return bw[end] - bw[begin] + (c == 0 ? b.costs->ends[pool].embedding_backward : 0) +
           (c == b.pp * b.v - 1 ? b.costs->ends[pool].head_backward : 0);
  }
  // For bounds, one micro-batch's forward and backward through a chunk either as the chain of passes
  // with their collectives (recompute as in LayerTimes::chain_recompute) or on the compute stream alone.
  static double chunk_bound_forward(const Base& b, bool alone, int c, int begin, int end) {
    if (!alone) return chunk_forward(b, c, begin, end);
    const int pool = b.rank_pool[c % b.pp];
    const auto& f = b.costs->compute_forward[pool];
    return f[end] - f[begin] + (c == 0 ? b.costs->ends[pool].embedding_forward : 0) +
           (c == b.pp * b.v - 1 ? b.costs->ends[pool].head_forward : 0);
  }
  static double chunk_bound_backward(const Base& b, bool alone, int c, int begin, int end) {
    const int pool = b.rank_pool[c % b.pp];
    const auto& bw = alone ? b.costs->compute_backward[pool] : b.costs->chain_backward[pool];
    return bw[end] - bw[begin] + (c == 0 ? b.costs->ends[pool].embedding_backward : 0) +
           (c == b.pp * b.v - 1 ? b.costs->ends[pool].head_backward : 0);
  }
  static double chunk_time(const Base& b, int c, int begin, int end) {
    return chunk_forward(b, c, begin, end) + chunk_backward(b, c, begin, end);
  }

  // What chunk_params and chunk_bytes need beyond the base's tables, worked out once per partition.
  struct ChunkMemory {
    double embedding = 0;      // parameters of the embedding (or an untied head) on one rank
    bool untied_last = false;  // the last chunk holds the head's own copy of the embedding
  };
  ChunkMemory chunk_memory(const Base& b) const {
    return {double(s_.model.vocab) * s_.model.hidden / b.tp, !s_.model.tied_embeddings || b.pp > 1};
  }

  // Parameters of layers [begin, end) of chunk c on one rank, as lowering counts them.
  static double chunk_params(const Base& b, const ChunkMemory& memory, int c, int begin, int end) {
    double params = b.costs->params[end] - b.costs->params[begin];
    if (c == 0) params += memory.embedding;
    if (c == b.pp * b.v - 1 && memory.untied_last) params += memory.embedding;
    return params;
  }
  double chunk_params(const Base& b, int c, int begin, int end) const {
    return chunk_params(b, chunk_memory(b), c, begin, end);
  }

  // Device bytes of model states per parameter a rank holds (states are linear in the parameters).
  double state_bytes_per_parameter(const Base& b, const Variant& v) const {
    const auto st =
        cost::held_model_state_bytes(1, b.replicas(), v.zero, s_.training.optimizer, s_.training.precision);
    return (st.weights + st.gradients + (v.offload ? Bytes(0) : st.optimizer)).value();
  }

  // Device bytes of chunk c of a rank: its model states (`per_parameter`, state_bytes_per_parameter)
  // plus the activations it holds at its peak (`in_flight` micro-batches of them).
  static double chunk_bytes(const Base& b, double per_parameter, const ChunkMemory& memory, int c, int begin,
                            int end, double in_flight) {
    const double states = per_parameter * chunk_params(b, memory, c, begin, end);
    double bytes = b.costs->activations[end] - b.costs->activations[begin];
    if (c == 0) bytes += b.costs->embedding_activations;
    if (c == b.pp * b.v - 1) bytes += b.costs->head_activations;
    return states + bytes * in_flight;
  }

  // A rank's memory for states and kept activations: its device's, less what recomputing a layer
  // holds while the backward runs (the least any layer holds, so that no partition that fits is lost).
  double capacity(const Base& b, int rank) const {
    return devices_[b.rank_pool[rank]]->memory.value() - b.costs->recompute_working;
  }

  bool partition_fits(const Base& b, const Variant& v, const std::vector<std::pair<int, int>>& ranges,
                      int microbatches) const {
    std::vector<double> used(b.pp, 0);
    const ChunkMemory memory = chunk_memory(b);
    const double per_parameter = state_bytes_per_parameter(b, v);
    for (int c = 0; c < b.pp * b.v; ++c)
      used[c % b.pp] += chunk_bytes(b, per_parameter, memory, c, ranges[c].first, ranges[c].second,
                                    in_flight(b, c % b.pp, microbatches));
    for (int r = 0; r < b.pp; ++r)
      if (used[r] > capacity(b, r)) return false;
    return true;
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
  // - with ZeRO-3 the DP stream also gathers every chunk's parameters twice per micro-batch.
  // - the critical path through its last passes (last_microbatch_terms).
  // step_r: the optimizer step, with offload the copy of the states in before it and out after it,
  // and with ZeRO 1/2 the all-gather of the updated parameters after it.
  double partition_bound(Base& b, const Variant& v, int partition) {
    auto terms = b.partition_terms.find(partition);
    if (terms == b.partition_terms.end())
      terms = b.partition_terms.emplace(partition, partition_terms(b, partitions_[partition])).first;
    const auto [steps, gradients, gathers, dp_tails] = rank_tails(b, v, partitions_[partition]);
    double bound = 0;
    for (int r = 0; r < b.pp; ++r) bound = std::max(bound, gathers[r] + gradients[r] + steps[r]);
    for (const PartitionTerms::Costing& t : terms->second.costings)
      for (int r = 0; r < b.pp; ++r) {
        bound = std::max(bound, t.load[r] + std::max(t.prefix[r], steps[r]));
        bound = std::max(bound, t.before_buckets[r] + gradients[r] + steps[r]);
        bound = std::max(bound, t.to_first_step[r] + steps[0]);
        bound = std::max(bound, t.to_own_step[r] + steps[r]);
        if (&t == &terms->second.costings[1] && b.replicas() > 1)
          bound = std::max(bound, t.to_dp_tail[r] + dp_tails[r] + steps[r]);
      }
    return bound;
  }

  PartitionTerms partition_terms(const Base& b, const std::vector<std::pair<int, int>>& ranges) const {
    const int chunks = b.pp * b.v;
    const int m = static_cast<int>(s_.training.global_batch / b.dp / b.mb);
    PartitionTerms out;
    std::vector<double> forward(chunks), backward(chunks), forward_prefixes(b.pp);
    for (bool alone : {false, true}) {
      PartitionTerms::Costing& t = out.costings[alone ? 1 : 0];
      t.load.assign(b.pp, 0);
      t.prefix.assign(b.pp, 0);
      t.before_buckets.assign(b.pp, 0);
      for (int c = 0; c < chunks; ++c) {
        const int r = c % b.pp;
        forward[c] = chunk_bound_forward(b, alone, c, ranges[c].first, ranges[c].second);
        backward[c] = chunk_bound_backward(b, alone, c, ranges[c].first, ranges[c].second);
        t.load[r] += forward[c] + backward[c];
        const auto& passes = b.counts->before_buckets[r][c / b.pp];
        t.before_buckets[r] += passes[0] * forward[c] + passes[1] * backward[c];
      }
      double prefix = 0, forward_prefix = 0;
      for (int r = 0; r < b.pp; ++r) {
        t.load[r] *= m;
        t.prefix[r] = prefix;
        t.before_buckets[r] = forward_prefix + t.before_buckets[r];
        forward_prefixes[r] = forward_prefix;
        prefix += forward[r] + backward[r];
        forward_prefix += forward[r];
      }
      last_microbatch_terms(b, forward, backward, forward_prefixes, t);
    }
    return out;
  }

  // Per pipeline rank, what does not depend on the passes' times (see partition_bound): the step with
  // what follows it, the gradient collectives, ZeRO-3's gathers and the DP tail.
  struct RankTails {
    std::vector<double> steps, gradients, gathers, dp_tails;
  };
  RankTails rank_tails(const Base& b, const Variant& v, const std::vector<std::pair<int, int>>& ranges) {
    const int chunks = b.pp * b.v;
    const int m = static_cast<int>(s_.training.global_batch / b.dp / b.mb);
    std::vector<double> params(b.pp, 0);
    for (int c = 0; c < chunks; ++c)
      params[c % b.pp] += chunk_params(b, c, ranges[c].first, ranges[c].second);
    RankTails out{std::vector<double>(b.pp, 0), std::vector<double>(b.pp, 0), std::vector<double>(b.pp, 0),
                  std::vector<double>(b.pp, 0)};
    auto& [steps, gradients, gathers, dp_tails] = out;
    // Ranks alike (pool, parameters, the elements of their DP tail) have the same tails: most of them.
    std::vector<std::tuple<int, double, double, int>> worked_out;
    for (int r = 0; r < b.pp; ++r) {
      const double first_chunk = chunk_params(b, r, ranges[r].first, ranges[r].second);
      const double tail_elements = std::max(0.0, params[r] - first_chunk) +
                                   last_bucket_elements(b, r, ranges[r].first, ranges[r].second);
      const auto alike = std::find_if(worked_out.begin(), worked_out.end(), [&](const auto& w) {
        return std::get<0>(w) == b.rank_pool[r] && std::get<1>(w) == params[r] &&
               std::get<2>(w) == tail_elements;
      });
      if (alike != worked_out.end()) {
        const int q = std::get<3>(*alike);
        steps[r] = steps[q], gradients[r] = gradients[q], gathers[r] = gathers[q], dp_tails[r] = dp_tails[q];
        continue;
      }
      worked_out.push_back({b.rank_pool[r], params[r], tail_elements, r});
      const StateCosts costs = state_costs(b, v, b.rank_pool[r], params[r]);
      steps[r] = costs.step;
      gradients[r] = costs.gradients;
      // ZeRO-3 gathers each chunk's parameters before its every forward and backward, on the DP stream.
      gathers[r] = 2.0 * m * costs.gather;
      // The DP stream runs the buckets in issue order: the rank's first chunk's (bottom layers last),
      // then its other chunks'. So the first chunk's last bucket, ready only when the rank's last
      // backward of that chunk ends, and every bucket of its other chunks still run after that
      // backward (concavity again: together at least one collective of their elements). The factor
      // absorbs the rounding of the prefix sums.
      if (b.replicas() > 1)
        dp_tails[r] = gradient_collective(b, v, b.rank_pool[r], tail_elements * (1 - 1e-9));
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
  static void last_microbatch_terms(const Base& b, const std::vector<double>& forward,
                                    const std::vector<double>& backward,
                                    const std::vector<double>& forward_prefixes,
                                    PartitionTerms::Costing& out) {
    const int chunks = b.pp * b.v;
    // forward_after[c]: forwards of chunks > c; backward_below[c]: backwards of chunks < c.
    std::vector<double> forward_after(chunks, 0), backward_below(chunks, 0);
    for (int c = chunks - 2; c >= 0; --c) forward_after[c] = forward_after[c + 1] + forward[c + 1];
    for (int c = 1; c < chunks; ++c) backward_below[c] = backward_below[c - 1] + backward[c - 1];
    const double all_backward = backward_below[chunks - 1] + backward[chunks - 1];
    out.to_first_step.assign(b.pp, 0);
    out.to_own_step.assign(b.pp, 0);
    out.to_dp_tail.assign(b.pp, 0);
    for (int r = 0; r < b.pp; ++r) {
      auto run = [&](const PassCounts& n) {
        double t = 0;
        for (int j = 0; j < b.v; ++j) t += n[j][0] * forward[j * b.pp + r] + n[j][1] * backward[j * b.pp + r];
        return t;
      };
      double own = 0, first = 0;
      for (int j = 0; j < b.v; ++j) {
        const int c = j * b.pp + r;
        const auto& through = b.counts->through_last[r][j];
        first = std::max(first, forward_prefixes[r] + run(through[0]) + forward_after[c] + all_backward);
        const double until_backward = run(through[1]);
        first = std::max(first, forward_prefixes[r] + until_backward + backward_below[c]);
        if (j == 0) out.to_dp_tail[r] = forward_prefixes[r] + until_backward;
        own = std::max(own, until_backward);
      }
      out.to_first_step[r] = first;
      out.to_own_step[r] = forward_prefixes[r] + own;
    }
  }

  // Elements of the DP bucket that lowering closes last in chunk c (the one holding its first layer),
  // walked from the chunk's last layer as lowering walks it (learned positions left out: a bound).
  double last_bucket_elements(const Base& b, int c, int begin, int end) const {
    const double bucket_elements = req_.bucket_size.value_or(Plan().bucket_size).value() / elem_;
    const ChunkMemory memory = chunk_memory(b);
    double filled = c == b.pp * b.v - 1 && memory.untied_last ? memory.embedding : 0;
    for (int l = end - 1; l >= begin; --l) {
      const double layer =
          s_.model.is_moe_layer(l) ? moe_layer_parameters(params_, b.ep) : params_.per_dense_layer;
      filled += layer / b.tp;
      if (l == begin) return filled + (c == 0 ? memory.embedding : 0);
      if (filled >= bucket_elements) filled = 0;
    }
    return 0;
  }

  const cost::GroupPlacement& dp_placement(const Base& b, int pool, int order) {
    return placement(b, GroupKind::Dp, pool, order);
  }
  const cost::GroupPlacement& placement(const Base& b, GroupKind kind, int pool, int order) {
    const auto key = std::tuple{kind, b.tp, b.cp, b.dp, b.pp, b.ep, pool, order};
    auto it = placement_.find(key);
    if (it == placement_.end()) {
      Plan layout;
      layout.tp = b.tp, layout.cp = b.cp, layout.dp = b.dp, layout.pp = b.pp, layout.ep = b.ep;
      layout.order = orders_[order];
      it = placement_.emplace(key, group_placement(layout, kind, s_.cluster.pools[pool], s_.cluster)).first;
    }
    return it->second;
  }

  // The layer partition minimizing the slowest chunk; with a variant, subject to its memory.
  std::optional<std::vector<std::pair<int, int>>> partition(const Base& b, const Variant* v,
                                                            int microbatches) {
    ChunkLayout layout{s_.model.layers, b.pp * b.v, b.pp, {}};
    auto time = [&b](int c, int begin, int end) { return chunk_time(b, c, begin, end); };
    if (!v) {
      layout.capacity.assign(b.pp, 1.0);
      return partition_layers(
          layout, time, [](int, int, int) { return 0.0; }, partition_scratch_);
    }
    for (int r = 0; r < b.pp; ++r) layout.capacity.push_back(capacity(b, r));
    std::vector<double> in_flight_per_rank(b.pp);
    for (int r = 0; r < b.pp; ++r) in_flight_per_rank[r] = in_flight(b, r, microbatches);
    const ChunkMemory memory = chunk_memory(b);
    const double per_parameter = state_bytes_per_parameter(b, *v);
    auto bytes = [&](int c, int begin, int end) {
      return chunk_bytes(b, per_parameter, memory, c, begin, end, in_flight_per_rank[c % b.pp]);
    };
    // A quick proof that none fits: no chunk holds more layers than fit in its share of its rank's
    // memory at the fewest bytes a layer can take, and if those counts do not add up to the layers, no
    // partition fits (the DP would visit every cell to find that out).
    double fewest_params = std::numeric_limits<double>::infinity(), fewest_activations = fewest_params;
    for (int l = 0; l < s_.model.layers; ++l) {
      fewest_params = std::min(fewest_params, b.costs->params[l + 1] - b.costs->params[l]);
      fewest_activations =
          std::min(fewest_activations, b.costs->activations[l + 1] - b.costs->activations[l]);
    }
    double most_layers = 0;
    for (int c = 0; c < b.pp * b.v; ++c) {
      const double share = layout.capacity[c % b.pp] / b.v - bytes(c, 0, 0);
      const double layer = per_parameter * fewest_params + fewest_activations * in_flight_per_rank[c % b.pp];
      most_layers += std::floor(share / layer * (1 + 1e-9));
    }
    if (most_layers < s_.model.layers) return std::nullopt;
    return partition_layers(layout, time, bytes, partition_scratch_);
  }

  // Micro-batches whose activations a chunk of pipeline rank r holds at once (per chunk).
  static double in_flight(const Base& b, int r, int microbatches) {
    if (b.schedule == Schedule::GPipe) return microbatches;
    if (b.schedule == Schedule::OneFOneB) return std::min(b.pp - r, microbatches);
    const double steps = std::min(microbatches * b.v, (b.pp - r - 1) * 2 + (b.v - 1) * b.pp + 1);
    return std::ceil(steps / b.v);
  }

  const ScenarioSpec& s_;
  const SearchOptions o_;
  const PlanRequest& req_;
  double elem_ = 2;
  std::vector<const DeviceSpec*> devices_;  // by pool (device_of looks them up by name)
  ParameterCount params_;
  int moe_layers_ = 0;
  const std::vector<std::string> orders_;  // rank orders the search tries (orders())
  std::deque<Base> bases_;                 // a deque: a Base is large, and never moved once made
  std::vector<Entry> queue_;
  std::vector<std::vector<std::pair<int, int>>> partitions_;
  PartitionScratch partition_scratch_;
  std::map<ComputeKey, LayerTimes> cache_;
  std::map<std::tuple<int, int, int, int, bool, Recompute, unsigned>, CostTable> cost_tables_;
  using TimeKey = std::tuple<int, int, int, int, int, int, bool, Recompute, std::vector<int>>;
  std::map<TimeKey, int> time_optimal_;  // index into partitions_
  std::map<std::tuple<Schedule, int, int, int>, PipelineCounts> pipeline_counts_;
  std::map<std::tuple<Schedule, int, int, int>, PassGraph> pass_graphs_;
  std::map<std::tuple<const LayerTimes*, int, int>, double> pipeline_bounds_;  // by (times, pp, m)
  std::map<std::tuple<int, int, int, int, int>, VariantCosts> variant_costs_;  // by (tp, cp, dp, pp, ep)
  // Where a pipeline rank's groups sit, by (group, tp, cp, dp, pp, ep, pool, rank order).
  std::map<std::tuple<GroupKind, int, int, int, int, int, int, int>, cost::GroupPlacement> placement_;
  std::vector<Candidate> best_;
  // Candidates evaluated that fit, or whose time is past the cutoff: their twins cannot win.
  std::set<TwinKey> cannot_win_;
  std::map<std::tuple<int, int, int, int, int>, bool> same_placements_;  // by (tp, cp, dp, pp, ep)
  std::optional<Report> closest_;
  double closest_ratio_ = 0;
  SearchResult result_;
};

}  // namespace

SearchResult search_plans(const ScenarioSpec& scenario, const SearchOptions& options) {
  return Search(scenario, options).run();
}

}  // namespace paratwin
