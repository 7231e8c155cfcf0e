// Tensor, pipeline and data parallelism in the live engine: the Program's tasks of one pipeline rank
// mapped onto the sharded model and the four groups of the plan's rank order.
#include "exec/train/parallel_runner.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "exec/data/loader.hpp"
#include "exec/memory/memory_meter.hpp"
#include "exec/threads.hpp"
#include "plan/ir/buckets.hpp"
#include "plan/topology/rank_groups.hpp"

namespace paratwin::exec {

RankCoordinates rank_coordinates(const Plan& p, int world_rank) {
  return rank_coords(p, world_rank);
}

namespace {

constexpr int kDone = -1;  // a task whose work ran inside the compute tasks (TP collectives)

// [begin, end) cut where `ranges` (sorted, disjoint) start and end: each piece, and whether it lies in
// one of them.
std::vector<std::pair<std::pair<size_t, size_t>, bool>> cut(const ParameterRanges& ranges, size_t begin,
                                                            size_t end) {
  std::vector<std::pair<std::pair<size_t, size_t>, bool>> out;
  size_t at = begin;
  for (const auto& [b, e] : ranges) {
    if (e <= at || b >= end) continue;
    if (at < b) out.push_back({{at, b}, false});
    out.push_back({{std::max(at, b), std::min(e, end)}, true});
    at = std::min(e, end);
  }
  if (at < end) out.push_back({{at, end}, false});
  return out;
}

// The model's chunks are the rank's activation units (see activation_units()).
ShardSpec shard_spec(const Plan& p, int world_rank, const RankCoordinates& at,
                     const std::vector<ActivationUnit>& units) {
  ShardSpec s;
  s.tp = p.tp;
  s.tp_rank = at.tp;
  for (const ActivationUnit& u : units) s.chunks.push_back({u.layer_begin, u.layer_end});
  s.first = at.pp == 0;
  s.last = at.pp == p.pp - 1;
  s.sequence_parallel = p.sequence_parallel;
  s.ep = p.ep;
  s.fold_experts = folds_experts(p);
  if (s.fold_experts) {  // its place in the folded EP group (tp x cp x dp), in the communicator's order
    const std::vector<int> members = group_members(p, world_rank, GroupKind::Ep);
    s.ep_rank = int(std::find(members.begin(), members.end(), world_rank) - members.begin());
  } else {
    s.ep_rank = at.dp % p.ep;  // EP groups are consecutive DP ranks (the lowering carves EP out of dp)
  }
  return s;
}

std::unique_ptr<Communicator> split(Communicator& world, int color) {
  auto g = world.split(color);
  if (!g) throw std::logic_error("a rank fell outside its own parallel group");
  return g;
}

// This rank's communicator of a group kind: the ranks plan/ meets it with, named by their leader.
std::unique_ptr<Communicator> group(Communicator& world, const Plan& plan, GroupKind kind) {
  return split(world, group_members(plan, world.rank(), kind).front());
}

}  // namespace

ParallelRunner::ParallelRunner(const ParallelSetup& setup, const GptConfig& config)
    : setup_(setup),
      at_(rank_coordinates(setup.plan, setup.world.rank())),
      tp_(group(setup.world, setup.plan, GroupKind::Tp)),
      dp_(group(setup.world, setup.plan, GroupKind::Dp)),
      pp_(group(setup.world, setup.plan, GroupKind::Pp)),
      units_(activation_units(setup.plan, setup.program.roles.at(size_t(at_.pp)))),
      model_(config, shard_spec(setup.plan, setup.world.rank(), at_, units_), tp_.get()) {
  const Plan& p = setup.plan;
  const GptConfig& c = config;
  // Tied embeddings over several stages: wte (first stage) and its copy (last stage), each summed over
  // the DP replicas in its bucket, then summed between the two stages (the pair at this rank's tp, cp
  // and dp) by the Program's "AR embedding grads".
  const bool tied = c.tied && p.pp > 1;
  const bool end_stage = at_.pp == 0 || at_.pp == p.pp - 1;
  embedding_ = setup.world.split(
      tied && end_stage ? group_members(p, setup.world.rank(), GroupKind::Embedding).front() : -1);
  if (p.dp_replicate > 1) replicas_ = group(setup.world, p, GroupKind::DpReplicate);
  if (p.cp > 1) {
    cp_ = group(setup.world, p, GroupKind::Cp);
    context_ = std::make_unique<ContextParallel>(cp_.get(), p.cp, at_.cp, setup.scenario.training.seq_len);
    model_.use_context_parallel(context_.get());
  }
  if (p.ep > 1) {
    experts_ = group(setup.world, p, GroupKind::Ep);
    // An expert's replicas: the ranks holding the same experts (the same place in their EP groups).
    expert_replicas_ = group(setup.world, p, GroupKind::ExpertDp);
    model_.use_expert_group(experts_.get());
    for (const ShardTensor& t : model_.tensors())
      if (t.expert) {
        if (!expert_ranges_.empty() && expert_ranges_.back().second == t.offset)
          expert_ranges_.back().second += t.size();
        else
          expert_ranges_.push_back({t.offset, t.offset + t.size()});
      }
  }
  if (tied && end_stage) tied_ = at_.pp == 0 ? model_.wte_range() : model_.head_range();
  // On one stage, where ZeRO 2 and 3 reduce every micro-batch's gradients, the head is the embedding,
  // whose gradients the head's backward starts: a part of its own, so that its window opens apart from
  // the first layer's (see parallel_sharding.cpp).
  if (c.tied && p.pp == 1 && reduces_every_microbatch(p)) tied_ = model_.wte_range();
  model_.initialize(setup.seed);
  ParameterRanges decayed;
  const auto append = [](ParameterRanges& ranges, const ShardTensor& t) {
    if (!ranges.empty() && ranges.back().second == t.offset)
      ranges.back().second += t.size();
    else
      ranges.push_back({t.offset, t.offset + t.size()});
  };
  for (const ShardTensor& t : model_.tensors()) {
    if (t.full_rows > 1 && t.name != "wpe") append(decayed, t);
    // Each value once over the TP group (replicated tensors on its first rank) and the stages, and
    // without ZeRO (every replica holding all of its gradients) over the replicas.
    if (!t.tied_copy && (!t.replicated || at_.tp == 0) && (p.zero > 0 || holder(t) == 0)) append(counted_, t);
  }

  // DP buckets: each reduces the gradients of the layers its task names (the Program's bucket plan,
  // plan/ir/buckets.hpp). Under EP a bucket's experts' gradients are summed over the ranks that hold the
  // same experts, by the bucket's task over them (moves()). The tied embedding is a part of its own, so
  // that its blocks under ZeRO line up on the two stages.
  // A tied embedding reduced early: wte is the first bucket's part (the head's gradient), and the last
  // bucket gathers the lookup's rows instead.
  if (tied_head_reduced_early(p, setup.scenario.model)) {
    early_head_ = model_.wte_range();
    model_.keep_lookup_gradient_apart();
  }
  const Role& r = role();
  for (size_t i = 0; i < r.tasks.size(); ++i) {
    const Task& task = r.tasks[i];
    if (task.purpose != Purpose::GradientReduce && task.purpose != Purpose::GradientTopK) continue;
    const auto [begin, end] = parameter_range(task);
    std::vector<ShardedRange>& parts = buckets_[int(i)];
    const bool dense = task.group == GroupKind::Dp;
    if (dense && early_head_.second > 0 && task.layer_end == c.layers)
      parts.push_back({early_head_, dp_.get()});
    if (dense && early_head_.second > 0 && task.layer_begin == 0) lookup_bucket_ = int(i);
    for (const auto& [piece, expert] : cut(expert_ranges_, begin, end))
      if (moves(task, expert))
        for (const auto& sub : cut({tied_, early_head_}, piece.first, piece.second))
          if (!(sub.first == early_head_))
            parts.push_back({sub.first, expert ? expert_replicas_.get() : dp_.get()});
  }
  for (const auto& [index, bucket] : buckets_) parts_.insert(parts_.end(), bucket.begin(), bucket.end());
  parts_ = distinct_ranges(std::move(parts_));
  if (p.zero == 0 || parts_.empty())
    owned_.push_back({0, model_.size()});
  else
    owned_ = owned_blocks(parts_);
  // Under ZeRO the moments of this rank's blocks only.
  adamw_ = std::make_unique<AdamW>(setup.adamw, model_.size(), std::move(decayed),
                                   p.zero == 0 ? ParameterRanges{} : owned_);
  set_up_sharding();
  set_up_memory_modes();
}

bool ParallelRunner::moves(const Task& task, bool expert) const {
  if (task.group == GroupKind::ExpertDp) return expert;
  return !expert || expert_replicas_->size() == 1;  // lowering's dp_experts
}

std::vector<std::pair<size_t, size_t>> ParallelRunner::moved_ranges(
    const Task& task, const std::vector<std::pair<size_t, size_t>>& ranges) const {
  std::vector<std::pair<size_t, size_t>> out;
  for (const auto& [begin, end] : ranges)
    for (const auto& [piece, expert] : cut(expert_ranges_, begin, end))
      if (moves(task, expert)) out.push_back(piece);
  return out;
}

std::pair<size_t, size_t> ParallelRunner::parameter_range(const Task& task) const {
  if (task.layer_begin >= 0) return model_.range(task.layer_begin, task.layer_end);
  if (task.chunk >= 0) {
    const StagePlan& st = setup_.plan.stages.at(size_t(task.chunk));
    return model_.range(st.layer_begin, st.layer_end);
  }
  return {0, model_.size()};
}

ParallelRunner::~ParallelRunner() {
  for (auto h : pending_sends_) pp_->wait(h);
}

int ParallelRunner::tag(int microbatch, int boundary, Direction d) const {
  return (microbatch * setup_.plan.chunks() + boundary) * 2 + (d == Direction::Forward ? 0 : 1);
}

void ParallelRunner::begin_step(int64_t step) {
  step_ = step;
  tp_seconds_.clear();
  cp_seconds_.clear();
  ep_seconds_.clear();
  losses_.clear();
  dp_bytes_ = 0;
  in_flight_.clear();
  in_flight_comm_.clear();
  tickets_.clear();
  on_done_.clear();
  copies_.clear();
  outputs_.clear();
  sending_.clear();
  forward_sends_.clear();
  pass_tickets_.clear();
  reductions_.clear();
  batches_.clear();
  computes_ = 0;
  skip_step_ = false;
  if (sharded_)
    sharded_->zero();
  else
    model_.zero_gradients();
}

void ParallelRunner::compute(int index, const Task& task) {
  // A share of a pass lowered apart for the twin (the CP ring's attention blocks, TP overlap's GEMM
  // pieces): the pass's own task runs it.
  if (is_pass_share(task.purpose)) return;
  settle_reductions();
  ++computes_;
  const double tp_before = model_.tp_seconds;
  struct Record {  // the TP (CP) time of this task, however it ends
    std::map<int, double>& to;
    int index;
    const double& now;
    double before;
    ~Record() { to[index] = now - before; }
  } record{tp_seconds_, index, model_.tp_seconds, tp_before};
  static const double no_cp = 0;
  const double& cp_now = context_ ? context_->seconds : no_cp;
  Record cp_record{cp_seconds_, index, cp_now, cp_now};
  Record ep_record{ep_seconds_, index, model_.experts().wall_s, model_.experts().wall_s};
  switch (task.kind) {
    case TaskKind::Forward:
      run_forward(index, task);
      break;
    case TaskKind::Recompute:
      recompute_first(task);
      break;
    case TaskKind::Backward:
      run_backward(index, task);
      break;
    case TaskKind::Send:
    case TaskKind::Recv: {
      // On the compute stream (no PP overlap): sends go out without blocking, receives complete here.
      const int h = start(-1, task);
      if (task.kind == TaskKind::Recv) finish(h);
      break;
    }
    case TaskKind::Optimizer:
      optimizer_step();
      break;
    default:
      throw std::invalid_argument("task '" + task.name + "' is not a compute task the live CPU backend runs");
  }
}

int ParallelRunner::start(int index, const Task& task) {
  switch (task.purpose) {
    case Purpose::None:
    case Purpose::AttentionBlocks:  // shares of a pass (is_pass_share): compute, skipped before here
    case Purpose::TpGemmPieces:
    case Purpose::GatheredForwardPart:
      break;
    case Purpose::ReplicaReduce:
      return sum_over_replicas(task);
    case Purpose::GradientReduce:
      return reduce_gradients(index, task);
    case Purpose::ParameterGather:
      return gather_parameters(task);
    case Purpose::TiedEmbeddingSum:
      return sum_tied_embedding();
    case Purpose::OverflowCheck:
    case Purpose::GradientNorm:
      return check_gradients(task);
    case Purpose::GradientTopK:
    case Purpose::PassGather:
    case Purpose::ActivationOffload:
    case Purpose::OptimizerOffload:
      return start_memory_mode(index, task);
    case Purpose::InputBatch:
      load_batch(task);
      return kDone;
  }
  if (task.kind == TaskKind::Send || task.kind == TaskKind::Recv) return transfer(index, task);
  if (task.kind == TaskKind::Collective &&
      (task.group == GroupKind::Tp || task.group == GroupKind::Cp || task.group == GroupKind::Ep))
    return kDone;  // the compute task ran its TP, CP and EP collectives where they fall between the GEMMs
  throw std::invalid_argument("task '" + task.name + "' is not one the live CPU backend runs");
}

int ParallelRunner::launched(Requests requests) {
  in_flight_.push_back(std::move(requests.handles));
  in_flight_comm_.push_back(std::move(requests.comms));
  return int(in_flight_.size()) - 1;
}

int ParallelRunner::transfer(int index, const Task& task) {
  Requests requests;
  const bool send = task.kind == TaskKind::Send, forward = task.direction == Direction::Forward;
  // Gradients travel after the forward made the slot; a send back follows the backward that released
  // what the forward kept (only the gradient buffer it sends is left).
  // A chunk's input and its gradient are its first unit's, its output and the output's gradient its last's.
  const int unit = send == forward ? last_unit(task.chunk) : first_unit(task.chunk);
  ChunkActivations& a = forward ? slot(task.microbatch, unit) : slots_.at({task.microbatch, unit});
  const size_t n = model_.boundary_size(a);
  // A message is named by the boundary it crosses: between chunks b and b + 1.
  const int boundary = send == forward ? task.chunk : task.chunk - 1;
  const int t = tag(task.microbatch, boundary, task.direction);
  float* data =
      forward ? (send ? const_cast<float*>(model_.output(a)) : model_.input(a)) : a.dresidual.data();
  // Under activation offload the send reads a copy of the output (moved along: its data stay put).
  if (auto o = outputs_.find({task.microbatch, task.chunk}); send && forward && o != outputs_.end()) {
    data = o->second.data();
    if (index < 0)
      sending_in_line_.push_back(std::move(o->second));
    else
      sending_[int(in_flight_.size())] = std::move(o->second);
    outputs_.erase(o);
  }
  const Communicator::Handle h =
      send ? pp_->start_send(data, n, task.peer, t) : pp_->start_recv(data, n, task.peer, t);
  if (send && forward) forward_sends_[{task.microbatch, task.chunk}] = h;
  if (send && index < 0) {  // on the compute stream: the optimizer step waits for it
    pending_sends_.push_back(h);
    return launched({});
  }
  requests.add(pp_.get(), h);
  return launched(std::move(requests));
}

int ParallelRunner::sum_tied_embedding() {
  // What this rank updates of the tied embedding: all of it, or under ZeRO its block.
  Requests requests;
  for (const auto& [begin, end] : owned_) {
    const size_t b = std::max(begin, tied_.first), e = std::min(end, tied_.second);
    if (embedding_ && b < e)
      requests.add(embedding_.get(), embedding_->start_allreduce_sum(gradient_at(b), e - b));
  }
  return launched(std::move(requests));
}

int ParallelRunner::gather_parameters(const Task& task) {
  // ZeRO 1/2: every rank's updated blocks of the bucket parts in the task's span to the ranks that share
  // them.
  const auto [begin, end] = parameter_range(task);
  return launched(start_parameter_gathers(begin, end, &task));
}

ParallelRunner::Requests ParallelRunner::start_parameter_gathers(size_t begin, size_t end, const Task* task) {
  Requests requests;
  float* w = model_.parameters().data();
  for (const auto& [range, comm] : parts_)
    if (range.first >= begin && range.second <= end && comm->size() > 1 &&
        (!task || moves(*task, comm == expert_replicas_.get()))) {
      if (task) dp_bytes_ += double(range.second - range.first) * sizeof(float);  // a step's, not between
      requests.add(comm, comm->start_allgather(w + range.first, dp_blocks(range, comm->size())));
    }
  return requests;
}

void ParallelRunner::gather_updated_parameters() {
  if (!setup_.plan.overlap_param_gather || setup_.plan.zero != 1) return;
  const Requests requests = start_parameter_gathers(0, model_.size(), nullptr);
  for (size_t i = 0; i < requests.handles.size(); ++i) requests.comms[i]->wait(requests.handles[i]);
}

int ParallelRunner::reduce_gradients(int index, const Task& task) {
  const bool all_reduce = task.collective == cost::CollectiveKind::AllReduce;
  if (!all_reduce && task.collective != cost::CollectiveKind::ReduceScatter)
    throw std::invalid_argument("task '" + task.name + "' is not a collective the live CPU backend runs");
  if (sharded_) return reduce_sharded(index, task);
  Requests requests;
  float* grads = model_.gradients().data();
  for (const auto& [range, comm] : buckets_.at(index)) {
    if (comm->size() == 1) continue;  // an expert with a single holder
    float* g = grads + range.first;
    const size_t n = range.second - range.first;
    dp_bytes_ += double(n) * sizeof(float);
    requests.add(comm, all_reduce ? comm->start_allreduce_sum(g, n)
                                  : comm->start_reduce_scatter_sum(g, dp_blocks(range, comm->size())));
  }
  if (index == lookup_bucket_) gather_lookup_rows(requests);
  return launched(std::move(requests));
}

void ParallelRunner::gather_lookup_rows(Requests& requests) {
  // Every replica's lookup rows, each as (row, C gradients); how many each has first.
  const size_t C = size_t(model_.config().hidden), mine = model_.lookup_rows().size();
  std::vector<float> counts(size_t(dp_->size()), 0.0f);
  counts[size_t(dp_->rank())] = float(mine);
  dp_->wait(dp_->start_allgather(counts.data(), std::vector<size_t>(counts.size(), 1)));
  std::vector<size_t> blocks;
  size_t offset = 0, total = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    blocks.push_back(size_t(counts[r]) * (C + 1));
    if (int(r) < dp_->rank()) offset += blocks.back();
    total += blocks.back();
  }
  {
    MemoryUseScope use(MemoryUse::Communication);
    gathered_lookup_.assign(total, 0.0f);
  }
  for (size_t i = 0; i < mine; ++i) {
    float* row = gathered_lookup_.data() + offset + i * (C + 1);
    row[0] = float(model_.lookup_rows()[i]);  // exact: rows are below 2^24
    std::copy_n(model_.lookup_gradients().data() + i * C, C, row + 1);
  }
  dp_bytes_ += double(total) * sizeof(float);
  requests.add(dp_.get(), dp_->start_allgather(gathered_lookup_.data(), blocks));
}

void ParallelRunner::add_gathered_lookup_rows() {
  // After every DP task has ended: the replicas' lookup rows, in rank and row order, into wte's
  // gradient (the head's part, summed over the replicas).
  if (gathered_lookup_.empty()) return;
  const size_t C = size_t(model_.config().hidden), rows = gathered_lookup_.size() / (C + 1);
  float* wte = model_.gradients().data() + early_head_.first;
  parallel_for(long(C), 64, [&](long j0, long j1) {
    for (size_t i = 0; i < rows; ++i) {
      const float* row = gathered_lookup_.data() + i * (C + 1);
      float* g = wte + size_t(row[0]) * C;
      for (long j = j0; j < j1; ++j) g[j] += row[1 + j];
    }
  });
  Buffer<float>().swap(gathered_lookup_);
}

bool ParallelRunner::poll(int handle) {
  if (handle == kDone) return true;
  bool done = true;
  for (size_t i = 0; i < in_flight_[handle].size(); ++i)
    done = in_flight_comm_[handle][i]->test(in_flight_[handle][i]) && done;
  return done && complete(handle, false);
}

void ParallelRunner::finish(int handle) {
  if (handle == kDone) return;
  for (size_t i = 0; i < in_flight_[handle].size(); ++i)
    in_flight_comm_[handle][i]->wait(in_flight_[handle][i]);
  complete(handle, true);
}

void ParallelRunner::attribute_tp_time(std::vector<TaskSpan>& spans) const {
  const std::vector<Task>& tasks = role().tasks;
  const std::map<GroupKind, const std::map<int, double>*> measured = {
      {GroupKind::Tp, &tp_seconds_}, {GroupKind::Cp, &cp_seconds_}, {GroupKind::Ep, &ep_seconds_}};
  // The lowering adds a pass's TP, CP and EP collectives right after its compute task.
  std::map<int, std::vector<int>> owned;  // compute task -> its collectives
  int owner = -1;
  for (size_t i = 0; i < tasks.size(); ++i) {
    if ((tasks[i].kind == TaskKind::Forward || tasks[i].kind == TaskKind::Backward ||
         tasks[i].kind == TaskKind::Recompute) &&
        !is_pass_share(tasks[i].purpose))
      owner = int(i);
    else if (tasks[i].kind == TaskKind::Collective && measured.count(tasks[i].group) && owner >= 0)
      owned[owner].push_back(int(i));
  }
  for (const auto& [compute, comm_tasks] : owned) {
    std::map<GroupKind, double> seconds;  // the compute task's time in each group's collectives
    std::map<GroupKind, int> count;       // and its tasks of each group
    double total = 0;
    for (const auto& [kind, by_task] : measured)
      if (const auto it = by_task->find(compute); it != by_task->end()) total += seconds[kind] = it->second;
    if (seconds.empty()) continue;
    for (int t : comm_tasks) ++count[tasks[size_t(t)].group];
    TaskSpan& c = spans[size_t(compute)];
    c.cpu_s = std::max(0.0, c.cpu_s - total);
    double at = c.end_s - total;
    for (int t : comm_tasks) {
      const GroupKind kind = tasks[size_t(t)].group;
      spans[size_t(t)].start_s = at;
      spans[size_t(t)].end_s = at += seconds[kind] / count[kind];
      spans[size_t(t)].wait_s = 0;
    }
  }
}

// The step's checks over every rank (Purpose::OverflowCheck, GradientNorm), once every DP task has ended.
int ParallelRunner::check_gradients(const Task& task) {
  add_gathered_lookup_rows();
  const Plan& p = setup_.plan;
  // This rank's share of the squares, each value once over the ranks that hold a copy of it (copies
  // are equal: summed over their group before this).
  double squares = 0;
  for (const auto& [begin, end] : owned_)
    for (const auto& [counted_begin, counted_end] : counted_) {
      const size_t b = std::max(begin, counted_begin), e = std::min(end, counted_end);
      if (b < e) squares += sum_of_squares(gradient_at(b), 0, e - b);
    }
  if (task.purpose == Purpose::OverflowCheck) {
    // fp16's check: this backend computes in fp32, where only a diverged run overflows; as under a
    // loss scale, such a step is skipped by every rank.
    skip_step_ = setup_.world.allreduce_sum(std::isfinite(squares) ? 0.0 : 1.0) > 0;
    return kDone;
  }
  // The norm of the mean over the DP replicas, the sum that the DP buckets and the tied embedding's
  // all-reduce left; under HSDP each block is held by every replica: counted once over them.
  const double inverse_dp = 1.0 / double(p.dp);
  gradient_norm_ = std::sqrt(setup_.world.allreduce_sum(squares * inverse_dp * inverse_dp / p.dp_replicate));
  return kDone;
}

void ParallelRunner::optimizer_step() {
  for (auto h : pending_sends_) pp_->wait(h);
  pending_sends_.clear();
  sending_in_line_.clear();
  if (skip_step_) return;
  float* params = model_.parameters().data();
  // The mean over the DP replicas and the clipping factor scale the gradients inside the fused AdamW
  // pass (grads stay as reduced).
  const double inverse_dp = 1.0 / double(setup_.plan.dp);
  const float scale = clip_scale(gradient_norm_, setup_.max_grad_norm);
  for (const auto& [begin, end] : owned_) {
    float* w = zero3_ ? zero3_->shard(begin) : params + begin;
    adamw_->update(w, gradient_at(begin), begin, end, setup_.lr.at(step_), step_ + 1,
                   float(inverse_dp * scale));
  }
}

const Buffer<float>& ParallelRunner::shard_weights() {
  if (zero3_) zero3_->gather_everything();
  gather_updated_parameters();
  return model_.parameters();
}

void ParallelRunner::gather_state(std::vector<float>& weights, std::vector<float>& m, std::vector<float>& v) {
  const size_t total = parameter_layout(model_.config()).total;
  const size_t n = model_.size();
  if (zero3_) zero3_->gather_everything();  // between steps: the weights whole again
  gather_updated_parameters();
  if (offload_) offload_->to_device();
  // Each value from one rank only (zeros elsewhere), so the sum over the world is the whole model.
  std::vector<float> own_w(model_.parameters().begin(), model_.parameters().end());
  std::vector<float> own_m = adamw_->full_m(), own_v = adamw_->full_v();  // zeros outside its blocks
  for (const ShardTensor& t : model_.tensors()) {
    const bool tp_owner = !t.replicated || at_.tp == 0;
    // Moments: every replica's ZeRO blocks (zeros outside them); without ZeRO the first replica's (an
    // expert's: its EP rank's first replica's).
    const bool moments_owner = tp_owner && (holder(t) == 0 || setup_.plan.zero > 0);
    for (size_t i = t.offset; i < t.offset + t.size() && i < n; ++i) {
      if (!(tp_owner && holder(t) == 0)) own_w[i] = 0;
      if (!moments_owner) own_m[i] = own_v[i] = 0;
    }
  }
  for (auto* buffers : {&weights, &m, &v}) buffers->assign(total, 0.0f);
  model_.put_shard(own_w.data(), weights.data());
  model_.put_shard(own_m.data(), m.data());
  model_.put_shard(own_v.data(), v.data());
  if (offload_) offload_->to_host();
  for (auto* buffers : {&weights, &m, &v})
    setup_.world.wait(setup_.world.start_allreduce_sum(buffers->data(), buffers->size()));
}

void ParallelRunner::scatter_state(const std::vector<float>& weights, const std::vector<float>& m,
                                   const std::vector<float>& v) {
  if (zero3_) {  // ZeRO 3: into the kept shard (the whole buffer exists only while passes run)
    std::vector<float> shard(model_.size());
    model_.take_shard(weights.data(), shard.data());
    zero3_->assign(shard.data());
  } else {
    model_.take_shard(weights.data(), model_.parameters().data());
  }
  // The moments of what this rank's optimizer owns (its blocks under ZeRO; gather_state sums them
  // over the replicas).
  std::vector<float> shard_m(model_.size()), shard_v(model_.size());
  model_.take_shard(m.data(), shard_m.data());
  model_.take_shard(v.data(), shard_v.data());
  if (offload_) offload_->to_device();
  adamw_->assign_full(shard_m, shard_v);
  if (offload_) offload_->to_host();
}

}  // namespace paratwin::exec
