// The layer partitions of the search's candidates, numbered in the order they are found: per layout
// the time-optimal one (memory aside), and per variant the one its memory allows -- the time-optimal
// one where it fits, else the best that fits.
#pragma once

#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "plan/search/layer_costs.hpp"
#include "plan/search/layout.hpp"
#include "plan/search/partition.hpp"
#include "plan/search/search_context.hpp"

namespace paratwin::search {

class Partitioner {
 public:
  Partitioner(const SearchContext& context, LayerCosts& costs);

  // The time-optimal partition of the layout (its tables made), or -1 when there is none; shared by
  // layouts that differ only in dp, the micro-batch count or the schedule's memory.
  int time_optimal(const ParallelLayout& layout, int microbatches);
  // The partition of the variant (the layout's time-optimal one found): the time-optimal one where
  // the variant's memory fits, else the best that fits, or -1 when none fits; kept in the layout.
  int fitted(ParallelLayout& layout, const Variant& v, int microbatches);
  const Ranges& ranges(int partition) const { return partitions_[partition]; }

 private:
  int store(std::optional<Ranges> ranges);
  bool partition_fits(const ParallelLayout& layout, const Variant& v, const Ranges& ranges,
                      int microbatches) const;
  // The layer partition minimizing the slowest chunk; with a variant, subject to its memory.
  std::optional<Ranges> partition(const ParallelLayout& layout, const Variant* v, int microbatches);

  const SearchContext& ctx_;
  LayerCosts& costs_;
  std::vector<Ranges> partitions_;
  PartitionScratch scratch_;
  using TimeKey = std::tuple<int, int, int, bool, int, int, int, bool, Recompute, std::vector<int>>;
  std::map<TimeKey, int> time_optimal_;  // index into partitions_
};

}  // namespace paratwin::search
