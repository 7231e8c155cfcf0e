// One layer's ring attention under context parallelism, counted from the frameworks' sources: PyTorch's
// context_parallel (torch_ring) and Transformer Engine's AttnFuncWithCPAndKVP2P (te_p2p).
#include "plan/cost/ring_attention.hpp"

#include <cassert>

namespace paratwin::cost {

bool runs_ring_attention(const LayerWork& w) {
  return w.cp > 1 && w.attention != AttentionKind::Unfused && w.cp_attention != CpAttention::Gather;
}

Bytes shift_as_alltoall(Bytes shift, int cp) {
  return shift * (double(cp) / (cp - 1));
}

namespace {

// One rank's share of a layer's ring, in elements and FLOPs.
struct RingShape {
  double cp = 0, e = 0;
  double O = 0;      // elements of this rank's queries, outputs and their gradients, b hq n d
  double lse = 0;    // of its logsumexp, b hq n
  double K = 0;      // of its keys (and as many of its values), b hk n d
  double block = 0;  // executed FLOPs of one n x n causal block forward
};

RingShape ring_shape(const ModelSpec& m, const LayerWork& w) {
  const double b = w.micro_batch, d = m.head_dim, n = double(w.seq_len) / w.cp;
  const double hq = double(m.heads) / w.tp;
  const double hk = double(w.repeat_kv ? m.heads : m.kv_heads) / w.tp;
  RingShape r;
  r.cp = w.cp;
  // Attention's tensors stay in 16 bits under fp8 (torchao and Transformer Engine cast the linears only).
  r.e = w.precision == Precision::Fp32 ? 4 : 2;
  r.O = b * hq * n * d;
  r.lse = b * hq * n;
  r.K = b * hk * n * d;
  r.block = 2 * b * hq * n * n * d;
  return r;
}

// The blocks both rings run: step 0 causal, n x n; steps 1..cp-1 non-causal half blocks; their SDPA
// launches. The kernels' rates go by key length: step 0 runs n keys per row; the later half blocks, as
// the last rank runs them (n queries over the visiting n/2 keys), n/2.
RingAttention ring_blocks(const ModelSpec& m, const LayerWork& w, const RingShape& x, bool forward) {
  const double model_block = 2 * x.block;  // model FLOPs of a block: the full n x n square (4 b h n^2 d)
  const double steps = x.cp - 1;           // the non-causal half blocks
  const double pass = forward ? 1 : 2;     // model FLOPs of the backward: twice the forward's
  RingAttention r;
  r.diagonal.gemm_flops = r.diagonal.attention_flops = Flops(pass * model_block);
  r.off_diagonal.gemm_flops = r.off_diagonal.attention_flops = Flops(pass * model_block * steps);
  r.diagonal.fused_kernel = r.off_diagonal.fused_kernel = w.attention;
  r.diagonal.fused_head_dim = r.off_diagonal.fused_head_dim = m.head_dim;
  r.diagonal.fused_key_length = double(w.seq_len) / w.cp;
  r.off_diagonal.fused_key_length = double(w.seq_len) / w.cp / 2;
  if (forward) {
    r.diagonal.flash_forward_flops = Flops(x.block);
    r.off_diagonal.flash_full_forward_flops = Flops(x.block * steps);
  } else {
    r.diagonal.flash_backward_flops = Flops(2.5 * x.block);
    r.off_diagonal.flash_full_backward_flops = Flops(2.5 * x.block * steps);
  }
  r.diagonal.launches = 1;
  r.off_diagonal.launches = int(steps);
  return r;
}

// PyTorch's context_parallel (torch/distributed/tensor/experimental/_attention.py as of torch 1963fc8,
// 2024-12, the version torchtitan's 2024-12 benchmarks ran: _templated_ring_attention, its _backward,
// _SDPAMerger).
RingAttention torch_ring(const ModelSpec& m, const LayerWork& w, bool forward) {
  const RingShape x = ring_shape(m, w);
  const double e = x.e, O = x.O, lse = x.lse, K = x.K, steps = x.cp - 1;
  RingAttention r = ring_blocks(m, w, x, forward);
  // Where the visiting keys and values come from (training.cp_rotate). allgather: the whole sequence's,
  // gathered once. alltoall: each step before the last sends the concatenation it made to the next rank
  // and the next step waits for the previous rank's: cp - 1 shifts of b n 2 k d e, each beside a block;
  // the ring then holds the keys and values in use, the copy being sent and the one arriving.
  const bool gathers = w.cp_rotate == CpRotate::AllGather;
  const Bytes kv_shift(2 * K * e);
  const Bytes kv_held = gathers ? Bytes(2 * K * w.cp * e) : Bytes(3 * kv_shift.value());
  if (gathers) r.kv_gather = kv_held;
  if (forward) {
    if (!gathers) {
      r.shift = kv_shift;
      r.shifts = w.cp - 1;
    }
    // Step 0: the keys and values made contiguous (repeated heads, transposed: a copy each), its output
    // and logsumexp upcast to fp32 for the merges.
    r.diagonal += memory_bound_kernels(2 * 2 * e * K + (e + 4) * O, 2 + 2);
    // Steps 1..cp-1, as the last rank runs them (every step merges its whole output; a rank whose
    // visiting keys come from above merges half and torch.cat's the rest: less traffic): the keys and
    // values concatenated for the rotater (every step before the last, though "allgather" sends once),
    // the block's output upcast, then out - sigmoid(lse_b - lse) * (out - out_b) in three fp32 passes
    // (read two, write one each) and the logsumexp update; finally the output cast back.
    const double per_step = 2 * 2 * e * K + (e + 4) * O + 3 * 12 * O;
    r.off_diagonal += memory_bound_kernels(steps * per_step + (4 + e) * O, int(steps) * 11 + 2);
    r.working = kv_held + Bytes(4 * O + 4 * lse + e * O + 4 * O);
    return r;
  }
  // The fp32 key and value gradients go to the next rank every step (dkv_rotater: always all-to-all), the
  // last one after the last block. Under alltoall the keys and values take the same group (one NCCL
  // stream) cp - 1 times too: 2 cp - 1 shifts a layer, carried as their mean.
  const Bytes dkv_shift(2 * K * 4);
  r.shifts = gathers ? w.cp : 2 * w.cp - 1;
  r.shift =
      gathers ? dkv_shift : Bytes((w.cp * dkv_shift.value() + (w.cp - 1) * kv_shift.value()) / r.shifts);
  r.tail_shifts = 1;
  // Step 0: the fp32 gradient accumulators zeroed (q, k, v), the keys and values made contiguous and
  // concatenated for the rotater, the block's gradients added in fp32, dK and dV concatenated to send.
  const double accumulate_q = (8 + e) * O, accumulate_kv = 2 * (8 + e) * K, send = 2 * 8 * K;
  r.diagonal += memory_bound_kernels(
      4 * (O + 2 * K) + 2 * 2 * e * K + 2 * 2 * e * K + accumulate_q + accumulate_kv + send,
      3 + 2 + 1 + 3 + 1);
  // Steps 1..cp-1 (the last rank's: whole-query gradients): the visiting keys and values concatenated
  // for the rotater, the received dK and dV updated in their first half and torch.cat'ed whole, dQ
  // added, dK and dV concatenated to send on; finally dQ, dK and dV cast back to 16 bits.
  const double half_update = 2 * ((8 + e) / 2 * K + 8 * K);
  const double per_step = 2 * 2 * e * K + half_update + accumulate_q + send;
  r.off_diagonal += memory_bound_kernels(steps * per_step + (4 + e) * (O + 2 * K), int(steps) * 7 + 2);
  r.working = kv_held + Bytes(4 * (O + 2 * K) + 2 * dkv_shift.value() + e * (O + 2 * K));
  return r;
}

// Transformer Engine's AttnFuncWithCPAndKVP2P (transformer_engine/pytorch/attention.py, TE 1.x: fused
// attention, bshd/sbhd layouts, 16-bit attention as fp8 recipes without fp8_dpa run it).
RingAttention te_p2p(const ModelSpec& m, const LayerWork& w, bool forward) {
  const RingShape x = ring_shape(m, w);
  const double e = x.e, O = x.O, lse = x.lse, K = x.K, steps = x.cp - 1;
  RingAttention r = ring_blocks(m, w, x, forward);
  if (forward) {
    // As the last rank runs it (every later step: its whole queries over the first half of the visiting
    // keys, which it copies out; its corrections are whole). The keys and values concatenated into the
    // first send buffer; cp - 1 shifts of them, each beside a block.
    r.shift = Bytes(2 * K * e);
    r.shifts = w.cp - 1;
    // After the loop: the output zeroed, each step's output merged into it, out += out_i exp(lse_i - lse)
    // (the factor and product in one fused kernel, read one and write one, then the in-place add, read
    // two and write one), and the fp64 logsumexp back to fp32. Step 0's share: the concatenation, the
    // zeroed output, the logsumexp cloned to fp64, its own correction and the final cast.
    const double correction = 5 * e * O + (4 + 8) * lse;
    r.diagonal += memory_bound_kernels(2 * 2 * e * K + e * O + (8 + 12) * lse + correction + (8 + 4) * lse,
                                       1 + 1 + 2 + 2 + 1);
    // Steps 1..cp-1: the visiting keys' and values' first half made contiguous, the logsumexp corrected
    // (max, min, log1p(exp) in fp64: one fused kernel and the copy back) and the output corrected.
    const double per_step = 2 * e * K + (20 + 16) * lse + correction;
    r.off_diagonal += memory_bound_kernels(steps * per_step, int(steps) * (1 + 2 + 2));
    r.working = Bytes(w.cp * 2 * K * e + w.cp * e * O + e * O + 8 * lse + e * K);
    return r;
  }
  // Backward, as the first rank runs it (its later steps take the second half of its queries against
  // the whole visiting chunk: the query, output and output-gradient halves copied out, more than the
  // last rank's key and value halves). cp shifts, each beside its block: the keys and values, then both
  // with the gradients accumulated so far, then the gradients alone.
  r.shift = Bytes((x.cp - 1) * 4 * K * e / x.cp);
  r.shifts = w.cp;
  // Before the loop: the keys and values copied into the first send buffer, the logsumexp's second half
  // made contiguous. The diagonal (last) step: dQ's halves copied and added, dK and dV concatenated
  // and added (first half) or copied (second) into the received gradients.
  r.diagonal += memory_bound_kernels(
      2 * 2 * e * K + 2 * 4 * lse / 2 + 2.5 * e * O + 2 * 2 * e * K + 5 * e * K, 1 + 1 + 2 + 1 + 2);
  // Steps before it: the query, output and output-gradient halves made contiguous, dQ's second half
  // added (or copied, first), dK and dV concatenated and added to the received gradients.
  const double per_step = 3 * e * O + 1.5 * e * O + 2 * 2 * e * K + 3 * 2 * e * K;
  r.off_diagonal += memory_bound_kernels(steps * per_step, int(steps) * (3 + 1 + 1 + 1));
  r.working = Bytes(2 * 2 * 2 * K * e + 2 * e * O + 2 * 2 * K * e + 1.5 * e * O);
  return r;
}

}  // namespace

RingAttention ring_attention(const ModelSpec& m, const LayerWork& w, bool forward) {
  assert(runs_ring_attention(w) && "ring attention without context parallelism over fused attention");
  return w.cp_attention == CpAttention::TeP2p ? te_p2p(m, w, forward) : torch_ring(m, w, forward);
}

}  // namespace paratwin::cost
