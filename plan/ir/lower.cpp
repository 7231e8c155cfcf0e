// Lowering: (model, cluster, plan) -> Program. One role per pipeline rank; its tasks follow the
// pipeline schedule, with the TP/CP/EP collectives of every pass, the PP transfers between stages,
// DP gradient buckets issued as their layers' gradients become final, ZeRO gathers, offload copies,
// recomputation and the optimizer step.
#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <tuple>
#include <utility>

#include "plan/cost/fp8_casts.hpp"
#include "plan/cost/layer_collectives.hpp"
#include "plan/cost/ring_attention.hpp"
#include "plan/cost/tp_overlap.hpp"
#include "plan/ir/role_builder.hpp"
#include "plan/ir/schedule.hpp"
#include "plan/spec/limits.hpp"

namespace paratwin {

using cost::CollectiveKind;

namespace lowering {

Role RoleBuilder::build() {
  parameters_and_buckets();
  forward_done_.resize(static_cast<size_t>(p_.num_microbatches) * p_.chunks());
  // Up to about 20 tasks per pass pair (compute, collectives, transfers, ZeRO-3 gathers, offload
  // copies, bucket segments); growing the vector would move them all.
  role_.tasks.reserve(static_cast<size_t>(
      estimated_role_tasks(p_.virtual_stages, p_.num_microbatches, m_.layers, p_.pp, p_.zero)));
  const auto order =
      pass_order(p_.schedule, p_.pp, p_.virtual_stages, p_.num_microbatches, rank_, p_.overlap_ep);
  // The data loader's copies lead the step: every micro-batch's ids are on the device before a pass
  // needs them (a few microseconds each), and no offload copy queues ahead of them on the copy stream.
  input_batch_.assign(forward_done_.size(), -1);
  for (const auto& s : order)
    if (s.forward && (s.chunk == 0 || last_chunk(s.chunk)))
      input_batch_[forward_slot(s.microbatch, s.chunk)] = input_batch(s.microbatch, s.chunk);
  // The last backward of each chunk finalizes its gradients.
  std::map<int, int> last_backward;
  for (const auto& s : order)
    if (!s.forward) last_backward[s.chunk] = s.microbatch;
  for (size_t k = 0; k < order.size(); ++k) {
    const PipelineStep& s = order[k];
    // Combined 1F1B pairs the steady state's forwards and backwards: a pass followed by one of the other
    // kind runs its all-to-alls beside that pass.
    ep_beside_next_ = p_.overlap_ep && k + 1 < order.size() && order[k + 1].forward != s.forward;
    if (s.forward)
      forward(s.microbatch, s.chunk);
    else
      backward(s.microbatch, s.chunk, last_backward[s.chunk] == s.microbatch);
  }
  ep_beside_next_ = false;
  if (ep_beside_ >= 0) previous_compute_.push_back(ep_beside_);
  optimizer();
  if (t_.launch_blocking) serialize_issue_order();
  return std::move(role_);
}

void RoleBuilder::serialize_issue_order() {
  // Under synchronous launches the host issues one task, waits for it to end, then issues the next:
  // a collective or transfer on a side stream no longer runs beside the compute that follows it.
  for (size_t i = 1; i < role_.tasks.size(); ++i) {
    TaskDeps& deps = role_.tasks[i].deps;
    const int previous = static_cast<int>(i) - 1;
    if (!deps.contains(previous)) deps.push_back(previous);
  }
}

cost::KernelCost RoleBuilder::layers_work(int begin, int end, bool forward, bool with_embedding,
                                          bool with_head) const {
  // Layers of one kind share a costing: dense or MoE (MoE ones by their pace; under balanced routing
  // all at load 1), full or windowed attention.
  cost::KernelCost k;
  for (const auto& [kind, layers] : layers_by_kind(begin, end, [](int) { return true; })) {
    const cost::LayerWork w = work_of(layer_work(), kind);
    k += (forward ? cost::layer_forward(m_, w, kind.moe) : cost::layer_backward(m_, w, kind.moe)) * layers;
  }
  const auto w = layer_work();
  // Under grad_accumulation copy or unfused the embedding's gradient is added with every other
  // parameter's (gradient_copy), not by a main_grad add of its own.
  const double hooked =
      cost::gradient_add_bytes(t_, p_.zero) > 0 ? 0 : cost::gradient_buffer_bytes(t_, p_.zero);
  if (with_embedding) k += forward ? cost::embedding_forward(m_, w) : cost::embedding_backward(m_, w, hooked);
  if (with_head) k += forward ? cost::head_forward(m_, w) : cost::head_backward(m_, w);
  if (!forward) k += gradient_copy(begin, end);
  return k;
}

cost::KernelCost RoleBuilder::gradient_copy(int begin, int end) const {
  const double element = cost::gradient_add_bytes(t_, p_.zero);
  if (element == 0) return {};
  double parameters = 0;
  for (int layer = begin; layer < end; ++layer) parameters += unit_params_.at(layer);
  return cost::gradient_copy(t_.grad_accumulation, parameters, element,
                             cost::gradient_buffer_bytes(t_, p_.zero),
                             cost::parameter_tensors_per_layer(m_, t_.projections) * (end - begin));
}

cost::KernelCost RoleBuilder::fp8_weight_casts() const {
  // Transformer Engine casts the weights at a step's first micro-batch (the first forward after the
  // step); costed with the step that changed them, once a step either way.
  const auto w = layer_work();
  cost::KernelCost k;
  for (const int chunk : p_.chunks_of(rank_)) {
    const StagePlan& st = stage(chunk);
    const int moe = moe_layers(st.layer_begin, st.layer_end), dense = st.layer_end - st.layer_begin - moe;
    if (dense) k += cost::fp8_weight_casts_per_step(cost::fp8_linears(m_, w, false), w) * dense;
    if (moe) k += cost::fp8_weight_casts_per_step(cost::fp8_linears(m_, w, true), w) * moe;
  }
  return k;
}

Bytes RoleBuilder::chunk_activations(int chunk) const {
  const StagePlan& st = stage(chunk);
  Bytes total;
  for (int l = st.layer_begin; l < st.layer_end; ++l)
    total += cost::layer_activation_bytes(m_, activation_config(chunk, l), m_.is_moe_layer(l));
  const cost::ActivationConfig a = activation_config(chunk);
  if (chunk == 0) total += cost::embedding_activation_bytes(m_, a);
  if (last_chunk(chunk)) total += cost::head_activation_bytes(m_, a);
  return total;
}

Task RoleBuilder::collective(CollectiveKind kind, GroupKind group, const cost::GroupPlacement& where,
                             Bytes bytes, int count, StreamKind stream, std::string name, TaskDeps deps) {
  Task t;
  t.kind = TaskKind::Collective;
  t.stream = stream;
  t.collective = kind;
  t.group = group;
  t.placement = where;
  t.bytes = bytes;
  t.count = count;
  t.name = std::move(name);
  t.deps = std::move(deps);
  return t;
}

TaskDeps RoleBuilder::model_parallel_comm(int chunk, int begin, int end, bool forward, int mb,
                                          const TaskDeps& tp_after, int after, int passes, int gathered,
                                          int scattered) {
  TaskDeps ids;
  auto what = [&](std::string_view kind) {
    return names_ ? named(std::string(kind) + (forward ? "F " : "B "), mb, chunk) : std::string();
  };
  const int layers = end - begin;
  const StreamKind stream = StreamKind::Tp;
  const cost::LayerCollectiveBytes bytes = cost::layer_collective_bytes(m_, layer_work());
  if (p_.tp > 1 && layers > 0) {
    const int count = tp_collectives(chunk, begin, end, passes);
    const Bytes full = bytes.tp;
    if (p_.sequence_parallel) {
      // Those TP overlap did not run beside its pieces (compute_with_comm): all of them without it, the
      // embedding's and AsyncTP's backward reduce-scatters with it; the backward's reduce-scatters
      // beside the pass are compute_with_comm's too.
      TaskDeps deps = tp_after;
      if (bytes.tp_amax.value() > 0) {
        // Each gathered tensor's amax (cost::tp_reduces_amax), decomposed pairs' included: after the
        // pass's compute, where the quantizer's wait puts it on the chain.
        ids.push_back(
            add(collective(CollectiveKind::AllReduce, GroupKind::Tp, tp_, bytes.tp_amax,
                           tp_layer_collectives(begin, end) * passes, stream, what("AR tp amax "), deps)));
        deps = {ids.back()};
      }
      if (count > gathered) {
        ids.push_back(add(collective(CollectiveKind::AllGather, GroupKind::Tp, tp_, bytes.tp_gather,
                                     count - gathered, stream, what("AG tp "), deps)));
        deps = {ids.back()};
      }
      if ((forward || !input_grads_beside_pass()) && count > scattered)
        ids.push_back(add(collective(CollectiveKind::ReduceScatter, GroupKind::Tp, tp_, full,
                                     count - scattered, stream, what("RS tp "), deps)));
    } else if (forward || !input_grads_beside_pass()) {
      ids.push_back(add(collective(CollectiveKind::AllReduce, GroupKind::Tp, tp_, full, count, stream,
                                   what("AR tp "), tp_after)));
    }
  }
  if (p_.cp > 1 && layers > 0 && !cost::runs_ring_attention(layer_work())) {
    // Unfused attention over the whole sequence's keys and values, gathered forward and their gradients
    // scattered backward (fused attention runs the ring instead: ring_attention_tasks).
    const Bytes kv = bytes.cp;
    ids.push_back(
        add(collective(forward ? CollectiveKind::AllGather : CollectiveKind::ReduceScatter, GroupKind::Cp,
                       cp_, kv, layers * passes, stream, what(forward ? "AG cp " : "RS cp "), {after})));
  }
  const int moe = moe_layers(begin, end);
  if (m_.moe && p_.ep > 1 && moe > 0) {
    // Dispatch and combine: each token's hidden state to its top_k experts and back, at the pace of
    // the hottest EP rank; one size for the chunk's MoE layers, their mean pace (sizes add up).
    double paces = 0;
    for (const auto& [pace, layers] : moe_layers_by_pace(begin, end)) paces += pace * layers;
    cost::LayerWork hottest = layer_work();
    hottest.expert_load = paces / moe;
    const Bytes sent = cost::layer_collective_bytes(m_, hottest).ep;
    ids.push_back(add(collective(CollectiveKind::AllToAll, GroupKind::Ep, ep_, sent, 2 * moe * passes,
                                 ep_beside_next_ ? StreamKind::Ep : stream, what("A2A ep "), {after})));
  }
  return ids;
}

int RoleBuilder::tp_collectives(int chunk, int begin, int end, int passes) const {
  // Those of the layers (their input gradients backward), one more for the vocabulary-parallel
  // embedding where the span starts the model.
  return (tp_layer_collectives(begin, end) + (chunk == 0 && begin == stage(0).layer_begin ? 1 : 0)) * passes;
}

bool RoleBuilder::input_grads_beside_pass() const {
  return cost::tp_input_grads_beside_pass(layer_work(), p_.overlap_tp);
}

std::vector<RoleBuilder::TpPairRun> RoleBuilder::tp_pairs(int begin, int end, bool forward,
                                                          int passes) const {
  const cost::LayerWork w = layer_work();
  const int moe = moe_layers(begin, end), dense = end - begin - moe;
  std::vector<TpPairRun> runs;
  // A dense layer's pairs first: an MoE layer's (its attention's) are the same GEMMs, one more each.
  for (const auto& [layers, moe_layer] : {std::pair{dense, false}, std::pair{moe, true}}) {
    if (layers == 0) continue;
    for (const cost::TpPair& pair : cost::tp_overlap_pairs(m_, w, forward, moe_layer)) {
      auto it =
          std::find_if(runs.begin(), runs.end(), [&](const TpPairRun& r) { return r.linear == pair.linear; });
      if (it == runs.end()) it = runs.insert(runs.end(), TpPairRun{pair.linear, pair.collective, {}, 0});
      it->pieces += pair.pieces * (layers * passes);
      it->count += layers * passes;
    }
  }
  return runs;
}

TaskDeps RoleBuilder::compute_with_comm(Task compute, int chunk, int begin, int end, bool forward, int mb,
                                        int passes) {
  for (int d : previous_compute_)
    if (!compute.deps.contains(d)) compute.deps.push_back(d);
  const TaskDeps deps = compute.deps;
  if (cost::runs_ring_attention(layer_work()) && end > begin)
    compute.deps = ring_attention_tasks(compute, end - begin, forward);
  // TP overlap (plan/cost/tp_overlap.hpp): the GEMMs whose all-gathers and reduce-scatters it decomposes
  // leave the pass's task for tasks of their own after it: the lead pieces of every pair, then pair by
  // pair the rest pieces beside that pair's collectives, the next pair after both (the frameworks
  // overlap each pair on its own: a pair's slack hides no other pair's transfer). Nothing else of the
  // pass hides them.
  const std::vector<TpPairRun> pairs =
      p_.overlap_tp && end > begin ? tp_pairs(begin, end, forward, passes) : std::vector<TpPairRun>{};
  auto piece_task = [&](const cost::KernelCost& work, const std::string& name) {
    Task t = pass_task(compute.kind, compute.microbatch, compute.chunk, compute.layer_begin,
                       compute.layer_end, names_ ? compute.name + name : std::string());
    t.work = work;
    if (t.kind == TaskKind::Recompute) t.recompute_flops = t.work.gemm_flops;
    t.purpose = Purpose::TpGemmPieces;
    return t;
  };
  std::optional<Task> lead_task;
  if (!pairs.empty()) {
    cost::TpPieces all;
    for (const TpPairRun& r : pairs) all += r.pieces;
    lead_task = piece_task(all.lead, " tp lead");
    compute.work = cost::without(compute.work, all.whole);
    compute.work += all.staging;
    if (compute.kind == TaskKind::Recompute) compute.recompute_flops = compute.work.gemm_flops;
  }
  const int id = add(std::move(compute));
  const cost::LayerCollectiveBytes layer_bytes = cost::layer_collective_bytes(m_, layer_work());
  const Bytes tp_bytes = layer_bytes.tp;
  int beside = -1;  // the last of the backward's TP collectives that run beside the whole pass
  if (!forward && p_.tp > 1 && end > begin) {
    if (p_.sequence_parallel && t_.tensor_parallel == TensorParallelImpl::Megatron) {
      // Under sequence parallelism the column-parallel linears (QKV, MLP up) keep only their input's
      // sequence shard, the activation memory counts that (cost::layer_activation_bytes), and gather it
      // again in the backward for the weight gradient, beside the input gradient's GEMM (Megatron-LM's
      // and Transformer Engine's linears): two more all-gathers per layer and backward (one in a folded
      // MoE layer, whose experts are no TP linears). DTensor's
      // autograd keeps the gathered input instead (training.tensor_parallel).
      beside = add(collective(CollectiveKind::AllGather, GroupKind::Tp, tp_, layer_bytes.tp_gather,
                              tp_layer_collectives(begin, end) * passes, StreamKind::Tp,
                              names_ ? named("AG tp input B ", mb, chunk) : std::string(), deps));
    }
    if (input_grads_beside_pass()) {
      // The QKV and up projections' input gradients (input_grads_beside_pass), after the regather where
      // there is one: beside the pass, not its pieces (the vocabulary-parallel embedding's with them).
      // model_parallel_comm leaves these collectives out.
      const bool bulk = p_.overlap_tp && cost::tp_overlap_bulk_backward(layer_work());  // userbuffers
      const CollectiveKind kind =
          p_.sequence_parallel ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
      Task t = collective(kind, GroupKind::Tp, tp_, tp_bytes, tp_collectives(chunk, begin, end, passes),
                          StreamKind::Tp,
                          names_ ? named(std::string(p_.sequence_parallel ? "RS" : "AR") +
                                             (bulk ? " tp bulk B " : " tp input grads B "),
                                         mb, chunk)
                                 : std::string(),
                          beside >= 0 ? TaskDeps{beside} : deps);
      if (bulk) t.sms = cost::tp_overlap_transfer_sms(t_.tp_overlap, kind);
      beside = add(std::move(t));
    }
  }
  // The pairs after the collectives beside the whole pass: the TP stream runs its tasks in issue order.
  int last = id;
  TaskDeps segment{id};  // what the next pair's pieces and collectives wait for
  int gathered = 0, scattered = 0;
  if (lead_task) {
    lead_task->deps = {id};
    last = add(std::move(*lead_task));
    segment = {last};
    for (const TpPairRun& r : pairs) {
      const std::string linear = enum_name(r.linear, cost::kTpLinearNames);
      const bool gathers = r.collective == CollectiveKind::AllGather;
      Task rest = piece_task(r.pieces.rest, " tp pieces " + linear);
      rest.deps = segment;
      const int rest_id = add(std::move(rest));
      const std::string kind =
          std::string(gathers ? "AG tp " : "RS tp ") + linear + (forward ? " F " : " B ");
      Task transfer =
          collective(r.collective, GroupKind::Tp, tp_, gathers ? layer_bytes.tp_gather : tp_bytes, r.count,
                     StreamKind::Tp, names_ ? named(kind, mb, chunk) : std::string(), segment);
      transfer.sms = cost::tp_overlap_transfer_sms(t_.tp_overlap, r.collective);
      const int comm_id = add(std::move(transfer));
      segment = {rest_id, comm_id};
      last = rest_id;
      (gathers ? gathered : scattered) += r.count;
    }
  }
  // The collectives follow the GEMMs; decomposed, those TP overlap left whole follow the last pair.
  const TaskDeps comm =
      model_parallel_comm(chunk, begin, end, forward, mb, segment, last, passes, gathered, scattered);
  // The pass is done when its collectives are (the last on each stream). The next pass's compute waits
  // for all of them but the all-to-alls combined 1F1B runs beside it, and for those the pass before
  // left beside this one: a merged forward and backward end together.
  TaskDeps done = segment, next = segment;
  if (ep_beside_ >= 0) next.push_back(std::exchange(ep_beside_, -1));
  for (size_t i = 0; i < comm.size(); ++i) {
    const StreamKind stream = role_.tasks[size_t(comm[i])].stream;
    if (i + 1 < comm.size() && role_.tasks[size_t(comm[i + 1])].stream == stream) continue;
    done.push_back(comm[i]);
    if (stream == StreamKind::Ep)
      ep_beside_ = comm[i];
    else
      next.push_back(comm[i]);
  }
  if (beside >= 0) {
    done.push_back(beside);
    next.push_back(beside);
  }
  previous_compute_ = std::move(next);
  return done;
}

TaskDeps RoleBuilder::ring_attention_tasks(Task& pass, int layers, bool forward) {
  // The pass's attention as the CP ring runs it, layer after layer (plan/cost/ring_attention.hpp). The
  // ring's first transfer (torch_ring: the keys' and values' all-gather; te_p2p: the first shift) runs
  // beside the first (diagonal) blocks, the other blocks after both; the other shifts run beside those
  // blocks, and those the ring leaves for after its last block (torch_ring's last dK/dV send) after them.
  // Every layer's ring is the same, so the layers' sum of max(transfer, blocks) is the max of the sums:
  // one task of each kind for the pass's layers gives the per-layer ring's time.
  const cost::RingAttention ring = cost::ring_attention(m_, layer_work(), forward);
  const std::string what = forward ? "F " : "B ";
  auto blocks = [&](const cost::KernelCost& work, const std::string& name, TaskDeps deps) {
    Task t = pass_task(pass.kind, pass.microbatch, pass.chunk, pass.layer_begin, pass.layer_end,
                       names_ ? pass.name + name : std::string());
    t.work = work * layers;
    if (t.kind == TaskKind::Recompute) t.recompute_flops = t.work.gemm_flops;
    t.purpose = Purpose::AttentionBlocks;
    t.deps = std::move(deps);
    pass.work = cost::without(pass.work, t.work);
    return add(std::move(t));
  };
  auto cp_name = [&](const std::string& kind) {
    return names_ ? named(kind + what, pass.microbatch, pass.chunk) : std::string();
  };
  // A shift: torch's permute_tensor (all_to_all_single) and TE's send/recv pair each move a rank's
  // buffer to the next rank, carried as the all-to-all whose one-peer share is the shift.
  const Bytes shift = ring.shifts > 0 ? cost::shift_as_alltoall(ring.shift, p_.cp) : Bytes(0);
  auto shifts = [&](int count, const std::string& name, TaskDeps deps) {
    return add(collective(CollectiveKind::AllToAll, GroupKind::Cp, cp_, shift, layers * count, StreamKind::Tp,
                          cp_name(name), std::move(deps)));
  };
  const bool gathers = ring.kv_gather.value() > 0;
  // One layer's ring buffers are held from the ring's first transfer to its last task.
  Task first = gathers ? collective(CollectiveKind::AllGather, GroupKind::Cp, cp_, ring.kv_gather, layers,
                                    StreamKind::Tp, cp_name("AG cp kv "), pass.deps)
                       : collective(CollectiveKind::AllToAll, GroupKind::Cp, cp_, shift, layers,
                                    StreamKind::Tp, cp_name("A2A cp kv "), pass.deps);
  first.alloc = ring.working;
  const int transfer = add(std::move(first));
  const int diagonal = blocks(ring.diagonal, " ring diagonal", pass.deps);
  const int rest = blocks(ring.off_diagonal, " ring blocks", {diagonal, transfer});
  if (pass.kind == TaskKind::Recompute) pass.recompute_flops = pass.work.gemm_flops;
  const int beside_count = ring.shifts - ring.tail_shifts - (gathers ? 0 : 1);
  TaskDeps done{rest};
  int beside = -1;
  if (beside_count > 0) {
    // torch's dK/dV sends start after the diagonal block's backward; TE's after the first shift.
    beside = shifts(beside_count, gathers ? "A2A cp dkv " : "A2A cp kv ", {gathers ? diagonal : transfer});
    done.push_back(beside);
  }
  if (ring.tail_shifts > 0) {
    TaskDeps after{rest};
    if (beside >= 0) after.push_back(beside);
    done = {shifts(ring.tail_shifts, "A2A cp dkv last ", std::move(after))};
  }
  role_.tasks[ring.tail_shifts > 0 ? done.back() : rest].free = ring.working;
  return done;
}

void RoleBuilder::forward(int mb, int chunk) {
  const StagePlan& st = stage(chunk);
  TaskDeps deps;
  if (const int batch = input_batch_[forward_slot(mb, chunk)]; batch >= 0) deps.push_back(batch);
  if (chunk > 0) deps.push_back(p2p(TaskKind::Recv, Direction::Forward, mb, chunk, {}));
  if (p_.zero == 3) {
    sharded_forward(mb, chunk, std::move(deps));
  } else if (mb == 0 && gathers_in_forward()) {
    gathered_forward(chunk, std::move(deps));
  } else {
    Task f = pass_task(TaskKind::Forward, mb, chunk, st.layer_begin, st.layer_end, named("F ", mb, chunk));
    f.work = pass_work(st.layer_begin, st.layer_end, true, chunk == 0, last_chunk(chunk));
    f.alloc = activations(chunk);
    f.deps = deps;
    forward_done_[forward_slot(mb, chunk)] =
        compute_with_comm(std::move(f), chunk, st.layer_begin, st.layer_end, true, mb, 1);
  }
  const TaskDeps& done = forward_done_[forward_slot(mb, chunk)];
  if (p_.offload_activations) {
    Task out;
    out.kind = TaskKind::Copy;
    out.stream = StreamKind::Copy;
    out.to_host = true;
    out.bytes = activations(chunk);
    out.free = out.bytes;
    out.name = named("copy d2h act ", mb, chunk);
    out.purpose = Purpose::ActivationOffload;
    out.microbatch = mb;  // whose activations: the live engine moves them
    out.chunk = chunk;
    out.deps = {done.front()};
    add(std::move(out));
  }
  if (!last_chunk(chunk)) p2p(TaskKind::Send, Direction::Forward, mb, chunk, done);
}

void RoleBuilder::backward(int mb, int chunk, bool final_microbatch) {
  const StagePlan& st = stage(chunk);
  const int before_this = previous_compute_.empty() ? -1 : previous_compute_.front();
  TaskDeps deps = forward_done_[forward_slot(mb, chunk)];
  // The output's gradient lands where the forward left its activations: its receive is posted once
  // that forward has run (posted earlier, as a stream of receives with nothing to wait for would be,
  // it would have nowhere to land).
  if (!last_chunk(chunk)) deps.push_back(p2p(TaskKind::Recv, Direction::Backward, mb, chunk, deps));
  if (p_.offload_activations) {
    Task in;
    in.kind = TaskKind::Copy;
    in.stream = StreamKind::Copy;
    in.bytes = activations(chunk);
    in.alloc = in.bytes;
    in.name = named("copy h2d act ", mb, chunk);
    in.purpose = Purpose::ActivationOffload;
    in.microbatch = mb;
    in.chunk = chunk;
    // Prefetched one backward ahead: the copy starts once the compute stream has reached the backward
    // before this one (and runs beside it), not with every other h2d copy after the last forward's d2h,
    // which would bring all offloaded activations back at once.
    if (before_previous_backward_ >= 0) in.deps = {before_previous_backward_};
    deps.push_back(add(std::move(in)));
  }
  before_previous_backward_ = before_this;
  if (p_.zero == 3) {
    deps = sharded_backward(mb, chunk, std::move(deps), final_microbatch);
    if (chunk > 0) p2p(TaskKind::Send, Direction::Backward, mb, chunk, deps);
    return;
  }
  Bytes working_set;
  deps = recompute(mb, chunk, st.layer_begin, st.layer_end, named("R ", mb, chunk), std::move(deps),
                   working_set);
  // The final micro-batch's backward is cut where DP buckets end, so each bucket starts as soon as
  // its layers are done (when DP overlap is on); under ZeRO 2 every micro-batch's is, and each bucket
  // is reduce-scattered then.
  std::vector<std::pair<int, int>> segments{{st.layer_end, st.layer_begin}};
  const bool every = reduces_every_microbatch();
  if ((final_microbatch || every) && p_.overlap_dp && replicas() > 1) segments = bucket_segments_[chunk];
  for (size_t i = 0; i < segments.size(); ++i) {
    const auto [hi, lo] = segments[i];
    Task b = pass_task(
        TaskKind::Backward, mb, chunk, lo, hi,
        named("B ", mb, chunk) +
            (segments.size() > 1 && names_ ? " L" + std::to_string(lo) + "-" + std::to_string(hi) : ""));
    const bool head = last_chunk(chunk) && i == 0, embedding = chunk == 0 && i + 1 == segments.size();
    b.work = pass_work(lo, hi, false, embedding, head);
    if (i + 1 == segments.size()) b.free = activations(chunk) + working_set;
    if (every) b.alloc = segment_gradient_bytes(lo, hi);  // until their reduce-scatter
    if (head) hold_loss_transients(b, chunk);
    b.deps = deps;
    deps = compute_with_comm(std::move(b), chunk, lo, hi, false, mb, 1);
    if (final_microbatch) segment_done_[{chunk, lo}] = deps.front();
    if (every && p_.overlap_dp) unit_reduce(mb, chunk, lo, hi, deps.front());
  }
  if (every && !p_.overlap_dp)  // the whole pass's buckets, after it
    for (const auto& [hi, lo] : bucket_segments_[chunk]) unit_reduce(mb, chunk, lo, hi, deps.front());
  if (chunk > 0) p2p(TaskKind::Send, Direction::Backward, mb, chunk, deps);
}

void RoleBuilder::parameters_and_buckets() {
  RankParameters held = plan_rank_parameters(p_, m_, t_, rank_);
  chunk_params_ = std::move(held.per_chunk);
  role_.parameters = held.total;
  experts_ = held.experts;
  buckets_ = std::move(held.buckets);
  unit_params_ = std::move(held.per_layer);
  unit_experts_ = std::move(held.per_layer_experts);
  for (const GradientBucket& b : buckets_) bucket_segments_[b.chunk].push_back({b.layer_end, b.layer_begin});
  if (gathers_in_forward()) gather_order();
}

TaskDeps RoleBuilder::add_dp(Task t, Bytes dense, Bytes experts) {
  const Bytes total = dense + experts;
  const double dense_share = total > Bytes(0) ? dense / total : 1;
  Task part = t;
  t.bytes = dense;
  t.alloc = t.alloc * dense_share;
  t.free = t.free * dense_share;
  TaskDeps ids{add(std::move(t))};
  if (experts <= Bytes(0)) return ids;
  part.group = GroupKind::ExpertDp;
  part.placement = expert_dp_;
  part.bytes = experts;
  part.alloc = part.alloc * (1 - dense_share);
  part.free = part.free * (1 - dense_share);
  if (names_) part.name += " experts";
  ids.push_back(add(std::move(part)));
  return ids;
}

TaskDeps RoleBuilder::gradient_buckets(int last_compute) {
  TaskDeps ids;
  int index = 0;
  for (const GradientBucket& b : buckets_) {
    const auto segment = segment_done_.find({b.chunk, b.layer_begin});  // none under ZeRO 3
    const int ready = p_.overlap_dp && segment != segment_done_.end() ? segment->second : last_compute;
    const double dense = b.elements - b.expert_elements, experts = dp_experts(b.expert_elements);
    Task t;
    Bytes dense_bytes, expert_bytes;
    if (p_.compression.kind == CompressionKind::TopK) {
      // Each rank contributes ratio x n (value, int32 index) pairs; everyone gathers all of them
      // (the pairs of its experts, the ranks that hold them).
      const double pair_bytes = p_.compression.ratio * (grad_elem_ + 4);
      dense_bytes = Bytes(replicas() * dense * pair_bytes);
      expert_bytes = Bytes(expert_replicas() * experts * pair_bytes);
      t = collective(CollectiveKind::AllGather, GroupKind::Dp, dp_, dense_bytes + expert_bytes, 1,
                     StreamKind::Dp, names_ ? "AG dp topk bucket" + std::to_string(index) : "", {ready});
      // The gathered pairs land in a buffer of their own, decoded into the bucket when it ends.
      t.alloc = t.free = t.bytes;
      t.purpose = Purpose::GradientTopK;
    } else {
      dense_bytes = Bytes(dense * grad_elem_);
      expert_bytes = Bytes(experts * grad_elem_);
      t = collective(
          p_.zero == 0 ? CollectiveKind::AllReduce : CollectiveKind::ReduceScatter, GroupKind::Dp, dp_,
          dense_bytes + expert_bytes, 1, StreamKind::Dp,
          names_ ? std::string(p_.zero == 0 ? "AR" : "RS") + " dp bucket" + std::to_string(index) : "",
          {ready});
      t.purpose = Purpose::GradientReduce;
    }
    t.chunk = b.chunk;  // the layers it reduces, once a step
    t.layer_begin = b.layer_begin;
    t.layer_end = b.layer_end;
    for (int id : add_dp(std::move(t), dense_bytes, expert_bytes)) ids.push_back(id);
    ++index;
  }
  return ids;
}

void RoleBuilder::optimizer() {
  // Everything the backward passes left running ends before the step.
  TaskDeps step_deps = previous_compute_;
  if (reduces_every_microbatch())
    for (int id : reduce_ids_) step_deps.push_back(id);
  else if (replicas() > 1)
    for (int id : gradient_buckets(previous_compute_.front())) step_deps.push_back(id);
  if (m_.tied_embeddings && p_.pp > 1 && (rank_ == 0 || rank_ == p_.pp - 1)) {
    // Tied embeddings: once the DP buckets have summed the gradients over the replicas, the first and
    // the last stage sum their two copies (Megatron-LM's order); under ZeRO only this rank's block.
    const cost::GroupPlacement pair = place(2, pp_stride_ * (p_.pp - 1), *pool_, c_);
    const double shards = p_.zero > 0 ? this->shards() : 1;
    Task sum = collective(CollectiveKind::AllReduce, GroupKind::Embedding, pair,
                          Bytes(double(m_.vocab) * m_.hidden / p_.tp * grad_elem_ / shards), 1,
                          StreamKind::Dp, "AR embedding grads", step_deps);
    sum.purpose = Purpose::TiedEmbeddingSum;
    step_deps.push_back(add(std::move(sum)));
  }
  // The step reads every rank's gradients at once: under fp16 whether any overflowed, then the
  // clipping norm, each a few bytes summed over every rank (the frameworks' order).
  const cost::GroupPlacement world = group_placement(p_, GroupKind::World, *pool_, c_);
  TaskDeps checked = step_deps;
  for (Purpose purpose : {Purpose::OverflowCheck, Purpose::GradientNorm}) {
    if (purpose == Purpose::OverflowCheck && t_.precision != Precision::Fp16) continue;
    const bool norm = purpose == Purpose::GradientNorm;
    Task check = collective(CollectiveKind::AllReduce, GroupKind::World, world, Bytes(4), 1, StreamKind::Dp,
                            norm ? "AR world gradient norm" : "AR world overflow flag", checked);
    check.purpose = purpose;
    checked = {add(std::move(check))};
  }
  // ZeRO shards the dense parameters' states over the DP group, the experts' over their replicas.
  const double shard = p_.zero >= 1 ? (role_.parameters - experts_) / shards() + experts_ / expert_replicas()
                                    : role_.parameters;
  const double k_bytes = cost::optimizer_bytes_per_parameter(t_.optimizer, t_.precision);
  if (p_.offload_optimizer) {
    Task in;
    in.kind = TaskKind::Copy;
    in.stream = StreamKind::Copy;
    in.bytes = Bytes(shard * k_bytes);
    in.alloc = in.bytes;  // the step runs on the device: its state is there until the copy back
    in.name = "copy h2d optimizer";
    in.purpose = Purpose::OptimizerOffload;
    in.deps = step_deps;
    checked.push_back(add(std::move(in)));
  }
  Task step;
  step.kind = TaskKind::Optimizer;
  step.name = "optimizer step";
  step.work = cost::optimizer_step(shard, t_);
  step.work += fp8_weight_casts();
  // The gradient buffer zeroed for the next step (Megatron-LM's train_step zeroes it before the first
  // micro-batch; one step's end and the next's start are the same point of a steady iteration).
  step.work += cost::gradient_buffer_zeroing(role_.parameters, cost::gradient_buffer_bytes(t_, p_.zero));
  step.deps = checked;
  const int step_id = add(std::move(step));
  if (p_.offload_optimizer) {
    Task out;
    out.kind = TaskKind::Copy;
    out.stream = StreamKind::Copy;
    out.to_host = true;
    out.bytes = Bytes(shard * k_bytes);
    out.free = out.bytes;
    out.name = "copy d2h optimizer";
    out.purpose = Purpose::OptimizerOffload;
    out.deps = {step_id};
    add(std::move(out));
  }
  // Under overlap.param_gather the next step's forward gathers them (lower_param_gather.cpp).
  if ((p_.zero == 1 || p_.zero == 2) && replicas() > 1 && !gathers_in_forward()) {
    const Bytes dense((role_.parameters - experts_) * gather_elem_),
        experts(dp_experts(experts_) * gather_elem_);
    Task gather = collective(CollectiveKind::AllGather, GroupKind::Dp, dp_, dense + experts, 1,
                             StreamKind::Dp, "AG dp params", {step_id});
    gather.purpose = Purpose::ParameterGather;  // every parameter of the rank (chunk -1)
    add_dp(std::move(gather), dense, experts);
  }

  // Gradients reduce-scattered every micro-batch are held as the rank's partition; otherwise whole.
  const bool sharded = reduces_every_microbatch();
  const cost::ModelStateBytes dense =
      cost::held_model_state_bytes(role_.parameters - experts_, shards(), p_.zero, sharded, t_);
  const cost::ModelStateBytes experts =
      cost::held_model_state_bytes(experts_, expert_replicas(), p_.zero, sharded, t_);
  role_.state = {dense.weights + experts.weights, dense.gradients + experts.gradients,
                 dense.optimizer + experts.optimizer};
  if (p_.offload_optimizer) {
    role_.host_state = role_.state.optimizer;
    role_.state.optimizer = Bytes(0);
  }
  // A PP send and receive buffer each way. The DP buckets reduce in place, in the gradient buffer
  // (as Megatron-LM's and PyTorch DDP's do); top-k's error feedback keeps a residual per gradient.
  role_.buffers = (p_.pp > 1 ? boundary_bytes() * 4 : Bytes(0)) +
                  cost::compression_buffer_bytes(p_.compression, role_.parameters, replicas());
}

}  // namespace lowering

size_t Program::task_count() const {
  size_t n = 0;
  for (const auto& r : roles) n += r.tasks.size();
  return n;
}

Program lower(const Plan& plan, const ModelSpec& model, const ClusterSpec& cluster,
              const TrainingSpec& training, const LowerOptions& options) {
  if (auto problems = verify(plan, model, cluster, training); !problems.empty())
    throw std::logic_error("lower() needs a verified plan: " + problems.front());
  Program program;
  program.plan = plan;
  program.model = model.name;
  program.cluster = cluster.name;
  program.world = plan.gpus();
  program.tokens_per_iteration = double(training.global_batch) * training.seq_len;
  program.model_flops_per_iteration =
      Flops(training_flops_per_token(model, training.seq_len) * program.tokens_per_iteration);
  program.routing = cost::layer_routing(model, plan.ep);
  for (int r = 0; r < plan.pp; ++r)
    program.roles.push_back(
        lowering::RoleBuilder(plan, model, cluster, training, r, options.task_names, program.routing)
            .build());
  return program;
}

}  // namespace paratwin
