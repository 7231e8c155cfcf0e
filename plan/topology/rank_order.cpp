// Parsing the rank order and moving between world ranks and coordinates.
#include "plan/topology/rank_order.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace paratwin {

RankStrides rank_strides(std::string_view order, int tp, int cp, int dp, int pp) {
  RankStrides s;
  long long stride = 1;
  for (size_t start = 0; start <= order.size();) {
    const size_t dash = std::min(order.find('-', start), order.size());
    const std::string_view dim = order.substr(start, dash - start);
    if (dim == "tp")
      s.tp = stride, stride *= tp;
    else if (dim == "cp")
      s.cp = stride, stride *= cp;
    else if (dim == "dp")
      s.dp = stride, stride *= dp;
    else if (dim == "pp")
      s.pp = stride, stride *= pp;
    else
      throw std::logic_error("rank order '" + std::string(order) + "' names an unknown dimension '" +
                             std::string(dim) + "'");
    start = dash + 1;
  }
  return s;
}

RankStrides rank_strides(const Plan& plan) {
  return rank_strides(plan.order, plan.tp, plan.cp, plan.dp, plan.pp);
}

RankCoords rank_coords(const RankStrides& s, const Plan& plan, int rank) {
  return {static_cast<int>(rank / s.tp % plan.tp), static_cast<int>(rank / s.cp % plan.cp),
          static_cast<int>(rank / s.dp % plan.dp), static_cast<int>(rank / s.pp % plan.pp)};
}

RankCoords rank_coords(const Plan& plan, int rank) {
  return rank_coords(rank_strides(plan), plan, rank);
}

long long rank_of(const RankStrides& s, const RankCoords& c) {
  return c.tp * s.tp + c.cp * s.cp + c.dp * s.dp + c.pp * s.pp;
}

}  // namespace paratwin
