// What one transformer layer's model-parallel collectives move: the one rule that lowering (the
// Program's TP, CP and EP tasks) and the optimizer's bounds both cost.
#pragma once

#include "plan/cost/compute.hpp"

namespace paratwin::cost {

// Bytes per collective of one layer's pass on one rank (`count` collectives of these sizes are
// issued per pass: see plan/ir/lower.cpp).
struct LayerCollectiveBytes {
  // TP: the layer's whole activation, b x s/cp x h: all-reduced, or under sequence parallelism
  // all-gathered and reduce-scattered (twice per layer and pass).
  Bytes tp;
  // CP (training.cp_attention gather): the keys and values of the whole sequence on this TP rank,
  // b x s x 2 x kv_heads x head_dim / tp (heads with training.repeat_kv): all-gathered forward, their
  // gradients reduce-scattered backward. torch_ring moves its own (plan/cost/ring_attention.hpp).
  Bytes cp;
  // EP: each token's hidden state to its top_k experts, b x s/cp x top_k x h: dispatched and
  // combined by all-to-all on MoE layers, times work.expert_load (the hottest EP rank's share sets
  // the pace of every rank of the all-to-all); 0 for a model without experts.
  Bytes ep;
};

LayerCollectiveBytes layer_collective_bytes(const ModelSpec& model, const LayerWork& work);

}  // namespace paratwin::cost
