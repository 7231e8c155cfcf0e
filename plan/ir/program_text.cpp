// The Program's text form: stable, one line per task, for golden tests and debugging.
#include <cstdio>

#include "plan/ir/program.hpp"

namespace paratwin {

const EnumNames<TaskKind> kTaskKindNames = {{"forward", TaskKind::Forward},
                                            {"backward", TaskKind::Backward},
                                            {"recompute", TaskKind::Recompute},
                                            {"optimizer", TaskKind::Optimizer},
                                            {"collective", TaskKind::Collective},
                                            {"send", TaskKind::Send},
                                            {"recv", TaskKind::Recv},
                                            {"copy", TaskKind::Copy}};
const EnumNames<StreamKind> kStreamKindNames = {{"compute", StreamKind::Compute},
                                                {"tp", StreamKind::Tp},
                                                {"pp", StreamKind::Pp},
                                                {"dp", StreamKind::Dp},
                                                {"copy", StreamKind::Copy},
                                                {"dp-replicate", StreamKind::DpReplicate},
                                                {"ep", StreamKind::Ep}};
const EnumNames<GroupKind> kGroupKindNames = {{"-", GroupKind::None},
                                              {"tp", GroupKind::Tp},
                                              {"cp", GroupKind::Cp},
                                              {"ep", GroupKind::Ep},
                                              {"dp", GroupKind::Dp},
                                              {"pp", GroupKind::Pp},
                                              {"embedding", GroupKind::Embedding},
                                              {"dp-replicate", GroupKind::DpReplicate},
                                              {"world", GroupKind::World},
                                              {"expert-dp", GroupKind::ExpertDp}};
const EnumNames<cost::CollectiveKind> kCollectiveKindNames = {
    {"all-reduce", cost::CollectiveKind::AllReduce},
    {"all-gather", cost::CollectiveKind::AllGather},
    {"reduce-scatter", cost::CollectiveKind::ReduceScatter},
    {"all-to-all", cost::CollectiveKind::AllToAll},
    {"broadcast", cost::CollectiveKind::Broadcast}};
const EnumNames<Purpose> kPurposeNames = {{"-", Purpose::None},
                                          {"gradient-reduce", Purpose::GradientReduce},
                                          {"gradient-topk", Purpose::GradientTopK},
                                          {"parameter-gather", Purpose::ParameterGather},
                                          {"pass-gather", Purpose::PassGather},
                                          {"replica-reduce", Purpose::ReplicaReduce},
                                          {"tied-embedding-sum", Purpose::TiedEmbeddingSum},
                                          {"overflow-check", Purpose::OverflowCheck},
                                          {"gradient-norm", Purpose::GradientNorm},
                                          {"activation-offload", Purpose::ActivationOffload},
                                          {"optimizer-offload", Purpose::OptimizerOffload},
                                          {"input-batch", Purpose::InputBatch},
                                          {"attention-blocks", Purpose::AttentionBlocks},
                                          {"tp-gemm-pieces", Purpose::TpGemmPieces},
                                          {"gathered-forward-part", Purpose::GatheredForwardPart}};

static std::string describe_task(const Task& t) {
  std::string s;
  switch (t.kind) {
    case TaskKind::Forward:
    case TaskKind::Backward:
    case TaskKind::Recompute:
    case TaskKind::Optimizer:
      s = "gemm " + to_string(t.work.gemm_flops) + ", traffic " + to_string(t.work.traffic()) + ", " +
          std::to_string(t.work.launches) + " kernels";
      if (t.work.flash_forward_flops.value() > 0 || t.work.flash_backward_flops.value() > 0)
        s += ", " + enum_name(t.work.fused_kernel, kAttentionNames) + " " +
             to_string(t.work.flash_forward_flops + t.work.flash_backward_flops);
      if (const Flops full = t.work.flash_full_forward_flops + t.work.flash_full_backward_flops;
          full.value() > 0)
        s += ", " + enum_name(t.work.fused_kernel, kAttentionNames) + " non-causal " + to_string(full);
      break;
    case TaskKind::Collective:
      s = enum_name(t.collective, kCollectiveKindNames) + " " + enum_name(t.group, kGroupKindNames) + "(" +
          std::to_string(t.placement.size) + ", " + std::to_string(t.placement.per_node) + "/node" +
          (t.placement.crosses_pods ? ", across pods" : "") + ") " + to_string(t.bytes) +
          (t.count > 1 ? " x" + std::to_string(t.count) : "") +
          (t.sms == 0  ? ", copy engines"
           : t.sms > 0 ? ", " + std::to_string(t.sms) + " SMs"
                       : "");
      break;
    case TaskKind::Send:
    case TaskKind::Recv:
      s = std::string(t.kind == TaskKind::Send ? "to" : "from") + " rank " + std::to_string(t.peer) +
          (t.peer_same_node ? " (same node) " : " ") + to_string(t.bytes);
      break;
    case TaskKind::Copy:
      s = std::string(t.to_host ? "to host " : "to device ") + to_string(t.bytes);
      break;
  }
  if (t.alloc.value() > 0) s += ", alloc " + to_string(t.alloc);
  if (t.free.value() > 0) s += ", free " + to_string(t.free);
  return s;
}

std::string to_text(const Program& p) {
  std::string out;
  const Plan& pl = p.plan;
  out += "program " + p.model + " on " + p.cluster + ": " + std::to_string(p.world) + " ranks, " +
         std::to_string(p.roles.size()) + " roles, " + std::to_string(p.task_count()) + " tasks\n";
  out += "plan dp=" + std::to_string(pl.dp) + " tp=" + std::to_string(pl.tp) +
         " pp=" + std::to_string(pl.pp) + " cp=" + std::to_string(pl.cp) + " ep=" + std::to_string(pl.ep) +
         (folds_experts(pl) ? " expert_tp=" + std::to_string(pl.expert_tp) : std::string()) +
         " micro_batch=" + std::to_string(pl.micro_batch) +
         " microbatches=" + std::to_string(pl.num_microbatches) +
         " schedule=" + enum_name(pl.schedule, kScheduleNames) + " v=" + std::to_string(pl.virtual_stages) +
         " zero=" + std::to_string(pl.zero) + (pl.sequence_parallel ? " sp" : "") + "\n";
  for (const auto& r : p.roles) {
    out += "role " + std::to_string(r.pipeline_rank) + " pool " + r.pool + " x" +
           std::to_string(r.instances) + ": " + format_count(r.parameters) + " parameters; weights " +
           to_string(r.state.weights) + ", gradients " + to_string(r.state.gradients) + ", optimizer " +
           to_string(r.state.optimizer) + ", buffers " + to_string(r.buffers) +
           (r.host_state.value() > 0 ? ", host " + to_string(r.host_state) : "") + "\n";
    for (size_t i = 0; i < r.tasks.size(); ++i) {
      const Task& t = r.tasks[i];
      std::string deps;
      for (int d : t.deps) deps += (deps.empty() ? "" : ",") + std::to_string(d);
      char head[160];
      std::snprintf(head, sizeof head, "  %4zu %-7s %-28s ", i, enum_name(t.stream, kStreamKindNames).c_str(),
                    t.name.c_str());
      out += head + describe_task(t) + (deps.empty() ? "" : " <- " + deps) + "\n";
    }
  }
  return out;
}

}  // namespace paratwin
