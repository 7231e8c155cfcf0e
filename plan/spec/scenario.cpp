// Scenario parsing: references into the catalog, the plan request with `auto`, failures, sweeps.
#include "plan/spec/scenario.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>

#include "plan/spec/checks.hpp"
#include "plan/spec/jobs.hpp"
#include "plan/spec/sweep_size.hpp"

namespace fs = std::filesystem;

namespace paratwin {

const EnumNames<OptimizerKind> kOptimizerNames = {
    {"adamw", OptimizerKind::AdamW}, {"adam", OptimizerKind::Adam}, {"sgd", OptimizerKind::Sgd}};
const EnumNames<AttentionKind> kAttentionNames = {{"flash", AttentionKind::Flash},
                                                  {"flash2", AttentionKind::Flash2},
                                                  {"flash3", AttentionKind::Flash3},
                                                  {"triton", AttentionKind::Triton},
                                                  {"unfused", AttentionKind::Unfused}};
const EnumNames<CpAttention> kCpAttentionNames = {
    {"gather", CpAttention::Gather}, {"torch_ring", CpAttention::TorchRing}, {"te_p2p", CpAttention::TeP2p}};
const EnumNames<CpRotate> kCpRotateNames = {{"allgather", CpRotate::AllGather},
                                            {"alltoall", CpRotate::AllToAll}};
const EnumNames<TpOverlap> kTpOverlapNames = {{"async_tp", TpOverlap::AsyncTp},
                                              {"userbuffers", TpOverlap::Userbuffers}};
const EnumNames<LayerKernels> kLayerKernelsNames = {
    {"fused", LayerKernels::Fused}, {"compiled", LayerKernels::Compiled}, {"eager", LayerKernels::Eager}};
const EnumNames<Projections> kProjectionsNames = {{"fused", Projections::Fused},
                                                  {"separate", Projections::Separate}};
const EnumNames<Rotary> kRotaryNames = {{"complex", Rotary::Complex},
                                        {"rotation_matrix", Rotary::RotationMatrix}};
const EnumNames<CrossEntropy> kCrossEntropyNames = {{"unfused", CrossEntropy::Unfused},
                                                    {"vocab_parallel", CrossEntropy::VocabParallel},
                                                    {"fused", CrossEntropy::Fused}};
const EnumNames<MoeDispatcher> kMoeDispatcherNames = {{"alltoall", MoeDispatcher::AllToAll},
                                                      {"fused", MoeDispatcher::Fused}};
const EnumNames<TensorParallelImpl> kTensorParallelNames = {{"megatron", TensorParallelImpl::Megatron},
                                                            {"dtensor", TensorParallelImpl::DTensor}};
const EnumNames<DpBuckets> kDpBucketsNames = {{"every_stage", DpBuckets::EveryStage},
                                              {"first_stage", DpBuckets::FirstStage}};
const EnumNames<Fp8Recipe> kFp8RecipeNames = {{"te_delayed", Fp8Recipe::TeDelayed},
                                              {"te_current", Fp8Recipe::TeCurrent},
                                              {"torchao_tensorwise", Fp8Recipe::TorchaoTensorwise}};
const EnumNames<FsdpCopies> kFsdpNames = {
    {"none", FsdpCopies::None}, {"fsdp1", FsdpCopies::Fsdp1}, {"fsdp2", FsdpCopies::Fsdp2}};
const EnumNames<GradAccumulation> kGradAccumulationNames = {{"in_place", GradAccumulation::InPlace},
                                                            {"copy", GradAccumulation::Copy},
                                                            {"unfused", GradAccumulation::Unfused}};
const EnumNames<Precision> kGradReduceNames = {
    {"fp32", Precision::Fp32}, {"bf16", Precision::Bf16}, {"fp16", Precision::Fp16}};
const EnumNames<Schedule> kScheduleNames = {
    {"gpipe", Schedule::GPipe}, {"1f1b", Schedule::OneFOneB}, {"interleaved", Schedule::Interleaved}};
const EnumNames<Reshard> kReshardNames = {{"after_forward", Reshard::AfterForward},
                                          {"after_backward", Reshard::AfterBackward},
                                          {"after_step", Reshard::AfterStep}};
const EnumNames<Recompute> kRecomputeNames = {{"none", Recompute::None},
                                              {"selective", Recompute::Selective},
                                              {"op", Recompute::Op},
                                              {"full", Recompute::Full}};
const EnumNames<CompressionKind> kCompressionNames = {{"none", CompressionKind::None},
                                                      {"topk", CompressionKind::TopK}};
const EnumNames<Objective> kObjectiveNames = {{"iteration_time", Objective::IterationTime},
                                              {"cost_per_token", Objective::CostPerToken},
                                              {"cost", Objective::Cost},
                                              {"energy", Objective::Energy},
                                              {"time_to_train", Objective::TimeToTrain}};
const EnumNames<Component> kComponentNames = {{"gpu", Component::Gpu},
                                              {"host", Component::Host},
                                              {"nic", Component::Nic},
                                              {"link", Component::Link},
                                              {"switch", Component::Switch}};
const EnumNames<FailureDistribution> kFailureDistributionNames = {
    {"exponential", FailureDistribution::Exponential}, {"weibull", FailureDistribution::Weibull}};
const EnumNames<ElasticPolicy> kElasticPolicyNames = {{"restart", ElasticPolicy::Restart},
                                                      {"spares", ElasticPolicy::Spares},
                                                      {"shrink", ElasticPolicy::Shrink}};

const std::vector<std::string> kRankOrders = {"tp-cp-dp-pp", "tp-cp-pp-dp", "tp-dp-cp-pp", "tp-pp-cp-dp"};

bool PlanRequest::fully_automatic() const {
  return !dp && !tp && !pp && !cp && !ep && !micro_batch && !schedule && !virtual_stages && !recompute &&
         !sequence_parallel && !zero && !reshard && !dp_replicate && !offload_optimizer &&
         !offload_activations && !compression && !bucket_size && !overlap_dp && !overlap_tp && !overlap_pp &&
         !overlap_param_gather && !overlap_ep && !expert_tp && !order && !num_microbatches && !stages &&
         !pipeline_split && !checkpoint_interval;
}

std::string PipelineSplit::problem(int layers, int chunks) const {
  const int counted = layers + extra_layers();
  if (extra_layers() == 0 || (chunks > 0 && counted % chunks == 0 && counted / chunks >= 2)) return "";
  const std::string what = embedding && loss ? "the embedding and the loss"
                           : embedding       ? "the embedding"
                                             : "the loss";
  if (chunks > 0 && counted % chunks == 0)
    return "with " + what +
           " counted as layers each chunk holds one, leaving no transformer layer for the "
           "first or last chunk";
  return std::to_string(layers) + " layers with " + what + " counted as layers make " +
         std::to_string(counted) + ", which do not divide evenly over the " + std::to_string(chunks) +
         " chunks (pp x virtual_stages), as Megatron-Core asserts they do";
}

bool PlanRequest::fully_fixed() const {
  return dp && tp && pp && micro_batch;
}

namespace {

bool is_auto(const DocNode* n) {
  return n && n->is_scalar() && !n->quoted && n->scalar == "auto";
}

// Reads `key` as an int, or leaves `out` empty for `auto` and when absent.
void read_auto(MapReader& r, std::string_view key, std::optional<int>& out, int min, int max) {
  const DocNode* n = r.get(key);
  if (!n || is_auto(n)) return;
  if (auto v = read_int(*n, r.field(key), r.diagnostics(), min, max)) out = static_cast<int>(*v);
}

void read_auto(MapReader& r, std::string_view key, std::optional<bool>& out) {
  const DocNode* n = r.get(key);
  if (!n || is_auto(n)) return;
  out = read_bool(*n, r.field(key), r.diagnostics());
}

template <class E>
void read_auto(MapReader& r, std::string_view key, std::optional<E>& out, const EnumNames<E>& names) {
  const DocNode* n = r.get(key);
  if (!n || is_auto(n)) return;
  std::vector<std::string> choices = enum_choices(names);
  choices.push_back("auto");
  if (auto chosen = read_choice(*n, r.field(key), choices, r.diagnostics()))
    for (const auto& [name, value] : names)
      if (name == *chosen) out = value;
}

TrainingSpec parse_training(MapReader& top, const ModelSpec& model, FieldLocations* locations) {
  TrainingSpec t;
  t.seq_len = model.seq_len;
  const DocNode* node = top.require("training");
  if (!node) return t;
  MapReader r(*node, "training", top.diagnostics(), locations);
  // Up to 2^31 - 1 sequences: micro-batch counts and rank products stay within int everywhere.
  r.read("global_batch", t.global_batch, 1, std::numeric_limits<int>::max(), true);
  r.read("seq_len", t.seq_len, 1, 1 << 24);
  r.read_enum("precision", t.precision, kPrecisionNames);
  r.read_enum("optimizer", t.optimizer, kOptimizerNames);
  r.read_enum("attention", t.attention, kAttentionNames);
  r.read_enum("cp_attention", t.cp_attention, kCpAttentionNames);
  if (r.read_enum("cp_rotate", t.cp_rotate, kCpRotateNames) && t.cp_rotate != CpRotate::AllGather &&
      t.cp_attention != CpAttention::TorchRing)
    top.diagnostics().error(node->find("cp_rotate")->location,
                            "training.cp_rotate is PyTorch's context_parallel rotate method: it needs "
                            "training.cp_attention: torch_ring, got " +
                                enum_name(t.cp_attention, kCpAttentionNames));
  r.read_enum("tp_overlap", t.tp_overlap, kTpOverlapNames);
  r.read_enum("kernels", t.kernels, kLayerKernelsNames);
  r.read_enum("projections", t.projections, kProjectionsNames);
  r.read_enum("rotary", t.rotary, kRotaryNames);
  r.read_enum("cross_entropy", t.cross_entropy, kCrossEntropyNames);
  r.read_enum("moe_dispatcher", t.moe_dispatcher, kMoeDispatcherNames);
  r.read_enum("tensor_parallel", t.tensor_parallel, kTensorParallelNames);
  r.read_enum("dp_buckets", t.dp_buckets, kDpBucketsNames);
  r.read_enum("fsdp", t.fsdp, kFsdpNames);
  Precision grad_reduce{};
  if (r.read_enum("grad_reduce", grad_reduce, kGradReduceNames)) t.grad_reduce = grad_reduce;
  if (r.read_enum("grad_accumulation", t.grad_accumulation, kGradAccumulationNames) &&
      t.grad_accumulation != GradAccumulation::InPlace &&
      (t.precision == Precision::Fp32 || t.precision == Precision::Tf32 || t.grad_reduce != Precision::Fp32))
    top.diagnostics().error(
        node->find("grad_accumulation")->location,
        "training.grad_accumulation: " + enum_name(t.grad_accumulation, kGradAccumulationNames) +
            " adds 16-bit gradients into an fp32 buffer: it needs a 16-bit "
            "training.precision and training.grad_reduce: fp32");
  r.read("repeat_kv", t.repeat_kv);
  if (r.read("fp8_param_gather", t.fp8_param_gather) && t.fp8_param_gather && t.precision != Precision::Fp8)
    top.diagnostics().error(node->find("fp8_param_gather")->location,
                            "training.fp8_param_gather needs training.precision: fp8 (the weights are cast "
                            "to fp8 for the GEMMs only then), got " +
                                enum_name(t.precision, kPrecisionNames));
  if (r.read_enum("fp8_recipe", t.fp8_recipe, kFp8RecipeNames) && t.precision != Precision::Fp8)
    top.diagnostics().error(
        node->find("fp8_recipe")->location,
        "training.fp8_recipe needs training.precision: fp8, got " + enum_name(t.precision, kPrecisionNames));
  r.read("launch_blocking", t.launch_blocking);
  if (const DocNode* tokens = r.get("tokens")) {
    t.tokens = read_quantity(*tokens, r.field("tokens"), Dimension::Count, r.diagnostics());
    // At most 10^18 (a million times the largest runs): the steps a budget makes, tokens / (global_batch
    // x seq_len), then fit a 64-bit count wherever they are counted (the live run, --emit megatron).
    constexpr double kMostTokens = 1e18;
    if (t.tokens && *t.tokens > kMostTokens) {
      r.diagnostics().error(tokens->location,
                            r.field("tokens") + " must be at most 1e18 tokens, got " + tokens->scalar);
      t.tokens.reset();
    }
  }
  std::int64_t steps = 0;
  if (r.read("steps", steps, 1)) t.steps = steps;
  if (t.tokens && t.steps)
    top.diagnostics().error(
        node->find("steps")->location,
        "give training.tokens or training.steps, not both: each sets the length of training");
  r.finish();
  return t;
}

PlanRequest parse_plan(const DocNode& node, Diagnostics& diag, FieldLocations* locations) {
  PlanRequest p;
  if (is_auto(&node)) return p;
  if (!node.is_mapping()) {
    diag.error(node.location, "expected a mapping or auto for plan, got " + describe(node));
    return p;
  }
  MapReader r(node, "plan", diag, locations);
  read_auto(r, "dp", p.dp, 1, 1 << 24);
  read_auto(r, "tp", p.tp, 1, 1024);
  read_auto(r, "pp", p.pp, 1, 4096);
  read_auto(r, "cp", p.cp, 1, 1024);
  read_auto(r, "ep", p.ep, 1, 4096);
  read_auto(r, "expert_tp", p.expert_tp, 1, 1024);
  read_auto(r, "micro_batch", p.micro_batch, 1, 1 << 20);
  read_auto(r, "schedule", p.schedule, kScheduleNames);
  read_auto(r, "virtual_stages", p.virtual_stages, 1, 1024);
  read_auto(r, "recompute", p.recompute, kRecomputeNames);
  read_auto(r, "recompute_every", p.recompute_every, 1, 1 << 20);
  if (p.recompute_every > 1 && p.recompute == Recompute::None)
    diag.error(node.find("recompute_every")->location,
               "plan.recompute_every: " + std::to_string(*p.recompute_every) +
                   " recomputes every n-th layer in a recompute mode, and plan.recompute is none: give "
                   "plan.recompute full, selective or op, or recompute_every 1");
  read_auto(r, "recompute_layers", p.recompute_layers, 1, 1 << 20);
  if (p.recompute_layers && p.recompute == Recompute::None)
    diag.error(node.find("recompute_layers")->location,
               "plan.recompute_layers: " + std::to_string(*p.recompute_layers) +
                   " recomputes a stage's first layers in a recompute mode, and plan.recompute is none: give "
                   "plan.recompute full, selective or op, or leave recompute_layers out");
  if (p.recompute_layers && p.recompute_every > 1)
    diag.error(node.find("recompute_layers")->location,
               "plan.recompute_layers: " + std::to_string(*p.recompute_layers) +
                   " beside plan.recompute_every " + std::to_string(*p.recompute_every) +
                   ": give one of them (each stage's first layers, or every n-th layer of the model)");
  if (const DocNode* modules = r.get("recompute_modules"); modules && !is_auto(modules)) {
    p.recompute_modules = read_recompute_modules(*modules, r.field("recompute_modules"), diag);
    if (p.recompute && *p.recompute != Recompute::Selective)
      diag.error(modules->location,
                 "plan.recompute_modules lists what selective recomputation runs again, and "
                 "plan.recompute is " +
                     enum_name(*p.recompute, kRecomputeNames) +
                     ": give plan.recompute selective, or leave recompute_modules out");
  }
  read_auto(r, "sequence_parallel", p.sequence_parallel);
  read_auto(r, "zero", p.zero, 0, 3);
  read_auto(r, "reshard", p.reshard, kReshardNames);
  if (p.reshard && *p.reshard != Reshard::AfterForward && p.zero && *p.zero != 3)
    diag.error(node.find("reshard")->location,
               "plan.reshard: " + enum_name(*p.reshard, kReshardNames) +
                   " says when ZeRO 3 frees the parameters it gathers, and plan.zero is " +
                   std::to_string(*p.zero) + ": give plan.zero 3, or reshard after_forward");
  read_auto(r, "dp_replicate", p.dp_replicate, 1, 1 << 24);
  if (p.dp_replicate > 1 && p.zero && *p.zero != 3)
    diag.error(node.find("dp_replicate")->location,
               "plan.dp_replicate: " + std::to_string(*p.dp_replicate) +
                   " replicates ZeRO 3's shard group (HSDP), and plan.zero is " + std::to_string(*p.zero) +
                   ": give plan.zero 3, or dp_replicate 1");
  if (const DocNode* off = r.get("offload"); off && !is_auto(off)) {
    MapReader o(*off, r.field("offload"), diag, locations);
    read_auto(o, "optimizer", p.offload_optimizer);
    read_auto(o, "activations", p.offload_activations);
    o.finish();
  }
  if (const DocNode* comp = r.get("compression"); comp && !is_auto(comp)) {
    CompressionSpec c;
    if (comp->is_scalar()) {
      // Shorthand: `compression: none`.
      if (auto kind = read_enum(*comp, r.field("compression"), kCompressionNames, diag)) {
        c.kind = *kind;
        if (c.kind == CompressionKind::TopK)
          diag.error(comp->location, "plan.compression: topk needs a ratio, e.g. {kind: topk, ratio: 0.01}");
      }
    } else {
      MapReader cr(*comp, r.field("compression"), diag, locations);
      cr.read_enum("kind", c.kind, kCompressionNames, true);
      const bool has_ratio = cr.get("ratio") != nullptr;
      if (has_ratio) {
        if (auto v = read_number(*comp->find("ratio"), cr.field("ratio"), diag, 0, 1, true)) c.ratio = *v;
      } else if (c.kind == CompressionKind::TopK) {
        diag.error(comp->location,
                   "missing required key 'ratio' in plan.compression (share of gradient "
                   "entries sent, e.g. 0.01)");
      }
      cr.read("error_feedback", c.error_feedback);
      cr.read("warmup_steps", c.warmup_steps, 0, 1 << 30);
      cr.finish();
    }
    p.compression = c;
  }
  if (const DocNode* bucket = r.get("bucket_size"); bucket && !is_auto(bucket))
    if (auto v = read_quantity(*bucket, r.field("bucket_size"), Dimension::DataSize, diag))
      p.bucket_size = Bytes(*v);
  if (const DocNode* ov = r.get("overlap"); ov && !is_auto(ov)) {
    MapReader o(*ov, r.field("overlap"), diag, locations);
    read_auto(o, "dp", p.overlap_dp);
    read_auto(o, "tp", p.overlap_tp);
    read_auto(o, "pp", p.overlap_pp);
    read_auto(o, "param_gather", p.overlap_param_gather);
    read_auto(o, "ep", p.overlap_ep);
    o.finish();
  }
  if (const DocNode* order = r.get("order"); order && !is_auto(order))
    p.order = read_choice(*order, r.field("order"), kRankOrders, diag);
  read_auto(r, "num_microbatches", p.num_microbatches, 1, 1 << 24);
  if (const DocNode* interval = r.get("checkpoint_interval"); interval && !is_auto(interval))
    if (auto v = read_quantity(*interval, r.field("checkpoint_interval"), Dimension::Duration, diag))
      p.checkpoint_interval = Seconds(*v);
  if (const DocNode* split = r.get("pipeline_split"); split && !is_auto(split)) {
    PipelineSplit ps;
    MapReader sr(*split, r.field("pipeline_split"), diag, locations);
    sr.read("embedding", ps.embedding);
    sr.read("loss", ps.loss);
    sr.finish();
    p.pipeline_split = ps;
  }
  if (const DocNode* stages = r.get("stages"); stages && !is_auto(stages)) {
    if (!stages->is_sequence() || stages->items.empty()) {
      diag.error(stages->location, "expected a list of stages for plan.stages, got " + describe(*stages));
    } else {
      std::vector<StagePlan> list;
      for (size_t i = 0; i < stages->items.size(); ++i) {
        const std::string path = "plan.stages[" + std::to_string(i) + "]";
        StagePlan st;
        MapReader sr(stages->items[i], path, diag, locations);
        if (const DocNode* layers = sr.require("layers")) {
          if (layers->is_sequence() && layers->items.size() == 2) {
            auto b = read_int(layers->items[0], path + ".layers[0]", diag, 0, 1 << 20);
            auto e = read_int(layers->items[1], path + ".layers[1]", diag, 1, 1 << 20);
            if (b && e && *e <= *b)
              diag.error(layers->location, path + ".layers = [" + std::to_string(*b) + ", " +
                                               std::to_string(*e) +
                                               "] is empty; expected [first, end) with end > first");
            if (b && e) st.layer_begin = static_cast<int>(*b), st.layer_end = static_cast<int>(*e);
          } else {
            diag.error(layers->location, "expected [first, end) for " + path + ".layers, e.g. [0, 12], got " +
                                             describe(*layers));
          }
        }
        sr.read("pool", st.pool);
        sr.read_enum("recompute", st.recompute, kRecomputeNames);
        sr.read("recompute_every", st.recompute_every, 1, 1 << 20);
        sr.read("recompute_layers", st.recompute_layers, 0, 1 << 20);
        sr.finish();
        list.push_back(st);
      }
      p.stages = list;
    }
  }
  r.finish();
  return p;
}

ComponentFailures parse_component(const DocNode& node, const std::string& path, Diagnostics& diag,
                                  FieldLocations* locations) {
  ComponentFailures c;
  MapReader r(node, path, diag, locations);
  r.read_quantity("mtbf", c.mtbf, true);
  r.read_enum("distribution", c.distribution, kFailureDistributionNames);
  if (r.read("shape", c.shape, 0.05, 20) && c.distribution != FailureDistribution::Weibull)
    diag.error(node.find("shape")->location, r.field("shape") + " applies to distribution: weibull only");
  r.finish();
  return c;
}

FailureSpec parse_failures(const DocNode& node, Diagnostics& diag, FieldLocations* locations) {
  FailureSpec f;
  MapReader r(node, "failures", diag, locations);
  for (const auto& [name, component] : kComponentNames)
    if (const DocNode* c = r.get(name))
      f.rates[component] = parse_component(*c, r.field(name), diag, locations);
  if (const DocNode* events = r.get("events")) {
    if (!events->is_sequence()) {
      diag.error(events->location, "expected a list of events for failures.events, got " + describe(*events));
    } else {
      for (size_t i = 0; i < events->items.size(); ++i) {
        FailureEvent e;
        MapReader er(events->items[i], "failures.events[" + std::to_string(i) + "]", diag, locations);
        er.read_quantity("at", e.at, true, true);
        er.read_enum("component", e.component, kComponentNames, true);
        er.read("index", e.index, 0);
        er.finish();
        f.events.push_back(e);
      }
    }
  }
  if (const DocNode* st = r.get("stragglers")) {
    auto parse_one = [&](const DocNode& n, const std::string& path) {
      StragglerSpec s;
      MapReader sr(n, path, diag, locations);
      sr.read("count", s.count, 1, 1 << 24, true);
      sr.read("slowdown", s.slowdown, 1.0, 1000.0, true);
      sr.finish();
      f.stragglers.push_back(s);
    };
    if (st->is_sequence())
      for (size_t i = 0; i < st->items.size(); ++i)
        parse_one(st->items[i], "failures.stragglers[" + std::to_string(i) + "]");
    else
      parse_one(*st, "failures.stragglers");
  }
  r.read_quantity("detection", f.detection, false, true);
  r.read_quantity("restart", f.restart, false, true);
  r.read_quantity("repair", f.repair, false, true);
  r.finish();
  return f;
}

SweepSpec parse_sweep(const DocNode& node, Diagnostics& diag, FieldLocations* locations) {
  SweepSpec s;
  s.location = node.location;
  MapReader r(node, "sweep", diag, locations);
  if (!r.is_mapping()) {
    diag.error(node.location, "expected a mapping with grid and/or list for sweep, got " + describe(node));
    return s;
  }
  r.read("simulate", s.simulate);
  if (const DocNode* grid = r.get("grid")) {
    if (!grid->is_mapping()) {
      diag.error(grid->location, "expected a mapping of field paths to lists of values for sweep.grid, got " +
                                     describe(*grid));
    } else {
      for (const auto& e : grid->entries) {
        SweepAxis axis{e.key, e.key_location, {}};
        const DocNode& values = e.value.front();
        if (values.is_sequence() && !values.items.empty())
          axis.values = values.items;
        else
          diag.error(values.location, "expected a non-empty list of values for sweep.grid." + e.key +
                                          ", got " + describe(values));
        s.grid.push_back(std::move(axis));
      }
      if (grid->entries.empty())
        diag.error(grid->location, "sweep.grid is empty; expected at least one axis");
    }
  }
  if (const DocNode* list = r.get("list")) {
    if (!list->is_sequence() || list->items.empty()) {
      diag.error(
          list->location,
          "expected a non-empty list of points (mappings of field paths to values) for sweep.list, got " +
              describe(*list));
    } else {
      for (size_t i = 0; i < list->items.size(); ++i) {
        const DocNode& point = list->items[i];
        if (!point.is_mapping() || point.entries.empty()) {
          diag.error(point.location, "expected a mapping of field paths to values for sweep.list[" +
                                         std::to_string(i) + "], got " + describe(point));
          continue;
        }
        std::vector<SweepSetting> settings;
        for (const auto& e : point.entries) settings.push_back({e.key, e.key_location, e.value.front()});
        s.list.push_back(std::move(settings));
      }
    }
  }
  const bool only_simulate = std::all_of(node.entries.begin(), node.entries.end(),
                                         [](const DocEntry& e) { return e.key == "simulate"; });
  if (only_simulate)  // (a misspelled grid or list is reported as an unknown key instead)
    diag.error(node.location,
               "sweep needs a grid (sweep.grid: {cluster.nodes: [16, 32]}) or a list of "
               "points (sweep.list: [{cluster: dgx-h100, plan.tp: 8}])");
  r.finish();
  return s;
}

std::string base_directory(const Location& where) {
  if (where.file.empty() || is_override_location(where)) return ".";
  return fs::path(where.file).parent_path().string();
}

bool looks_like_path(const std::string& s) {
  return s.find('/') != std::string::npos || s.ends_with(".yaml") || s.ends_with(".yml");
}

// `variability:` inline, or a file's (`paratwin calibrate --variability FILE` writes one: a mapping
// with the section under `variability`).
std::optional<DocNode> resolve_variability(const DocNode& value, Diagnostics& diag) {
  if (!value.is_scalar()) return value;
  fs::path p(value.scalar);
  if (p.is_relative()) p = fs::path(base_directory(value.location)) / p;
  std::error_code ec;
  if (!looks_like_path(value.scalar) || !fs::is_regular_file(p, ec)) {
    diag.error(value.location,
               "expected a variability mapping or the path of a file written by paratwin "
               "calibrate --variability, got '" +
                   value.scalar + "'");
    return std::nullopt;
  }
  try {
    DocNode file = load_yaml_file_cached(p.lexically_normal().string());
    if (const DocNode* section = file.find("variability")) return *section;
    diag.error(file.location, "expected a 'variability' section in " + p.string());
  } catch (const InputError& e) {
    for (const auto& d : e.diagnostics()) diag.error(d.where, d.message);
  }
  return std::nullopt;
}

ScenarioSpec parse_scenario(DocNode document, const Catalog& catalog, Diagnostics& diag, bool run_checks) {
  ScenarioSpec s;
  s.file = document.location.file;
  FieldLocations* locs = &s.locations;
  MapReader r(document, "", diag, locs);
  if (!r.is_mapping()) return s;
  r.read("name", s.name);
  r.read("description", s.description);

  if (const DocNode* m = r.require("model"))
    if (auto resolved = resolve_reference(*m, CatalogKind::Model, catalog, diag))
      s.model = parse_model(*resolved, "model", diag, locs);
  if (const DocNode* c = r.require("cluster"))
    if (auto resolved = resolve_reference(*c, CatalogKind::Topology, catalog, diag))
      s.cluster = parse_cluster(*resolved, "cluster", diag, locs);
  s.training = parse_training(r, s.model, locs);
  if (const DocNode* p = r.get("plan")) s.plan = parse_plan(*p, diag, locs);
  if (const DocNode* n = r.get("search")) {
    MapReader sr(*n, "search", diag, locs);
    sr.read_enum("objective", s.search.objective, kObjectiveNames);
    int max_gpus = 0;
    if (sr.read("max_gpus", max_gpus, 1, 1 << 24)) s.search.max_gpus = max_gpus;
    sr.read("top", s.search.top, 1, 1000);
    sr.read("tp_across_nodes", s.search.tp_across_nodes);
    sr.finish();
  }
  if (const DocNode* n = r.get("failures")) s.failures = parse_failures(*n, diag, locs);
  if (const DocNode* n = r.get("variability"))
    if (auto resolved = resolve_variability(*n, diag))
      s.variability = parse_variability(*resolved, diag, locs);
  if (const DocNode* n = r.get("checkpoint")) {
    MapReader cr(*n, "checkpoint", diag, locs);
    if (const DocNode* interval = cr.get("interval"); interval && !is_auto(interval))
      if (auto v = read_quantity(*interval, cr.field("interval"), Dimension::Duration, diag))
        s.checkpoint.interval = Seconds(*v);
    cr.finish();
  }
  if (const DocNode* n = r.get("elasticity")) {
    MapReader er(*n, "elasticity", diag, locs);
    er.read_enum("policy", s.elasticity.policy, kElasticPolicyNames);
    er.read("spares", s.elasticity.spares, 0, 1 << 24);
    int min_gpus = 0;
    if (er.read("min_gpus", min_gpus, 1, 1 << 24)) s.elasticity.min_gpus = min_gpus;
    er.finish();
  }
  if (const DocNode* n = r.get("sweep")) s.sweep = parse_sweep(*n, diag, locs);
  if (const DocNode* n = r.get("goal")) {
    MapReader gr(*n, "goal", diag, locs);
    gr.read_quantity("deadline", s.goal.deadline);
    gr.read_quantity("budget", s.goal.budget);
    gr.finish();
  }
  r.finish();

  // Semantic checks need every part parsed; on top of earlier errors they would only add noise.
  if (run_checks && !diag.has_errors()) check_scenario(s, diag);
  s.document = std::move(document);
  return s;
}

}  // namespace

std::optional<DocNode> resolve_reference(const DocNode& value, CatalogKind kind, const Catalog& catalog,
                                         Diagnostics& diag) {
  const std::string what = kind == CatalogKind::Model ? "model" : "cluster";
  auto load_named = [&](const DocNode& ref) -> std::optional<DocNode> {
    if (!ref.is_scalar() || ref.scalar.empty()) {
      diag.error(ref.location, "expected a " + what +
                                   " name from the catalog, a file path or a mapping for " + what + ", got " +
                                   describe(ref));
      return std::nullopt;
    }
    std::string path;
    if (looks_like_path(ref.scalar)) {
      fs::path p(ref.scalar);
      if (p.is_relative()) p = fs::path(base_directory(ref.location)) / p;
      path = p.lexically_normal().string();
      std::error_code ec;
      if (!fs::is_regular_file(path, ec)) {
        diag.error(ref.location, what + " file '" + ref.scalar + "' not found (looked for " + path + ")");
        return std::nullopt;
      }
    } else if (auto found = catalog.find(kind, ref.scalar)) {
      path = *found;
    } else {
      const auto names = catalog.names(kind);
      std::string hint = did_you_mean(ref.scalar, names);
      if (hint.empty()) hint = "; expected one of " + join(names);
      diag.error(ref.location, "unknown " + what + " '" + ref.scalar + "'" + hint + " (see 'paratwin list " +
                                   kind_directory(kind) + "')");
      return std::nullopt;
    }
    try {
      return load_yaml_file_cached(path);
    } catch (const InputError& e) {
      for (const auto& d : e.diagnostics()) diag.error(d.where, d.message);
      return std::nullopt;
    }
  };

  if (value.is_mapping()) {
    const DocNode* from = value.find("from");
    if (!from) return value;  // inline
    auto base = load_named(*from);
    if (!base) return std::nullopt;
    DocNode overlay = value;
    std::erase_if(overlay.entries, [](const DocEntry& e) { return e.key == "from"; });
    deep_merge(*base, overlay);
    return *base;
  }
  return load_named(value);
}

ScenarioSpec load_scenario(DocNode document, const std::vector<Override>& overrides, const Catalog& catalog) {
  for (const auto& o : overrides) apply_override(document, o);
  if (holds_jobs(document))
    throw InputError(document.find("jobs")->location,
                     "this scenario holds several jobs (jobs:); `paratwin plan`, `paratwin simulate` and "
                     "`paratwin validate` take it, other commands take a scenario of one job");
  Diagnostics diag;
  ScenarioSpec s = parse_scenario(std::move(document), catalog, diag, /*run_checks=*/true);
  if (!diag.has_errors() && !s.sweep.empty() && check_sweep_size(s.sweep, diag))
    check_sweep_values(s, s.sweep, catalog, diag);
  diag.throw_if_errors();
  s.warnings = diag.warnings();
  return s;
}

ScenarioSpec load_scenario(const std::string& path, const std::vector<Override>& overrides,
                           const Catalog& catalog) {
  return load_scenario(load_yaml_file(path), overrides, catalog);
}

ScenarioSpec parse_scenario_document(DocNode document, const Catalog& catalog, Diagnostics& diag,
                                     bool run_checks) {
  return parse_scenario(std::move(document), catalog, diag, run_checks);
}

PlanRequest parse_plan_request(const DocNode& node, Diagnostics& diag, FieldLocations* locations) {
  return parse_plan(node, diag, locations);
}

ModelSpec load_model_file(const std::string& path) {
  Diagnostics diag;
  ModelSpec m = parse_model(load_yaml_file(path), "model", diag);
  diag.throw_if_errors();
  return m;
}

ClusterSpec load_cluster_file(const std::string& path) {
  Diagnostics diag;
  ClusterSpec c = parse_cluster(load_yaml_file(path), "cluster", diag);
  diag.throw_if_errors();
  return c;
}

}  // namespace paratwin
