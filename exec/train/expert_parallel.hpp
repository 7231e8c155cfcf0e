// Expert parallelism on the data-parallel runner (tp = pp = 1): ep consecutive DP ranks form an EP
// group (the lowering carves EP out of dp) and share each MoE layer's experts, rank g of the group
// running experts [g E/ep, (g+1) E/ep). Tokens reach their experts by all-to-all inside the model's
// passes (exec/gpt/moe_layer.cpp); here: which gradients are reduced over which ranks, which
// parameters this rank updates, and the whole model gathered back for checkpoints.
#pragma once

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "exec/comm/communicator.hpp"
#include "exec/gpt/model.hpp"
#include "exec/optim/adamw.hpp"
#include "exec/train/interpreter.hpp"
#include "exec/train/zero3.hpp"

namespace paratwin::exec {

// Time a compute task spent in all-to-alls: wall, and the thread's CPU (MPI's spinning).
struct ExchangeTime {
  double wall_s = 0, cpu_s = 0;
};
// The all-to-alls run inside the compute tasks: moves each compute task's measured exchange time
// (`times`: compute task index -> time) out of its span into the spans of the EP tasks the lowering
// placed after it, laid end to end before the compute task's end, so a profile shows them.
void attribute_expert_exchanges(const Role& role, const std::map<int, ExchangeTime>& times,
                                std::vector<TaskSpan>& spans);

class ExpertParallel {
 public:
  // `dp` holds the plan's dp ranks; `ep` must divide dp and the model's experts (the plan's checks say
  // so first). Splits dp into EP groups and expert replica groups, and hands the EP group to `model`.
  ExpertParallel(Gpt<float>& model, Communicator& dp, int ep);

  // The parameters this rank trains under ZeRO 0: all but the other EP ranks' experts (under ZeRO
  // 1-3 its blocks of parts()).
  const ParameterRanges& owned() const { return owned_; }

  // How a DP bucket's parameters [begin, end) are reduced, and under ZeRO sharded: the dense ones over
  // the whole DP group, this rank's experts over the ranks that hold the same experts (dp / ep of
  // them); other ranks' experts not at all (this rank has no gradient for them).
  std::vector<ShardedRange> parts(size_t begin, size_t end);
  // ZeRO 0: the squared gradient norm of the whole model from this rank's owned gradients (the
  // experts' shares summed over the EP group).
  double gradient_squares(const float* grads) const;
  // Every rank's experts into `values` (weights or ZeRO 0's optimizer moments over the whole model,
  // zero or stale where this rank does not hold them), summed over the EP group: the whole model on
  // every rank.
  void gather_experts(float* values);

 private:
  Communicator& dp_;
  std::unique_ptr<Communicator> group_, replicas_;  // this rank's EP group; the ranks with its experts
  ParameterRanges own_experts_, other_experts_, all_experts_;  // parameter ranges, sorted
  ParameterRanges dense_;                                      // everything else
  ParameterRanges owned_;
};

}  // namespace paratwin::exec
