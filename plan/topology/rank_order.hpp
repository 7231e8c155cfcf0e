// The rank order of a plan, parsed in one place: a world rank's coordinates along tp, cp, dp and pp
// and the stride of each dimension. The order ("tp-cp-dp-pp", fastest-varying first) is one of the
// permutations the scenario language accepts; every consumer (lowering, the optimizer, the
// simulator, the live runners) asks here instead of reading the string.
#pragma once

#include <string_view>

#include "plan/ir/plan.hpp"

namespace paratwin {

// Distance in world ranks between consecutive members of each dimension.
struct RankStrides {
  long long tp = 1, cp = 1, dp = 1, pp = 1;
};

// Coordinates of one rank along each parallel dimension.
struct RankCoords {
  int tp = 0, cp = 0, dp = 0, pp = 0;
};

// Strides under `order` for the given sizes. Throws std::logic_error naming a dimension the order
// does not know (an order that was not validated).
RankStrides rank_strides(std::string_view order, int tp, int cp, int dp, int pp);
RankStrides rank_strides(const Plan& plan);

// The coordinates of world rank `rank` under the plan's order, and back.
RankCoords rank_coords(const Plan& plan, int rank);
RankCoords rank_coords(const RankStrides& strides, const Plan& plan, int rank);
long long rank_of(const RankStrides& strides, const RankCoords& coords);

}  // namespace paratwin
