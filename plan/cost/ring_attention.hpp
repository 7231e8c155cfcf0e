// Context parallelism's attention as a ring over the CP group: its attention kernels block by block,
// the merges of their partial results, and what the ring moves. Two frameworks' rings:
//
// torch_ring, PyTorch's context_parallel (torch.distributed.tensor.experimental._attention, the CP of
// torchtitan). Each CP rank holds 2 of the sequence's 2 cp chunks (chunk r and chunk 2cp-1-r: round-robin
// load balance for the causal mask), n = s / cp queries. Per layer and pass the rank makes cp SDPA calls:
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
// the last one is waited for with nothing left to hide it. Under rotate method "alltoall"
// (training.cp_rotate, torchtitan's --experimental.context_parallel_rotate_method alltoall) no gather:
// each step's keys and values go to the next rank beside its block (_AllToAllRotater, permute_tensor),
// forward cp - 1 times and again in the backward, on the group the gradients travel on.
//
// te_p2p, Transformer Engine's AttnFuncWithCPAndKVP2P (Megatron-Core's and NeMo's CP, cp_comm_type
// "p2p", its only kind before TE 1.10): the same chunks and blocks, but the keys and values (at the
// kv heads) travel one step a time: each step sends the keys and values it holds to the next rank and
// receives the previous rank's (send/recv pairs, 16 bits) while its block computes. Every step's output
// and logsumexp are kept; after the loop they are merged into a 16-bit output, one fused correction
// (out += out_i exp(lse_i - lse)) a step. Backward, in reverse step order, the key and value gradients
// ride with the keys and values (one send a step: keys and values first, both next, the gradients
// alone last), accumulated in 16 bits, each send beside its own step's block: nothing is left exposed.
#pragma once

#include "plan/cost/compute.hpp"

namespace paratwin::cost {

// Whether a layer's attention runs as a ring: context parallelism with training.cp_attention torch_ring
// or te_p2p over fused attention (both rings call fused kernels only; unfused attention over gathered
// keys stays one kernel over the whole sequence).
bool runs_ring_attention(const LayerWork& work);

// One layer's ring attention on one rank, in one direction.
struct RingAttention {
  KernelCost diagonal;      // step 0 (its backward, backward): the causal n x n block
  KernelCost off_diagonal;  // steps 1..cp-1 with the merges (forward) or the accumulation of the query,
                            // key and value gradients (backward), and the copies around them
  // torch_ring (cp_rotate allgather): the keys and values of the whole sequence at the heads SDPA sees
  // (kv heads / tp, or heads / tp when the model repeats them first: training.repeat_kv), gathered beside
  // the diagonal block: the all-gather's output, b s 2 k d e. te_p2p and torch_ring alltoall: none.
  Bytes kv_gather;
  // What one ring shift carries to the next CP rank, and how many shifts a layer makes. torch_ring:
  // backward only, one step's fp32 key and value gradients, b n 2 k d 4, cp shifts; under alltoall also
  // the keys and values, b n 2 k d e, cp - 1 shifts forward and as many more backward (2 cp - 1 shifts
  // there, as their mean). te_p2p: forward the
  // keys and values, b n 2 k d e, cp - 1 shifts; backward cp shifts carrying (cp - 1) x b n 4 k d e in
  // all (keys and values, then both with their gradients, then the gradients), as their mean.
  Bytes shift;
  int shifts = 0;
  // Of those, the shifts after the last block, with nothing left to hide them (torch_ring's backward:
  // the last dK/dV send; te_p2p sends each beside its own block: none).
  int tail_shifts = 0;
  // Device memory the layer's ring holds while it runs, one layer at a time. torch_ring: the gathered
  // keys and values (alltoall: a step's keys and values in use, being sent and arriving); forward, the
  // merger's fp32 running output and logsumexp with a block's output and its fp32 upcast; backward, the fp32
  // query, key and value gradient accumulators, the key and value gradients being sent and received, and a
  // block's 16-bit gradients. te_p2p: forward, every step's received keys and values and its output (kept to
  // the merge), the merged output and its fp64 logsumexp; backward, the two send/receive buffers of keys,
  // values and their gradients, dQ and one step's dQ, dK and dV.
  Bytes working;
};

// A ring shift as the all-to-all the Program carries it as (each rank's whole buffer to the next rank:
// torch's permute_tensor, TE's send/recv pair): the all-to-all's bytes whose one-peer share,
// (cp - 1) / cp of them, is the shift.
Bytes shift_as_alltoall(Bytes shift, int cp);

// The ring's work for one layer (work.cp > 1, runs_ring_attention(work)), as work.cp_attention runs it.
// The blocks' FLOPs are the attention's: their sum over the cp steps is attention_core_forward's executed
// FLOPs (half the square per causal mask), the diagonal's at the causal rate, the rest at the kernel's
// non-causal rate.
RingAttention ring_attention(const ModelSpec& model, const LayerWork& work, bool forward);

}  // namespace paratwin::cost
