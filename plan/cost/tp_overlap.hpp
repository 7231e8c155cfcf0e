// Tensor-parallel communication overlap (plan.overlap.tp) as PyTorch's AsyncTP and Transformer Engine's
// userbuffers run it: each all-gather -> GEMM and GEMM -> reduce-scatter pair of sequence parallelism is
// decomposed into tp pieces, a GEMM on 1/tp of the rows each, whose transfers run beside the other pieces.
// The one rule of which GEMMs are decomposed and what the pieces cost, for lowering and the optimizer.
#pragma once

#include "plan/cost/compute.hpp"

namespace paratwin::cost {

// One layer's pass under the decomposition (docs/plans-and-cost-model.md, "TP overlap"):
//   forward: all-gather -> QKV and MLP up (gate and up) projections; output and MLP down projections
//            -> reduce-scatter;
//   backward: the input gradients' GEMMs: the output and down projections' after an all-gather of the
//            incoming gradient, the QKV and up projections' before a reduce-scatter of their partial sums.
// An MoE layer decomposes its attention's pair only (its experts' grouped GEMMs run between all-to-alls).
// The weight gradients' GEMMs, attention and the memory-bound kernels are not decomposed: the
// transfers do not run beside them.
// training.tp_overlap says how (scenario.hpp's TpOverlap). async_tp: every pair in tp pieces run one after
// another, each tiled on its own, the reduce-scatter's partial results summed after it. userbuffers
// (Transformer Engine's initialize_ub defaults): the all-gathers in tp pieces (ring_exchange), the
// forward's reduce-scatters in 4 (pipeline), the pieces after the lead on 3 streams so their tiles fill
// the waves together, the sum inside the reduce-scatter kernel; the backward's QKV and up projections'
// input gradients are not decomposed (bulk: their reduce-scatters run beside the weight gradients).
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

// Whether TP overlap decomposes anything at these degrees: the all-gathers and reduce-scatters of
// sequence parallelism only (plain TP's all-reduces are not decomposed).
inline bool tp_overlap_decomposes(int tp, bool sequence_parallel) {
  return tp > 1 && sequence_parallel;
}

// Whether the backward's reduce-scatters (the column-parallel input gradients') run whole beside the
// pass's weight-gradient GEMMs rather than beside decomposed pieces: userbuffers' bulk overlap.
inline bool tp_overlap_bulk_backward(const LayerWork& work) {
  return tp_overlap_decomposes(work.tp, work.sequence_parallel) && work.tp_overlap == TpOverlap::Userbuffers;
}

// The pieces of one layer's forward (or recomputed forward) or backward at work.tp; empty below tp 2
// or without sequence parallelism (the all-reduces of plain TP are not decomposed).
TpPieces tp_overlap_pieces(const ModelSpec& model, const LayerWork& work, bool forward, bool moe_layer);

// `pass` (holding the pieces' whole GEMMs) with them decomposed: its other work, the staging kernels,
// the lead pieces and the rest. Its compute time is at least about the undecomposed pass's: the pieces'
// smaller row counts fill fewer of the device's tiles (wave quantization: each piece under async_tp,
// the lead alone and the rest together under userbuffers) and launch as many times as there are pieces.
KernelCost decomposed(const KernelCost& pass, const TpPieces& pieces);

}  // namespace paratwin::cost
