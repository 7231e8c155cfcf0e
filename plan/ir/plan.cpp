// Plan completion, verification and the plan file.
#include "plan/ir/plan.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

#include "plan/spec/checked.hpp"
#include "plan/spec/limits.hpp"
#include "plan/topology/rank_order.hpp"

namespace paratwin {

std::vector<StagePlan> even_stages(int layers, int chunks, const std::string& pool, Recompute recompute,
                                   int recompute_every, PipelineSplit split) {
  const int counted = layers + split.extra_layers();
  std::vector<StagePlan> out;
  int begin = 0;
  for (int c = 0; c < chunks; ++c) {
    int n = counted / chunks + (c < counted % chunks ? 1 : 0);
    if (c == 0 && split.embedding) --n;
    if (c == chunks - 1 && split.loss) --n;
    out.push_back({begin, begin + n, pool, recompute, recompute_every});
    begin += n;
  }
  return out;
}

Plan complete_plan(const ScenarioSpec& s) {
  return complete_plan(s.plan, s);
}

Plan complete_plan(const PlanRequest& r, const ScenarioSpec& s) {
  auto needs_optimizer = [&](const char* field) {
    const auto it = s.locations.find(std::string("plan.") + field);
    const Location where = it != s.locations.end() ? it->second : s.document.location;
    throw InputError(where, std::string("plan.") + field + " is left to the optimizer (auto); give plan." +
                                field +
                                " a value, or run the plan it chooses: paratwin plan SCENARIO -o plan.yaml, "
                                "then --plan plan.yaml");
  };
  Plan p;
  if (!r.tp) needs_optimizer("tp");
  if (!r.pp) needs_optimizer("pp");
  if (!r.micro_batch) needs_optimizer("micro_batch");
  p.tp = *r.tp;
  p.pp = *r.pp;
  p.cp = r.cp.value_or(1);
  p.ep = r.ep.value_or(1);
  p.expert_tp = r.expert_tp.value_or(0) == p.tp ? 0 : r.expert_tp.value_or(0);  // 0: as tp
  p.dp = r.dp ? *r.dp : int(s.cluster.gpus() / (std::int64_t(p.tp) * p.pp * p.cp));
  p.order = r.order.value_or(p.order);
  p.micro_batch = *r.micro_batch;
  // At most global_batch (an int, see parse_training): never wrapped.
  const long long per_replica = s.training.global_batch / std::max(1, p.dp);
  p.num_microbatches = r.num_microbatches.value_or(static_cast<int>(per_replica / p.micro_batch));
  p.schedule = r.schedule.value_or(Schedule::OneFOneB);
  p.virtual_stages = r.virtual_stages.value_or(1);
  p.sequence_parallel = r.sequence_parallel.value_or(false);
  p.zero = r.zero.value_or(0);
  p.reshard = r.reshard.value_or(Reshard::AfterForward);
  p.dp_replicate = r.dp_replicate.value_or(1);
  p.offload_optimizer = r.offload_optimizer.value_or(false);
  p.offload_activations = r.offload_activations.value_or(false);
  if (r.compression) p.compression = *r.compression;
  if (r.bucket_size) p.bucket_size = *r.bucket_size;
  p.overlap_dp = r.overlap_dp.value_or(p.overlap_dp);
  p.overlap_tp = r.overlap_tp.value_or(p.overlap_tp);
  p.overlap_pp = r.overlap_pp.value_or(p.overlap_pp);
  p.overlap_param_gather = r.overlap_param_gather.value_or(p.overlap_param_gather);
  p.overlap_ep = r.overlap_ep.value_or(p.overlap_ep);
  p.checkpoint_interval = r.checkpoint_interval ? r.checkpoint_interval : s.checkpoint.interval;
  if (r.stages) {
    p.stages = *r.stages;
    for (auto& st : p.stages)
      if (st.pool.empty() && !s.cluster.pools.empty()) st.pool = s.cluster.pools.front().name;
  } else {
    if (s.cluster.pools.size() > 1)
      throw InputError(s.document.location,
                       "plan.stages is required on a heterogeneous cluster: say which pool runs each stage");
    const PipelineSplit split = r.pipeline_split.value_or(PipelineSplit{});
    // Scenarios were checked; a plan file was not.
    if (const std::string problem = split.problem(s.model.layers, p.chunks()); !problem.empty()) {
      const auto it = s.locations.find("plan.pipeline_split");
      throw InputError(it != s.locations.end() ? it->second : s.document.location,
                       "plan.pipeline_split: " + problem);
    }
    p.stages = even_stages(s.model.layers, p.chunks(), s.cluster.pools.front().name,
                           r.recompute.value_or(Recompute::None), r.recompute_every.value_or(1), split);
  }
  for (auto& st : p.stages) {
    st.recompute_modules = r.recompute_modules.value_or(RecomputeModules{});
    if (r.recompute_layers && st.recompute_layers == 0) st.recompute_layers = *r.recompute_layers;
  }
  return p;
}

std::vector<std::string> verify(const Plan& p, const ModelSpec& m, const ClusterSpec& c,
                                const TrainingSpec& t) {
  std::vector<std::string> problems;
  auto add = [&](std::string s) { problems.push_back(std::move(s)); };
  auto num = [](long long v) { return std::to_string(v); };
  if (p.dp < 1 || p.tp < 1 || p.pp < 1 || p.cp < 1 || p.ep < 1)
    add("every parallel degree must be at least 1");
  if (p.tp > 0 && (m.heads % p.tp != 0 || m.kv_heads % p.tp != 0))
    add("tp=" + num(p.tp) + " must divide the " + num(m.heads) + " attention heads and " + num(m.kv_heads) +
        " key/value heads");
  if (p.tp > 0 && m.ffn_hidden % p.tp != 0)
    add("tp=" + num(p.tp) + " must divide the " + num(m.ffn_hidden) + " FFN units (ffn_hidden)");
  // Megatron-LM's sequence parallelism splits each sequence (this CP rank's share of it) over tp.
  if (p.sequence_parallel && p.tp > 1 && p.cp > 0 && (t.seq_len / p.cp) % p.tp != 0)
    add("sequence_parallel splits each sequence's " + num(t.seq_len / p.cp) +
        " tokens (per CP rank) over tp=" + num(p.tp) + ": they must divide evenly");
  if (p.cp > 1 && t.seq_len % (2 * p.cp) != 0)
    add("cp=" + num(p.cp) + " needs the sequence length " + num(t.seq_len) + " divisible by " +
        num(2 * p.cp));
  if (p.expert_tp > 0) {
    if (p.expert_tp != 1 || p.tp < 2)
      add("expert_tp=" + num(p.expert_tp) + " with tp=" + num(p.tp) +
          ": the experts' tensor parallelism is tp (leave expert_tp out) or, with tp > 1, 1 (MoE parallel "
          "folding)");
    else if (!m.moe)
      add("expert_tp=1 folds a mixture-of-experts model's experts, and the model has none");
    else if (const long long ranks = static_cast<long long>(p.tp) * p.cp * p.dp; ranks % p.ep != 0)
      add("expert_tp=1 spreads ep=" + num(p.ep) + " over tp x cp x dp = " + num(ranks) +
          " ranks a stage: ep must divide them");
    else if (!p.sequence_parallel)
      add("expert_tp=1 dispatches each rank's sequence-parallel share of the tokens (Megatron-Core requires "
          "--sequence-parallel for MoE under tp > 1): give sequence_parallel true");
    else if (t.tensor_parallel != TensorParallelImpl::Megatron)
      add("expert_tp=1 is Megatron-Core's MoE parallel folding: it needs training.tensor_parallel megatron");
    else if (std::any_of(p.stages.begin(), p.stages.end(),
                         [](const StagePlan& st) { return st.recompute == Recompute::Op; }))
      add("expert_tp=1 with recompute op: per-operator recompute is torchtitan's, which does not fold "
          "experts; use recompute full or selective");
  }
  if (p.ep > 1 && (!m.moe || m.moe->experts % p.ep != 0 || (!folds_experts(p) && p.dp % p.ep != 0)))
    add("ep=" + num(p.ep) + " needs a mixture-of-experts model whose experts and dp=" + num(p.dp) +
        " it divides");
  const std::optional<std::int64_t> per_step = checked_product({p.dp, p.micro_batch, p.num_microbatches});
  if (per_step != t.global_batch)
    add("dp x micro_batch x num_microbatches = " + num(p.dp) + " x " + num(p.micro_batch) + " x " +
        num(p.num_microbatches) + " = " + (per_step ? num(*per_step) : std::string("more than 9.2e18")) +
        " sequences, but the global batch is " + num(t.global_batch));
  if (const std::string big =
          program_size_problem(p.pp, p.virtual_stages, p.num_microbatches, m.layers, p.zero);
      !big.empty())
    add(big);
  if (p.schedule != Schedule::Interleaved && p.virtual_stages != 1)
    add("virtual_stages=" + num(p.virtual_stages) + " needs schedule interleaved");
  if (p.schedule == Schedule::Interleaved) {
    if (p.pp < 2 || p.virtual_stages < 2) add("schedule interleaved needs pp >= 2 and virtual_stages >= 2");
    if (p.pp > 0 && p.num_microbatches % p.pp != 0)
      add("schedule interleaved needs num_microbatches (" + num(p.num_microbatches) +
          ") to be a multiple of pp=" + num(p.pp));
  }
  if (p.zero < 0 || p.zero > 3) add("zero must be 0, 1, 2 or 3");
  if (p.reshard != Reshard::AfterForward && p.zero != 3)
    add("reshard " + enum_name(p.reshard, kReshardNames) +
        " says when ZeRO 3 frees the parameters it gathers, and the plan has zero " + num(p.zero) +
        ": use zero 3, or reshard after_forward");
  if (p.dp_replicate < 1 || p.dp % std::max(1, p.dp_replicate) != 0) {
    // The nearest divisors of dp on either side.
    int below = std::clamp(p.dp_replicate, 1, std::max(1, p.dp)), above = below;
    while (below > 1 && p.dp % below != 0) --below;
    while (above < p.dp && p.dp % above != 0) ++above;
    add("dp_replicate=" + num(p.dp_replicate) + " must divide dp=" + num(p.dp) + " (nearest: " + num(below) +
        (above != below ? " or " + num(above) : "") +
        "; HSDP runs dp_replicate replicas of a dp / dp_replicate-way ZeRO 3 shard group)");
  } else if (p.dp_replicate > 1 && p.zero != 3)
    add("dp_replicate=" + num(p.dp_replicate) +
        " replicates ZeRO 3's shard group (HSDP), and the plan has zero " + num(p.zero) +
        ": use zero 3, or dp_replicate 1");
  else if (p.dp_replicate > 1 && experts_apart(p))
    add("dp_replicate=" + num(p.dp_replicate) + " with ep=" + num(p.ep) +
        ": HSDP of a mixture-of-experts plan (experts sharded over their own replicas) is not modelled; "
        "use ep 1 or dp_replicate 1");
  if (p.compression.kind == CompressionKind::TopK && p.zero >= 2)
    add("top-k gradient compression needs whole gradients on every rank: use zero 0 or 1");
  // Megatron-LM's --overlap-param-gather needs its distributed optimizer and --overlap-grad-reduce
  // (arguments.py asserts both).
  if (p.overlap_param_gather && (p.zero != 1 || !p.overlap_dp))
    add("overlap.param_gather needs zero 1 and overlap.dp (Megatron-LM's distributed optimizer with "
        "--overlap-grad-reduce)");
  if (p.overlap_ep) {
    const bool full = std::any_of(p.stages.begin(), p.stages.end(),
                                  [](const StagePlan& st) { return st.recompute == Recompute::Full; });
    switch (combined_1f1b_conflict(m.moe.has_value(), p.ep, p.pp, p.schedule, full, p.zero)) {
      case Combined1F1BConflict::NoExperts:
        add("overlap.ep overlaps the EP all-to-alls of a mixture-of-experts plan: it needs a model with "
            "moe and ep > 1");
        break;
      case Combined1F1BConflict::Schedule:
        add("overlap.ep (Megatron-Core's combined 1F1B) runs under pp 1 with schedule 1f1b, or under "
            "schedule interleaved, and the plan has pp=" +
            num(p.pp) + " with schedule " + enum_name(p.schedule, kScheduleNames));
        break;
      case Combined1F1BConflict::FullRecompute:
        add("overlap.ep (Megatron-Core's combined 1F1B) does not run beside full recompute: use recompute "
            "selective or none");
        break;
      case Combined1F1BConflict::Zero3:
        add("overlap.ep with zero 3: the twin lowers ZeRO 3's passes a layer at a time, and combined "
            "1F1B pairs whole passes; use zero 0-2");
        break;
      case Combined1F1BConflict::None:
        break;
    }
  }
  // Stages: pp x v chunks covering the layers in order, each on a pool, each pipeline rank on one pool.
  if (static_cast<int>(p.stages.size()) != p.chunks()) {
    add("plan has " + num(p.stages.size()) + " stages; pp x virtual_stages = " + num(p.chunks()) +
        " expected");
    return problems;
  }
  int next = 0;
  for (size_t i = 0; i < p.stages.size(); ++i) {
    const StagePlan& st = p.stages[i];
    if (st.layer_begin != next || st.layer_end <= st.layer_begin)
      add("stage " + num(i) + " covers layers [" + num(st.layer_begin) + ", " + num(st.layer_end) +
          "); stages must cover the layers in order without gaps, starting at " + num(next));
    next = st.layer_end;
    if (st.recompute_every > 1 && st.recompute == Recompute::None)
      add("stage " + num(i) + " has recompute_every " + num(st.recompute_every) +
          " and recompute none: give it recompute full, selective or op, or recompute_every 1");
    if (st.recompute_layers > 0 && st.recompute == Recompute::None)
      add("stage " + num(i) + " has recompute_layers " + num(st.recompute_layers) +
          " and recompute none: give it recompute full, selective or op, or leave recompute_layers out");
    if (st.recompute_layers > 0 && st.recompute_every > 1)
      add("stage " + num(i) + " has recompute_layers " + num(st.recompute_layers) + " and recompute_every " +
          num(st.recompute_every) + ": give one of them (a stage's first layers, or every n-th layer)");
    bool known = false;
    for (const auto& pool : c.pools) known |= pool.name == st.pool;
    if (!known) add("stage " + num(i) + " runs on unknown pool '" + st.pool + "'");
    const int rank = p.rank_of_chunk(int(i));
    const std::string& rank_pool = p.stages[size_t(rank)].pool;
    if (st.pool != rank_pool)
      add("stage " + num(i) + " is on pool " + st.pool + " but pipeline rank " + num(rank) +
          " holds its other chunks on pool " + rank_pool + "; a pipeline rank runs on one pool");
  }
  if (next != m.layers) add("stages cover " + num(next) + " layers; the model has " + num(m.layers));
  if (const RecomputeModules& modules = p.stages.front().recompute_modules; modules != RecomputeModules{}) {
    if (std::ranges::none_of(p.stages,
                             [](const StagePlan& st) { return st.recompute == Recompute::Selective; }))
      add("recompute_modules [" + modules.names() +
          "] says what selective recomputation runs again, and no stage recomputes selectively: give "
          "recompute selective, or leave recompute_modules out");
    // Megatron-Core's TransformerConfig refuses it.
    if ((modules.layernorm || modules.moe_act) && t.precision == Precision::Fp8 &&
        t.fp8_recipe == Fp8Recipe::TeDelayed)
      add("recompute_modules layernorm and moe_act do not run under fp8 delayed scaling (Megatron-Core "
          "refuses them): give training.fp8_recipe te_current, or recompute core_attn only");
  }
  // GPUs per pool: each pipeline rank uses dp x tp x cp GPUs of its pool.
  for (const auto& pool : c.pools) {
    long long used = 0;
    for (int r = 0; r < p.pp; ++r)
      if (p.stages[r].pool == pool.name) used += static_cast<long long>(p.dp) * p.tp * p.cp;
    if (used > pool.gpus())
      add("pool " + pool.name + " has " + num(pool.gpus()) + " GPUs; the plan places " + num(used) +
          " on it");
    if (used > 0 && p.tp > pool.gpus_per_node)
      add("tp=" + num(p.tp) + " exceeds the " + num(pool.gpus_per_node) + " GPUs per node of pool " +
          pool.name);
    if (used > 0 && !c.device_of(pool).peak.contains(t.precision))
      add("pool " + pool.name + "'s device has no " + enum_name(t.precision, kPrecisionNames) + " peak");
  }
  if (c.pools.size() > 1 && rank_strides(p).pp != static_cast<long long>(p.tp) * p.cp * p.dp)
    add("on a heterogeneous cluster the rank order must end with pp, so that each pipeline rank stays in its "
        "pool");
  return problems;
}

static std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string to_yaml(const Plan& p) {
  auto b = [](bool v) { return v ? "true" : "false"; };
  std::string y;
  y += "dp: " + std::to_string(p.dp) + "\ntp: " + std::to_string(p.tp) + "\npp: " + std::to_string(p.pp) +
       "\ncp: " + std::to_string(p.cp) + "\nep: " + std::to_string(p.ep) + "\norder: " + p.order + "\n";
  if (p.expert_tp > 0) y += "expert_tp: " + std::to_string(p.expert_tp) + "\n";
  y += "micro_batch: " + std::to_string(p.micro_batch) +
       "\nnum_microbatches: " + std::to_string(p.num_microbatches) + "\n";
  y += "schedule: " + enum_name(p.schedule, kScheduleNames) +
       "\nvirtual_stages: " + std::to_string(p.virtual_stages) + "\n";
  y += std::string("sequence_parallel: ") + b(p.sequence_parallel) + "\nzero: " + std::to_string(p.zero) +
       "\n";
  // Only ZeRO 3 gathers passes' parameters (a plan file without the key reads after_forward).
  if (p.zero == 3) y += "reshard: " + enum_name(p.reshard, kReshardNames) + "\n";
  if (p.dp_replicate > 1) y += "dp_replicate: " + std::to_string(p.dp_replicate) + "\n";
  y += std::string("offload: {optimizer: ") + b(p.offload_optimizer) +
       ", activations: " + b(p.offload_activations) + "}\n";
  y += "compression: {kind: " + enum_name(p.compression.kind, kCompressionNames) +
       ", ratio: " + number(p.compression.ratio) + ", error_feedback: " + b(p.compression.error_feedback) +
       ", warmup_steps: " + std::to_string(p.compression.warmup_steps) + "}\n";
  y += "bucket_size: " + number(p.bucket_size.value()) + "B\n";
  y += std::string("overlap: {dp: ") + b(p.overlap_dp) + ", tp: " + b(p.overlap_tp) +
       ", pp: " + b(p.overlap_pp) +
       // Written when on, so that the plan files of every other plan read as they did before it existed.
       (p.overlap_param_gather ? ", param_gather: true" : "") + (p.overlap_ep ? ", ep: true" : "") + "}\n";
  // Written when not Megatron's default, so that every other plan file reads as it did before.
  if (!p.stages.empty() && p.stages.front().recompute_modules != RecomputeModules{})
    y += "recompute_modules: [" + p.stages.front().recompute_modules.names() + "]\n";
  y += "checkpoint_interval: " +
       (p.checkpoint_interval ? number(p.checkpoint_interval->value()) + "s" : "auto") + "\n";
  y += "stages:\n";
  for (const auto& st : p.stages)
    y += "  - {layers: [" + std::to_string(st.layer_begin) + ", " + std::to_string(st.layer_end) +
         "], pool: " + st.pool + ", recompute: " + enum_name(st.recompute, kRecomputeNames) +
         (st.recompute_every > 1 ? ", recompute_every: " + std::to_string(st.recompute_every) : "") +
         (st.recompute_layers > 0 ? ", recompute_layers: " + std::to_string(st.recompute_layers) : "") +
         "}\n";
  return y;
}

std::string recompute_name(const Plan& p) {
  if (p.stages.empty()) return "none";
  const StagePlan& st = p.stages.front();
  std::string mode = enum_name(st.recompute, kRecomputeNames);
  if (st.recompute == Recompute::Selective && st.recompute_modules != RecomputeModules{})
    mode += " (" + st.recompute_modules.names() + ")";
  if (st.recompute != Recompute::None && st.recompute_layers > 0)
    mode += ", first " + std::to_string(st.recompute_layers) +
            (st.recompute_layers == 1 ? " layer" : " layers") + " a stage";
  return mode;
}

Plan load_plan_file(const std::string& path, const ScenarioSpec& scenario) {
  Diagnostics diag;
  FieldLocations locations;
  PlanRequest request = parse_plan_request(load_yaml_file(path), diag, &locations);
  diag.throw_if_errors();
  ScenarioSpec with_plan = scenario;
  // The plan file's fields are where its errors are, not the scenario's plan section.
  for (const auto& [field, where] : locations) with_plan.locations.insert_or_assign(field, where);
  return complete_plan(request, with_plan);
}

}  // namespace paratwin
