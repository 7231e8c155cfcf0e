// The layer partitions of the search's candidates: the time-optimal one of each layout, and for each
// variant the one its memory allows, by the dynamic program of partition.hpp.
#include "plan/search/partitioner.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "plan/search/partition.hpp"

namespace paratwin::search {

Partitioner::Partitioner(const SearchContext& context, LayerCosts& costs) : ctx_(context), costs_(costs) {}

int Partitioner::time_optimal(const ParallelLayout& layout, int microbatches) {
  const TimeKey key{layout.tp, layout.cp, layout.ep, layout.folded,    layout.mb,
                    layout.pp, layout.v,  layout.sp, layout.recompute, layout.rank_pool};
  auto optimal = time_optimal_.find(key);
  if (optimal == time_optimal_.end())
    optimal = time_optimal_.emplace(key, store(partition(layout, nullptr, microbatches))).first;
  return optimal->second;
}

// Variants with the same states per parameter (ZeRO 1 and 2 hold the same; compression and rank
// order change nothing) share their partition; none fits where none fits with fewer bytes per
// parameter.
int Partitioner::fitted(ParallelLayout& layout, const Variant& v, int microbatches) {
  const double key = costs_.state_bytes_per_parameter(layout, v);
  auto it = layout.fitted.find(key);
  if (it == layout.fitted.end()) {
    int fitted = layout.time_optimal;
    if (fitted < 0 || !partition_fits(layout, v, partitions_[fitted], microbatches)) {
      const bool hopeless = std::any_of(layout.fitted.begin(), layout.fitted.upper_bound(key),
                                        [](const auto& fit) { return fit.second < 0; });
      fitted = hopeless ? -1 : store(partition(layout, &v, microbatches));
    }
    it = layout.fitted.emplace(key, fitted).first;
  }
  return it->second;
}

int Partitioner::store(std::optional<Ranges> ranges) {
  if (!ranges) return -1;
  partitions_.push_back(std::move(*ranges));
  return static_cast<int>(partitions_.size()) - 1;
}

bool Partitioner::partition_fits(const ParallelLayout& layout, const Variant& v, const Ranges& ranges,
                                 int microbatches) const {
  std::vector<double> used(layout.pp, 0);
  const ChunkMemory memory = costs_.chunk_memory(layout);
  const double per_parameter = costs_.state_bytes_per_parameter(layout, v);
  for (int c = 0; c < layout.pp * layout.v; ++c)
    used[c % layout.pp] += chunk_bytes(layout, per_parameter, memory, c, ranges[c].first, ranges[c].second,
                                       in_flight(layout, c % layout.pp, microbatches));
  for (int r = 0; r < layout.pp; ++r)
    if (used[r] > costs_.capacity(layout, r)) return false;
  return true;
}

// The layer partition minimizing the slowest chunk; with a variant, subject to its memory.
std::optional<Ranges> Partitioner::partition(const ParallelLayout& layout, const Variant* v,
                                             int microbatches) {
  ChunkLayout shape{ctx_.s.model.layers, layout.pp * layout.v, layout.pp, {}};
  auto time = [&layout](int c, int begin, int end) { return chunk_time(layout, c, begin, end); };
  if (!v) {
    shape.capacity.assign(layout.pp, 1.0);
    return partition_layers(
        shape, time, [](int, int, int) { return 0.0; }, scratch_);
  }
  for (int r = 0; r < layout.pp; ++r) shape.capacity.push_back(costs_.capacity(layout, r));
  std::vector<double> in_flight_per_rank(layout.pp);
  for (int r = 0; r < layout.pp; ++r) in_flight_per_rank[r] = in_flight(layout, r, microbatches);
  const ChunkMemory memory = costs_.chunk_memory(layout);
  const double per_parameter = costs_.state_bytes_per_parameter(layout, *v);
  auto bytes = [&](int c, int begin, int end) {
    return chunk_bytes(layout, per_parameter, memory, c, begin, end, in_flight_per_rank[c % layout.pp]);
  };
  // A quick proof that none fits: no chunk holds more layers than fit in its share of its rank's
  // memory at the fewest bytes a layer can take, and if those counts do not add up to the layers, no
  // partition fits (the DP would visit every cell to find that out).
  double fewest_params = std::numeric_limits<double>::infinity(), fewest_activations = fewest_params;
  for (int l = 0; l < ctx_.s.model.layers; ++l) {
    fewest_params = std::min(fewest_params, layout.costs->params[l + 1] - layout.costs->params[l]);
    fewest_activations =
        std::min(fewest_activations, layout.costs->activations[l + 1] - layout.costs->activations[l]);
  }
  double most_layers = 0;
  for (int c = 0; c < layout.pp * layout.v; ++c) {
    const double share = shape.capacity[c % layout.pp] / layout.v - bytes(c, 0, 0);
    const double layer =
        per_parameter * fewest_params + fewest_activations * in_flight_per_rank[c % layout.pp];
    most_layers += std::floor(share / layer * (1 + 1e-9));
  }
  if (most_layers < ctx_.s.model.layers) return std::nullopt;
  return partition_layers(shape, time, bytes, scratch_);
}

}  // namespace paratwin::search
