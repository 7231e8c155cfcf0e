// The memory-bound copies PyTorch FSDP runs around ZeRO 3's per-unit weight gathers and gradient
// reduce-scatters (training.fsdp), per unit and micro-batch, from the framework's source:
//
// fsdp2 (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py):
//   - foreach_all_gather, on the all-gather copy-in stream: _get_param_all_gather_inputs casts the fp32
//     shard to param_dtype (a foreach copy) and all_gather_copy_in copies it into the all-gather input
//     buffer: 1/dp of the unit, each gather.
//   - foreach_all_gather_copy_out, on the compute stream when the unshard is waited for:
//     split_with_sizes_copy reads the gathered flat buffer and writes each unsharded parameter: the
//     whole unit read and written, each gather (forward and backward).
//   - foreach_reduce: foreach_reduce_scatter_copy_in (torch._chunk_cat) on the compute stream reads
//     the unsharded gradients and writes the reduce-scatter input in reduce_dtype (bf16 read, fp32
//     written under mixed_precision_reduce fp32); no divide kernel for fp32 or bf16
//     (_get_gradient_divide_factors: NCCL's average); on the reduce-scatter stream the output is cast
//     to the fp32 gradient when reduce_dtype is narrower (_to_dtype_if_needed) and added into the
//     sharded gradient from the second micro-batch on (the first is a view): 1/dp of the unit.
// fsdp1 (torch/distributed/fsdp/_flat_param.py, _runtime_utils.py):
//   - FlatParamHandle.pre_unshard casts the fp32 shard to the low-precision shard (pre-unshard
//     stream, 1/dp); the all-gather writes the padded unsharded FlatParameter, which the module's
//     parameters view (_use_unsharded_views): no copy-out.
//   - The forward uses Tensor views of the FlatParameter that autograd tracks, so the backward of
//     their split concatenates the parameters' gradients into the flat gradient (compute stream: the
//     unit read and written in the training precision).
//   - _post_backward_hook on the post-backward stream: the flat gradient cast to reduce_dtype when it
//     differs (bf16 read, fp32 written), _reduce_grad's in-place pre-divide by
//     _gradient_predivide_factor (> 1 for any group of 2 or more: read and written), then on the shard
//     the post-divide, _cast_grad_to_param_dtype to fp32 and the += into _saved_grad_shard from the
//     second micro-batch on: 1/dp of the unit.
#pragma once

#include "plan/spec/scenario.hpp"
#include "plan/spec/units.hpp"

namespace paratwin::cost {

// One unit's copies in one micro-batch. `compute`: on the compute stream; `side`: on FSDP's copy-in,
// reduce-scatter or post-backward stream, beside the compute kernels of the next unit.
struct FsdpCopyBytes {
  Bytes compute, side;
  int compute_launches = 0, side_launches = 0;
  Bytes total() const { return compute + side; }
};

// The copies of one pass over a unit of `params` parameters on this rank (a dp-th of them its shard):
// its gather's where the pass gathered the unit (`gathers`), its gradient's reduction where the pass
// (a backward) reduce-scatters it (`reduces`); `accumulates`: the sharded gradient already holds an
// earlier micro-batch's. None under training.fsdp none.
FsdpCopyBytes fsdp_copy_bytes(const TrainingSpec& training, double params, int dp, bool gathers, bool reduces,
                              bool accumulates);

// Gradient accumulation without reduction (plan.reshard after_step, FSDP's no_sync): after a unit's
// backward that does not reduce-scatter, its unsharded gradient is kept for the next one, on the compute
// stream. fsdp2 (_fsdp_param.py): the first backward's to_accumulated_grad_if_needed casts the gradient
// to reduce_dtype when it differs (read in the training precision, written in reduce_dtype's), each later
// one's accumulate_unsharded_grad_if_needed adds it into that accumulator (the new gradient and the
// accumulator read, the accumulator written). fsdp1: autograd accumulates into the flat gradient in
// the training precision (read twice, written once) from the second backward on. The bytes of a unit
// of `params` parameters on this rank; none under training.fsdp none.
Bytes fsdp_accumulation_bytes(const TrainingSpec& training, double params, bool first);

}  // namespace paratwin::cost
