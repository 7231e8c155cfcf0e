// The one rule from `model.moe.routing` to the tokens each expert-parallel rank runs: lowering (the
// Program's MoE work and all-to-alls), the optimizer's bounds and the report all ask it. EP rank r
// holds experts [r E/ep, (r+1) E/ep), as the live engine places them.
#pragma once

#include <vector>

#include "plan/spec/model.hpp"

namespace paratwin::cost {

// Steps over which a routing that changes every step (zipf) is averaged for the pace it sets.
inline constexpr int kRoutingSteps = 64;

// One MoE layer in one step.
struct ExpertLoad {
  std::vector<double> expert_share;  // per expert: its share of the layer's assignments, after capacity
  std::vector<double> rank_load;     // per EP rank: assignments it runs over the balanced count
  double dropped = 0;                // share of the assignments the capacity factor dropped
  double hottest() const;            // the largest rank_load: 1 when balanced
};

// The load of MoE layer `moe_layer` (its index among the model's MoE layers) in step `step` on `ep`
// EP ranks (ep must divide the experts). Shares are normalized to sum 1; an expert above
// capacity_factor / experts keeps that much and drops the rest. Balanced routing gives every rank
// exactly 1. Zipf: a permutation of the experts drawn from (seed, step, moe_layer).
ExpertLoad expert_load(const MoeSpec& moe, int ep, int moe_layer, int step);

// What one MoE layer of the model costs its ranks: the hottest rank's load expected over
// kRoutingSteps steps (the pace every rank of the all-to-all waits for), with step 0's draw.
struct LayerRouting {
  int layer = 0;                     // model layer index
  std::vector<double> rank_load;     // step 0, per EP rank
  std::vector<double> expert_share;  // step 0, per expert
  double pace = 1;                   // mean over steps of the hottest rank's load
  double dropped = 0;                // mean over steps
};
// Every MoE layer of `model` in layer order; empty without experts.
std::vector<LayerRouting> layer_routing(const ModelSpec& model, int ep);

// The smallest pace of any MoE layer (1 without experts or with balanced routing): what every MoE
// layer costs at least, for the optimizer's lower bounds.
double least_pace(const std::vector<LayerRouting>& layers);

}  // namespace paratwin::cost
