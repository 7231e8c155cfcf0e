// Tensor-parallel communication overlap (plan.overlap.tp) as PyTorch's AsyncTP and Transformer Engine's
// userbuffers run it: each all-gather -> GEMM and GEMM -> reduce-scatter pair of sequence parallelism is
// decomposed into tp pieces, a GEMM on 1/tp of the rows each, whose transfers run beside the other pieces.
// The one rule of which GEMMs are decomposed and what the pieces cost, for lowering and the optimizer.
#pragma once

#include <vector>

#include "plan/cost/collectives.hpp"
#include "plan/cost/compute.hpp"

namespace paratwin::cost {

// One layer's pass under the decomposition (docs/plans-and-cost-model.md, "TP overlap"), pair by pair:
//   forward: all-gather -> QKV and MLP up (gate and up) projections; output and MLP down projections
//            -> reduce-scatter;
//   backward: the output and down projections' input gradients after an all-gather of the incoming
//            gradient. The QKV and up projections' input gradients are sums of two or three GEMMs'
//            (q, k, v; gate, up) before their reduce-scatter, which neither framework decomposes: PyTorch's
//            micro-pipeline TP pass (torch/_inductor/fx_passes/micro_pipeline_tp.py) fuses a
//            reduce-scatter only when a single matmul produces its input, and Transformer Engine runs
//            them whole (bulk) beside the weight gradients.
// Each pair runs on its own (fused_all_gather_matmul / fused_matmul_reduce_scatter, one per pair; one
// userbuffers overlap per GEMM): one pair's pieces cannot hide another pair's transfer.
// An MoE layer decomposes its attention's pair only (its experts' grouped GEMMs run between all-to-alls).
// The weight gradients' GEMMs, attention and the memory-bound kernels are not decomposed: the
// transfers do not run beside them.
// training.tp_overlap says how (scenario.hpp's TpOverlap). async_tp: every pair in tp pieces run one after
// another, each tiled on its own, the reduce-scatter's partial results summed after it. userbuffers
// (Transformer Engine's initialize_ub defaults): the all-gathers in tp pieces (ring_exchange), the
// forward's reduce-scatters in 4 (pipeline), the pieces after the lead on 3 streams so their tiles fill
// the waves together, the sum inside the reduce-scatter kernel; the backward's QKV and up projections'
// reduce-scatters run whole beside the weight gradients (bulk). Under async_tp they follow the pass.
struct TpPieces {
  KernelCost whole;  // the decomposed GEMMs as one launch each (as layer_forward / layer_backward hold them)
  // One piece of each: the rank's own shard's rows (all-gather) or the first partial result
  // (reduce-scatter), which no transfer can run beside.
  KernelCost lead;
  KernelCost rest;  // the other tp - 1 pieces of each, beside the pieces' transfers
  // Memory-bound kernels the decomposition adds on the compute stream: the rank's own shard copied into
  // the shared buffer before an all-gather's pieces (PyTorch's symmetric memory, Transformer Engine's
  // userbuffers), and the tp partial results summed after a reduce-scatter's (b s/cp x h read, 1/tp
  // of it written).
  KernelCost staging;

  TpPieces operator*(int k) const { return {whole * k, lead * k, rest * k, staging * k}; }
  TpPieces& operator+=(const TpPieces& o);
};

// The linear of a layer a pair decomposes (the forward's GEMM, or its input gradient's backward).
enum class TpLinear { Qkv, Output, Up, Down };
extern const EnumNames<TpLinear> kTpLinearNames;  // in task names: qkv, out, up, down

// One all-gather -> GEMM or GEMM -> reduce-scatter pair of a layer's pass: its pieces, and the
// collective that runs beside its rest pieces (one per layer and pass).
struct TpPair {
  TpLinear linear = TpLinear::Qkv;
  CollectiveKind collective = CollectiveKind::AllGather;
  TpPieces pieces;
};

// Whether TP overlap decomposes anything at these degrees: the all-gathers and reduce-scatters of
// sequence parallelism only (plain TP's all-reduces are not decomposed).
inline bool tp_overlap_decomposes(int tp, bool sequence_parallel) {
  return tp > 1 && sequence_parallel;
}

// The SMs a TP overlap transfer's kernels hold (docs/catalog.md, "Communication kernels' SMs"): PyTorch's
// AsyncTP pulls and pushes the pieces through symmetric memory with copy engines (tensor copies between
// mapped buffers), none; Transformer Engine's userbuffers run the all-gathers' ring exchange on copy
// engines too, and each reduce-scatter (pipelined, and the backward's bulk ones) in a comm kernel of
// 16 SMs (reducescatter2_userbuff_stridedoutput; 32 for a pipelined one's last chunk, taken as 16).
inline int tp_overlap_transfer_sms(TpOverlap how, CollectiveKind kind) {
  return how == TpOverlap::Userbuffers && kind == CollectiveKind::ReduceScatter ? 16 : 0;
}

// Whether the backward's reduce-scatters (the column-parallel input gradients') run whole beside the
// pass's weight-gradient GEMMs rather than beside decomposed pieces: userbuffers' bulk overlap.
inline bool tp_overlap_bulk_backward(const LayerWork& work) {
  return tp_overlap_decomposes(work.tp, work.sequence_parallel) && work.tp_overlap == TpOverlap::Userbuffers;
}

// Whether the backward's column-parallel input gradients (the QKV and up projections') are
// reduce-scattered, or all-reduced without sequence parallelism, beside the pass rather than after it
// (`overlap_tp`: plan.overlap.tp). Under TP overlap where it decomposes: userbuffers' bulk overlap.
// Otherwise Megatron-LM's and Transformer Engine's linears (training.tensor_parallel megatron) start
// them asynchronously before the weight-gradient GEMM and wait for them before the norm's backward
// (TE 1.8 layernorm_linear.py, "Overlap dgrad-RS/AR with wgrad"; Megatron-Core's
// LinearWithGradAccumulationAndAsyncCommunication). Costed beside the whole pass, not beside each
// linear's own weight gradient: at tp 8 a QKV projection's weight gradient can be shorter than its
// reduce-scatter, which the pass then hides.
inline bool tp_input_grads_beside_pass(const LayerWork& work, bool overlap_tp) {
  if (overlap_tp && tp_overlap_decomposes(work.tp, work.sequence_parallel))
    return work.tp_overlap == TpOverlap::Userbuffers;
  return work.tensor_parallel == TensorParallelImpl::Megatron;
}

// The pairs of one layer's forward (or recomputed forward) or backward at work.tp, in the pass's order;
// empty below tp 2 or without sequence parallelism (the all-reduces of plain TP are not decomposed).
// Forward: QKV and up (all-gathers), output and down (reduce-scatters); backward: down and output
// (all-gathers) alone.
std::vector<TpPair> tp_overlap_pairs(const ModelSpec& model, const LayerWork& work, bool forward,
                                     bool moe_layer);

// The pairs' pieces summed: what the decomposition takes out of the pass and puts back.
TpPieces tp_overlap_pieces(const ModelSpec& model, const LayerWork& work, bool forward, bool moe_layer);

// `pass` (holding the pieces' whole GEMMs) with them decomposed: its other work, the staging kernels,
// the lead pieces and the rest. Its compute time is at least about the undecomposed pass's: the pieces'
// smaller row counts fill fewer of the device's tiles (wave quantization: each piece under async_tp,
// the lead alone and the rest together under userbuffers) and launch as many times as there are pieces.
KernelCost decomposed(const KernelCost& pass, const TpPieces& pieces);

}  // namespace paratwin::cost
