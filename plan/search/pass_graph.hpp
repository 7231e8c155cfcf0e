// Every pipeline rank's passes in its schedule's order as one graph, and the lower bounds that follow
// a candidate's partition through it: pass by pass as lowering issues them, each waiting for the
// rank's previous pass and its TP/CP/EP collectives and for its input; only the DP and copy streams'
// contention is left out.
#pragma once

#include <map>
#include <tuple>
#include <vector>

#include "plan/search/layer_costs.hpp"
#include "plan/search/layout.hpp"
#include "plan/search/search_context.hpp"

namespace paratwin::search {

// A pass waits for the rank's pass before it and for the same micro-batch's pass through the
// neighbouring chunk (a forward for the forward through the chunk before, a backward for the backward
// through the chunk after, the last chunk's backward for its forward). Nodes in a topological order;
// shared by the layouts of one pass order (pass_order: schedule, pp, v, micro-batches, overlap_ep).
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

// The layout's schedule as a pass graph; throws std::logic_error if the order deadlocks.
PassGraph pass_graph(const ParallelLayout& layout, int microbatches);
// How many passes of each chunk each pipeline rank runs before its first bucket and through its
// last passes (PipelineCounts).
PipelineCounts pipeline_counts(const ParallelLayout& layout, int microbatches);

// One pass through a chunk for the pass graph: compute and collectives apart (additive lower bounds,
// as in the cost tables); ZeRO 3's gather of the chunk before each pass; the sends of its output to
// the chunk after (forward) and before (backward), -1 where there is none.
struct ChunkPasses {
  double forward = 0, forward_comm = 0, backward = 0, backward_comm = 0, recompute = 0, recompute_comm = 0;
  double gather = 0, forward_send = -1, backward_send = -1;
};

class PassGraphBounds {
 public:
  PassGraphBounds(const SearchContext& context, LayerCosts& costs);

  // The layout's pipeline counts, shared by the layouts of one pass order.
  const PipelineCounts& counts(const ParallelLayout& layout, int microbatches);
  // Per pipeline rank, bounds of when its last pass ends and when its first chunk's last DP bucket is
  // ready, for partition `partition` (its `ranges`) under rank order `order`, with ZeRO 3's gathers
  // when `zero3`; kept in the layout.
  const PassBounds& bounds(ParallelLayout& layout, int microbatches, int partition, const Ranges& ranges,
                           int order, bool zero3);

 private:
  // `comm`: one layer's collectives where the rank order places the groups.
  static ChunkPasses chunk_passes(const ParallelLayout& layout, int c, int begin, int end,
                                  const LayerComm& comm);
  PassBounds pass_bounds(const ParallelLayout& layout, const PassGraph& g, const Ranges& ranges, int order,
                         const std::vector<double>& gathers);
  // `pp_stride`: ranks between pipeline neighbours under the rank order.
  double transfer_time(const ParallelLayout& layout, long long pp_stride, int from, int to) const;

  const SearchContext& ctx_;
  LayerCosts& costs_;
  // By (schedule, pp, v, micro-batches, combined 1F1B): one pipeline order.
  std::map<std::tuple<Schedule, int, int, int, bool>, PipelineCounts> counts_;
  std::map<std::tuple<Schedule, int, int, int, bool>, PassGraph> graphs_;
};

}  // namespace paratwin::search
