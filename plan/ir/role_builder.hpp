// The builder of one Program role, shared by lowering's files (lower.cpp: the passes, the collectives and
// the step; lower_sharded.cpp: ZeRO 2 and 3 as they run per layer and per micro-batch). Internal to
// plan/ir: lower() in program.hpp is the interface.
#pragma once

#include <charconv>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "plan/cost/expert_load.hpp"
#include "plan/cost/tp_overlap.hpp"
#include "plan/ir/buckets.hpp"
#include "plan/ir/program.hpp"
#include "plan/topology/rank_order.hpp"

namespace paratwin::lowering {

using cost::CollectiveKind;

// Where `n` members `stride` ranks apart sit on nodes of the pool.
cost::GroupPlacement place(int n, long long stride, const PoolSpec& pool, const ClusterSpec& cluster);

class RoleBuilder {
 public:
  // `routing`: the model's MoE layers as plan/cost/expert_load.hpp loads them (Program::routing).
  RoleBuilder(const Plan& p, const ModelSpec& m, const ClusterSpec& c, const TrainingSpec& t, int rank,
              bool names, const std::vector<cost::LayerRouting>& routing)
      : p_(p), m_(m), c_(c), t_(t), rank_(rank), names_(names) {
    for (const cost::LayerRouting& l : routing) moe_pace_[l.layer] = l.pace;
    role_.pipeline_rank = rank;
    role_.pool = p.stages[rank].pool;
    role_.instances = p.dp * p.tp * p.cp;
    for (const auto& pool : c.pools)
      if (pool.name == role_.pool) pool_ = &pool;
    tp_ = group_placement(p, GroupKind::Tp, *pool_, c);
    cp_ = group_placement(p, GroupKind::Cp, *pool_, c);
    dp_ = group_placement(p, GroupKind::Dp, *pool_, c);
    ep_ = group_placement(p, GroupKind::Ep, *pool_, c);
    expert_dp_ = group_placement(p, GroupKind::ExpertDp, *pool_, c);
    replicate_ = group_placement(p, GroupKind::DpReplicate, *pool_, c);
    pp_stride_ = rank_strides(p).pp;
    elem_ = cost::element_bytes(t.precision);
    grad_elem_ = cost::gradient_bytes(t);
    gather_elem_ = cost::gathered_weight_bytes(t);
  }

  Role build();

 private:
  int add(Task task) {
    task.work = cost::launched_as_trained(std::move(task.work), t_);
    role_.tasks.push_back(std::move(task));
    return static_cast<int>(role_.tasks.size()) - 1;
  }

  // "mb<mb> c<chunk>", written in place: lowering names every task, and the temporaries of string
  // concatenation were a tenth of its time.
  static std::string tag(int mb, int chunk) {
    // Two ints take at most 22 characters: the space left is never short.
    char buf[32] = {'m', 'b'};
    char* p = std::to_chars(buf + 2, buf + 14, mb).ptr;
    p[0] = ' ', p[1] = 'c';
    p = std::to_chars(p + 2, buf + sizeof buf, chunk).ptr;
    return std::string(buf, p);
  }
  // prefix + tag(mb, chunk), with one allocation at most; empty when the caller wants no names.
  std::string named(std::string_view prefix, int mb, int chunk) const {
    if (!names_) return {};
    const std::string t = tag(mb, chunk);
    std::string out;
    out.reserve(prefix.size() + t.size());
    out.append(prefix).append(t);
    return out;
  }
  // named(prefix, mb, chunk) of one layer's unit (ZeRO 3), " L<layer>" added.
  std::string unit_name(std::string_view prefix, int mb, int chunk, int layer) const {
    return names_ ? named(prefix, mb, chunk) + " L" + std::to_string(layer) : std::string();
  }
  // A forward, backward or recompute pass of micro-batch `mb` over layers [begin, end) of `chunk`.
  static Task pass_task(TaskKind kind, int mb, int chunk, int begin, int end, std::string name) {
    Task t;
    t.kind = kind;
    t.name = std::move(name);
    t.microbatch = mb;
    t.chunk = chunk;
    t.layer_begin = begin;
    t.layer_end = end;
    return t;
  }
  // The ranks that reduce each gradient (the DP group): dp x cp; an expert's, the ranks that hold it
  // (GroupKind::ExpertDp).
  int replicas() const { return p_.dp * p_.cp; }
  int expert_replicas() const { return paratwin::expert_replicas(p_); }
  // Of a span's expert parameters, those data parallelism reduces and gathers: none where each expert
  // has a single holder.
  double dp_experts(double experts) const { return experts_replicated(expert_replicas()) ? experts : 0; }
  // The ranks ZeRO shards the dense model state over: the DP group, a shard group under HSDP.
  int shards() const { return p_.zero_group(); }
  bool last_chunk(int chunk) const { return chunk == p_.chunks() - 1; }
  size_t forward_slot(int mb, int chunk) const { return static_cast<size_t>(mb) * p_.chunks() + chunk; }
  const StagePlan& stage(int chunk) const { return p_.stages[chunk]; }

  cost::LayerWork layer_work() const {
    cost::LayerWork w =
        cost::layer_work(t_, p_.micro_batch, p_.tp, p_.cp, p_.sequence_parallel, p_.ep, p_.overlap_tp);
    w.expert_tp = p_.expert_tp;
    return w;
  }

  // A span's TP collectives of each kind per pass (plan.hpp's tp_layer_collectives).
  int tp_layer_collectives(int begin, int end) const {
    return paratwin::tp_layer_collectives(end - begin, moe_layers(begin, end), folds_experts(p_));
  }

  int moe_layers(int begin, int end) const {
    int n = 0;
    for (int l = begin; l < end; ++l) n += m_.is_moe_layer(l) ? 1 : 0;
    return n;
  }
  // The hottest EP rank's load of MoE layer `layer`: 1 under balanced routing.
  double moe_pace(int layer) const {
    const auto it = moe_pace_.find(layer);
    return it == moe_pace_.end() ? 1.0 : it->second;
  }
  // The MoE layers of [begin, end) by pace: {pace: layers}; one entry under balanced routing.
  std::map<double, int> moe_layers_by_pace(int begin, int end) const {
    std::map<double, int> by_pace;
    for (int l = begin; l < end; ++l)
      if (m_.is_moe_layer(l)) ++by_pace[moe_pace(l)];
    return by_pace;
  }
  // The layers of [begin, end) that `take` selects, by the costing they share: {(MoE, pace, attention
  // window): layers}. One entry for a model of one kind of layer under balanced routing.
  struct LayerKind {
    bool moe = false;
    double pace = 1;  // the hottest EP rank's load (MoE layers)
    int window = 0;   // cost::LayerWork::attention_window
    auto operator<=>(const LayerKind&) const = default;
  };
  template <class Take>
  std::map<LayerKind, int> layers_by_kind(int begin, int end, Take take) const {
    std::map<LayerKind, int> by_kind;
    for (int l = begin; l < end; ++l)
      if (take(l)) {
        const bool moe = m_.is_moe_layer(l);
        ++by_kind[{moe, moe ? moe_pace(l) : 1.0, m_.attention_window(l)}];
      }
    return by_kind;
  }
  // `w` as layer kind `kind` runs it.
  static cost::LayerWork work_of(cost::LayerWork w, const LayerKind& kind) {
    w.expert_load = kind.pace;
    w.attention_window = kind.window;
    return w;
  }

  // Layers [begin, end) of a chunk, forward or backward, with the embedding and head where they live;
  // every micro-batch's pass through a chunk does the same work, and so do ranges of the same layers
  // (ZeRO 3's units): each is costed once, and alike ones share their GEMM list (cost::KernelTimer).
  cost::KernelCost pass_work(int begin, int end, bool forward, bool with_embedding, bool with_head) {
    const auto key = std::tuple{begin, end, forward, with_embedding, with_head};
    auto known = pass_work_.find(key);
    if (known != pass_work_.end()) return known->second;
    double parameters = 0;  // what gradient_copy reads of the range
    for (int l = begin; l < end; ++l) parameters += unit_params_.at(l);
    const auto alike = std::tuple{layers_by_kind(begin, end, [](int) { return true; }), forward,
                                  with_embedding, with_head, parameters};
    auto work = alike_work_.find(alike);
    if (work == alike_work_.end())
      work = alike_work_.emplace(alike, layers_work(begin, end, forward, with_embedding, with_head)).first;
    return pass_work_.emplace(key, work->second).first->second;
  }
  cost::KernelCost layers_work(int begin, int end, bool forward, bool with_embedding, bool with_head) const;
  // The fp8 weight casts of the rank's layers run once a step (cost::fp8_weight_casts_per_step).
  cost::KernelCost fp8_weight_casts() const;
  // Under training.grad_accumulation copy, the copy of layers [begin, end)'s gradients into the fp32
  // buffer after each backward through them (cost::gradient_copy); nothing otherwise.
  cost::KernelCost gradient_copy(int begin, int end) const;

  // One micro-batch's activations held by a chunk (worked out once per chunk).
  Bytes activations(int chunk) {
    if (activations_.empty()) activations_.resize(p_.chunks());
    if (!activations_[chunk]) activations_[chunk] = chunk_activations(chunk);
    return *activations_[chunk];
  }
  // A chunk's activation memory inputs, with layer `layer`'s recompute mode (the stage's with -1).
  cost::ActivationConfig activation_config(int chunk, int layer = -1) const;
  Bytes chunk_activations(int chunk) const;
  // The backward task that runs the head (on the last chunk) also holds the loss's backward transients
  // while it runs (cost::head_backward_transient_bytes): allocated when it starts, freed when it ends.
  void hold_loss_transients(Task& head_backward, int chunk) const {
    const Bytes loss = cost::head_backward_transient_bytes(m_, activation_config(chunk));
    head_backward.alloc += loss;
    head_backward.free += loss;
  }

  // Recomputation (lower_recompute.cpp): the work of recomputing layers [begin, end) of a chunk, each
  // in its mode (StagePlan::layer_recompute), worked out once per range.
  cost::KernelCost recompute_work(int chunk, int begin, int end);
  // The recompute task of micro-batch mb's backward over layers [begin, end), after `deps`, with the
  // collectives its mode repeats; returns what the backward waits for (`deps` when no layer of the
  // range recomputes). `working`: what it holds until the backward ends (the largest layer's dropped
  // activations, cost::recompute_working_bytes).
  TaskDeps recompute(int mb, int chunk, int begin, int end, std::string name, TaskDeps deps, Bytes& working);

  // One rank's share of an activation tensor of the micro-batch (b x s/cp x h), split by tp under SP.
  Bytes boundary_bytes() const {
    double tokens = double(p_.micro_batch) * t_.seq_len / p_.cp;
    if (p_.sequence_parallel) tokens /= p_.tp;
    return Bytes(tokens * m_.hidden * elem_);
  }

  Task collective(CollectiveKind kind, GroupKind group, const cost::GroupPlacement& where, Bytes bytes,
                  int count, StreamKind stream, std::string name, TaskDeps deps);
  // A data-parallel task `t` of a parameter span, as its parts: `dense` bytes over the DP group, and
  // `experts` bytes (none: no such part) over the experts' replicas (GroupKind::ExpertDp) in a task of
  // their own issued right after it, with the same dependencies, as Megatron-Core's DDP and distributed
  // optimizer keep the experts' parameters in buffers of their own and issue their collectives after
  // the dense ones' (on one stream, it runs after it). The parts share t's alloc and free by bytes.
  // Returns the parts' ids: what needs the span waits for both.
  TaskDeps add_dp(Task t, Bytes dense, Bytes experts);

  // TP (and SP), CP and EP collectives of one pass over layers [begin, end), the TP ones after
  // `tp_after`, the others after task `after`; returns their task ids. `gathered` all-gathers and
  // `scattered` reduce-scatters of the pass already ran beside their TP overlap pairs' pieces.
  TaskDeps model_parallel_comm(int chunk, int begin, int end, bool forward, int mb, const TaskDeps& tp_after,
                               int after, int passes, int gathered = 0, int scattered = 0);

  // The TP collectives of each kind (all-reduces, or all-gathers and reduce-scatters under sequence
  // parallelism) of `passes` passes over layers [begin, end) of a chunk.
  int tp_collectives(int chunk, int begin, int end, int passes) const;

  // Whether the backward's column-parallel input gradients are reduce-scattered (all-reduced without
  // sequence parallelism) beside the whole pass (cost::tp_input_grads_beside_pass).
  bool input_grads_beside_pass() const;

  // One TP overlap pair of `passes` passes over layers [begin, end) (plan/cost/tp_overlap.hpp): its
  // pieces summed over the layers that have it, and the `count` collectives beside them.
  struct TpPairRun {
    cost::TpLinear linear;
    CollectiveKind collective;
    cost::TpPieces pieces;
    int count = 0;
  };
  // The pass's pairs in its order (an MoE layer's are some of a dense layer's).
  std::vector<TpPairRun> tp_pairs(int begin, int end, bool forward, int passes) const;

  // Context parallelism over fused attention: the ring's tasks for a pass of `layers` layers (its
  // blocks taken out of `pass`'s work); returns what `pass` waits for.
  TaskDeps ring_attention_tasks(Task& pass, int layers, bool forward);

  // Compute task plus its model-parallel collectives; returns the ids the next step must wait for.
  // Every compute task also waits for the previous one's collectives: a layer needs its input reduced.
  TaskDeps compute_with_comm(Task compute, int chunk, int begin, int end, bool forward, int mb, int passes);

  int p2p(TaskKind kind, Direction dir, int mb, int chunk, TaskDeps deps);

  // ZeRO 2 and 3 per layer and per micro-batch (lower_sharded.cpp).
  // Whether gradients are reduce-scattered every micro-batch (ZeRO 2 and 3 without compression, which
  // keeps its once-a-step exchange).
  bool reduces_every_microbatch() const;
  // A unit's (one layer's, see lower_sharded.cpp) parameters on this rank, as gathered.
  // A ZeRO-3 unit's gathered parameters: its dense ones and, where they are sharded, its experts'.
  Bytes unit_dense_bytes(int layer) const {
    return Bytes((unit_params_.at(layer) - unit_experts_.at(layer)) * gather_elem_);
  }
  Bytes unit_expert_bytes(int layer) const {
    return Bytes(dp_experts(unit_experts_.at(layer)) * gather_elem_);
  }
  Bytes unit_bytes(int layer) const { return unit_dense_bytes(layer) + unit_expert_bytes(layer); }
  Bytes unit_activations(int chunk, int layer) const;
  // training.fsdp's copies around layer `layer`'s unit in micro-batch mb's pass (lower_sharded.cpp): those
  // of its gather where the pass had one (`gathered`), those of its gradient's reduction (`reduced`).
  void add_fsdp_copies(Task& pass, int mb, int layer, bool gathered, bool reduced) const;
  // ZeRO 3's gather of one unit before a pass (its copy freed by the pass that reshards it), after `deps`.
  TaskDeps unit_gather(int mb, int chunk, int layer, bool forward, TaskDeps deps);
  // unit_gather where the unit's parameters are not held (unsharded_), else none.
  TaskDeps gather_unless_held(int mb, int chunk, int layer, bool forward, TaskDeps deps);
  // plan.reshard after_step under ZeRO 3: gradients accumulated unsharded, reduce-scattered once a step.
  bool once_a_step() const;
  // The gradients of layers [begin, end) of a chunk (with the embedding and head where they live) that
  // a reduce-scatter takes: {dense, experts'} (the experts' where they are reduced: dp_experts).
  std::pair<Bytes, Bytes> segment_gradients(int begin, int end) const;
  Bytes segment_gradient_bytes(int begin, int end) const {
    const auto [dense, experts] = segment_gradients(begin, end);
    return dense + experts;
  }
  // The reduce-scatter of layers [begin, end)'s gradients of micro-batch mb, after task `after`; it
  // frees those gradients.
  void unit_reduce(int mb, int chunk, int begin, int end, int after);
  // ZeRO 3's passes, unit by unit; the forward records its tasks in forward_done_, the backward returns
  // what the next step waits for.
  void sharded_forward(int mb, int chunk, TaskDeps deps);
  TaskDeps sharded_backward(int mb, int chunk, TaskDeps deps, bool final);

  void forward(int mb, int chunk);
  // The host-to-device copy of micro-batch mb's token ids or labels before its forward of `chunk`
  // (chunk 0 or the last): Purpose::InputBatch. Returns its id.
  int input_batch(int mb, int chunk);

  // ZeRO 1's parameter gather during the next step's first forward (lower_param_gather.cpp,
  // Plan::overlap_param_gather): whether the plan runs it so, the buckets in the order the forward
  // needs them, bucket g's gather (issued once, after `deps` and the gather before it), and micro-batch
  // 0's forward of a chunk cut at its buckets, each part after its bucket's gather.
  bool gathers_in_forward() const;
  void gather_order();
  TaskDeps bucket_gather(size_t g, TaskDeps deps);
  void gathered_forward(int chunk, TaskDeps deps);

  void backward(int mb, int chunk, bool final_microbatch);

  // Parameters per chunk on this rank and its DP buckets (plan/ir/buckets.hpp); each chunk's final
  // backward is cut where its buckets end.
  void parameters_and_buckets();

  // One task per DP bucket, each as soon as its layers' gradients are final (with DP overlap; else
  // after the last backward): returns their ids.
  TaskDeps gradient_buckets(int last_compute);

  void optimizer();
  // training.launch_blocking: every task waits for the one issued before it.
  void serialize_issue_order();

  const Plan& p_;
  const ModelSpec& m_;
  const ClusterSpec& c_;
  const TrainingSpec& t_;
  const int rank_;
  const bool names_;
  const PoolSpec* pool_ = nullptr;
  cost::GroupPlacement tp_, cp_, dp_, ep_, replicate_, expert_dp_;
  long long pp_stride_ = 1;
  double elem_ = 2;
  double grad_elem_ = 2;    // a gradient's bytes in the buffers and DP reductions
  double gather_elem_ = 2;  // a weight's bytes in the DP weight gathers
  Role role_;
  std::map<int, double> moe_pace_;  // by model layer, MoE layers only
  std::map<int, double> chunk_params_;
  double experts_ = 0;  // of role_.parameters, experts' under EP
  std::map<int, std::vector<std::pair<int, int>>> bucket_segments_;
  std::map<std::pair<int, int>, int> segment_done_;
  std::vector<TaskDeps> forward_done_;  // by forward_slot(micro-batch, chunk): its tasks
  std::vector<int> input_batch_;        // by forward_slot: the data loader's copy before it (-1: none)
  std::map<std::tuple<int, int, bool, bool, bool>, cost::KernelCost> pass_work_;
  // By what layers_work reads of a range: its layers by kind, the direction, embedding, head and the
  // range's parameters.
  std::map<std::tuple<std::map<LayerKind, int>, bool, bool, bool, double>, cost::KernelCost> alike_work_;
  std::map<std::pair<int, int>, cost::KernelCost> recompute_work_;  // by layer range
  std::vector<std::optional<Bytes>> activations_;                   // by chunk
  TaskDeps previous_compute_;
  // Combined 1F1B (Plan::overlap_ep): the pass being lowered leaves its EP all-to-alls to the Ep stream,
  // beside the next pass; the last all-to-all left so, which the pass after next waits for.
  bool ep_beside_next_ = false;
  int ep_beside_ = -1;
  int before_previous_backward_ = -1;  // the compute task the last backward lowered came after
  std::vector<GradientBucket> buckets_;
  std::vector<GradientBucket> gather_order_;  // buckets_ in the forward's order (gathers_in_forward)
  std::vector<TaskDeps> gather_ids_;          // by gather_order_: the gather's tasks, none until issued
  std::map<int, double> unit_params_, unit_experts_;  // by layer (RankParameters::per_layer)
  std::vector<int> reduce_ids_;                       // the reduce-scatters issued every micro-batch
  std::set<int> unsharded_;     // ZeRO 3: the layers whose gathered parameters are held now
  std::set<int> accumulating_;  // reshard after_step: the layers whose unsharded gradient is held
};

}  // namespace paratwin::lowering
