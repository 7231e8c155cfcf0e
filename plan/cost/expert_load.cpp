// Expert routing to per-rank loads: shares per expert, capacity, blocks of experts per EP rank.
#include "plan/cost/expert_load.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>

#include "plan/util/seeded_random.hpp"

namespace paratwin::cost {

double ExpertLoad::hottest() const {
  return rank_load.empty() ? 1.0 : *std::max_element(rank_load.begin(), rank_load.end());
}

namespace {

// The shares before capacity, summing to 1.
std::vector<double> raw_shares(const MoeSpec& moe, int moe_layer, int step) {
  const int E = moe.experts;
  const MoeRouting& r = moe.routing;
  std::vector<double> w(size_t(E), 1.0);
  switch (r.kind) {
    case RoutingKind::Balanced:
      break;
    case RoutingKind::Shares:
      w = r.shares;
      break;
    case RoutingKind::Measured:
      w = r.tokens.size() == 1 ? r.tokens[0] : r.tokens.at(size_t(moe_layer));
      break;
    case RoutingKind::Zipf: {
      // Fisher-Yates from a generator seeded by (seed, step, layer): which expert is how popular.
      SeededRandom rng(r.seed * 0x9e3779b97f4a7c15ULL ^ (std::uint64_t(step) << 32) ^
                       std::uint64_t(moe_layer));
      std::vector<int> order(static_cast<size_t>(E));
      std::iota(order.begin(), order.end(), 0);
      for (int i = E - 1; i > 0; --i) std::swap(order[size_t(i)], order[rng.below(std::uint64_t(i) + 1)]);
      for (int i = 0; i < E; ++i) w[size_t(order[size_t(i)])] = std::pow(double(i + 1), -r.zipf_s);
      break;
    }
  }
  assert(static_cast<int>(w.size()) == E && "routing rows are checked against the experts when parsed");
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  for (double& x : w) x /= sum;
  return w;
}

}  // namespace

ExpertLoad expert_load(const MoeSpec& moe, int ep, int moe_layer, int step) {
  assert(ep >= 1 && moe.experts % ep == 0 && "ep divides the experts (checked with the plan)");
  ExpertLoad out;
  const int E = moe.experts, per_rank = E / ep;
  out.expert_share.assign(size_t(E), 1.0 / E);
  out.rank_load.assign(size_t(ep), 1.0);
  if (moe.routing.balanced()) return out;  // exactly 1 everywhere: today's results, bit for bit
  out.expert_share = raw_shares(moe, moe_layer, step);
  if (moe.capacity_factor) {
    const double cap = *moe.capacity_factor / E;
    for (double& s : out.expert_share)
      if (s > cap) out.dropped += s - cap, s = cap;
  }
  for (int r = 0; r < ep; ++r) {
    double sum = 0;
    for (int e = r * per_rank; e < (r + 1) * per_rank; ++e) sum += out.expert_share[size_t(e)];
    out.rank_load[size_t(r)] = ep * sum;  // balanced: ep x (1/ep)
  }
  return out;
}

std::vector<LayerRouting> layer_routing(const ModelSpec& model, int ep) {
  std::vector<LayerRouting> out;
  if (!model.moe) return out;
  const bool per_step = model.moe->routing.kind == RoutingKind::Zipf;
  const int steps = per_step ? kRoutingSteps : 1;
  int index = 0;
  for (int l = 0; l < model.layers; ++l) {
    if (!model.is_moe_layer(l)) continue;
    LayerRouting lr;
    lr.layer = l;
    double pace = 0, dropped = 0;
    for (int step = 0; step < steps; ++step) {
      ExpertLoad load = expert_load(*model.moe, ep, index, step);
      pace += load.hottest(), dropped += load.dropped;
      if (step == 0) lr.rank_load = std::move(load.rank_load), lr.expert_share = std::move(load.expert_share);
    }
    lr.pace = steps == 1 ? pace : pace / steps;
    lr.dropped = steps == 1 ? dropped : dropped / steps;
    out.push_back(std::move(lr));
    ++index;
  }
  return out;
}

double least_pace(const std::vector<LayerRouting>& layers) {
  double least = layers.empty() ? 1.0 : layers.front().pace;
  for (const LayerRouting& l : layers) least = std::min(least, l.pace);
  return least;
}

}  // namespace paratwin::cost
