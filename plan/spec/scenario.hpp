// A scenario: which model on which cluster, the training job, a fixed or automatic plan, search
// settings, failures, checkpoint and elasticity policy, and for capacity planning a sweep.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "plan/spec/catalog.hpp"
#include "plan/spec/cluster.hpp"
#include "plan/spec/diagnostics.hpp"
#include "plan/spec/doc.hpp"
#include "plan/spec/model.hpp"
#include "plan/spec/recompute_modules.hpp"
#include "plan/spec/variability.hpp"

namespace paratwin {

enum class OptimizerKind { AdamW, Adam, Sgd };
// How the framework computes attention's scores and values: one fused kernel that never writes the
// s x s scores, or batched GEMMs with the softmax, mask and dropout between them as kernels of their
// own (Megatron-LM before 2022, the live CPU engine). Fused kernels by generation: flash2
// (FlashAttention 2, PyTorch SDPA's flash backend), flash3 (FlashAttention 3, cuDNN / Transformer
// Engine fused attention on Hopper); flash: the newest the device file has figures for. triton: the
// Triton FlashAttention of flash-attn's flash_attn_triton.py (Triton before its MLIR rewrite, Ampere MMA
// instructions on every GPU), which llm-foundry's MPT runs as attn_impl: triton (MPT's default in
// llm-foundry v0.3 and v0.4; llmfoundry/models/layers/flash_attn_triton.py): about half FA2's rate.
enum class AttentionKind { Flash, Flash2, Flash3, Triton, Unfused };
// The widest head the Triton kernel takes (flash_attn_triton.py asserts d <= 128).
inline constexpr int kTritonMaxHeadDim = 128;
// How context parallelism computes attention. gather: the keys and values of the whole sequence
// all-gathered (their gradients reduce-scattered back) and one kernel over them (the twin's first
// approximation). torch_ring: PyTorch's context_parallel (torchtitan's CP); te_p2p: Transformer Engine's
// p2p ring (Megatron-Core's and NeMo's CP); both rings of plan/cost/ring_attention.hpp.
enum class CpAttention { Gather, TorchRing, TeP2p };
// How PyTorch's context_parallel moves the keys and values around its ring (cp_attention torch_ring;
// torchtitan's experimental.context_parallel_rotate_method, torch's set_rotate_method). allgather: one
// all-gather of the whole sequence's keys and values per layer and pass (_AllGatherRotater, the default of
// both). alltoall: each step's keys and values sent to the next rank (_AllToAllRotater: permute_tensor,
// an all_to_all_single with one peer), as the backward's key and value gradients always are.
enum class CpRotate { AllGather, AllToAll };
// How the framework runs TP overlap (plan.overlap.tp, plan/cost/tp_overlap.hpp). async_tp: PyTorch's
// AsyncTP (torchtitan): every all-gather -> GEMM and GEMM -> reduce-scatter pair of sequence parallelism
// split into tp pieces run one after another on the compute stream, the partial results summed in one
// more kernel. userbuffers: Transformer Engine's (Megatron-Core's and NeMo's --tp-comm-overlap):
// ring-exchange all-gathers in tp pieces and pipelined reduce-scatters in 4, the pieces spread over 3
// compute streams; the backward's column-parallel input gradients not split, their reduce-scatters run
// beside the weight gradients' GEMMs (bulk).
enum class TpOverlap { AsyncTp, Userbuffers };
// Which kernels a layer's backward runs besides its GEMMs' and attention's. fused: the framework's
// own (Megatron-LM with Transformer Engine: each linear's bias gradient in its weight-gradient GEMM's
// epilogue, the query, key and value gradients written into one packed buffer). compiled:
// torch.compile's Inductor, which fuses the model code's elementwise ops as `fused` does, but leaves
// the ops it generates no code for to ATen: complex tensors (torchtitan's complex rotary embedding,
// training.rotary complex: "Torchinductor does not support code generation for complex operators",
// torch/_inductor/lowering.py; pytorch/torchtitan issue 15). eager: PyTorch autograd over nn.Linear
// and a fused QKV projection split into views (llm-foundry's MPT): each bias gradient is a reduction of
// the linear's output gradient over the tokens, and the split's backward concatenates the query, key
// and value gradients into the projection's output gradient.
enum class LayerKernels { Fused, Compiled, Eager };
// How a layer's linears are laid out in the framework's model code. fused: one QKV projection (and,
// with SwiGLU, one gate-and-up projection): Megatron-LM's linear_qkv and linear_fc1, llm-foundry's
// MPT Wqkv. separate: a linear each for the queries, keys and values, and for SwiGLU's gate and up
// (torchtitan's and Hugging Face's Llama: wq, wk, wv, w1, w3). Under training.kernels eager the
// layout decides autograd's own kernels (cost::eager_autograd_backward).
enum class Projections { Fused, Separate };
// How the model code rotates the queries and keys (rotary position embedding; under training.kernels
// eager, and complex under compiled, plan/cost/eager_rotary.hpp; fused kernels rotate in one pass). complex:
// torchtitan's and Meta's Llama apply_rotary_emb, an fp32 complex product. rotation_matrix:
// foundation-model-stack's RotaryEmbedding (the LLaMA fms-fsdp trains), each pair of an fp32 upcast times a
// gathered 2 x 2 rotation matrix, then summed over the pair.
enum class Rotary { Complex, RotationMatrix };
// How the loss is computed from the logits. unfused: PyTorch's F.cross_entropy, fp32 kernels that each
// pass over the logits (48 bytes of HBM traffic per bf16 logit over forward and backward, an fp32
// softmax kept for the backward). vocab_parallel: Megatron-LM's unfused vocab_parallel_cross_entropy
// (megatron/core/tensor_parallel/cross_entropy.py; Megatron-DeepSpeed's mpu/cross_entropy.py), eager
// passes over the rank's fp32 logits that write them in place (max, subtract, exp, sum, divide; in
// backward the product by the incoming gradient): 52 bytes per bf16 logit. fused: one kernel forward
// that reads each logit once and keeps only a log-sum-exp per token, one backward that reads the
// logits and writes their gradient (flash-attn's CrossEntropyLoss, llm-foundry's default loss_fn
// fused_crossentropy; the nearest to Transformer Engine's parallel_cross_entropy, Megatron-Core's
// cross_entropy_fusion_impl te).
enum class CrossEntropy { Unfused, VocabParallel, Fused };
// How an MoE layer's tokens reach their experts and come back (Megatron-Core's token dispatchers).
// alltoall (moe_token_dispatcher_type alltoall, the default): each rank permutes its tokens' top_k
// copies into expert order, all-to-alls them, and, with several experts per EP rank, sorts the rows it
// received by local expert (and back before the combine). fused (the flex dispatcher with DeepEP or
// HybridEP): the dispatch and combine kernels place the copies themselves; one permutation each way.
enum class MoeDispatcher { AllToAll, Fused };
// How the framework runs tensor and sequence parallelism. megatron: Megatron-LM's and Transformer
// Engine's linears over activations laid out [s, b, h], so a sequence shard is a contiguous block the
// collectives move in place; a column-parallel linear keeps only its input's sequence shard for the
// backward and all-gathers it again there. dtensor: PyTorch's DTensor plans (torchtitan's
// parallelize_module with SequenceParallel and Shard(1)) over [b, s, h]: the sequence is dimension 1,
// so functional collectives rearrange around NCCL's dimension-0 transfers (each all-gather's output
// concatenated from its chunks along dimension 1, each reduce-scatter's input concatenated from its
// dimension-1 chunks: a copy of the whole activation each), and autograd keeps the gathered input
// whole, with no all-gather again in the backward.
enum class TensorParallelImpl { Megatron, DTensor };
// Which pipeline ranks cut their gradients into plan.bucket_size buckets. every_stage: all of them
// (PyTorch DDP, DeepSpeed). first_stage: Megatron-Core's DistributedDataParallel (r0.8 and later),
// which drops the bucket size on pipeline ranks after the first: each of their model chunks is one
// bucket, reduced after its last backward and (overlap.param_gather) gathered whole from the step's
// start.
enum class DpBuckets { EveryStage, FirstStage };
// Which fp8 training recipe quantizes the linear layers' GEMM operands under precision fp8 (the
// memory-bound passes around each fp8 GEMM: plan/cost/fp8_casts.hpp; the dtype of the inputs the linears
// keep for the backward: cost::keeps_fp8_gemm_inputs). te_delayed: Transformer Engine's
// DelayedScaling (the scale from the amax history, so the cast is one pass; the norm before a
// LayerNormLinear writes fp8 itself); te_current: Transformer Engine's Float8CurrentScaling (an amax
// pass over each tensor before its cast; Megatron-LM's --fp8-recipe tensorwise); torchao_tensorwise:
// torchao's Float8Linear with dynamic tensorwise scaling (torchtitan's float8 converter), every
// linear casting its own input and its weight each micro-batch.
enum class Fp8Recipe { TeDelayed, TeCurrent, TorchaoTensorwise };
// Which PyTorch FSDP runs ZeRO 3, for the memory-bound copies around its per-unit gathers and
// reduce-scatters (cost::fsdp_copy_bytes, plan/cost/fsdp_copies.hpp). none: none costed (DeepSpeed,
// Megatron FSDP). fsdp1: FullyShardedDataParallel's FlatParameter (Composer, fms-fsdp). fsdp2:
// fully_shard's per-parameter sharding (torchtitan).
enum class FsdpCopies { None, Fsdp1, Fsdp2 };
extern const EnumNames<FsdpCopies> kFsdpNames;
// How each micro-batch's gradients reach a whole-step fp32 gradient buffer (training.grad_reduce fp32
// under a 16-bit precision, ZeRO 0 or 1; elsewhere there is no such buffer and this changes nothing).
// in_place: the backward accumulates into the buffer itself (Megatron-LM's gradient_accumulation_fusion
// and main_grad hooks; the embedding's add is charged apart, cost::embedding_backward). copy: autograd
// writes each parameter's gradient in the training precision and the framework adds it, upcast, into
// the buffer after every micro-batch's backward, keeping the 16-bit gradients until the next backward
// begins: DeepSpeed's BF16_Optimizer (update_hp_grads(clear_lp_grads=False) after each backward in its
// pipeline engine, clear_lp_grads before the next), which DeepSpeed runs for bf16 with fp32 gradient
// accumulation under ZeRO 0 and 1 (cost::gradient_copy). unfused: Megatron-LM's
// --no-gradient-accumulation-fusion: each weight gradient GEMM writes a 16-bit gradient, which the
// parameter's backward hook adds into main_grad (one mixed-precision add_) and frees at once.
enum class GradAccumulation { InPlace, Copy, Unfused };
extern const EnumNames<GradAccumulation> kGradAccumulationNames;
extern const EnumNames<OptimizerKind> kOptimizerNames;
extern const EnumNames<CrossEntropy> kCrossEntropyNames;
extern const EnumNames<LayerKernels> kLayerKernelsNames;
extern const EnumNames<Projections> kProjectionsNames;
extern const EnumNames<Rotary> kRotaryNames;
extern const EnumNames<AttentionKind> kAttentionNames;
extern const EnumNames<CpAttention> kCpAttentionNames;
extern const EnumNames<CpRotate> kCpRotateNames;
extern const EnumNames<TpOverlap> kTpOverlapNames;
extern const EnumNames<MoeDispatcher> kMoeDispatcherNames;
extern const EnumNames<TensorParallelImpl> kTensorParallelNames;
extern const EnumNames<DpBuckets> kDpBucketsNames;
extern const EnumNames<Fp8Recipe> kFp8RecipeNames;
extern const EnumNames<Precision> kGradReduceNames;  // fp32, bf16, fp16

struct TrainingSpec {
  std::int64_t global_batch = 0;  // sequences per iteration
  int seq_len = 0;                // the model's seq_len unless given
  Precision precision = Precision::Bf16;
  OptimizerKind optimizer = OptimizerKind::AdamW;
  AttentionKind attention = AttentionKind::Flash;
  CpAttention cp_attention = CpAttention::Gather;
  CpRotate cp_rotate = CpRotate::AllGather;  // under cp_attention torch_ring only
  TpOverlap tp_overlap = TpOverlap::AsyncTp;
  LayerKernels kernels = LayerKernels::Fused;
  Projections projections = Projections::Fused;
  Rotary rotary = Rotary::Complex;
  CrossEntropy cross_entropy = CrossEntropy::Unfused;
  MoeDispatcher moe_dispatcher = MoeDispatcher::AllToAll;
  TensorParallelImpl tensor_parallel = TensorParallelImpl::Megatron;
  DpBuckets dp_buckets = DpBuckets::EveryStage;
  FsdpCopies fsdp = FsdpCopies::None;
  GradAccumulation grad_accumulation = GradAccumulation::InPlace;
  // The precision gradients are accumulated and reduced over data-parallel replicas in: fp32 where the
  // framework keeps fp32 gradient buffers or reduces in fp32 (Megatron-LM's bf16 default, torchtitan's
  // mixed_precision_reduce, Composer's FSDP DEFAULT mode, DeepSpeed's BF16_Optimizer); unset: the
  // training precision's element (bf16 under fp8).
  std::optional<Precision> grad_reduce;
  // Under fp8, the data-parallel weight gathers (ZeRO 3's per unit, ZeRO 1 and 2's after the step) carry
  // fp8 weights, 1 byte each (torchtitan's float8.enable_fsdp_float8_all_gather, Megatron-LM's
  // --fp8-param-gather); otherwise the training precision's 16-bit copy.
  bool fp8_param_gather = false;
  Fp8Recipe fp8_recipe = Fp8Recipe::TeDelayed;  // under precision fp8 only
  // Every kernel launch returns only when its kernel has ended (CUDA_LAUNCH_BLOCKING=1, as BLOOM's
  // training script sets it): the host cannot run ahead, so the device waits for the host's dispatch
  // of each kernel (efficiency.synchronous_launch), and a collective or transfer on a side stream
  // holds the host until it ends, so nothing overlaps: a rank's tasks run one after another in issue
  // order.
  bool launch_blocking = false;
  // The model repeats grouped-query attention's key and value heads to the query heads before the
  // attention kernel (torchtitan's Llama: repeat_kv before F.scaled_dot_product_attention); context
  // parallelism then moves keys and values at the query heads. Megatron-LM and Transformer Engine pass
  // the grouped heads (false).
  bool repeat_kv = false;
  std::optional<double> tokens;       // training budget in tokens
  std::optional<std::int64_t> steps;  // or in iterations
};

enum class Schedule { GPipe, OneFOneB, Interleaved };
// What a layer keeps for its backward and recomputes (docs/scenario-language.md, plan.recompute):
// none keeps everything; selective drops the attention core (Megatron-LM's selective granularity);
// op keeps the outputs of every other linear and of attention and recomputes the rest of the layer
// (torchtitan's per-operator selective checkpointing, selective_ac_option = "op"); full keeps the
// layer's input only.
enum class Recompute { None, Selective, Op, Full };
enum class CompressionKind { None, TopK };
// When ZeRO 3 frees a unit's gathered parameters (docs/scenario-language.md, plan.reshard), as PyTorch FSDP
// names it: after_forward after each forward and backward (FSDP FULL_SHARD, FSDP2
// reshard_after_forward=True); after_backward keeps them from the forward to the backward (FSDP2
// reshard_after_forward=False, FSDP1 SHARD_GRAD_OP); after_step gathers each unit once a step and keeps
// its parameters and unsharded gradients until its last backward of the step, where the gradients are
// reduce-scattered once (FSDP's no_sync; FSDP2 under PyTorch's pipelining schedules).
enum class Reshard { AfterForward, AfterBackward, AfterStep };
extern const EnumNames<Schedule> kScheduleNames;
extern const EnumNames<Reshard> kReshardNames;
extern const EnumNames<Recompute> kRecomputeNames;
extern const EnumNames<CompressionKind> kCompressionNames;

struct CompressionSpec {
  CompressionKind kind = CompressionKind::None;
  double ratio = 1.0;  // share of gradient entries sent (topk)
  bool error_feedback = true;
  int warmup_steps = 0;  // dense steps before compression starts

  bool operator==(const CompressionSpec&) const = default;
};

// How a fixed plan splits the layers over its chunks when it gives no plan.stages: evenly, or as
// Megatron-Core's account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split do,
// counting the embedding as one more layer of the first chunk and the loss (with the head) as one more
// of the last, so that those chunks hold a transformer layer less.
struct PipelineSplit {
  bool embedding = false;
  bool loss = false;

  int extra_layers() const { return (embedding ? 1 : 0) + (loss ? 1 : 0); }
  // Why this split cannot spread `layers` over `chunks` as Megatron-Core does (it asserts that the
  // layers, with the embedding and loss it counts, divide evenly over the chunks); empty when it can.
  std::string problem(int layers, int chunks) const;
  bool operator==(const PipelineSplit&) const = default;
};

// One model chunk of a pipeline: transformer layers [layer_begin, layer_end), the node pool that runs
// it and its recompute mode. Chunk c runs on pipeline rank c % pp; the embedding belongs to chunk 0
// and the head and loss to the last chunk.
struct StagePlan {
  int layer_begin = 0;
  int layer_end = 0;
  std::string pool;
  Recompute recompute = Recompute::None;
  // Recompute only every n-th layer, those whose number counted from 1 over the whole model is a
  // multiple of n; the others keep everything (torchtitan's selective_ac_option = "n" and fms-fsdp's
  // every_xth_item wrap every n-th block they build). 1: every layer.
  int recompute_every = 1;
  RecomputeModules recompute_modules{};  // what `selective` recomputes: the plan's, the same in every stage
  // Recompute only the chunk's first n layers, the others keep everything (Megatron-LM's
  // --recompute-method block --recompute-num-layers n, counted in each model chunk). 0: every layer.
  int recompute_layers = 0;

  // The recompute mode of layer `layer` (of this stage): `recompute` on every recompute_every-th
  // layer (on the first recompute_layers of the stage), none on the others. The one rule every
  // consumer asks.
  Recompute layer_recompute(int layer) const {
    if (recompute_layers > 0 && layer - layer_begin >= recompute_layers) return Recompute::None;
    return recompute_every <= 1 || (layer + 1) % recompute_every == 0 ? recompute : Recompute::None;
  }

  bool operator==(const StagePlan&) const = default;
};

// Rank orders: parallel dimensions listed fastest-varying first (Megatron-LM's default first).
extern const std::vector<std::string> kRankOrders;

// The scenario's `plan:` section. Each field left out or written `auto` is for the optimizer to
// choose (std::nullopt); `plan: auto` leaves all of them to it.
struct PlanRequest {
  std::optional<int> dp, tp, pp, cp, ep;
  std::optional<int> expert_tp;  // Plan::expert_tp
  std::optional<int> micro_batch;
  std::optional<Schedule> schedule;
  std::optional<int> virtual_stages;
  std::optional<Recompute> recompute;
  std::optional<int> recompute_every;                 // StagePlan::recompute_every
  std::optional<int> recompute_layers;                // StagePlan::recompute_layers, every stage's
  std::optional<RecomputeModules> recompute_modules;  // StagePlan::recompute_modules, every stage's
  std::optional<bool> sequence_parallel;
  std::optional<int> zero;
  std::optional<Reshard> reshard;
  std::optional<int> dp_replicate;  // Plan::dp_replicate (HSDP); the search does not choose it
  std::optional<bool> offload_optimizer, offload_activations;
  std::optional<CompressionSpec> compression;
  std::optional<Bytes> bucket_size;
  std::optional<bool> overlap_dp, overlap_tp, overlap_pp;
  std::optional<bool> overlap_param_gather;  // plan.overlap.param_gather (Plan::overlap_param_gather)
  std::optional<bool> overlap_ep;            // plan.overlap.ep (Plan::overlap_ep)
  // Written in plan files (and allowed in scenarios): everything else a plan says.
  std::optional<std::string> order;
  std::optional<int> num_microbatches;
  std::optional<std::vector<StagePlan>> stages;
  std::optional<PipelineSplit> pipeline_split;  // without stages, in a plan with tp, pp and micro_batch
  std::optional<Seconds> checkpoint_interval;

  bool fully_automatic() const;
  bool fully_fixed() const;  // every degree and micro-batch given
};

enum class Objective { IterationTime, CostPerToken, Cost, Energy, TimeToTrain };
extern const EnumNames<Objective> kObjectiveNames;

struct SearchSpec {
  Objective objective = Objective::IterationTime;
  std::optional<int> max_gpus;
  int top = 5;
  bool tp_across_nodes = false;  // allow TP groups to leave a node's fast fabric
};

enum class Component { Gpu, Host, Nic, Link, Switch };
enum class FailureDistribution { Exponential, Weibull };
extern const EnumNames<Component> kComponentNames;
extern const EnumNames<FailureDistribution> kFailureDistributionNames;

struct ComponentFailures {
  Seconds mtbf;  // mean time between failures of one component
  FailureDistribution distribution = FailureDistribution::Exponential;
  double shape = 1.0;  // Weibull shape
};

struct FailureEvent {
  Seconds at;
  Component component = Component::Gpu;
  int index = 0;  // which one, counted over the cluster
};

struct StragglerSpec {
  int count = 0;        // hosts that straggle
  double slowdown = 1;  // their compute takes this many times longer
};

struct FailureSpec {
  std::map<Component, ComponentFailures> rates;
  std::vector<FailureEvent> events;
  std::vector<StragglerSpec> stragglers;
  Seconds detection{30};
  Seconds restart{300};
  Seconds repair{4 * 3600};
};

struct CheckpointSpec {
  std::optional<Seconds> interval;  // nullopt: chosen to maximize goodput
};

enum class ElasticPolicy { Restart, Spares, Shrink };
extern const EnumNames<ElasticPolicy> kElasticPolicyNames;

struct ElasticitySpec {
  ElasticPolicy policy = ElasticPolicy::Restart;
  int spares = 0;  // hot spare GPUs
  std::optional<int> min_gpus;
};

// One field a sweep sets and its value (an entry of `sweep.list`).
struct SweepSetting {
  std::string path;   // dotted, as for --set
  Location location;  // of the path, in the scenario (or on the command line)
  DocNode value;
};

// One axis of a sweep's grid: a field and the values it takes.
struct SweepAxis {
  std::string path;   // dotted, as for --set
  Location location;  // of the path, in the scenario (or on the command line)
  std::vector<DocNode> values;
};

// The points of a sweep: every entry of `list` (or one empty entry) crossed with every combination of
// the grid's axes. `simulate` verifies each point's plan with the simulator.
struct SweepSpec {
  std::vector<SweepAxis> grid;
  std::vector<std::vector<SweepSetting>> list;
  bool simulate = false;
  Location location;  // of the `sweep:` section

  bool empty() const { return grid.empty() && list.empty(); }
};

struct GoalSpec {
  std::optional<Seconds> deadline;
  std::optional<Dollars> budget;
};

struct ScenarioSpec {
  std::string name;
  std::string description;
  std::string file;  // where it was loaded from ("" for text)
  ModelSpec model;
  ClusterSpec cluster;
  TrainingSpec training;
  PlanRequest plan;
  SearchSpec search;
  FailureSpec failures;
  VariabilitySpec variability;  // kernel-time noise and per-GPU slowness (simulate)
  CheckpointSpec checkpoint;
  ElasticitySpec elasticity;
  SweepSpec sweep;
  GoalSpec goal;

  FieldLocations locations;          // where each field was written
  std::vector<Diagnostic> warnings;  // problems that do not stop anything
  DocNode document;                  // the scenario as written, overrides applied (for sweeps)
};

// Loads a scenario file, applies overrides in order, resolves its model and cluster and checks it.
// Every problem is reported at once in one InputError.
ScenarioSpec load_scenario(const std::string& path, const std::vector<Override>& overrides = {},
                           const Catalog& catalog = Catalog::installed());
// As load_scenario, from a document already parsed (text, tests, fuzzing, sweeps).
ScenarioSpec load_scenario(DocNode document, const std::vector<Override>& overrides = {},
                           const Catalog& catalog = Catalog::installed());

// The overrides that set `settings`, least specific path first (`cluster` before `cluster.nodes`), so
// that swapping a whole field never undoes a setting inside it. Each override's text is PATH=VALUE.
std::vector<Override> sweep_overrides(const std::vector<SweepSetting>& settings);

// Checks each value of `sweep` against its field: a grid value applied alone to the scenario, a list
// entry as a whole. A problem with a path is reported once, at the path; one with a value, at the value.
void check_sweep_values(const ScenarioSpec& scenario, const SweepSpec& sweep, const Catalog& catalog,
                        Diagnostics& diag);

// Parses one job's scenario document with no overrides: problems go to `diag`; the cross-field checks
// (check_scenario) run only with `run_checks` and when parsing found no error. For several jobs'
// scenarios (plan/spec/jobs.hpp), each checked on its own share of the cluster.
ScenarioSpec parse_scenario_document(DocNode document, const Catalog& catalog, Diagnostics& diag,
                                     bool run_checks);

// Parses a `plan:` section or a plan file (the same keys); `auto` and absent fields stay empty.
PlanRequest parse_plan_request(const DocNode& node, Diagnostics& diag, FieldLocations* locations = nullptr);

// Loads a model or cluster file on its own (validate, list).
ModelSpec load_model_file(const std::string& path);
ClusterSpec load_cluster_file(const std::string& path);

// Resolves a `model:` or `cluster:` value into the document it stands for: a catalog name, a path
// (relative to the file it is written in), an inline mapping, or `{from: NAME|PATH, ...overrides}`.
// Returns nullopt after reporting why when it cannot.
std::optional<DocNode> resolve_reference(const DocNode& value, CatalogKind kind, const Catalog& catalog,
                                         Diagnostics& diag);

}  // namespace paratwin
