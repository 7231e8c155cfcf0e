// A parallel layout as the optimizer searches it -- degrees, micro-batch, schedule, recompute, sequence
// parallelism and the pool of each pipeline rank -- with its variants (ZeRO, offload, compression,
// rank order), the tables and bounds the search works out for it, and the per-chunk figures read off
// those tables. The figures are inline: the partition DP asks for them hundreds of millions of times.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "plan/ir/buckets.hpp"
#include "plan/ir/plan.hpp"
#include "plan/topology/rank_order.hpp"

namespace paratwin::search {

// A layer partition: layers [first, second) of each chunk, chunk c on pipeline rank c % pp.
using Ranges = std::vector<std::pair<int, int>>;

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
  // For the pass graph (PassGraphBounds::bounds): a pass's compute and collectives apart, the backward's
  // compute without recompute, and the recompute's compute and collectives.
  double backward_pure = 0, moe_backward_pure = 0, recompute_compute = 0, moe_recompute_compute = 0;
  double embedding_forward = 0, embedding_backward = 0, head_forward = 0, head_backward = 0;
  double embedding() const { return embedding_forward + embedding_backward; }
  double head() const { return head_forward + head_backward; }
};

// One layer's model-parallel collectives per pass, as lowering issues them: TP (or SP), CP forward
// and backward, and on MoE layers EP's dispatch and combine (none under combined 1F1B). tp_backward:
// the backward's TP after its pass, without the input gradients' collectives where they run beside it
// (cost::tp_input_grads_beside_pass; a bound leaves those out).
struct LayerComm {
  double tp = 0, tp_backward = 0, cp_forward = 0, cp_backward = 0, ep = 0;
};

// Prefix sums over the layers of one layout's per-layer costs, so that a chunk's time, activations and
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
  std::vector<double> experts;   // [l]: of params[l], the experts' under EP
};

// How many forwards and backwards of each chunk of a pipeline rank its schedule runs before given
// points, shared by the layouts of one (schedule, pp, v, micro-batches). Counts: [j] = {forwards,
// backwards} of the rank's chunk j (chunk j x pp + rank).
using PassCounts = std::vector<std::array<int, 2>>;
struct PipelineCounts {
  // [r]: before the first backward that finishes a chunk's gradients (when the first bucket is ready).
  std::vector<PassCounts> before_buckets;
  // [r]: before the rank's first backward (its warm-up forwards).
  std::vector<PassCounts> before_backward;
  // [r][j][d]: up to and including the rank's last pass of its chunk j in direction d (0 forward,
  // 1 backward).
  std::vector<std::vector<std::array<PassCounts, 2>>> through_last;
};

// Per pipeline rank, lower bounds of when its last pass ends and when its first chunk's last DP bucket
// becomes ready, for one partition (PassGraphBounds::bounds).
struct PassBounds {
  std::vector<double> last_end, bucket_ready;
};

// The terms of Bounds::partition_bound that follow from the partition alone, per pipeline rank r, with the
// passes as a chain with their collectives ([0]) or on the compute stream alone ([1]): m load_r;
// prefix_r; forward prefix_r + the passes before the first bucket; through the rank's last
// passes (Bounds::last_microbatch_terms) to rank 0's step, to its own step and to its first chunk's DP tail;
// and to the start of its first backward (its warm-up forwards after forward prefix_r, and the first
// micro-batch's forward through every chunk and backward through the chunks after the rank's last).
struct PartitionTerms {
  // One of those paths through rank r's last passes: the rank's own passes on it (`own`) and the rest
  // (`rest`: the forward prefix before them, the passes of other ranks after them), without the step
  // it ends with: rank 0's (`to_own_step` false) or the rank's own.
  struct Path {
    double own, rest;
    bool to_own_step;
  };
  struct Costing {
    std::vector<double> load, prefix, before_buckets, to_first_step, to_own_step, to_dp_tail,
        to_first_backward;
    std::vector<std::vector<Path>> paths;  // per pipeline rank
  };
  std::array<Costing, 2> costings;
};

// One point of the search's space before its variants: the degrees, the micro-batch, the schedule
// with its virtual stages, recompute, sequence parallelism and the pool of each pipeline rank.
struct ParallelLayout {
  int tp, cp, ep, pp, dp, mb, v;
  Schedule schedule;
  Recompute recompute;
  bool sp;
  int replicate = 1;    // HSDP's replicas of a ZeRO 3 shard group (Plan::dp_replicate)
  bool folded = false;  // MoE parallel folding (Plan::expert_tp 1): EP over tp x cp x dp
  // Combined 1F1B (Plan::overlap_ep): EP all-to-alls beside the next pass. The request's, the same for
  // every layout of a search (SearchSpace::enumerate), so the cost tables' keys leave it out.
  bool overlap_ep = false;
  std::vector<int> rank_pool;  // pool index of each pipeline rank
  double free_bound = 0;       // valid for every partition; tightened when the layout is refined
  double scale = 1;            // objective per second of iteration time (Search::objective_scale)
  long first_candidate = 0;    // the sequence number of its first variant
  int gpus() const { return tp * cp * dp * pp; }  // the Program's world
  // The ranks that reduce each gradient: dp x cp, as the Program lowers them.
  int replicas() const { return dp * cp; }
  // The ranks that share ZeRO's blocks (Plan::zero_group): the replicas, a shard group's under HSDP.
  int shards() const { return replicas() / replicate; }
  int expert_tp() const { return folded ? 1 : tp; }
  // The ranks that hold each expert (plan.hpp's expert_replicas).
  int expert_replicas() const { return paratwin::expert_replicas(tp, expert_tp(), replicas(), ep); }
  // The plan's degrees and rank order: where its groups sit.
  Plan degrees(const std::string& order) const {
    Plan p;
    p.tp = tp, p.cp = cp, p.dp = dp, p.pp = pp, p.ep = ep, p.dp_replicate = replicate;
    p.expert_tp = folded ? 1 : 0;
    p.order = order;
    return p;
  }
  // Filled when the layout is refined: cost tables, its layer partitions (indices into the search's
  // list; -1: none fits) -- the time-optimal one, memory aside, and by the device bytes of model
  // states per parameter, that one where it fits, else the best that fits -- and, per pipeline rank
  // and chunk j, the forwards and backwards the rank runs before the first backward that finishes a
  // chunk's gradients (when the first DP bucket becomes ready).
  bool refined = false;
  const CostTable* costs = nullptr;  // shared by layouts alike in what the tables follow (LayerCosts::table)
  int time_optimal = -1;
  std::map<double, int> fitted{};
  std::map<int, PartitionTerms> partition_terms{};  // by partition (Bounds::partition_terms)
  const PipelineCounts* counts = nullptr;           // shared by layouts of one pipeline order
  // By (partition, rank order, ZeRO 3), once a candidate of it reaches the front.
  std::map<std::tuple<int, int, bool>, PassBounds> pass_bounds{};
};

// What a layout's candidates differ in beside it.
struct Variant {
  int zero;
  bool offload;
  bool topk;
  int order;  // index into SearchContext::orders (a plain value: the queue moves candidates a lot)
};

// One micro-batch's forward, and backward + recompute, through layers [begin, end) of chunk c, with
// the embedding on chunk 0 and the head on the last chunk (additive lower bounds).
inline double chunk_forward(const ParallelLayout& layout, int c, int begin, int end) {
  const int pool = layout.rank_pool[c % layout.pp];
  const auto& f = layout.costs->forward[pool];
  return f[end] - f[begin] + (c == 0 ? layout.costs->ends[pool].embedding_forward : 0) +
         (c == layout.pp * layout.v - 1 ? layout.costs->ends[pool].head_forward : 0);
}

inline double chunk_backward(const ParallelLayout& layout, int c, int begin, int end) {
  const int pool = layout.rank_pool[c % layout.pp];
  const auto& bw = layout.costs->backward[pool];
  return bw[end] - bw[begin] + (c == 0 ? layout.costs->ends[pool].embedding_backward : 0) +
         (c == layout.pp * layout.v - 1 ? layout.costs->ends[pool].head_backward : 0);
}

// For bounds, one micro-batch's forward and backward through a chunk either as the chain of passes
// with their collectives (recompute as in LayerTimes::chain_recompute) or on the compute stream alone.
inline double chunk_bound_forward(const ParallelLayout& layout, bool alone, int c, int begin, int end) {
  if (!alone) return chunk_forward(layout, c, begin, end);
  const int pool = layout.rank_pool[c % layout.pp];
  const auto& f = layout.costs->compute_forward[pool];
  return f[end] - f[begin] + (c == 0 ? layout.costs->ends[pool].embedding_forward : 0) +
         (c == layout.pp * layout.v - 1 ? layout.costs->ends[pool].head_forward : 0);
}

inline double chunk_bound_backward(const ParallelLayout& layout, bool alone, int c, int begin, int end) {
  const int pool = layout.rank_pool[c % layout.pp];
  const auto& bw = alone ? layout.costs->compute_backward[pool] : layout.costs->chain_backward[pool];
  return bw[end] - bw[begin] + (c == 0 ? layout.costs->ends[pool].embedding_backward : 0) +
         (c == layout.pp * layout.v - 1 ? layout.costs->ends[pool].head_backward : 0);
}

inline double chunk_time(const ParallelLayout& layout, int c, int begin, int end) {
  return chunk_forward(layout, c, begin, end) + chunk_backward(layout, c, begin, end);
}

// Whether a candidate's ZeRO 2 or 3 reduce-scatters its gradients every micro-batch, as lowering does
// (ir/buckets.hpp): its variant's top-k compression keeps the once-a-step exchange.
inline bool reduces_every_microbatch(const ParallelLayout& layout, const Variant& v) {
  return paratwin::reduces_every_microbatch(v.zero, layout.replicas(), v.topk);
}

// What chunk_params and chunk_bytes need beyond the layout's tables, worked out once per partition.
struct ChunkMemory {
  double embedding = 0;      // parameters of the embedding (or an untied head) on one rank
  bool untied_last = false;  // the last chunk holds the head's own copy of the embedding
};

// Parameters of layers [begin, end) of chunk c on one rank, as lowering counts them.
inline double chunk_params(const ParallelLayout& layout, const ChunkMemory& memory, int c, int begin,
                           int end) {
  double params = layout.costs->params[end] - layout.costs->params[begin];
  if (c == 0) params += memory.embedding;
  if (c == layout.pp * layout.v - 1 && memory.untied_last) params += memory.embedding;
  return params;
}

// Device bytes of chunk c of a rank: its model states (`per_parameter`, state_bytes_per_parameter)
// plus the activations it holds at its peak (`in_flight` micro-batches of them).
inline double chunk_bytes(const ParallelLayout& layout, double per_parameter, const ChunkMemory& memory,
                          int c, int begin, int end, double in_flight) {
  const double states = per_parameter * chunk_params(layout, memory, c, begin, end);
  double bytes = layout.costs->activations[end] - layout.costs->activations[begin];
  if (c == 0) bytes += layout.costs->embedding_activations;
  if (c == layout.pp * layout.v - 1) bytes += layout.costs->head_activations;
  return states + bytes * in_flight;
}

// Micro-batches whose activations a chunk of pipeline rank r holds at once (per chunk); combined 1F1B
// without pipelining (pass_order) runs a second forward before the first backward.
inline double in_flight(const ParallelLayout& layout, int r, int microbatches) {
  if (layout.schedule == Schedule::GPipe) return microbatches;
  if (layout.schedule == Schedule::OneFOneB)
    return std::min(layout.pp - r + (layout.overlap_ep && layout.pp == 1 ? 1 : 0), microbatches);
  const double steps =
      std::min(microbatches * layout.v, (layout.pp - r - 1) * 2 + (layout.v - 1) * layout.pp + 1);
  return std::ceil(steps / layout.v);
}

// Ranks between pipeline neighbours under rank order `order`.
inline long long pp_stride(const ParallelLayout& layout, const std::string& order) {
  return rank_strides(order, layout.tp, layout.cp, layout.dp, layout.pp).pp;
}

}  // namespace paratwin::search
