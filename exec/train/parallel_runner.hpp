// The tasks of one rank of a live CPU run, whatever the plan's degrees (data parallelism alone is the
// tp = pp = cp = 1 case): forward, recomputation and backward of its chunks' shards, activations and
// gradients sent point to point between pipeline stages, DP gradient buckets over its shard (top-k
// compressed when the plan says so), the tied embedding's gradients summed between the first and the
// last stage, ZeRO 1-3 and the sharded AdamW step (its state offloaded between steps when the plan
// says so). Data-parallel tasks run by the purpose and parameter span the Program gives them.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "exec/comm/communicator.hpp"
#include "exec/data/loader.hpp"
#include "exec/gpt/context_parallel.hpp"
#include "exec/gpt/model.hpp"
#include "exec/gpt/tensor_parallel.hpp"
#include "exec/optim/adamw.hpp"
#include "exec/optim/schedule.hpp"
#include "exec/train/activation_offload.hpp"
#include "exec/train/dp_blocks.hpp"
#include "exec/train/optimizer_offload.hpp"
#include "exec/train/parallel_zero3.hpp"
#include "exec/train/sharded_gradients.hpp"
#include "exec/train/step_runner.hpp"
#include "exec/train/topk_compression.hpp"
#include "plan/ir/program.hpp"
#include "plan/spec/scenario.hpp"
#include "plan/topology/rank_order.hpp"

namespace paratwin::exec {

// Where a world rank sits under the plan's rank order (plan.order, fastest-varying first).
using RankCoordinates = RankCoords;
RankCoordinates rank_coordinates(const Plan& plan, int world_rank);

// A piece of one of a rank's chunks whose activations come and go together: the layers of one of the
// Program's forward tasks (the whole chunk, or under ZeRO 3 one layer, whose activations its backward
// frees as the Program says). The shard's model runs each as a chunk of its own.
struct ActivationUnit {
  int chunk = 0;  // the plan's chunk (stage) it is part of
  int layer_begin = 0, layer_end = 0;
};
// The role's units in model order. Throws std::logic_error when its forward tasks do not cut each of
// its chunks into contiguous spans, each run once.
std::vector<ActivationUnit> activation_units(const Plan& plan, const Role& role);

struct ParallelSetup {
  const ScenarioSpec& scenario;
  const Plan& plan;
  const Program& program;
  Communicator& world;
  const DataLoader& data;
  const LearningRate& lr;
  AdamWSettings adamw;
  float max_grad_norm = 1.0f;
  uint64_t seed = 1337;  // of the initial weights (exec/gpt/init.hpp)
};

class ParallelRunner final : public StepRunner {
 public:
  // Collective over `world` (it splits the TP, DP, PP and embedding groups). This rank's shard of the
  // model `config` describes starts from GPT-2's initial weights for setup.seed, drawn here for the
  // shard alone (the values the whole model holds there).
  ParallelRunner(const ParallelSetup& setup, const GptConfig& config);
  ~ParallelRunner() override;

  const RankCoordinates& coordinates() const { return at_; }
  const Role& role() const { return setup_.program.roles.at(at_.pp); }
  ShardedGpt& model() { return model_; }

  // Collective over the DP group under ZeRO 3 and overlap.param_gather (between steps): the shard's
  // weights, whole.
  const Buffer<float>& shard_weights();

  void begin_step(int64_t step) override;
  const std::vector<double>& losses() const override { return losses_; }
  double dp_bytes() const override { return dp_bytes_; }
  std::vector<double> routed_tokens() const override { return model_.routed_tokens(); }
  void compute(int index, const Task& task) override;
  int start(int index, const Task& task) override;
  bool poll(int handle) override;
  void finish(int handle) override;

  // The TP, CP and EP collectives ran inside the compute tasks: moves their measured time from each
  // compute task (its CPU time) to the Program's TP, CP and EP tasks that follow it (their span), so
  // that a profile times them as the twin costs them.
  void attribute_tp_time(std::vector<TaskSpan>& spans) const;

  // Collective over the world: the whole model's weights and AdamW moments, assembled from every
  // rank's shard, into buffers laid out as parameter_layout() (sized here).
  void gather_state(std::vector<float>& weights, std::vector<float>& m, std::vector<float>& v);
  // Takes this rank's shard of a whole model's weights and moments (a checkpoint's).
  void scatter_state(const std::vector<float>& weights, const std::vector<float>& m,
                     const std::vector<float>& v);

 private:
  // Activation units (parallel_units.cpp): a micro-batch's activations of one unit, allocated when
  // first used in a step; the unit of a chunk's layer, and its first and last.
  ChunkActivations& slot(int microbatch, int unit);
  int unit_of(int chunk, int layer) const;
  int first_unit(int chunk) const;
  int last_unit(int chunk) const;
  // The last backward segment of a micro-batch's unit is done: what its forward kept is freed (the
  // gradient buffer stays, for the unit below or the send back), and allocated again by the next
  // step's forward.
  void release(int microbatch, int unit);
  // What a micro-batch's forward of a chunk kept, over its units (activation offload moves it).
  std::vector<Buffer<float>*> chunk_buffers(int microbatch, int chunk);
  // A forward or backward task over its unit: the residual stream (its gradient) handed from the unit
  // below (above), the data, the loss, the unit's release.
  void run_forward(int index, const Task& task);
  // An InputBatch task: this DP replica's share of the step's global sequences for its micro-batch.
  void load_batch(const Task& task);
  void run_backward(int index, const Task& task);
  // A recompute task: the top layer of its span that the backward needs again (it recomputes each
  // next one itself).
  void recompute_first(const Task& task);
  int tag(int microbatch, int boundary, Direction d) const;
  // Whether any gradient overflowed (skip the step) or their global norm, over every rank.
  int check_gradients(const Task& task);
  void optimizer_step();
  // A task's collectives under way, each on its communicator.
  struct Requests {
    std::vector<Communicator*> comms;
    std::vector<Communicator::Handle> handles;
    void add(Communicator* c, Communicator::Handle h) {
      comms.push_back(c);
      handles.push_back(h);
    }
  };
  int launched(Requests requests);  // its handle for poll() and finish()
  // What start() runs, by the task's purpose: pipeline transfers (index -1: on the compute stream),
  // a bucket's gradient reduction, ZeRO 1/2's parameter gather, the tied embedding's sum.
  int transfer(int index, const Task& task);
  int reduce_gradients(int index, const Task& task);
  int gather_parameters(const Task& task);
  // The all-gathers of the bucket parts inside parameters [begin, end) (ZeRO 1/2) that `task` moves,
  // counted in the step's DP bytes (none: all of them, between steps, not counted).
  Requests start_parameter_gathers(size_t begin, size_t end, const Task* task);
  // Under overlap.param_gather a step's update reaches the other replicas during the next step's
  // forward (plan/ir/lower_param_gather.cpp): between steps, whoever reads the whole weights (a
  // checkpoint, the end of the run) gathers them first. Collective over the DP group.
  void gather_updated_parameters();
  int sum_tied_embedding();
  // Optimizer and activation offload and top-k compression (parallel_memory_modes.cpp): set up after
  // the buckets; start() hands them the tasks of their purposes; complete() ends what one of its handles
  // waits for beyond its requests (false: not yet).
  void set_up_memory_modes();
  int start_memory_mode(int index, const Task& task);
  bool complete(int handle, bool block);
  // Activation offload: the d2h copy after a forward may free the chunk's output before its send has
  // read it, so the send reads a copy, taken here when the forward ends.
  void keep_output(const Task& forward);
  // ZeRO 2 and 3 (parallel_sharding.cpp). Set up after the buckets: ZeRO 3's gathers, and where the
  // Program reduce-scatters every micro-batch's gradients, the partition they are held in.
  void set_up_sharding();
  // What each backward opens of the sharded gradients (the parts its micro-batch's reduce-scatters of
  // its layers name), found once from the Program; opened before the backward task `index` runs.
  void plan_gradient_windows();
  void open_gradient_windows(int index);
  // A reduce-scatter of one micro-batch's gradients of a span, into the partition.
  int reduce_sharded(int index, const Task& task);
  // HSDP: the blocks that reduce-scatter left, summed over the replicas before they join the partition.
  int sum_over_replicas(const Task& task);
  // Starts one collective per part of DP bucket task `bucket` (start: its id in sharded_), launched under
  // one handle, as a reduction the runner settles; `done` is called with each id when they end.
  using StartPart = std::function<int(std::pair<size_t, size_t>, Communicator*,
                                      std::vector<std::pair<Communicator*, Communicator::Handle>>&)>;
  int each_sharded_part(int bucket, void (ShardedGradients::*done)(int), const StartPart& start);
  // ZeRO 3: the gather of the parameters of a pass (task `index`), under `handle`; a pass that frees
  // them as plan.reshard says (pass_reshards, plan/ir/reshard_rule.hpp) gives back those gathered
  // before it.
  void request_pass_gather(int handle, int index, const Task& task);
  // Waits for the reduce-scatters issued before the compute task that preceded this one (all of them:
  // `all`), see parallel_sharding.cpp.
  void settle_reductions(bool all = false);
  void pass_ended(int index, const Task& task);
  // The gradient this rank's optimizer reads at layout offset `offset` onwards: its partition's under
  // sharded gradients, else the shard's gradient buffer.
  float* gradient_at(size_t offset);
  // The parameters a pass over the task's span reads: its span, and the head when the pass runs it and
  // it lies outside the span (tied embeddings on one stage: the embedding, in the first layer's span).
  std::vector<std::pair<size_t, size_t>> pass_ranges(const Task& task) const;
  bool runs_head(const Task& task) const;
  // The local parameters a task's span names (plan/ir/program.hpp): its layers, else its chunk's, else
  // the whole shard.
  std::pair<size_t, size_t> parameter_range(const Task& task) const;
  // Whether a data-parallel task moves the experts' parameters of its span (`expert`) or the others:
  // under EP the Program moves the experts' in a task over their replicas (GroupKind::ExpertDp), where
  // they have more than one holder, and the rest in a task over the DP group.
  bool moves(const Task& task, bool expert) const;
  // The pieces of `ranges` that the task moves.
  std::vector<std::pair<size_t, size_t>> moved_ranges(
      const Task& task, const std::vector<std::pair<size_t, size_t>>& ranges) const;
  // What each layer of an activation unit keeps for its backward: its stage's recompute mode on the
  // layers StagePlan::layer_recompute names, everything on the others.
  std::vector<ActivationPolicy> activation_policies(int unit) const;
  // Of the ranks whose copies of a tensor are summed (its DP replicas, dp x cp ranks; for an expert,
  // the replicas of its EP rank), this rank's index: 0 counts the tensor once.
  int holder(const ShardTensor& t) const {
    return t.expert && expert_replicas_ ? expert_replicas_->rank() : dp_->rank();
  }

  ParallelSetup setup_;
  RankCoordinates at_;
  // dp_: the DP group ZeRO shards over (dp x cp; under HSDP the rank's shard group); replicas_: under
  // HSDP, the ranks holding the same shard in the other replicas.
  std::unique_ptr<Communicator> tp_, dp_, pp_, embedding_, cp_, replicas_;
  std::vector<ActivationUnit> units_;  // the model's chunks (ShardSpec::chunks)
  ShardedGpt model_;
  std::unique_ptr<ContextParallel> context_;  // under cp > 1
  // Expert parallelism (ep > 1): this rank's EP group (ep consecutive DP ranks at its cp, tp and
  // stage), and the ranks that hold the same experts (over cp and the other EP groups), over which the
  // experts' gradients are summed; the shard's expert tensors, as sorted ranges.
  std::unique_ptr<Communicator> experts_, expert_replicas_;
  ParameterRanges expert_ranges_;
  // This step's micro-batches as their InputBatch tasks loaded them (under CP this rank's share of each
  // sequence), by micro-batch, until the forward takes them.
  std::map<int, Batch> batches_;
  std::unique_ptr<AdamW> adamw_;
  int64_t step_ = 0;
  std::vector<double> losses_;
  double dp_bytes_ = 0;
  double gradient_norm_ = 0;                               // this step's, over every rank (check_gradients)
  bool skip_step_ = false;                                 // a gradient overflowed on some rank
  std::map<std::pair<int, int>, ChunkActivations> slots_;  // (micro-batch, unit) -> activations
  std::set<std::pair<int, int>> released_;                 // slots whose kept buffers are freed
  // This step's forward sends, by (micro-batch, chunk): the activations they read stay until they end.
  std::map<std::pair<int, int>, Communicator::Handle> forward_sends_;
  // DP bucket task -> its gradients' parts: the dense ones reduced (and under ZeRO sharded) over the DP
  // group, this rank's experts over their replicas.
  std::map<int, std::vector<ShardedRange>> buckets_;
  std::vector<ShardedRange> parts_;  // the buckets' distinct parts (the tasks of every micro-batch alike)
  std::unique_ptr<Zero3Gathers> zero3_;
  // ZeRO 3: the gathered parameters held, by their gather task, chunk and layers.
  struct PassTicket {
    int gather, chunk;
    int layer_begin, layer_end;
    int ticket;
  };
  std::vector<PassTicket> pass_tickets_;
  // ZeRO 2 and 3 reducing every micro-batch: the gradients as this rank's partition, and the parts
  // each backward task opens.
  std::unique_ptr<ShardedGradients> sharded_;
  std::map<int, std::vector<std::pair<size_t, size_t>>> backward_parts_;
  std::deque<std::pair<int, int>> reductions_;  // sharded reductions in flight: (handle, computes_ then)
  int computes_ = 0;                            // compute tasks begun this step
  std::unique_ptr<TopKCompressor> compressor_;
  std::unique_ptr<OptimizerOffload> offload_;
  std::map<int, int> tickets_;                    // handle -> its ZeRO-3 gather
  std::map<int, std::function<void()>> on_done_;  // handle -> what follows its requests (top-k)
  std::map<int, int> copies_;                     // handle -> its activation copy's ticket
  // Activation offload: the outputs forward sends read, from the forward to the send's start, then
  // by handle (on the compute stream: until the optimizer step has waited for them).
  std::map<std::pair<int, int>, Buffer<float>> outputs_;
  std::map<int, Buffer<float>> sending_;
  std::vector<Buffer<float>> sending_in_line_;
  std::unique_ptr<ActivationOffload> activations_;  // after slots_: its copies end before they go
  std::pair<size_t, size_t> tied_;  // the tied embedding's range: a part of its own (empty if none)
  // A tied embedding reduced early (plan/ir/buckets.hpp): wte's range (the head's part, in the first
  // bucket), the bucket that gathers every replica's lookup rows, and what it gathered: per row, the
  // local vocabulary row, then its C gradients.
  std::pair<size_t, size_t> early_head_{0, 0};
  int lookup_bucket_ = -1;
  Buffer<float> gathered_lookup_;
  void gather_lookup_rows(Requests& requests);
  void add_gathered_lookup_rows();
  std::vector<std::pair<size_t, size_t>> owned_;              // ranges this rank's optimizer updates
  ParameterRanges counted_;                                   // ranges counted in the gradient norm here
  std::vector<std::vector<Communicator::Handle>> in_flight_;  // per start(): (communicator, handle)
  std::vector<std::vector<Communicator*>> in_flight_comm_;
  std::vector<Communicator::Handle> pending_sends_;  // sends issued on the compute stream
  std::map<int, double> tp_seconds_;                 // compute task -> wall time in its TP collectives
  std::map<int, double> cp_seconds_;                 // and in its CP collectives
  std::map<int, double> ep_seconds_;                 // and in its experts' all-to-alls
};

}  // namespace paratwin::exec
