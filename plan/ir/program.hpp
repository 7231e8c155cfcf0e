// The Program: the execution IR that the analytic evaluator, the simulator and the live engine all
// consume. For each distinct rank role (a pipeline rank on its pool; the dp x tp x cp ranks of a
// pipeline rank differ only in their group members and share the role), an ordered DAG of tasks on
// streams, with FLOPs, bytes and memory on every task. Durations are not in the IR: each evaluator
// costs the tasks on its own hardware model.
#pragma once

#include <string>
#include <vector>

#include "plan/cost/collectives.hpp"
#include "plan/cost/compute.hpp"
#include "plan/cost/expert_load.hpp"
#include "plan/cost/memory.hpp"
#include "plan/ir/plan.hpp"
#include "plan/ir/task_deps.hpp"

namespace paratwin {

enum class TaskKind { Forward, Backward, Recompute, Optimizer, Collective, Send, Recv, Copy };
// DpReplicate: HSDP's all-reduces over the replicas, on a stream of their own as PyTorch FSDP runs them
// (FSDP1's _all_reduce_stream, FSDP2's all_reduce_stream), so that the next unit's gather and
// reduce-scatter in the shard group need not wait for them.
// Ep: the EP all-to-alls that Plan::overlap_ep runs beside the next pass (the others run on Tp).
enum class StreamKind { Compute, Tp, Pp, Dp, Copy, DpReplicate, Ep };
constexpr int kStreamKinds = static_cast<int>(StreamKind::Ep) + 1;  // Ep is the last
// Dp: the ranks ZeRO shards over (Plan::zero_group: dp x cp, a shard group under HSDP); DpReplicate:
// under HSDP, the ranks holding the same shard in each replica; Embedding: first + last stage (tied).
// World: every rank of the job (the step's gradient norm and fp16 overflow flag). ExpertDp: under EP or
// folded, the ranks that hold the same experts (expert_replicas, plan.hpp), over which the experts'
// gradients are reduced and their ZeRO shards gathered, as Megatron-Core's expert-data-parallel group.
enum class GroupKind { None, Tp, Cp, Ep, Dp, Pp, Embedding, DpReplicate, World, ExpertDp };
// Whether a group's members play different roles (pipeline ranks): the tied embedding's pair of the
// first and last stages, and the whole job. Their collectives meet by task name across roles.
inline bool spans_roles(GroupKind kind) {
  return kind == GroupKind::Embedding || kind == GroupKind::World;
}
enum class Direction { Forward, Backward };

// What a data-parallel task or a host copy does for the step. The live engines run each such task
// by its purpose and the parameters it names (Task's parameter span), never by its place in the graph.
enum class Purpose {
  None,            // compute, pipeline transfers, TP/CP/EP collectives: their kind and group say it all
  GradientReduce,  // a bucket's gradients summed over the DP group (all-reduce; reduce-scatter under ZeRO)
  GradientTopK,    // a bucket's top-k (value, index) pairs all-gathered, each rank summing them
  // ZeRO 1/2, after the optimizer step: every rank's updated blocks to every rank; under
  // overlap.param_gather a bucket's span each, before micro-batch 0's forward of its layers.
  ParameterGather,
  PassGather,        // ZeRO 3, before a forward or backward pass: the parameters it needs
  ReplicaReduce,     // HSDP: a gradient reduce-scatter's shard summed over the replicas (all-reduce)
  TiedEmbeddingSum,  // tied embeddings over stages: the first and the last stage's copies summed
  // Before the optimizer step, over every rank (GroupKind::World), a few bytes each. fp16 only: whether
  // any rank's unscaled gradients hold an inf or NaN (the step is skipped and the loss scale lowered if
  // so; Megatron-LM's found_inf, DeepSpeed's overflow check). Then the squares of every rank's gradient
  // share summed for the clipping norm (Megatron-LM's clip_grad_norm, FSDP's clip_grad_norm_). Their
  // reads of the gradients are in the optimizer step's work.
  OverflowCheck,
  GradientNorm,
  ActivationOffload,  // one micro-batch's activations of a chunk, to the host or back
  OptimizerOffload,   // the optimizer state, to the host or back
  // Host to device before a micro-batch's forward of chunk 0 (the token ids the embedding reads) or of
  // the last chunk (the labels the loss reads), as the data loader hands a batch over: its ids, this
  // rank's seq_len / cp of each sequence. The live engines load the micro-batch then.
  InputBatch,
  // A compute task holding a share of its pass's attention (the CP ring's blocks, lowered apart so
  // that the ring's transfers overlap them: plan/cost/ring_attention.hpp); the pass's own task runs the
  // layers in the live engines, which skip this one.
  AttentionBlocks,
  // A compute task holding GEMM pieces of its pass that TP overlap decomposes (the lead pieces, or the
  // rest beside the pass's TP collectives: plan/cost/tp_overlap.hpp); the live engines skip it too.
  TpGemmPieces,
  // A forward task holding the layers of one parameter bucket of micro-batch 0's pass under
  // overlap.param_gather, after that bucket's gather (plan/ir/lower_param_gather.cpp); the pass's last
  // task, after every gather of the chunk, runs the layers in the live engines, which skip this one.
  GatheredForwardPart,
};

// Whether a compute task holds a share of its pass's work apart from the task that runs its layers.
inline bool is_pass_share(Purpose p) {
  return p == Purpose::AttentionBlocks || p == Purpose::TpGemmPieces || p == Purpose::GatheredForwardPart;
}

extern const EnumNames<TaskKind> kTaskKindNames;
extern const EnumNames<StreamKind> kStreamKindNames;
extern const EnumNames<GroupKind> kGroupKindNames;
extern const EnumNames<cost::CollectiveKind> kCollectiveKindNames;
extern const EnumNames<Purpose> kPurposeNames;

struct Task {
  TaskKind kind = TaskKind::Forward;
  StreamKind stream = StreamKind::Compute;
  std::string name;  // identity within the role, stable across evaluators: profiles are keyed by it
  Purpose purpose = Purpose::None;
  // Compute tasks and activation copies: the micro-batch, chunk and layers [layer_begin, layer_end)
  // they work on. Data-parallel tasks (a purpose but the offload copies): their parameter span, the
  // parameters of layers [layer_begin, layer_end) of `chunk` (with the embedding when it starts at layer
  // 0, the final norm and head when it ends at the model's last layer) for micro-batch `microbatch`;
  // microbatch -1: the step's accumulated gradients; layers -1: every layer of the chunk, chunk -1:
  // every parameter the rank holds (a tied-embedding sum: the rank's copy of the tied embedding). A
  // ZeRO-3 gather of one layer before one micro-batch's backward is a span as much as a bucket of
  // several layers reduced once a step.
  int microbatch = -1;
  int chunk = -1;
  int layer_begin = -1, layer_end = -1;

  cost::KernelCost work;  // compute tasks
  Flops recompute_flops;  // of work.gemm_flops, the part that repeats the forward (HFU, not MFU)

  cost::CollectiveKind collective = cost::CollectiveKind::AllReduce;  // collective tasks
  GroupKind group = GroupKind::None;
  cost::GroupPlacement placement;  // who takes part, and where they sit
  Bytes bytes;                     // message size (collective, send/recv, copy)
  int count = 1;                   // identical collectives folded into this task (e.g. 2 per layer)
  // The SMs a collective's kernels hold where the framework, not NCCL, moves the bytes (TP overlap's
  // transfers: cost::tp_overlap_transfer_sms); -1: NCCL's channels, by where the group sits.
  int sms = -1;

  // Send/recv: activations forward, gradients backward; a pass gather: the pass it gathers for.
  Direction direction = Direction::Forward;
  int peer = -1;  // send/recv: the other pipeline rank
  bool peer_same_node = false;
  bool to_host = false;  // copy: device to host (true) or host to device

  Bytes alloc;    // device memory taken when the task starts
  Bytes free;     // and given back when it ends
  TaskDeps deps;  // indices of tasks of the same role that must end first
};

struct Role {
  int pipeline_rank = 0;
  std::string pool;
  int instances = 1;            // ranks that play this role: dp x tp x cp
  double parameters = 0;        // held by one rank before ZeRO sharding
  cost::ModelStateBytes state;  // per rank, after ZeRO, on the device
  Bytes host_state;             // offloaded to host memory
  Bytes buffers;                // communication buffers (DP buckets, PP messages)
  std::vector<Task> tasks;      // in issue order; each stream runs its tasks in this order
};

struct Program {
  Plan plan;
  std::string model;
  std::string cluster;
  int world = 0;
  double tokens_per_iteration = 0;
  Flops model_flops_per_iteration;  // MFU's numerator: training FLOPs of the model, no recompute
  // Per MoE layer, the tokens each EP rank runs (over the balanced count) and the hottest rank's load
  // that its compute tasks and all-to-alls carry (plan/cost/expert_load.hpp); empty without experts.
  std::vector<cost::LayerRouting> routing;
  std::vector<Role> roles;

  size_t task_count() const;
};

// Where the members of one rank's group of `kind` (tp, cp, dp or ep) sit under the plan's rank order.
cost::GroupPlacement group_placement(const Plan& plan, GroupKind kind, const PoolSpec& pool,
                                     const ClusterSpec& cluster);

struct LowerOptions {
  // Without names (every Task::name empty) lowering is cheaper: for callers that only schedule the
  // Program, as the optimizer does for candidates that cannot enter its top list.
  bool task_names = true;
};

// Lowers a verified plan. `verify(plan, ...)` must be empty; a plan that is not verified is a
// programming error (std::logic_error).
Program lower(const Plan& plan, const ModelSpec& model, const ClusterSpec& cluster,
              const TrainingSpec& training, const LowerOptions& options = {});

// Checks the Program's invariants and returns every problem found, in words naming the role and
// task (empty: sound). Dependencies point to earlier tasks of the role; every data-parallel task
// has the purpose its collective, group and the plan allow, and a parameter span inside its role's
// chunks; each micro-batch's (or the step's) gradient buckets reduce every layer of the role once;
// under ZeRO 3 every pass's layers are gathered before it; ZeRO 1/2's parameter gather follows the
// optimizer step, or under overlap.param_gather precedes it, each micro-batch 0 forward of a layer
// waiting for the gather of its bucket.
std::vector<std::string> verify(const Program& program);

// The text form, for golden tests and debugging: one line per task with its stream, sizes and deps.
std::string to_text(const Program& program);

}  // namespace paratwin
