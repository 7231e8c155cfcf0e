// An MoE layer's MLP in the tensor/pipeline/context-parallel shard (ShardedGpt): its expert group, its
// weights and shape as this rank holds them, and its forward and backward on the rank's rows: all N
// tokens with the experts' columns split over TP, or, folded (ShardSpec::fold_experts), the rank's own
// sequence-parallel rows through whole experts.
#include "exec/gpt/tensor_parallel.hpp"

#include <stdexcept>
#include <string>

namespace paratwin::exec {

void ShardedGpt::use_expert_group(Communicator* group) {
  if ((group ? group->size() : 1) != spec_.ep || (group && group->rank() != spec_.ep_rank))
    throw std::invalid_argument("the expert group does not match the shard's ep " + std::to_string(spec_.ep) +
                                ", rank " + std::to_string(spec_.ep_rank));
  experts_.comm = checked_expert_group<float>(group, full_.experts);
}

MoeWeights<float> ShardedGpt::moe_weights(int layer, bool gradients) {
  const Layer& w = layers_[layer];
  // A forward writes no gradient (under ZeRO 2 and 3 no window for them is open then).
  const auto grad = [&](size_t offset) { return gradients ? g(offset) : nullptr; };
  MoeWeights<float> out{p(w.router_w), grad(w.router_w), {}};
  for (const MlpOffsets& x : w.experts)
    out.experts.push_back({p(x.fc_w), p(x.fc_b), p(x.fc_proj_w), p(x.fc_proj_b), grad(x.fc_w), grad(x.fc_b),
                           grad(x.fc_proj_w), grad(x.fc_proj_b)});
  return out;
}

MoeShape ShardedGpt::moe_shape(int N) const {
  return {N, full_.hidden, full_.experts, full_.top_k, Fe_, full_.swiglu ? 2 * Fe_ : Fe_, full_.swiglu};
}

MoeTensorSplit<float> ShardedGpt::moe_split() {
  MoeTensorSplit<float> split;
  if (spec_.fold_experts) return split;  // whole experts on the rank's own tokens: nothing partial
  split.adds_shared = spec_.tp_rank == 0;
  if (spec_.tp > 1) split.sum_over_tp = [this](float* values, size_t n) { allreduce(values, n); };
  return split;
}

void ShardedGpt::moe_forward(ChunkActivations& a, int layer, size_t slot, int rows, const float* ln2,
                             float* out) {
  moe_mlp_forward(a.moe[slot], moe_shape(rows), moe_weights(layer, false), experts_, moe_split(), ln2, out);
}

void ShardedGpt::moe_backward(ChunkActivations& a, int layer, size_t slot, int rows, const float* dout,
                              const float* ln2, float* dln2) {
  MoeWeights<float> w = moe_weights(layer, true);
  // Folded, each TP rank routed its own rows: its router gradient is a part of the sum over the group.
  if (spec_.fold_experts) {
    router_part_.assign(size_t(full_.hidden) * full_.experts, 0.0f);
    w.drouter_w = router_part_.data();
  }
  moe_mlp_backward(a.moe[slot], moe_shape(rows), w, experts_, moe_split(), dout, ln2, dln2);
  if (spec_.fold_experts) {
    allreduce(router_part_.data(), router_part_.size());
    float* d = g(layers_[layer].router_w);
    for (size_t i = 0; i < router_part_.size(); ++i) d[i] += router_part_[i];
  }
  // Each token's choices once: under TP every rank routed the same tokens, folded each its own.
  if (spec_.tp_rank == 0 || spec_.fold_experts)
    count_routed(a.moe[slot], layer, full_.layers, full_.experts, routed_);
}

}  // namespace paratwin::exec
