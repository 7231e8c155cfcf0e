// Where a chunk's activations live on a rank's shard: the buffers each layer keeps for its backward
// under its recompute policy, the places the dropped ones share, and the residual stream's ends.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "exec/gpt/tensor_parallel.hpp"

namespace paratwin::exec {

size_t ShardedGpt::boundary_size(const ChunkActivations& a) const {
  return size_t(stream_rows(a.B * a.Tn)) * full_.hidden;
}

void ShardedGpt::allocate(ChunkActivations& a, int chunk, int B, int Tn,
                          std::vector<ActivationPolicy> policies, RecomputeModules modules) const {
  if (Tn > full_.max_seq_len)
    throw std::invalid_argument("sequence length " + std::to_string(Tn) + " exceeds the model's " +
                                std::to_string(full_.max_seq_len));
  if (sequence_parallel() && (B * Tn) % spec_.tp != 0)
    throw std::invalid_argument("sequence parallelism needs the tokens of a micro-batch (" +
                                std::to_string(B * Tn) + ") to split evenly over tp " +
                                std::to_string(spec_.tp));
  const auto [lo, hi] = spec_.chunks.at(chunk);
  const size_t N = size_t(B) * Tn, n = size_t(stream_rows(int(N))), L = hi - lo, C = full_.hidden;
  const size_t D = full_.head_dim, QKV = size_t(Hl_ + 2 * Kl_) * D, HD = size_t(Hl_) * D;
  const size_t FW = full_.swiglu ? 2 * size_t(Fl_) : Fl_;
  const bool last = spec_.last && hi == full_.layers;
  if (policies.empty()) policies.assign(L, ActivationPolicy::KeepAll);
  if (policies.size() != L)
    throw std::invalid_argument(std::to_string(policies.size()) + " activation policies for a chunk of " +
                                std::to_string(L) + " layers");
  if (std::count(policies.begin(), policies.end(), ActivationPolicy::RecomputeOps) > 0)
    check_op_rule(full_.swiglu);
  a.chunk = chunk;
  a.B = B;
  a.Tn = Tn;
  a.policies = std::move(policies);
  a.modules = modules;
  a.recomputed_layer = -1;
  a.tokens.assign(N, 0);
  a.targets.assign(N, 0);
  // Full recomputation keeps a layer's input only, selective all but the attention probabilities,
  // per-operator the input, qkv, fc (and CP's keys and values, MoE's routing and experts, mid under SP).
  // A layer's place in a buffer: the layers keeping it in order, then one place the others share (the
  // layer being recomputed).
  const auto places = [L](auto keeps, std::vector<size_t>& place) {
    place.assign(L, 0);
    size_t own = 0;
    for (size_t li = 0; li < L; ++li)
      if (keeps(li)) place[li] = own++;
    for (size_t li = 0; li < L; ++li)
      if (!keeps(li)) place[li] = own;
    return own < L ? own + 1 : own;
  };
  using P = ActivationPolicy;
  const auto policy = [&a](size_t li) { return a.policies[li]; };
  const size_t Lk = places([&](size_t li) { return policy(li) != P::RecomputeLayers; }, a.slots);
  const auto inner = [&](size_t li) {
    return policy(li) == P::KeepAll || policy(li) == P::RecomputeSelective;
  };
  const size_t Li = places(inner, a.inner_slots);
  const size_t L2 = places([&](size_t li) { return inner(li) && !drops_moe_norm(a, int(li), lo + int(li)); },
                           a.norm2_slots);
  const size_t La = places(
      [&](size_t li) {
        return policy(li) == P::KeepAll || (policy(li) == P::RecomputeSelective && !a.modules.core_attn);
      },
      a.att_slots);
  const bool recomputes_layers =
      std::count(a.policies.begin(), a.policies.end(), ActivationPolicy::RecomputeLayers) > 0;
  // The residual stream: (n,C) rows of this rank (all N without sequence parallelism); the norms'
  // outputs are kept whole (gathered), as the GEMMs read them.
  assign_zeros(a.residual, (L + 1) * n * C);
  assign_zeros(a.mid, (sequence_parallel() ? Lk : Li) * n * C);
  assign_zeros(a.ln1, Li * N * C);
  assign_zeros(a.ln1_mean, Li * n);
  assign_zeros(a.ln1_rstd, Li * n);
  assign_zeros(a.qkv, Lk * N * QKV);
  assign_zeros(a.att, La * B * Hl_ * size_t(Tn) * keys(Tn));
  // CP's gathered keys and values: every layer's, but one layer's under full recomputation, which
  // gathers them again (the Program's recompute task repeats the forward's CP all-gather); selective
  // recomputation keeps them, as the Program's has no collective.
  assign_zeros(a.kv, cp_ ? Lk * B * size_t(keys(Tn)) * 2 * Kl_ * D : 0);
  assign_zeros(a.attn_out, Li * N * HD);
  assign_zeros(a.ln2, L2 * N * C);
  assign_zeros(a.ln2_mean, L2 * n);
  assign_zeros(a.ln2_rstd, L2 * n);
  assign_zeros(a.fc, Lk * N * FW);
  assign_zeros(a.fc_act, Li * N * Fl_);
  assign_zeros(a.recomputed_out, recomputes_layers ? n * C : 0);
  assign_zeros(a.lnf, last ? N * C : 0);
  assign_zeros(a.lnf_mean, last ? n : 0);
  assign_zeros(a.lnf_rstd, last ? n : 0);
  assign_zeros(a.probs, last ? N * Vl_ : 0);
  assign_zeros(a.losses, last ? N : 0);
  assign_zeros(a.dresidual, n * C);
  a.moe.assign(full_.experts > 0 ? Lk : 0, {});  // sized by the routing, in the forward
}

const float* ShardedGpt::output(const ChunkActivations& a) const {
  const auto [lo, hi] = spec_.chunks.at(a.chunk);
  return a.residual.data() + size_t(hi - lo) * boundary_size(a);
}

float* ShardedGpt::input(ChunkActivations& a) const {
  return a.residual.data();
}

}  // namespace paratwin::exec
