// The tasks of one rank of a live CPU run, whatever the plan's degrees (data parallelism alone is the
// tp = pp = cp = 1 case): forward, recomputation and backward of its chunks' shards, activations and
// gradients sent point to point between pipeline stages, DP gradient buckets over its shard (top-k
// compressed when the plan says so), the tied embedding's gradients summed between the first and the
// last stage, ZeRO 1-3 and the sharded AdamW step (its state offloaded between steps when the plan
// says so). Data-parallel tasks run by the purpose and parameter span the Program gives them.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "exec/comm/communicator.hpp"
#include "exec/gpt/context_parallel.hpp"
#include "exec/gpt/model.hpp"
#include "exec/gpt/tensor_parallel.hpp"
#include "exec/optim/adamw.hpp"
#include "exec/optim/schedule.hpp"
#include "exec/train/activation_offload.hpp"
#include "exec/train/dp_blocks.hpp"
#include "exec/train/optimizer_offload.hpp"
#include "exec/train/parallel_zero3.hpp"
#include "exec/train/step_runner.hpp"
#include "exec/train/topk_compression.hpp"
#include "plan/ir/program.hpp"
#include "plan/spec/scenario.hpp"
#include "plan/topology/rank_order.hpp"

namespace paratwin::exec {

class DataLoader;

// Where a world rank sits under the plan's rank order (plan.order, fastest-varying first).
using RankCoordinates = RankCoords;
RankCoordinates rank_coordinates(const Plan& plan, int world_rank);

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

  // Collective over the DP group under ZeRO 3 (between steps): the shard's weights, whole.
  const Buffer<float>& shard_weights();

  void begin_step(int64_t step) override;
  const std::vector<double>& losses() const override { return losses_; }
  double dp_bytes() const override { return dp_bytes_; }
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
  ChunkActivations& slot(int microbatch, int chunk);
  // The last backward segment of a micro-batch's chunk is done: what its forward kept is freed (the
  // gradient buffer stays, for the send back), and allocated again by the next step's forward.
  void release(int microbatch, int chunk);
  int local_chunk(int chunk) const { return chunk / setup_.plan.pp; }
  int tag(int microbatch, int boundary, Direction d) const;
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
  int sum_tied_embedding();
  // ZeRO 3, optimizer and activation offload and top-k compression (parallel_memory_modes.cpp): set up after
  // the buckets; start() hands them the tasks of their purposes; complete() ends what one of its handles
  // waits for beyond its requests (false: not yet); a pass that has ended gives back the parameters it
  // gathered.
  void set_up_memory_modes();
  int start_memory_mode(int index, const Task& task);
  bool complete(int handle, bool block);
  // Activation offload: the d2h copy after a forward may free the chunk's output before its send has
  // read it, so the send reads a copy, taken here when the forward ends.
  void keep_output(const Task& forward);
  void pass_ended(const Task& task);
  // The local parameters a task's span names (plan/ir/program.hpp): its layers, else its chunk's, else
  // the whole shard.
  std::pair<size_t, size_t> parameter_range(const Task& task) const;
  ActivationPolicy activation_policy(int chunk) const;
  // Of the ranks whose copies of a tensor are summed (its DP replicas, dp x cp ranks; for an expert,
  // the replicas of its EP rank), this rank's index: 0 counts the tensor once.
  int holder(const ShardTensor& t) const {
    return t.expert && expert_replicas_ ? expert_replicas_->rank() : dp_->rank();
  }

  ParallelSetup setup_;
  RankCoordinates at_;
  std::unique_ptr<Communicator> tp_, dp_, pp_, embedding_, cp_;
  ShardedGpt model_;
  std::unique_ptr<ContextParallel> context_;  // under cp > 1
  // Expert parallelism (ep > 1): this rank's EP group (ep consecutive DP ranks at its cp, tp and
  // stage), and the ranks that hold the same experts (over cp and the other EP groups), over which the
  // experts' gradients are summed; the shard's expert tensors, as sorted ranges.
  std::unique_ptr<Communicator> experts_, expert_replicas_;
  ParameterRanges expert_ranges_;
  std::vector<int32_t> whole_tokens_, whole_targets_;  // whole sequences, of which CP takes its share
  std::unique_ptr<AdamW> adamw_;
  int64_t step_ = 0;
  std::vector<double> losses_;
  double dp_bytes_ = 0;
  std::map<std::pair<int, int>, ChunkActivations> slots_;  // (micro-batch, chunk) -> activations
  std::set<std::pair<int, int>> released_;                 // slots whose kept buffers are freed
  // This step's forward sends, by (micro-batch, chunk): the activations they read stay until they end.
  std::map<std::pair<int, int>, Communicator::Handle> forward_sends_;
  // DP bucket task -> its gradients' parts: the dense ones reduced (and under ZeRO sharded) over the DP
  // group, this rank's experts over their replicas.
  std::map<int, std::vector<ShardedRange>> buckets_;
  std::unique_ptr<Zero3Gathers> zero3_;
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
