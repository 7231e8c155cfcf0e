// The GPT as one rank of a tensor- and pipeline-parallel group holds it: the layers of its pipeline
// chunks, split Megatron-style over the TP group (attention heads and the MLP column-wise then
// row-wise, the vocabulary of the embedding and of the head by rows), in one flat parameter buffer.
// Forward and backward of a chunk run the TP collectives themselves (two per layer and pass, one for
// the embedding, one for the head's input gradient, two small ones in the vocabulary-parallel loss).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "exec/comm/communicator.hpp"
#include "exec/gpt/config.hpp"
#include "exec/gpt/kernels.hpp"
#include "exec/gpt/layout_windows.hpp"
#include "exec/gpt/model.hpp"
#include "exec/tensor.hpp"
#include "plan/spec/recompute_modules.hpp"

namespace paratwin::exec {

class ContextParallel;

// Which part of the model a rank holds.
struct ShardSpec {
  int tp = 1, tp_rank = 0;
  std::vector<std::pair<int, int>> chunks;  // layer ranges [begin, end) of its chunks, in model order
  bool first = false;                       // holds chunk 0: the embedding
  bool last = false;                        // holds the last chunk: the final norm, head and loss
  // Megatron's sequence parallelism: between the TP regions the residual stream (norms, residual
  // additions) is split by tokens over the group, reduce-scatter and all-gather replacing each
  // all-reduce.
  bool sequence_parallel = false;
  // Expert parallelism: the rank's index in its EP group of `ep` ranks, whose MoE layers' experts it
  // shares (it holds experts [ep_rank E/ep, (ep_rank+1) E/ep) of each).
  int ep = 1, ep_rank = 0;
  // MoE parallel folding (Plan::expert_tp 1, Megatron-Core's): the rank's experts whole rather than
  // split over TP, its EP group drawn from tp x cp x dp (plan/topology/rank_groups.hpp), and each rank
  // routing its sequence-parallel share of the tokens: no TP collective around an MoE layer's MLP.
  bool fold_experts = false;
};

// One local tensor: full rows [row_begin, row_begin + rows) of a full tensor, and of those rows the
// full columns `columns` (ranges, laid side by side).
struct ShardTensor {
  std::string name;  // "layer2.qkv_w", ...; "head" also for the last stage's copy of a tied wte
  size_t offset = 0, rows = 0, cols = 0;
  size_t full_offset = 0, full_cols = 0, full_rows = 0, row_begin = 0;
  std::vector<std::pair<size_t, size_t>> columns;
  bool replicated = false;  // the same values on every TP rank (norms, row-parallel biases, positions)
  bool tied_copy = false;   // the last stage's copy of wte (tied embeddings over several stages)
  bool expert = false;      // part of one of the rank's experts (the other EP ranks hold the others)
  size_t size() const { return rows * cols; }
};

// What the forward of one micro-batch through one chunk keeps for its backward. N = B x T tokens;
// widths are this rank's (heads, kv heads, FFN and vocabulary over tp).
struct ChunkActivations {
  int chunk = 0;  // index into ShardSpec::chunks
  int B = 0, Tn = 0;
  // Each layer's policy (the chunk's layer li at li; the stage's recompute_every and recompute_layers
  // leave some layers keeping all). What the layers under a recompute policy drop shares one layer's
  // buffers, which hold the layer recomputed_layer names; kept activations have a place of their own.
  std::vector<ActivationPolicy> policies;
  RecomputeModules modules;  // what the layers under RecomputeSelective drop
  // Where layer li's activations sit: those every policy but full keeps (qkv, fc, kv, moe; mid under
  // sequence parallelism, a reduce-scatter's output), those per-operator recomputation drops too (the
  // first norm's output and statistics, attn_out, fc_act; mid without sequence parallelism), the second
  // norm's (which selective recomputation of layernorm drops in MoE layers) and the attention
  // probabilities (kept by keeping all, and by selective recomputation without core_attn).
  std::vector<size_t> slots, inner_slots, norm2_slots, att_slots;
  int recomputed_layer = -1;
  Buffer<float> recomputed_out;  // full recomputation: the recomputed layer's output, set aside
  ActivationPolicy policy(int li) const { return policies[size_t(li)]; }
  size_t kept(int li) const { return slots[size_t(li)]; }
  size_t inner(int li) const { return inner_slots[size_t(li)]; }
  size_t norm2(int li) const { return norm2_slots[size_t(li)]; }
  size_t att_kept(int li) const { return att_slots[size_t(li)]; }
  std::vector<int32_t> tokens, targets;  // (B,T)
  Buffer<float> residual;                // (l+1,N,C): the chunk's input (received or embedded), ...
  Buffer<float> mid, ln1, ln1_mean, ln1_rstd, qkv, att, attn_out, ln2, ln2_mean, ln2_rstd, fc, fc_act;
  Buffer<float> kv;  // (l,B,T,2KD) under context parallelism: the keys and values gathered over CP (one
                     // layer's under full recomputation, which gathers them again)
  Buffer<float> lnf, lnf_mean, lnf_rstd, probs, losses;  // last chunk
  Buffer<float> dresidual;                               // (N,C): gradient of the output, then of the input
  std::vector<MoeActivations<float>> moe;                // (l): MoE layers' routing and experts
  double loss = 0;
};

class ShardedGpt {
 public:
  // `tp` is the tensor-parallel group (size spec.tp; may be null when spec.tp is 1). Throws
  // std::invalid_argument when tp does not divide the heads, kv heads, FFN width or vocabulary.
  ShardedGpt(const GptConfig& full, ShardSpec spec, Communicator* tp);

  // Context parallelism: activations hold this rank's tokens of each sequence (Tn = seq_len / cp, at
  // cp->positions()), attention runs through `cp`, and the loss is the mean over the group's tokens.
  // Set before allocate(); null (the default) for whole sequences.
  void use_context_parallel(ContextParallel* cp) { cp_ = cp; }
  // Expert parallelism: the EP group of spec.ep ranks (this rank at spec.ep_rank) over which tokens
  // travel to their experts by all-to-all. Every rank of the group must run the same passes in the same
  // order. Throws std::invalid_argument when the group does not match the spec.
  void use_expert_group(Communicator* group);
  // The EP group, with the wall and thread CPU time spent in the experts' all-to-alls so far.
  const ExpertGroup& experts() const { return experts_; }
  // Assignments of this rank's tokens to each expert over the run, [layer x experts] (zeros for the
  // layers it does not run): counted once per micro-batch, in the backward, on TP rank 0 only (the TP
  // ranks route the same tokens).
  std::vector<double> routed_tokens() const {
    std::vector<double> out = routed_;
    out.resize(size_t(full_.layers) * size_t(full_.experts), 0.0);
    return out;
  }

  const GptConfig& config() const { return full_; }
  const ShardSpec& spec() const { return spec_; }
  const std::vector<ShardTensor>& tensors() const { return tensors_; }
  size_t size() const { return total_; }
  Buffer<float>& parameters() { return params_; }
  Buffer<float>& gradients() { return grads_; }
  // ZeRO 2 and 3: the passes read parameters from the windows of `parameters` and write gradients into
  // those of `gradients` instead of the flat buffers above (either may be null: the flat buffer). A
  // pass that touches an offset no window holds throws std::logic_error. The windows outlive the model.
  void use_windows(const LayoutWindows* parameters, const LayoutWindows* gradients) {
    param_windows_ = parameters;
    grad_windows_ = gradients;
  }

  // GPT-2's initial weights of this shard (exec/gpt/init.hpp): the values the whole model, initialized
  // with `seed`, holds there, computed here alone on the rank's threads.
  void initialize(uint64_t seed);

  // This rank's values out of a buffer laid out as parameter_layout(full) (weights or optimizer
  // moments), and back into one (the rest of `full` untouched).
  void take_shard(const float* full, float* shard) const;
  void put_shard(const float* shard, float* full) const;

  // [begin, end) of the local parameters of layers [lo, hi) of one chunk, with the embeddings when
  // lo = 0 and the final norm and head when hi = layers.
  std::pair<size_t, size_t> range(int lo, int hi) const;
  // Local range of the head (the last stage's copy of wte under tied embeddings); empty if none.
  std::pair<size_t, size_t> head_range() const;
  std::pair<size_t, size_t> wte_range() const;

  // Zeroes the gradients (and the lookup's rows kept apart).
  void zero_gradients();

  // A tied embedding reduced early (plan/ir/buckets.hpp): the lookup's gradient goes to rows kept apart,
  // so wte's gradient holds the head's part alone, final once the head's backward has run. The rows
  // (local vocabulary rows, in order of first use since zero_gradients()) and their gradients (rows x C).
  void keep_lookup_gradient_apart() { lookup_apart_ = true; }
  const std::vector<int32_t>& lookup_rows() const { return lookup_rows_; }
  const Buffer<float>& lookup_gradients() const { return lookup_gradients_; }

  // Sizes `a` for B sequences of Tn tokens through the chunk, its layers under `policies` (one per
  // layer of the chunk; empty: every layer keeps all), the selective ones dropping `modules`.
  void allocate(ChunkActivations& a, int chunk, int B, int Tn, std::vector<ActivationPolicy> policies = {},
                RecomputeModules modules = {}) const;
  // Forward of the chunk: embeds a.tokens (chunk 0) or starts from a.residual[0] (received); the last
  // chunk returns the mean loss over a.targets (0 elsewhere). Output in a.residual[l] (top).
  double forward(ChunkActivations& a);
  // Backward of layers [lo, hi) of the chunk, from the top down; at the chunk's top a.dresidual holds
  // the output's gradient (received), except on the last chunk, which starts from the loss. When lo is
  // the chunk's first layer a.dresidual ends as the input's gradient (to send, or into the embedding).
  void backward(ChunkActivations& a, int lo, int hi, float loss_scale);
  // What the forward of `layer` dropped under its policy, computed again by the same kernels from what it
  // kept (bit for bit; full recomputation runs the layer's TP and CP collectives again, per-operator its
  // two TP all-gathers (SP) or its output projection's all-reduce, selective none; both reuse the keys
  // and values CP gathered). The backward calls it for each layer it needs; the Program's
  // recompute task for the first. Defined in tensor_parallel_recompute.cpp.
  void recompute(ChunkActivations& a, int layer);
  const float* output(const ChunkActivations& a) const;  // (n,C), the top of a.residual
  float* input(ChunkActivations& a) const;               // (n,C), a.residual[0]
  // Values of the residual stream this rank holds for one micro-batch (what a stage sends): n x C,
  // n = N / tp under sequence parallelism, else N.
  size_t boundary_size(const ChunkActivations& a) const;

  double tp_seconds = 0;  // wall time spent in TP collectives so far

 private:
  struct Layer {
    size_t ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fc_proj_w, fc_proj_b;
    size_t router_w = kNone;          // MoE layers (their fc_* are kNone)
    std::vector<MlpOffsets> experts;  // MoE layers: this rank's experts, in order
  };
  void add(const std::string& name, size_t full_offset, size_t full_rows, size_t full_cols, size_t row_begin,
           size_t rows, std::vector<std::pair<size_t, size_t>> columns, bool replicated,
           bool tied_copy = false);
  void allreduce(float* data, size_t count);
  void forward_layers(ChunkActivations& a, int from, int to, bool recomputing);
  // The layer's first norm (of its input) and second (of mid), into their slots, gathered under SP: the
  // forward's, and what recomputation runs again.
  void norm1_forward(ChunkActivations& a, int layer);
  void norm2_forward(ChunkActivations& a, int layer);
  // This rank's rows of `inp` normalized into slot `slot` of out (N,C), gathered under SP if `gathered`.
  void norm_into(Buffer<float>& out, Buffer<float>& mean, Buffer<float>& rstd, size_t slot, const float* inp,
                 size_t weight, size_t bias, int N, bool gathered = true);
  // Whether `layer` is an MoE layer whose experts are folded (ShardSpec::fold_experts): its MLP runs on
  // the rank's own rows of the residual stream.
  bool folded_moe(int layer) const { return spec_.fold_experts && full_.moe_layer(layer); }
  // An MoE layer's MLP forward and backward on `rows` tokens (N whole under TP, the rank's n when
  // folded), and the router's gradient summed over the TP group where each rank routed its own rows.
  void moe_forward(ChunkActivations& a, int layer, size_t slot, int rows, const float* ln2, float* out);
  void moe_backward(ChunkActivations& a, int layer, size_t slot, int rows, const float* dout,
                    const float* ln2, float* dln2);
  void recompute_attention(ChunkActivations& a, int layer);  // tensor_parallel_recompute.cpp
  void recompute_ops(ChunkActivations& a, int layer);
  // Throws std::logic_error unless plan/cost/op_checkpoint.hpp's rule over the fused linears keeps qkv
  // and fc and runs the output projection again, as recompute_ops does.
  static void check_op_rule(bool swiglu);
  // Whether the selective recomputation of `layer` (chunk index li) drops an MoE layer's norm output or
  // its experts' activation.
  bool drops_moe_norm(const ChunkActivations& a, int li, int layer) const;
  bool drops_moe_act(const ChunkActivations& a, int li, int layer) const;
  double forward_head(ChunkActivations& a);
  MoeWeights<float> moe_weights(int layer, bool gradients);  // without them: null gradient pointers
  MoeShape moe_shape(int N) const;
  MoeTensorSplit<float> moe_split();
  const float* p(size_t offset) const {
    if (offset == kNone) return nullptr;
    return param_windows_ ? param_windows_->at(offset) : params_.data() + offset;
  }
  float* g(size_t offset) {
    if (offset == kNone) return nullptr;
    return grad_windows_ ? grad_windows_->at(offset) : grads_.data() + offset;
  }
  void ensure_scratch(size_t N);
  bool sequence_parallel() const { return spec_.sequence_parallel && spec_.tp > 1; }
  size_t mid_slot(const ChunkActivations& a, int li) const {
    return sequence_parallel() ? a.kept(li) : a.inner(li);
  }
  const int* positions() const;  // of the local tokens in their sequence (null: 0..Tn-1)
  int position(int t) const { return cp_ ? positions()[t] : t; }
  int keys(int Tn) const;  // keys each query attends over: the whole sequence's
  // What layer `layer`'s attention adds to causality for this rank's heads (ALiBi's slopes, a window).
  kernels::AttentionMask attention_mask(int layer) const;
  int cp_size() const;
  int stream_rows(int N) const;  // rows of the residual stream held here
  int first_row(int N) const;    // the first of them
  float* reduce(float* partial, int N);
  void gather(float* full, int N);
  const float* whole(const float* rows, int N);
  void norm_backward(float* dinp, size_t dweight, size_t dbias, const float* dout, const float* inp,
                     size_t weight, const float* mean, const float* rstd, int rows);
  // out (rows,C) = sum + bias (C; may be null) + residual, on the rank's threads.
  void residual_add(float* out, const float* sum, const float* bias, const float* residual, int rows) const;

  static constexpr size_t kNone = size_t(-1);
  GptConfig full_;
  ShardSpec spec_;
  Communicator* tp_;
  ContextParallel* cp_ = nullptr;
  ExpertGroup experts_;
  std::vector<double> routed_;  // [layer x experts]: see routed_tokens()
  int Hl_, Kl_, Fl_, Vl_;       // this rank's heads, kv heads, FFN width, vocabulary rows
  int Fe_;                      // this rank's FFN width of each of its experts (the whole when folded)
  std::vector<double> alibi_;   // ALiBi's slope of every head of the model (empty without ALiBi)
  kernels::RotaryAngles rotary_;
  std::vector<ShardTensor> tensors_;
  size_t total_ = 0;
  std::vector<Layer> layers_;                    // by global layer index (kNone offsets when not held)
  std::vector<size_t> layer_begin_, layer_end_;  // by global layer index
  size_t wte_ = kNone, wpe_ = kNone, lnf_w_ = kNone, lnf_b_ = kNone, head_ = kNone;
  size_t tail_begin_ = 0;  // where the final norm starts
  Buffer<float> params_, grads_;
  const LayoutWindows* param_windows_ = nullptr;
  const LayoutWindows* grad_windows_ = nullptr;
  Buffer<float> tmp_, dln_, dqkv_, dattn_, dfc_, dact_, row_, norm_grads_;
  Buffer<float> router_part_;  // folded experts: this rank's part of a router gradient (C x E)
  bool lookup_apart_ = false;
  std::vector<int32_t> lookup_rows_, lookup_slot_;  // the rows kept apart; per local row, its slot or -1
  Buffer<float> lookup_gradients_;
  void add_lookup_gradient(const ChunkActivations& a, const float* d);
};

}  // namespace paratwin::exec
