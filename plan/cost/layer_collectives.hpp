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
  // TP all-gathers under sequence parallelism: `tp` at one byte an element where they move float8
  // (tp_gathers_float8), else `tp`. The reduce-scatters and all-reduces move `tp`.
  Bytes tp_gather;
  // Before each of those all-gathers, the all-reduce of its fp32 amax over the TP group where the
  // gathered fp8 tensor's scale comes from the whole tensor (tp_reduces_amax); 0 elsewhere.
  Bytes tp_amax;
  // CP (training.cp_attention gather): the keys and values of the whole sequence on this TP rank,
  // b x s x 2 x kv_heads x head_dim / tp (heads with training.repeat_kv): all-gathered forward, their
  // gradients reduce-scattered backward. torch_ring moves its own (plan/cost/ring_attention.hpp).
  Bytes cp;
  // EP: each token's hidden state to its top_k experts, b x s/cp x top_k x h (folded, the rank's
  // sequence-parallel share: / tp): dispatched and combined by all-to-all on MoE layers, times
  // work.expert_load (the hottest EP rank's share sets the pace of every rank of the all-to-all); 0
  // for a model without experts.
  Bytes ep;
};

LayerCollectiveBytes layer_collective_bytes(const ModelSpec& model, const LayerWork& work);

// Whether the TP all-gathers move float8 (under fp8 and sequence parallelism); the reduce-scatters
// move the high-precision partial sums either way.
// - torchtitan (training.fp8_recipe torchao_tensorwise under training.tensor_parallel dtensor): its
//   apply_tp gives float8 linears torchao's Float8ColwiseParallel, Float8RowwiseParallel and
//   PrepareFloat8ModuleInput (torchao/float8/float8_tensor_parallel.py), which cast the sequence
//   shard to float8 before the forward's all-gathers and the output gradient before the backward's
//   (_NoopFwToFloat8BwDynamic).
// - Transformer Engine (the te_* recipes under tensor_parallel megatron): LayerNormLinear writes the
//   norm's output in fp8 and all-gathers that (TE 1.8 layernorm_linear.py: ln_out of dtype uint8
//   into gather_along_first_dim), gathers the same fp8 shard again for the weight gradient, and
//   casts a row-parallel linear's output gradient to fp8 before its all-gather
//   (base.py grad_output_preprocess); TE 2.x gathers through _all_gather_fp8 for delayed and current
//   scaling alike, the latter's scale shared by an amax reduction over the TP group.
bool tp_gathers_float8(const LayerWork& work);

// Whether each float8 TP all-gather waits for an all-reduce of its tensor's amax over the TP group:
// Transformer Engine's current scaling (training.fp8_recipe te_current) gives a column-parallel
// linear's input quantizer and a row-parallel linear's output-gradient quantizer with_amax_reduction
// over the TP group under sequence parallelism, so that every rank casts its shard with one scale
// (TE 2.9 layernorm_linear.py and linear.py _customize_quantizers_float8_current_scaling); the
// quantizer waits for the all-reduce before its cast (quantizer.cpp). Delayed scaling uses the last
// steps' amax and torchao's tensorwise scaling reduces it inside DTensor: neither waits per tensor.
bool tp_reduces_amax(const LayerWork& work);

}  // namespace paratwin::cost
