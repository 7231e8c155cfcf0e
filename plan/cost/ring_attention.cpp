// One layer's ring attention under context parallelism, counted from PyTorch's context_parallel
// (torch/distributed/tensor/experimental/_attention.py as of torch 1963fc8, 2024-12, the version
// torchtitan's 2024-12 benchmarks ran: _templated_ring_attention, its _backward, _SDPAMerger).
#include "plan/cost/ring_attention.hpp"

#include <cassert>

namespace paratwin::cost {

bool runs_ring_attention(const LayerWork& w) {
  return w.cp > 1 && w.attention != AttentionKind::Unfused && w.cp_attention == CpAttention::TorchRing;
}

namespace {

KernelCost kernels(double bytes, int launches) {
  KernelCost c;
  c.elementwise_bytes = Bytes(bytes);
  c.launches = launches;
  return c;
}

}  // namespace

RingAttention ring_attention(const ModelSpec& m, const LayerWork& w, bool forward) {
  assert(runs_ring_attention(w) && "ring attention without context parallelism over fused attention");
  const double cp = w.cp, b = w.micro_batch, d = m.head_dim, n = double(w.seq_len) / w.cp;
  const double hq = double(m.heads) / w.tp;
  const double hk = double(w.repeat_kv ? m.heads : m.kv_heads) / w.tp;
  // SDPA's tensors stay in 16 bits under fp8 (torchao and Transformer Engine cast the linears only).
  const double e = w.precision == Precision::Fp32 ? 4 : 2;
  const double O = b * hq * n * d;  // elements of this rank's queries, outputs and their gradients
  const double lse = b * hq * n;    // of its logsumexp
  const double K = b * hk * n * d;  // of its keys (and as many of its values)
  const double block = 2 * b * hq * n * n * d;  // executed FLOPs of one n x n causal block forward
  const double model_block = 2 * block;         // its model FLOPs: the full n x n square (4 b h n^2 d)
  const double steps = cp - 1;                  // the non-causal half blocks

  RingAttention r;
  r.kv_gather = Bytes(2 * b * hk * w.seq_len * d * e);
  const double pass = forward ? 1 : 2;  // model FLOPs of the backward: twice the forward's
  r.diagonal.gemm_flops = r.diagonal.attention_flops = Flops(pass * model_block);
  r.off_diagonal.gemm_flops = r.off_diagonal.attention_flops = Flops(pass * model_block * steps);
  r.diagonal.fused_kernel = r.off_diagonal.fused_kernel = w.attention;
  r.diagonal.fused_head_dim = r.off_diagonal.fused_head_dim = m.head_dim;
  // The kernels' rates by key length: step 0 runs n keys per row; the later half blocks, as the last
  // rank runs them (n queries over the visiting n/2 keys), n/2.
  r.diagonal.fused_key_length = n;
  r.off_diagonal.fused_key_length = n / 2;
  if (forward) {
    r.diagonal.flash_forward_flops = Flops(block);
    r.off_diagonal.flash_full_forward_flops = Flops(block * steps);
    // Step 0: its SDPA; the keys and values made contiguous (repeated heads, transposed: a copy each),
    // its output and logsumexp upcast to fp32 for the merges.
    r.diagonal += kernels(2 * 2 * e * K + (e + 4) * O, 1 + 2 + 2);
    // Steps 1..cp-1, as the last rank runs them (every step merges its whole output; a rank whose
    // visiting keys come from above merges half and torch.cat's the rest: less traffic): the keys and
    // values concatenated for the rotater (every step before the last, though "allgather" sends once),
    // the block's output upcast, then out - sigmoid(lse_b - lse) * (out - out_b) in three fp32 passes
    // (read two, write one each) and the logsumexp update; finally the output cast back.
    const double per_step = 2 * 2 * e * K + (e + 4) * O + 3 * 12 * O;
    r.off_diagonal += kernels(steps * per_step + (4 + e) * O, int(steps) * 11 + 2);
    r.off_diagonal.launches += int(steps);  // the SDPA calls
    r.working = r.kv_gather + Bytes(4 * O + 4 * lse + e * O + 4 * O);
    return r;
  }
  r.diagonal.flash_backward_flops = Flops(2.5 * block);
  r.off_diagonal.flash_full_backward_flops = Flops(2.5 * block * steps);
  r.dkv_step = Bytes(2 * K * 4);
  r.dkv_steps = w.cp;
  // Step 0: the fp32 gradient accumulators zeroed (q, k, v), the keys and values made contiguous and
  // concatenated for the rotater, the block's gradients added in fp32, dK and dV concatenated to send.
  const double accumulate_q = (8 + e) * O, accumulate_kv = 2 * (8 + e) * K, send = 2 * 8 * K;
  r.diagonal += kernels(4 * (O + 2 * K) + 2 * 2 * e * K + 2 * 2 * e * K + accumulate_q + accumulate_kv + send,
                        1 + 3 + 2 + 1 + 3 + 1);
  // Steps 1..cp-1 (the last rank's: whole-query gradients): the visiting keys and values concatenated
  // for the rotater, the received dK and dV updated in their first half and torch.cat'ed whole, dQ
  // added, dK and dV concatenated to send on; finally dQ, dK and dV cast back to 16 bits.
  const double half_update = 2 * ((8 + e) / 2 * K + 8 * K);
  const double per_step = 2 * 2 * e * K + half_update + accumulate_q + send;
  r.off_diagonal += kernels(steps * per_step + (4 + e) * (O + 2 * K), int(steps) * 7 + 2);
  r.off_diagonal.launches += int(steps);  // the SDPA calls
  r.working = r.kv_gather + Bytes(4 * (O + 2 * K) + 2 * r.dkv_step.value() + e * (O + 2 * K));
  return r;
}

}  // namespace paratwin::cost
