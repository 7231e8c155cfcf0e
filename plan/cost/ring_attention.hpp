// Context parallelism's attention as PyTorch's context_parallel runs it (torch.distributed.tensor.
// experimental._attention, the CP of torchtitan): the ring of keys and values over the CP group, its
// SDPA calls block by block, the merges of their partial results, and what the ring moves.
//
// Each CP rank holds 2 of the sequence's 2 cp chunks (chunk r and chunk 2cp-1-r: round-robin load
// balance for the causal mask), n = s / cp queries. Per layer and pass the rank makes cp SDPA calls:
//   step 0:       its queries against its own keys, n x n, causal;
//   steps 1..cp-1: non-causal, n queries x n/2 keys (the first chunk of the visiting keys) or n/2
//                  queries (the second chunk of its own) x n keys: half a block each.
// Every rank does the same work, s^2 / (2 cp) (query, key) pairs, as the causal square split evenly.
// Forward: the keys and values are all-gathered once (rotate method "allgather", the default of
// _cp_options and of torchtitan's experimental.context_parallel_rotate_method) while step 0 runs; each
// later step's output is merged into the fp32 running output by its logsumexp (_SDPAMerger: upcast,
// sigmoid-weighted update, a torch.cat for a half update). Backward: the keys and values are all-gathered
// again beside step 0's backward; each step's key and value gradients, accumulated in fp32, travel to
// the next rank (dkv_rotater: always all-to-all, torch's permute_tensor) while the next step computes;
// the last one is waited for with nothing left to hide it.
#pragma once

#include "plan/cost/compute.hpp"

namespace paratwin::cost {

// Whether a layer's attention runs as the ring: context parallelism with training.cp_attention
// torch_ring over fused attention (PyTorch's CP dispatches the flash, memory-efficient and cuDNN SDPA
// kernels only; unfused attention over gathered keys stays one kernel over the whole sequence).
bool runs_ring_attention(const LayerWork& work);

// One layer's ring attention on one rank, in one direction.
struct RingAttention {
  KernelCost diagonal;      // step 0 (its backward, backward): the causal n x n block
  KernelCost off_diagonal;  // steps 1..cp-1 with the merges (forward) or the fp32 accumulation of the
                            // query, key and value gradients (backward), and the copies around them
  // The keys and values of the whole sequence at the heads SDPA sees (kv heads / tp, or heads / tp when
  // the model repeats them first: training.repeat_kv), gathered: the all-gather's output, b s 2 k d e.
  Bytes kv_gather;
  // Backward: one step's key and value gradients in fp32, b n 2 k d 4, sent to the next CP rank; cp
  // such steps per layer, all but the last beside the next block's backward.
  Bytes dkv_step;
  int dkv_steps = 0;  // cp in the backward, 0 forward
  // Device memory the layer's ring holds while it runs, one layer at a time: the gathered keys and
  // values; forward, the merger's fp32 running output and logsumexp with a block's output and its fp32
  // upcast; backward, the fp32 query, key and value gradient accumulators, the key and value gradients
  // being sent and received, and a block's 16-bit gradients.
  Bytes working;
};

// The ring's work for one layer (work.cp > 1, runs_ring_attention(work)). The blocks' FLOPs are the
// attention's: their sum over the cp steps is attention_core_forward's executed FLOPs (half the square
// per causal mask), the diagonal's at the causal rate, the rest at the kernel's non-causal rate.
RingAttention ring_attention(const ModelSpec& model, const LayerWork& work, bool forward);

}  // namespace paratwin::cost
