// A Plan: everything the evaluators need to know about how a model is split over a cluster and
// trained. A plain value, written and read as YAML (round trip exact); the optimizer writes plans,
// users may write them by hand, and sim/ and exec/ read them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plan/spec/scenario.hpp"

namespace paratwin {

struct Plan {
  int dp = 1, tp = 1, pp = 1, cp = 1, ep = 1;
  // The experts' tensor parallelism (Megatron-Core's --expert-tensor-parallel-size): 0, the dense
  // layers' tp (EP carved out of dp); 1 under tp > 1, MoE parallel folding (folds_experts).
  int expert_tp = 0;
  std::string order = "tp-cp-dp-pp";  // rank order, fastest-varying dimension first
  int micro_batch = 1;                // sequences per micro-batch
  int num_microbatches = 1;           // per data-parallel replica and iteration
  Schedule schedule = Schedule::OneFOneB;
  int virtual_stages = 1;  // model chunks per pipeline rank (interleaved)
  bool sequence_parallel = false;
  int zero = 0;
  Reshard reshard = Reshard::AfterForward;  // when ZeRO 3 frees what it gathered (zero 3 only)
  // HSDP (zero 3 only): the dp ranks are dp_replicate replicas of a dp / dp_replicate-way shard group;
  // ZeRO 3 gathers and reduce-scatters within a shard group, and each gradient shard is then
  // all-reduced over the replicas (PyTorch FSDP's HYBRID_SHARD, torchtitan's dp_replicate, DeepSpeed's
  // MiCS). 1: ZeRO shards over the whole DP group.
  int dp_replicate = 1;
  bool offload_optimizer = false;
  bool offload_activations = false;
  CompressionSpec compression;
  Bytes bucket_size{25.0 * 1024 * 1024};  // DP gradient bucket (PyTorch DDP's default)
  bool overlap_dp = true;                 // DP buckets start as soon as their layers' gradients are final
  bool overlap_tp = false;                // TP collectives overlap the GEMMs they belong to
  bool overlap_pp = true;                 // PP sends and receives run on their own stream
  // ZeRO 1: the updated parameters are all-gathered bucket by bucket during the next step's first
  // forward, each bucket's gather issued when the forward reaches the bucket before it (Megatron-LM's
  // --overlap-param-gather); otherwise all at once after the optimizer step.
  bool overlap_param_gather = false;
  // MoE: Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm): in the steady state each
  // pass's EP all-to-alls run on a stream of their own beside the next pass's compute, a forward's beside
  // a backward's and the other way round, instead of between the pass and the next.
  bool overlap_ep = false;
  std::optional<Seconds> checkpoint_interval;
  std::vector<StagePlan> stages;  // pp x virtual_stages chunks in model order

  int chunks() const { return pp * virtual_stages; }
  // Chunks go to pipeline ranks round robin (interleaved: rank r runs chunks r, r + pp, ...).
  int rank_of_chunk(int chunk) const { return chunk % pp; }
  // The chunks pipeline rank `rank` runs, in model order.
  std::vector<int> chunks_of(int rank) const {
    std::vector<int> out;
    for (int c = rank; c < chunks(); c += pp) out.push_back(c);
    return out;
  }
  int gpus() const { return dp * tp * pp * cp; }
  // The ranks ZeRO shards the model state over and its DP collectives span (GroupKind::Dp): dp x cp
  // (the CP ranks of a replica hold the same weights), a shard group's dp / dp_replicate x cp under HSDP.
  int zero_group() const { return dp / dp_replicate * cp; }
  bool operator==(const Plan&) const = default;
};

// MoE parallel folding, Megatron-Core's expert grid (parallel_state.py: its own RankGenerator over the
// same ranks with tp = expert_tp and cp 1): with a stage's ranks numbered tp fastest, then cp, then dp,
// a rank's EP group is ep consecutive numbers (times expert_tp) and its experts' DP group the numbers
// at its place in every EP group, so EP spans the stage's tp x cp x dp ranks instead of dp alone. The
// experts run whole (expert_tp 1) on the rank's sequence-parallel share of the tokens.
inline int experts_tp(const Plan& p) {
  return p.expert_tp > 0 ? p.expert_tp : p.tp;
}
inline bool folds_experts(const Plan& p) {
  return experts_tp(p) < p.tp;
}
// Whether an MoE layer's experts are sharded or replicated apart from its dense parameters (their
// gradients reduced over GroupKind::ExpertDp): under EP or folded.
inline bool experts_apart(const Plan& p) {
  return p.ep > 1 || folds_experts(p);
}
// The ranks that hold each expert of a stage (GroupKind::ExpertDp), of `replicas` = dp x cp: dp x cp / ep,
// folded tp x cp x dp / (expert_tp x ep) (tp / expert_tp is 1 unless folded).
inline int expert_replicas(int tp, int expert_tp, int replicas, int ep) {
  return tp / expert_tp * replicas / ep;
}
// TP collectives of each kind per pass over `layers` layers, `moe_layers` of them MoE: two a layer, after
// attention and the MLP; one in an MoE layer with folded experts, which take the tokens through the EP
// all-to-alls instead. Lowering and the optimizer's bounds count them so.
inline int tp_layer_collectives(int layers, int moe_layers, bool folded) {
  return 2 * layers - (folded ? moe_layers : 0);
}
inline int expert_replicas(const Plan& p) {
  return expert_replicas(p.tp, experts_tp(p), p.dp * p.cp, p.ep);
}

// Megatron-Core's combined 1F1B (plan.overlap.ep, --overlap-moe-expert-parallel-comm) pairs a forward
// with a backward of another micro-batch layer by layer, each one's EP all-to-alls beside the other's
// compute: it needs experts spread over ep > 1 ranks, runs without pipelining (in 1F1B order) or under
// the interleaved schedule, not beside full recompute (its config checks), and not under ZeRO 3, whose
// passes the twin lowers a layer at a time. What keeps it from running, the one rule verify() and the
// optimizer's search ask.
enum class Combined1F1BConflict { None, NoExperts, Schedule, FullRecompute, Zero3 };
inline Combined1F1BConflict combined_1f1b_conflict(bool moe, int ep, int pp, Schedule schedule,
                                                   bool full_recompute, int zero) {
  if (!moe || ep < 2) return Combined1F1BConflict::NoExperts;
  if (schedule != (pp == 1 ? Schedule::OneFOneB : Schedule::Interleaved))
    return Combined1F1BConflict::Schedule;
  if (full_recompute) return Combined1F1BConflict::FullRecompute;
  if (zero == 3) return Combined1F1BConflict::Zero3;
  return Combined1F1BConflict::None;
}

// The plan a scenario fixes. Secondary fields left out take documented defaults (cp, ep 1; schedule
// 1f1b; recompute none; ZeRO 0, resharded after forward; no offload, no compression; overlap of DP and PP
// on); dp follows from the cluster when tp and pp are given; stages are split as evenly as the layers allow.
// A field the optimizer would have to choose (plan: auto, or tp/pp/micro_batch auto) throws InputError saying
// so.
Plan complete_plan(const ScenarioSpec& scenario);
Plan complete_plan(const PlanRequest& request, const ScenarioSpec& scenario);

// Layers split into `chunks` contiguous ranges as evenly as possible (the first ones get the extra). With a
// PipelineSplit the embedding and the loss count as a layer each, of the first and the last chunk
// (PipelineSplit::problem says when that split is not Megatron-Core's).
std::vector<StagePlan> even_stages(int layers, int chunks, const std::string& pool, Recompute recompute,
                                   int recompute_every = 1, PipelineSplit split = {});

// Every problem with a plan for this model, cluster and job, in words a user understands; empty
// when the plan can run.
std::vector<std::string> verify(const Plan& plan, const ModelSpec& model, const ClusterSpec& cluster,
                                const TrainingSpec& training);

// The plan file: the keys of a scenario's `plan:` section, all of them given.
std::string to_yaml(const Plan& plan);
// The plan's recompute as reports name it: the first stage's mode, with selective's modules when they
// are not Megatron's default ("selective (layernorm, moe_act)").
std::string recompute_name(const Plan& plan);
// Reads a plan file; with a scenario, fills what the file leaves out as complete_plan does.
Plan load_plan_file(const std::string& path, const ScenarioSpec& scenario);

}  // namespace paratwin
