// verify(const Program&): the Program's invariants, every broken one reported (as LLVM's verifier
// does), for tests and for the live engines, which run DP tasks by what the Program says of them.
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "plan/cost/tp_overlap.hpp"
#include "plan/ir/buckets.hpp"
#include "plan/ir/program.hpp"
#include "plan/ir/reshard_rule.hpp"

namespace paratwin {

namespace {

class RoleVerifier {
 public:
  RoleVerifier(const Program& program, size_t index, std::vector<std::string>& problems)
      : p_(program.plan), role_(program.roles[index]), index_(index), problems_(problems) {}

  void run() {
    if (role_.pipeline_rank != int(index_)) report("is pipeline rank " + std::to_string(role_.pipeline_rank));
    int optimizer_steps = 0;
    for (size_t i = 0; i < role_.tasks.size(); ++i) {
      const Task& t = role_.tasks[i];
      for (int d : t.deps)
        if (d < 0 || size_t(d) >= i)
          report(i, "waits for task " + std::to_string(d) + ", which is not an earlier task of the role");
      if (t.kind == TaskKind::Optimizer) {
        ++optimizer_steps;
        optimizer_ = int(i);
      }
      purpose(i, t);
      if (p_.zero == 3 && (t.kind == TaskKind::Forward || t.kind == TaskKind::Backward))
        gathered_before(i, t);
      if (t.kind == TaskKind::Forward && t.microbatch == 0 && !step_gathered_.empty())
        gathered_for_step(i, t);
    }
    if (optimizer_steps != 1)
      report("has " + std::to_string(optimizer_steps) + " optimizer steps; one is expected");
    if (norms_ != 1)
      report("has " + std::to_string(norms_) + " gradient-norm all-reduces; one is expected");
    else if (optimizer_ >= 0 && !role_.tasks[size_t(optimizer_)].deps.contains(norm_))
      report(size_t(optimizer_), "must wait for the gradient-norm all-reduce");
    buckets_cover_every_layer();
  }

 private:
  std::string where(size_t i) const {
    const Task& t = role_.tasks[i];
    return "role " + std::to_string(index_) + ", task " + std::to_string(i) +
           (t.name.empty() ? "" : " '" + t.name + "'");
  }
  void report(size_t i, const std::string& what) { problems_.push_back(where(i) + ": " + what); }
  void report(const std::string& what) { problems_.push_back("role " + std::to_string(index_) + " " + what); }

  int replicas() const { return p_.dp * p_.cp; }
  int expert_replicas() const { return paratwin::expert_replicas(p_); }
  bool own_chunk(int chunk) const {
    return chunk >= 0 && chunk < p_.chunks() && p_.rank_of_chunk(chunk) == int(index_);
  }

  // The purpose the task's kind and group allow, and what that purpose asks of the plan and the task.
  void purpose(size_t i, const Task& t) {
    const bool dp = t.kind == TaskKind::Collective && t.group == GroupKind::Dp;
    const bool tied = t.kind == TaskKind::Collective && t.group == GroupKind::Embedding;
    const bool pass =
        t.kind == TaskKind::Forward || t.kind == TaskKind::Backward || t.kind == TaskKind::Recompute;
    const std::string name = enum_name(t.purpose, kPurposeNames);
    auto expect = [&](bool ok, const std::string& what) {
      if (!ok) report(i, name + " " + what);
    };
    if (t.kind == TaskKind::Collective && t.group == GroupKind::ExpertDp) {
      expert_part(i, t, expect);
      return;
    }
    switch (t.purpose) {
      case Purpose::None:
        if (dp || tied || t.group == GroupKind::DpReplicate || t.group == GroupKind::World ||
            t.kind == TaskKind::Copy)
          report(i, "has no purpose; the live engines run it by its purpose");
        return;
      case Purpose::GradientReduce:
        expect(dp && t.collective == (p_.zero == 0 ? cost::CollectiveKind::AllReduce
                                                   : cost::CollectiveKind::ReduceScatter),
               "must be a DP " +
                   std::string(p_.zero == 0 ? "all-reduce (ZeRO 0)" : "reduce-scatter (ZeRO 1-3)"));
        expect(p_.compression.kind == CompressionKind::None, "is dense, but the plan compresses gradients");
        bucket(i, t);
        return;
      case Purpose::GradientTopK:
        expect(dp && t.collective == cost::CollectiveKind::AllGather, "must be a DP all-gather");
        expect(p_.compression.kind == CompressionKind::TopK, "needs top-k compression in the plan");
        bucket(i, t);
        return;
      case Purpose::ParameterGather:
        expect(dp && t.collective == cost::CollectiveKind::AllGather, "must be a DP all-gather");
        expect(p_.zero == 1 || p_.zero == 2, "belongs to ZeRO 1 and 2");
        if (p_.overlap_param_gather) {
          // The previous step's parameters, a bucket's span at a time, before the forward needs them.
          expect(optimizer_ < 0, "must come before the optimizer step under overlap.param_gather");
          step_gathered_.push_back({int(i), span(i, t)});
          return;
        }
        expect(optimizer_ >= 0 && t.deps.contains(optimizer_), "must wait for the optimizer step");
        expect(t.chunk == -1 || own_chunk(t.chunk),
               "names chunk " + std::to_string(t.chunk) + " of another role");
        return;
      case Purpose::PassGather:
        expect(dp && t.collective == cost::CollectiveKind::AllGather, "must be a DP all-gather");
        expect(p_.zero == 3, "belongs to ZeRO 3");
        expect(t.microbatch >= 0 && t.microbatch < p_.num_microbatches,
               "names micro-batch " + std::to_string(t.microbatch) + " of " +
                   std::to_string(p_.num_microbatches));
        held_after_gather(i, t, span(i, t));
        return;
      case Purpose::ReplicaReduce: {
        // HSDP: right after the reduce-scatter of the same span, over the replicas.
        expect(t.kind == TaskKind::Collective && t.group == GroupKind::DpReplicate &&
                   t.collective == cost::CollectiveKind::AllReduce,
               "must be an all-reduce over the DP replicas");
        expect(p_.dp_replicate > 1 && p_.zero == 3, "belongs to HSDP (zero 3 with dp_replicate > 1)");
        const bool after_reduce = t.deps.size() == 1 && t.deps.front() >= 0 && size_t(t.deps.front()) < i &&
                                  role_.tasks[size_t(t.deps.front())].purpose == Purpose::GradientReduce;
        expect(after_reduce, "must follow one gradient reduce-scatter");
        if (after_reduce) {
          const Task& rs = role_.tasks[size_t(t.deps.front())];
          expect(rs.chunk == t.chunk && rs.layer_begin == t.layer_begin && rs.layer_end == t.layer_end &&
                     rs.microbatch == t.microbatch,
                 "must span the parameters of the reduce-scatter it follows");
        }
        return;
      }
      case Purpose::TiedEmbeddingSum:
        expect(tied && t.collective == cost::CollectiveKind::AllReduce,
               "must be an all-reduce over the embedding pair");
        expect(p_.pp > 1 && (index_ == 0 || int(index_) == p_.pp - 1),
               "belongs to the first and the last stage");
        return;
      case Purpose::OverflowCheck:
      case Purpose::GradientNorm:
        expect(t.kind == TaskKind::Collective && t.group == GroupKind::World &&
                   t.collective == cost::CollectiveKind::AllReduce,
               "must be an all-reduce over every rank");
        expect(optimizer_ < 0, "must come before the optimizer step");
        if (t.purpose == Purpose::GradientNorm) {
          ++norms_;
          norm_ = int(i);
        }
        return;
      case Purpose::ActivationOffload:
        expect(t.kind == TaskKind::Copy && p_.offload_activations,
               "must be a copy of a plan that offloads activations");
        expect(t.microbatch >= 0 && own_chunk(t.chunk), "must name a micro-batch and a chunk of the role");
        return;
      case Purpose::AttentionBlocks:
        expect(pass && p_.cp > 1, "must be a compute task of a plan with cp > 1");
        return;
      case Purpose::GatheredForwardPart:
        expect(t.kind == TaskKind::Forward && t.microbatch == 0 && p_.overlap_param_gather,
               "must be a forward of micro-batch 0 of a plan with overlap.param_gather");
        return;
      case Purpose::TpGemmPieces:
        expect(pass && p_.overlap_tp && cost::tp_overlap_decomposes(p_.tp, p_.sequence_parallel),
               "must be a compute task of a plan with TP overlap, tp > 1 and sequence parallelism");
        return;
      case Purpose::OptimizerOffload:
        expect(t.kind == TaskKind::Copy && p_.offload_optimizer,
               "must be a copy of a plan that offloads the optimizer");
        return;
      case Purpose::InputBatch:
        expect(t.kind == TaskKind::Copy && !t.to_host, "must be a copy to the device");
        expect(t.microbatch >= 0 && own_chunk(t.chunk) && (t.chunk == 0 || t.chunk == p_.chunks() - 1),
               "must name a micro-batch and the role's first or last chunk of the model");
        return;
    }
  }

  // The experts' part of a data-parallel task: issued right after the dense part of the same span, on
  // the same dependencies (lowering's add_dp); the checks above hold that part to the plan.
  template <class Expect>
  void expert_part(size_t i, const Task& t, const Expect& expect) {
    expect(experts_apart(p_) && experts_replicated(expert_replicas()),
           "over the experts' replicas needs experts apart (ep > 1 or folded) with more than one holder");
    expect(t.purpose == Purpose::GradientReduce || t.purpose == Purpose::GradientTopK ||
               t.purpose == Purpose::ParameterGather || t.purpose == Purpose::PassGather,
           "is not a data-parallel task with an experts' part");
    const Task* dense = i > 0 ? &role_.tasks[i - 1] : nullptr;
    expect(
        dense && dense->kind == TaskKind::Collective && dense->group == GroupKind::Dp &&
            dense->purpose == t.purpose && dense->collective == t.collective && dense->stream == t.stream &&
            dense->microbatch == t.microbatch && dense->chunk == t.chunk &&
            dense->layer_begin == t.layer_begin && dense->layer_end == t.layer_end &&
            dense->direction == t.direction && dense->deps == t.deps,
        "over the experts' replicas must come right after the DP task of the same span, on its dependencies");
  }

  // The layers of a parameter span: a chunk of the role and layers inside it (-1: all of the chunk's).
  // Empty when the span is not one.
  std::pair<int, int> span(size_t i, const Task& t) {
    if (!own_chunk(t.chunk)) {
      report(i, "names chunk " + std::to_string(t.chunk) + ", not one of the role's");
      return {0, 0};
    }
    const StagePlan& st = p_.stages[size_t(t.chunk)];
    if (t.layer_begin == -1 && t.layer_end == -1) return {st.layer_begin, st.layer_end};
    if (t.layer_begin < st.layer_begin || t.layer_end > st.layer_end || t.layer_begin >= t.layer_end) {
      report(i, "spans layers " + std::to_string(t.layer_begin) + "-" + std::to_string(t.layer_end) +
                    ", not a part of chunk " + std::to_string(t.chunk) + "'s " +
                    std::to_string(st.layer_begin) + "-" + std::to_string(st.layer_end));
      return {0, 0};
    }
    return {t.layer_begin, t.layer_end};
  }
  void bucket(size_t i, const Task& t) {
    const auto [begin, end] = span(i, t);
    for (int l = begin; l < end; ++l) {
      auto [it, fresh] = reduced_[t.microbatch].emplace(std::pair{t.chunk, l}, int(i));
      if (!fresh)
        report(i, "reduces layer " + std::to_string(l) + ", which task " + std::to_string(it->second) +
                      " reduces too");
    }
  }

  // Under ZeRO 3 a pass needs its layers gathered (and not freed since) first; plan.reshard says which
  // passes free them: every one (after_forward), backwards (after_backward), the chunk's last backward
  // of the step (after_step). The shares of a pass (is_pass_share) follow the pass that freed them.
  void gathered_before(size_t i, const Task& pass) {
    const bool forward = pass.kind == TaskKind::Forward;
    const bool frees =
        pass_reshards(p_.reshard, forward, !forward && pass.microbatch == last_backward(pass.chunk));
    for (int l = pass.layer_begin; l < pass.layer_end; ++l) {
      const std::pair unit{pass.chunk, l};
      const std::tuple by{pass.microbatch, int(pass.kind)};
      const auto freed = freed_by_.find(unit);
      if (!held_.count(unit) && (freed == freed_by_.end() || freed->second != by)) {
        report(i, "runs layer " + std::to_string(l) + " without a ZeRO-3 gather of it before");
        return;
      }
      if (frees && pass.purpose == Purpose::None && held_.erase(unit)) freed_by_[unit] = by;
    }
  }
  // The micro-batch of the chunk's last backward in the role's order.
  int last_backward(int chunk) {
    if (last_backward_.empty())
      for (const Task& t : role_.tasks)
        if (t.kind == TaskKind::Backward) last_backward_[t.chunk] = t.microbatch;
    return last_backward_[chunk];
  }
  void held_after_gather(size_t i, const Task& t, std::pair<int, int> layers) {
    for (int l = layers.first; l < layers.second; ++l)
      if (!held_.insert({t.chunk, l}).second)
        report(i, "gathers layer " + std::to_string(l) + ", which is gathered already");
  }

  // Under overlap.param_gather, micro-batch 0's forward of a layer comes after the gather of its bucket:
  // a part of the pass waits for it, the pass's last task (spanning the chunk) for the parts.
  void gathered_for_step(size_t i, const Task& pass) {
    const bool part = pass.purpose == Purpose::GatheredForwardPart;
    for (int l = pass.layer_begin; l < pass.layer_end; ++l) {
      bool found = false;
      for (const auto& [g, layers] : step_gathered_)
        found = found || (role_.tasks[size_t(g)].chunk == pass.chunk && layers.first <= l &&
                          l < layers.second && (!part || pass.deps.contains(g)));
      if (!found && pass.purpose != Purpose::TpGemmPieces) {
        report(i, "runs layer " + std::to_string(l) + " before the step's gather of its parameters");
        return;
      }
    }
  }

  // The buckets of each micro-batch (or of the step) reduce every layer of every chunk of the role.
  void buckets_cover_every_layer() {
    if (replicas() == 1 && reduced_.empty()) return;
    if (reduced_.empty()) reduced_[-1];  // DP without buckets: the step's are all missing
    for (const auto& [microbatch, layers] : reduced_)
      for (const int c : p_.chunks_of(int(index_))) {
        const StagePlan& st = p_.stages[size_t(c)];
        for (int l = st.layer_begin; l < st.layer_end; ++l)
          if (!layers.count({c, l})) {
            report("reduces layer " + std::to_string(l) + " of chunk " + std::to_string(c) +
                   " in no gradient bucket" +
                   (microbatch >= 0 ? " of micro-batch " + std::to_string(microbatch) : std::string()));
            break;
          }
      }
  }

  const Plan& p_;
  const Role& role_;
  const size_t index_;
  std::vector<std::string>& problems_;
  int optimizer_ = -1;
  int norms_ = 0, norm_ = -1;           // the gradient-norm all-reduces seen, and the last one
  std::set<std::pair<int, int>> held_;  // ZeRO 3: the (chunk, layer)s gathered and not freed so far
  std::map<std::pair<int, int>, std::tuple<int, int>>
      freed_by_;                      // the pass (micro-batch, kind) that freed one
  std::map<int, int> last_backward_;  // chunk -> micro-batch
  std::vector<std::pair<int, std::pair<int, int>>>
      step_gathered_;  // overlap.param_gather's gathers, with their layers
  std::map<int, std::map<std::pair<int, int>, int>> reduced_;  // micro-batch -> (chunk, layer) -> bucket task
};

}  // namespace

std::vector<std::string> verify(const Program& program) {
  std::vector<std::string> problems;
  if (int(program.roles.size()) != program.plan.pp)
    problems.push_back("the Program has " + std::to_string(program.roles.size()) + " roles for pp " +
                       std::to_string(program.plan.pp));
  for (size_t r = 0; r < program.roles.size(); ++r) RoleVerifier(program, r, problems).run();
  return problems;
}

}  // namespace paratwin
