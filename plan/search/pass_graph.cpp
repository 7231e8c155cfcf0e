// The pass graph of a pipeline schedule, and the lower bounds of when each pipeline rank's passes
// end that follow a partition through it.
#include "plan/search/pass_graph.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "plan/cost/tp_overlap.hpp"
#include "plan/ir/schedule.hpp"

namespace paratwin::search {

using cost::CollectiveKind;

PassGraphBounds::PassGraphBounds(const SearchContext& context, LayerCosts& costs)
    : ctx_(context), costs_(costs) {}

PassGraph pass_graph(const ParallelLayout& layout, int microbatches) {
  const int chunks = layout.pp * layout.v, m = microbatches;
  std::vector<std::vector<PipelineStep>> orders(layout.pp);
  for (int r = 0; r < layout.pp; ++r)
    orders[r] = pass_order(layout.schedule, layout.pp, layout.v, m, r, layout.overlap_ep);
  auto key = [&](bool forward, int mb, int chunk) {
    return (static_cast<size_t>(forward ? 0 : 1) * chunks + chunk) * m + mb;
  };
  // Ranks run ahead until a pass's input is not placed yet; the one rank waiting for a pass (its
  // input feeds one pass only) resumes once it is placed.
  std::vector<int> index(static_cast<size_t>(2) * chunks * m, -1), waiting(index.size(), -1);
  PassGraph g;
  g.nodes.reserve(index.size());
  g.last.assign(layout.pp, -1);
  g.first_chunk_final.assign(layout.pp, -1);
  std::vector<size_t> next(layout.pp, 0);
  std::vector<int> ready(layout.pp);
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

PipelineCounts pipeline_counts(const ParallelLayout& layout, int microbatches) {
  PipelineCounts out;
  out.before_buckets.assign(layout.pp, PassCounts(layout.v, {0, 0}));
  out.before_backward.assign(layout.pp, PassCounts(layout.v, {0, 0}));
  out.through_last.assign(layout.pp, std::vector<std::array<PassCounts, 2>>(layout.v));
  for (int r = 0; r < layout.pp; ++r) {
    const auto order = pass_order(layout.schedule, layout.pp, layout.v, microbatches, r, layout.overlap_ep);
    std::vector<std::array<size_t, 2>> last(layout.v, {0, 0});  // index of the last pass per (j, d)
    for (size_t k = 0; k < order.size(); ++k) last[order[k].chunk / layout.pp][order[k].forward ? 0 : 1] = k;
    PassCounts running(layout.v, {0, 0});
    bool bucket_ready = false, backward_seen = false;
    for (size_t k = 0; k < order.size(); ++k) {
      const int j = order[k].chunk / layout.pp, d = order[k].forward ? 0 : 1;
      if (d == 1 && !backward_seen) {
        out.before_backward[r] = running;
        backward_seen = true;
      }
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

const PipelineCounts& PassGraphBounds::counts(const ParallelLayout& layout, int microbatches) {
  const auto order_key = std::tuple{layout.schedule, layout.pp, layout.v, microbatches, layout.overlap_ep};
  auto counts = counts_.find(order_key);
  if (counts == counts_.end())
    counts = counts_.emplace(order_key, pipeline_counts(layout, microbatches)).first;
  return counts->second;
}

// Transfers and ZeRO 3's gathers depend on where the groups sit (the rank order).
const PassBounds& PassGraphBounds::bounds(ParallelLayout& layout, int microbatches, int partition,
                                          const Ranges& ranges, int order, bool zero3) {
  const std::tuple key{partition, order, zero3};
  auto bounds = layout.pass_bounds.find(key);
  if (bounds == layout.pass_bounds.end()) {
    const auto order_key = std::tuple{layout.schedule, layout.pp, layout.v, microbatches, layout.overlap_ep};
    auto graph = graphs_.find(order_key);
    if (graph == graphs_.end()) graph = graphs_.emplace(order_key, pass_graph(layout, microbatches)).first;
    std::vector<double> gathers;
    for (int c = 0; zero3 && c < layout.pp * layout.v; ++c) {
      // A pass waits for its first unit's gather (one layer's; the rest are prefetched beside its
      // compute): at least the smallest unit's dense part over the DP group (an MoE unit's experts
      // follow over their replicas, or stay where they have one holder).
      const int pool = layout.rank_pool[c % layout.pp];
      double params = std::numeric_limits<double>::infinity();
      const std::vector<double>& prefix = layout.costs->params;  // layers only: embedding and head left out
      const std::vector<double>& experts = layout.costs->experts;
      for (int l = ranges[c].first; l < ranges[c].second; ++l)
        params = std::min(params, prefix[l + 1] - prefix[l] - (experts[l + 1] - experts[l]));
      const double bytes = ranges[c].second > ranges[c].first ? params * ctx_.gather_elem : 0;
      gathers.push_back(cost::collective_time(CollectiveKind::AllGather, Bytes(bytes),
                                              costs_.dp_placement(layout, pool, order),
                                              ctx_.s.cluster.pools[pool], ctx_.s.cluster)
                            .time.value());
    }
    bounds =
        layout.pass_bounds.emplace(key, pass_bounds(layout, graph->second, ranges, order, gathers)).first;
  }
  return bounds->second;
}

ChunkPasses PassGraphBounds::chunk_passes(const ParallelLayout& layout, int c, int begin, int end,
                                          const LayerComm& comm) {
  const int pool = layout.rank_pool[c % layout.pp];
  const auto& x = layout.costs->passes[pool];
  const bool first = c == 0, last = c == layout.pp * layout.v - 1;
  const LayerTimes& ends = layout.costs->ends[pool];
  // The layers' TP collectives (tp_layer_collectives), one more on the first chunk for the
  // vocabulary-parallel embedding.
  const int layers = end - begin, moe = x[end].moe_layers - x[begin].moe_layers;
  const double tp = tp_layer_collectives(layers, moe, layout.folded) + (first ? 1 : 0);
  const double forward_comm = tp * comm.tp + moe * comm.ep + layers * comm.cp_forward;
  return {chunk_bound_forward(layout, true, c, begin, end),
          forward_comm,
          x[end].backward_pure - x[begin].backward_pure + (first ? ends.embedding_backward : 0) +
              (last ? ends.head_backward : 0),
          tp * comm.tp_backward + moe * comm.ep + layers * comm.cp_backward,
          x[end].recompute_compute - x[begin].recompute_compute,
          layout.recompute == Recompute::Full ? forward_comm : 0};
}

// Lower bounds of when every pass's compute ends and when its collectives end, pass by pass in the
// graph's order, as lowering orders them: a pass waits for its input (a send waits for its pass's
// collectives; a receive ends with its send, and each rank's sends and receives run in issue order
// on their stream) and for the rank's previous pass and its collectives; selective and op recompute wait
// for the previous compute alone, so it can run beside those collectives; full recompute is a forward of its
// own before the backward; ZeRO 3's gather starts after the previous compute, and the pass waits for it; with
// TP overlap the collectives start with the compute. The DP and copy streams are left out: they only delay.
// A rank's first chunk's last DP bucket is ready when that chunk's last backward's compute ends. `gathers`:
// ZeRO 3's gather time per chunk, or empty.
PassBounds PassGraphBounds::pass_bounds(const ParallelLayout& layout, const PassGraph& g,
                                        const Ranges& ranges, int order, const std::vector<double>& gathers) {
  const int chunks = layout.pp * layout.v;
  std::vector<ChunkPasses> passes(chunks);
  std::map<int, LayerComm> comm;  // by pool
  for (int pool : layout.rank_pool)
    if (!comm.count(pool))
      comm[pool] = costs_.comm(
          layout, [&](GroupKind group, int) { return costs_.placement(layout, group, pool, order); },
          ctx_.s.cluster.pools[pool]);
  const long long stride = pp_stride(layout, ctx_.orders[order]);  // ranks between pipeline neighbours
  for (int c = 0; c < chunks; ++c) {
    passes[c] =
        chunk_passes(layout, c, ranges[c].first, ranges[c].second, comm[layout.rank_pool[c % layout.pp]]);
    // With recompute_every, only some layers repeat their collectives: none are counted.
    if (ctx_.req.recompute_every.value_or(1) > 1) passes[c].recompute_comm = 0;
    if (!gathers.empty()) passes[c].gather = gathers[c];
    if (c + 1 < chunks) passes[c].forward_send = transfer_time(layout, stride, c, c + 1);
    if (c > 0) passes[c].backward_send = transfer_time(layout, stride, c, c - 1);
  }
  // TP overlap hides only what it decomposes: the TP collectives of sequence parallelism (lowering runs
  // the CP and EP ones after the compute too, so the maximum stays below).
  const bool overlap =
      ctx_.req.overlap_tp.value_or(false) && cost::tp_overlap_decomposes(layout.tp, layout.sp);
  std::vector<double> compute_end(g.nodes.size()), done(g.nodes.size()), sent(g.nodes.size());
  std::vector<double> pp_free(layout.pp, 0);  // the rank's send-and-receive stream
  auto run = [overlap](double start, double compute, double comm, double& compute_end, double& done) {
    compute_end = start + compute;
    done = overlap ? std::max(compute_end, start + comm) : compute_end + comm;
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const PassGraph::Node& n = g.nodes[i];
    const ChunkPasses& k = passes[n.chunk];
    const double previous_compute = n.previous >= 0 ? compute_end[n.previous] : 0;
    const int r = n.chunk % layout.pp;
    double ready = 0;
    if (n.input >= 0 && n.input != n.own_forward) ready = pp_free[r] = std::max(pp_free[r], sent[n.input]);
    if (n.own_forward >= 0) ready = std::max(ready, done[n.own_forward]);
    if (k.gather > 0) ready = std::max(ready, previous_compute + k.gather);
    double start = std::max(n.previous >= 0 ? done[n.previous] : 0, ready);
    if (n.forward) {
      run(start, k.forward, k.forward_comm, compute_end[i], done[i]);
    } else {
      if (layout.recompute == Recompute::Selective || layout.recompute == Recompute::Op) {
        start = std::max(start, std::max(previous_compute, ready) + k.recompute);
      } else if (layout.recompute == Recompute::Full) {
        double recompute_end = 0, recompute_done = 0;
        run(start, k.recompute, k.recompute_comm, recompute_end, recompute_done);
        start = recompute_done;
      }
      run(start, k.backward, k.backward_comm, compute_end[i], done[i]);
    }
    const double send = n.forward ? k.forward_send : k.backward_send;
    // Combined 1F1B sends a steady-state pass's output on the Ep stream after its all-to-alls, apart
    // from the receives: at least after the pass's compute.
    if (send >= 0 && layout.overlap_ep)
      sent[i] = compute_end[i] + send;
    else if (send >= 0)
      sent[i] = pp_free[r] = std::max(pp_free[r], done[i]) + send;
  }
  PassBounds out{std::vector<double>(layout.pp), std::vector<double>(layout.pp)};
  for (int r = 0; r < layout.pp; ++r) {
    out.last_end[r] = done[g.last[r]];
    out.bucket_ready[r] = compute_end[g.first_chunk_final[r]];
  }
  return out;
}

// A micro-batch's activations (or their gradients) sent from chunk `from` to chunk `to`, as lowering
// costs the send.
double PassGraphBounds::transfer_time(const ParallelLayout& layout, long long pp_stride, int from,
                                      int to) const {
  const int sender = from % layout.pp, receiver = to % layout.pp;
  if (sender == receiver) return 0;
  const PoolSpec& pool = ctx_.s.cluster.pools[layout.rank_pool[sender]];
  const bool same_node = pp_stride * std::abs(receiver - sender) < pool.gpus_per_node &&
                         layout.rank_pool[receiver] == layout.rank_pool[sender];
  double tokens = double(layout.mb) * ctx_.s.training.seq_len / layout.cp;
  if (layout.sp) tokens /= layout.tp;
  return cost::p2p_time(Bytes(tokens * ctx_.s.model.hidden * ctx_.elem), same_node, pool, ctx_.s.cluster)
      .value();
}

}  // namespace paratwin::search
