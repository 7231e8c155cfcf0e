// Activation recomputation per operator (recompute: op, torchtitan's selective_ac_option "op"), every
// n-th layer (recompute_every), each stage's first layers (recompute_layers, Megatron-LM's block
// method) and by Megatron-Core's modules (recompute_modules): parsing, the bytes a
// layer keeps, the FLOPs and kernels it recomputes, and the Program and analytic evaluator that carry
// them.
#define BOOST_TEST_MODULE recompute
#include <set>
#include <string>

#include <boost/test/unit_test.hpp>

#include "catalog_scenario.hpp"
#include "fast_cluster.hpp"
#include "plan/analytic/evaluate.hpp"
#include "plan/cost/compute.hpp"
#include "plan/cost/memory.hpp"
#include "plan/ir/plan.hpp"
#include "plan/ir/program.hpp"
#include "plan/report/emit.hpp"
#include "plan/report/import_megatron.hpp"
#include "plan/search/optimizer.hpp"
#include "source_tree.hpp"

using namespace paratwin;
using namespace paratwin::cost;
namespace tt = boost::test_tools;

namespace {

using paratwin_test::scenario;

std::string error_of(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  try {
    scenario(yaml, sets);
  } catch (const InputError& e) {
    return e.what();
  }
  BOOST_FAIL("expected InputError");
  return "";
}

ModelSpec model(const std::string& name) {
  return load_model_file(paratwin_test::source_dir() + "/models/" + name + ".yaml");
}

// A small dense Llama-like model (SwiGLU, GQA) on the test cluster whose communication is free.
const std::string kScenario = paratwin_test::fast_cluster(4) + R"(
model: {name: small, layers: 8, hidden: 1024, heads: 16, kv_heads: 4, ffn_hidden: 3584, vocab: 1024,
        seq_len: 2048, mlp: swiglu, norm: rmsnorm, position: rope}
training: {global_batch: 16, seq_len: 2048, precision: bf16}
plan: {tp: 2, pp: 1, dp: 4, micro_batch: 2, sequence_parallel: true, zero: 1}
)";

// A small MoE model (SwiGLU experts, top 2 of 8) on the same cluster, tp 2 with SP and ep 2.
const std::string kMoeScenario = paratwin_test::fast_cluster(4) + R"(
model: {name: small-moe, layers: 4, hidden: 512, heads: 8, kv_heads: 2, ffn_hidden: 768, vocab: 1024,
        seq_len: 1024, mlp: swiglu, norm: rmsnorm, position: rope, moe: {experts: 8, top_k: 2}}
training: {global_batch: 16, seq_len: 1024, precision: bf16}
plan: {tp: 2, pp: 1, dp: 4, ep: 2, micro_batch: 2, sequence_parallel: true, zero: 1}
)";

// torchtitan's Llama layout (separate wq, wk, wv, w1, w3), where recompute op comes from.
double layer_bytes(const ModelSpec& m, Recompute r, int tp, bool sp, AttentionKind attention,
                   Projections projections = Projections::Separate) {
  ActivationConfig c;
  c.projections = projections;
  c.micro_batch = 2;
  c.seq_len = 4096;
  c.tp = tp;
  c.sequence_parallel = sp;
  c.recompute = r;
  c.attention = attention;
  return layer_activation_bytes(m, c, false).value();
}

struct Run {
  Program program;
  Evaluation eval;
};

Run run(const std::vector<std::string>& sets, const std::string& base = kScenario) {
  const ScenarioSpec s = scenario(base, sets);
  const Plan plan = complete_plan(s);
  const auto problems = verify(plan, s.model, s.cluster, s.training);
  BOOST_REQUIRE_MESSAGE(problems.empty(), (problems.empty() ? std::string() : problems.front()));
  Run r{lower(plan, s.model, s.cluster, s.training), {}};
  r.eval = evaluate(r.program, s.cluster, s.training);
  return r;
}

double recompute_flops(const Program& p) {
  double f = 0;
  for (const Role& role : p.roles)
    for (const Task& t : role.tasks) f += t.recompute_flops.value() * role.instances;
  return f;
}

}  // namespace

// ---- the scenario language ----

BOOST_AUTO_TEST_CASE(op_and_recompute_every_parse_and_reach_every_stage) {
  const ScenarioSpec s = scenario(kScenario, {"plan.recompute=op"});
  BOOST_TEST((*s.plan.recompute == Recompute::Op));
  const ScenarioSpec e = scenario(kScenario, {"plan.recompute=full", "plan.recompute_every=2"});
  BOOST_TEST(*e.plan.recompute_every == 2);
  const Plan plan = complete_plan(e);
  for (const StagePlan& st : plan.stages) BOOST_TEST(st.recompute_every == 2);
  // Layers counted from 1 over the model: the 2nd, 4th, ... recompute, the others keep everything.
  BOOST_TEST((plan.stages[0].layer_recompute(0) == Recompute::None));
  BOOST_TEST((plan.stages[0].layer_recompute(1) == Recompute::Full));
  BOOST_TEST((plan.stages[0].layer_recompute(7) == Recompute::Full));
}

BOOST_AUTO_TEST_CASE(the_plan_file_round_trips_recompute_every) {
  const ScenarioSpec s = scenario(kScenario, {"plan.recompute=op", "plan.recompute_every=3"});
  const Plan plan = complete_plan(s);
  const std::string yaml = to_yaml(plan);
  BOOST_TEST(yaml.find("recompute: op, recompute_every: 3") != std::string::npos);
  Diagnostics diag;
  const PlanRequest back = parse_plan_request(parse_yaml(yaml, "plan.yaml"), diag);
  diag.throw_if_errors();
  BOOST_TEST((back.stages->front() == plan.stages.front()));
}

BOOST_AUTO_TEST_CASE(a_misspelt_mode_names_the_nearest_choice) {
  const std::string e = error_of(kScenario, {"plan.recompute=opp"});
  BOOST_TEST(e.find("plan.recompute") != std::string::npos);
  BOOST_TEST(e.find("'op'") != std::string::npos, e);
}

BOOST_AUTO_TEST_CASE(recompute_every_needs_a_mode_and_a_positive_count) {
  const std::string none = error_of(kScenario, {"plan.recompute=none", "plan.recompute_every=2"});
  BOOST_TEST(none.find("plan.recompute_every") != std::string::npos, none);
  BOOST_TEST(none.find("full, selective or op") != std::string::npos, none);
  const std::string zero = error_of(kScenario, {"plan.recompute=full", "plan.recompute_every=0"});
  BOOST_TEST(zero.find("plan.recompute_every") != std::string::npos, zero);
}

// ---- memory: what a layer keeps ----

BOOST_AUTO_TEST_CASE(op_keeps_less_than_none_and_more_than_full) {
  for (const char* name : {"llama3-8b", "llama2-13b", "gpt3-175b"})
    for (int tp : {1, 8})
      for (bool sp : {false, true})
        for (AttentionKind a : {AttentionKind::Flash, AttentionKind::Unfused}) {
          const ModelSpec m = model(name);
          // Llama 2 13B (SwiGLU without GQA) at tp 8: see the next case.
          if (tp == 8 && m.mlp == MlpKind::SwiGlu && m.kv_heads == m.heads) continue;
          const double none = layer_bytes(m, Recompute::None, tp, sp, a);
          const double op = layer_bytes(m, Recompute::Op, tp, sp, a);
          const double full = layer_bytes(m, Recompute::Full, tp, sp, a);
          BOOST_TEST(full < op, name << " tp " << tp << " sp " << sp);
          BOOST_TEST(op < none, name << " tp " << tp << " sp " << sp);
        }
}

BOOST_AUTO_TEST_CASE(op_keeps_the_down_projections_unreduced_output_whole_on_every_tp_rank) {
  // The 7th linear's output is kept before its reduction: h per token on each of the t ranks, where
  // everything else shrinks with t. Under wide TP a SwiGLU model without GQA keeps more than without
  // recomputation (Llama 2 13B at tp 8 with SP: 10,688 against 10,304 bytes / 2 per token, the
  // log-sum-exp aside); as torchtitan's policy does.
  const ModelSpec m = model("llama2-13b");
  const double tokens = 2 * 4096, e = 2, h = 5120, A = 5120, Kv = 5120, f = 13824, t = 8;
  const double op = tokens * (e * (3 * h / t + (A + Kv + f) / t + A / t + h) + 4.0 * 40 / t);
  BOOST_TEST(layer_bytes(m, Recompute::Op, 8, true, AttentionKind::Flash) == op, tt::tolerance(1e-12));
  BOOST_TEST(layer_bytes(m, Recompute::Op, 8, true, AttentionKind::Flash) >
             layer_bytes(m, Recompute::None, 8, true, AttentionKind::Flash));
}

BOOST_AUTO_TEST_CASE(op_keeps_the_input_q_v_attention_output_gate_and_down_projection) {
  // Llama 3 8B, tp 1, 2 x 4096 tokens, bf16: input h, Q 4096, V 1024, attention output 4096 and its fp32
  // log-sum-exp (4 bytes x 32 heads), SwiGLU's gate 14336 and the down projection's output h.
  const ModelSpec m = model("llama3-8b");
  const double tokens = 2 * 4096;
  const double expected = tokens * (2.0 * (4096 + 4096 + 1024 + 4096 + 14336 + 4096) + 4 * 32);
  BOOST_TEST(layer_bytes(m, Recompute::Op, 1, false, AttentionKind::Flash) == expected, tt::tolerance(1e-12));
  // What it drops is what its recomputation holds while the backward runs.
  ActivationConfig c;
  c.projections = Projections::Separate;
  c.micro_batch = 2;
  c.seq_len = 4096;
  c.recompute = Recompute::Op;
  BOOST_TEST(recompute_working_bytes(m, c, false).value() ==
                 layer_bytes(m, Recompute::None, 1, false, AttentionKind::Flash) - expected,
             tt::tolerance(1e-12));
}

// ---- time: what a layer recomputes ----

BOOST_AUTO_TEST_CASE(op_recomputes_every_second_linear_in_forward_order) {
  // Q, K, V, output, gate, up, down: K, output and up again, 2 x tokens x (h Kv + A h + h f).
  const ModelSpec m = model("llama3-8b");
  LayerWork w;
  w.projections = Projections::Separate;
  w.micro_batch = 1;
  w.seq_len = 4096;
  const double tokens = 4096, h = 4096, Kv = 1024, A = 4096, f = 14336;
  const KernelCost op = recompute_forward(m, w, Recompute::Op, false);
  BOOST_TEST(op.gemm_flops.value() == 2 * tokens * (h * Kv + A * h + h * f), tt::tolerance(1e-12));
  BOOST_TEST(op.attention_flops.value() == 0);   // fused attention's output is kept
  BOOST_TEST(op.elementwise_bytes.value() > 0);  // norms, rotary embedding, SwiGLU, residuals
  // Between selective (attention core) and full (the whole forward).
  const double full = recompute_forward(m, w, Recompute::Full, false).gemm_flops.value();
  BOOST_TEST(op.gemm_flops.value() < full);
  BOOST_TEST(recompute_forward(m, w, Recompute::None, false).gemm_flops.value() == 0);
  // Unfused attention's batched matmuls are not kept: they run again.
  w.attention = AttentionKind::Unfused;
  BOOST_TEST(recompute_forward(m, w, Recompute::Op, false).attention_flops.value() ==
             attention_core_forward(m, w).gemm_flops.value());
}

// The same policy over fused linears (Megatron-Core's linear_qkv and linear_fc1, the live GPT's): QKV and
// the MLP's first linear kept, the output projection run again; the down projection, last, neither kept
// nor run again (no backward reads its output). Separate GELU linears: K and the output projection again.
BOOST_AUTO_TEST_CASE(op_over_fused_linears_keeps_qkv_and_the_first_mlp_linear) {
  const ModelSpec m = model("llama3-8b");
  const double tokens = 2 * 4096, h = 4096, A = 4096, Kv = 1024, f = 14336;
  const double fused = tokens * (2.0 * (h + A + 2 * Kv + 2 * f + A) + 4 * 32);
  BOOST_TEST(layer_bytes(m, Recompute::Op, 1, false, AttentionKind::Flash, Projections::Fused) == fused,
             tt::tolerance(1e-12));
  LayerWork w;
  w.micro_batch = 1;
  w.seq_len = 4096;
  BOOST_TEST(recompute_forward(m, w, Recompute::Op, false).gemm_flops.value() == 2 * 4096 * A * h,
             tt::tolerance(1e-12));
  const ModelSpec gpt = model("gpt3-175b");
  w.projections = Projections::Separate;
  const double gh = gpt.hidden, gA = double(gpt.heads) * gpt.head_dim,
               gKv = double(gpt.kv_heads) * gpt.head_dim;
  BOOST_TEST(
      recompute_forward(gpt, w, Recompute::Op, false).gemm_flops.value() == 2 * 4096 * (gh * gKv + gA * gh),
      tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(the_program_counts_the_recomputed_flops) {
  const Run none = run({"plan.recompute=none"});
  const Run op = run({"plan.recompute=op"});
  const Run full = run({"plan.recompute=full"});
  const Run half = run({"plan.recompute=full", "plan.recompute_every=2"});
  BOOST_TEST(recompute_flops(none.program) == 0);
  BOOST_TEST(recompute_flops(op.program) > 0);
  BOOST_TEST(recompute_flops(op.program) < recompute_flops(full.program));
  // Every 2nd of 8 layers: half the full recomputation, exactly.
  BOOST_TEST(recompute_flops(half.program) == recompute_flops(full.program) / 2, tt::tolerance(1e-12));
  // Hardware FLOPs grow by what is recomputed; model FLOPs do not.
  BOOST_TEST(op.eval.hardware_flops.value() - none.eval.hardware_flops.value() == recompute_flops(op.program),
             tt::tolerance(1e-9));
  BOOST_TEST(op.program.model_flops_per_iteration.value() == none.program.model_flops_per_iteration.value());
}

BOOST_AUTO_TEST_CASE(peak_memory_and_time_fall_in_order) {
  for (const char* zero : {"plan.zero=1", "plan.zero=3"}) {
    const Run none = run({"plan.recompute=none", zero});
    const Run op = run({"plan.recompute=op", zero});
    const Run half = run({"plan.recompute=full", "plan.recompute_every=2", zero});
    const Run full = run({"plan.recompute=full", zero});
    const auto peak = [](const Run& r) { return r.eval.roles.front().peak_memory.value(); };
    BOOST_TEST(peak(full) < peak(half), zero);
    BOOST_TEST(peak(half) < peak(none), zero);
    BOOST_TEST(peak(full) < peak(op), zero);
    BOOST_TEST(peak(op) < peak(none), zero);
    BOOST_TEST(none.eval.iteration_time_s < op.eval.iteration_time_s, zero);
    BOOST_TEST(op.eval.iteration_time_s < full.eval.iteration_time_s, zero);
    BOOST_TEST(half.eval.iteration_time_s < full.eval.iteration_time_s, zero);
  }
}

// ---- the optimizer ----

// A small model on one DGX A100 node with the plan left to the optimizer.
const std::string kAutoPlan = R"(
model: {name: small, layers: 8, hidden: 512, heads: 8, kv_heads: 2, ffn_hidden: 1536, vocab: 4096,
        seq_len: 2048, mlp: swiglu}
cluster: {from: dgx-a100-80g, nodes: 1}
training: {global_batch: 32, seq_len: 512}
plan: auto
)";

BOOST_AUTO_TEST_CASE(the_optimizer_keeps_a_fixed_op_or_every_nth_layer_and_its_bounds_stay_below) {
  // Everything but recompute left to the search, exhaustively: it throws if a bound is above the
  // objective it bounds (the per-layer tables and the pass graph see which layers recompute).
  for (const std::vector<std::string>& sets : std::vector<std::vector<std::string>>{
           {"plan.recompute=op"}, {"plan.recompute=full", "plan.recompute_every=2"}}) {
    const ScenarioSpec s = scenario(kAutoPlan, sets);
    const SearchResult r = search_plans(s, {.top = 3, .exhaustive = true});
    BOOST_REQUIRE(!r.top.empty());
    for (const Candidate& c : r.top)
      for (const StagePlan& st : c.plan.stages) {
        BOOST_TEST((st.recompute == *s.plan.recompute));
        BOOST_TEST(st.recompute_every == s.plan.recompute_every.value_or(1));
      }
  }
}

// The optimizer proposes the recompute modes the scenario's framework runs: torchtitan's per-operator
// policy under DTensor's TP, Megatron-LM's selective (the attention core) otherwise.
BOOST_AUTO_TEST_CASE(the_optimizer_searches_op_for_torchtitan_and_selective_for_megatron) {
  for (const char* framework : {"megatron", "dtensor"}) {
    const ScenarioSpec s = scenario(kAutoPlan, {std::string("training.tensor_parallel=") + framework,
                                                "training.seq_len=2048", "training.global_batch=64"});
    const SearchResult r = search_plans(s, {.top = 60});
    BOOST_REQUIRE(!r.top.empty());
    std::set<Recompute> modes;
    for (const Candidate& c : r.top) modes.insert(c.plan.stages.front().recompute);
    const bool torchtitan = std::string(framework) == "dtensor";
    BOOST_TEST_INFO(framework);
    BOOST_TEST(modes.count(Recompute::Op) == (torchtitan ? 1u : 0u));
    BOOST_TEST(modes.count(Recompute::Selective) == (torchtitan ? 0u : 1u));
  }
}

// ---- the frameworks' launch settings ----

BOOST_AUTO_TEST_CASE(megatron_gets_full_recomputation_for_op_and_every_nth_layer_with_notes) {
  for (const std::vector<std::string>& sets : std::vector<std::vector<std::string>>{
           {"plan.recompute=op"}, {"plan.recompute=full", "plan.recompute_every=2"}}) {
    const ScenarioSpec s = scenario(kScenario, sets);
    const EmittedConfig e = megatron_launch(complete_plan(s), s);
    BOOST_TEST(e.text.find("--recompute-granularity full") != std::string::npos, e.text);
    std::string notes;
    for (const auto& n : e.notes) notes += n + "\n";
    BOOST_TEST(notes.find(sets.size() == 1 ? "recompute op" : "recompute_every 2") != std::string::npos,
               notes);
  }
}

// ---- Megatron-Core's recompute_modules ----

BOOST_AUTO_TEST_CASE(recompute_modules_parse_round_trip_and_refuse_what_is_not_modelled) {
  const ScenarioSpec s =
      scenario(kMoeScenario, {"plan.recompute=selective", "plan.recompute_modules=[layernorm, moe_act]"});
  const Plan plan = complete_plan(s);
  for (const StagePlan& st : plan.stages)
    BOOST_TEST(
        (st.recompute_modules == RecomputeModules{.core_attn = false, .layernorm = true, .moe_act = true}));
  BOOST_TEST(recompute_name(plan) == "selective (layernorm, moe_act)");
  // The plan file says it once, and reads back the same.
  const std::string yaml = to_yaml(plan);
  BOOST_TEST(yaml.find("recompute_modules: [layernorm, moe_act]") != std::string::npos, yaml);
  Diagnostics diag;
  const PlanRequest back = parse_plan_request(parse_yaml(yaml, "plan.yaml"), diag);
  diag.throw_if_errors();
  BOOST_TEST((*back.recompute_modules == plan.stages.front().recompute_modules));
  // Megatron's default writes nothing: every other plan file reads as before.
  BOOST_TEST(to_yaml(complete_plan(scenario(kMoeScenario, {"plan.recompute=selective"})))
                 .find("recompute_modules") == std::string::npos);

  // Each bad setting and what its message must say.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"full", "[moe_act]"},   // only selective has modules
      {"selective", "[mlp]"},  // Megatron's, not modelled
      {"selective", "[layernorm, moe_acts]"},
      {"selective", "[moe_act, moe_act]"},
      {"selective", "[]"}};
  const std::vector<std::string> says = {"give plan.recompute selective", "does not model", "'moe_act'",
                                         "twice", "expected a list of modules"};
  for (size_t i = 0; i < bad.size(); ++i) {
    const std::string e =
        error_of(kMoeScenario, {"plan.recompute=" + bad[i].first, "plan.recompute_modules=" + bad[i].second});
    BOOST_TEST(e.find(says[i]) != std::string::npos, e);
  }
}

BOOST_AUTO_TEST_CASE(layernorm_and_moe_act_drop_an_moe_layers_norm_and_activation_outputs) {
  const ScenarioSpec s = scenario(kMoeScenario);
  const ModelSpec& m = s.model;
  ActivationConfig c;
  c.micro_batch = 2;
  c.seq_len = 1024;
  c.tp = 2;
  c.sequence_parallel = true;
  c.recompute = Recompute::Selective;
  const auto bytes = [&](RecomputeModules modules, bool moe) {
    c.recompute_modules = modules;
    return layer_activation_bytes(m, c, moe).value();
  };
  const double tokens = 2 * 1024, e = 2;
  const double core = bytes({}, true);
  // The pre-MLP norm's output: e h a token, sequence-parallel over tp.
  BOOST_TEST(core - bytes({.layernorm = true}, true) == tokens * e * m.hidden / 2, tt::tolerance(1e-12));
  // The activation's output: e f a routed row (top_k a token), tensor-parallel.
  BOOST_TEST(core - bytes({.moe_act = true}, true) == 2 * tokens * e * m.ffn_hidden / 2,
             tt::tolerance(1e-12));
  // Dense layers have neither: Transformer Engine fuses their norms into the next linear.
  BOOST_TEST(bytes({.layernorm = true, .moe_act = true}, false) == bytes({}, false));
}

BOOST_AUTO_TEST_CASE(the_modules_recompute_their_own_kernels_and_nothing_else) {
  const ScenarioSpec s = scenario(kMoeScenario);
  const LayerWork w = layer_work(s.training, 2, 2, 1, true, 2, false);
  const auto work = [&](RecomputeModules modules, bool moe) {
    return recompute_forward(s.model, w, Recompute::Selective, moe, modules);
  };
  const KernelCost norm = work({.core_attn = false, .layernorm = true}, true);
  const KernelCost act = work({.core_attn = false, .moe_act = true}, true);
  const KernelCost attn = work({}, true);
  const KernelCost all = work({.layernorm = true, .moe_act = true}, true);
  // Memory-bound kernels only: no GEMM, no attention.
  for (const KernelCost* k : {&norm, &act}) {
    BOOST_TEST(k->gemm_flops.value() == 0);
    BOOST_TEST(k->fused_attention_flops().value() == 0);
    BOOST_TEST(k->launches > 0);
  }
  BOOST_TEST(all.launches == attn.launches + norm.launches + act.launches);
  BOOST_TEST(all.fused_attention_flops().value() == attn.fused_attention_flops().value());
  // A dense layer has no module of its own for either.
  BOOST_TEST(work({.core_attn = false, .layernorm = true, .moe_act = true}, false).launches == 0);
}

BOOST_AUTO_TEST_CASE(the_program_trades_memory_for_time_by_the_modules) {
  const Run none = run({"plan.recompute=none"}, kMoeScenario);
  const Run modules =
      run({"plan.recompute=selective", "plan.recompute_modules=[layernorm, moe_act]"}, kMoeScenario);
  const auto peak = [](const Run& r) { return r.eval.roles.front().peak_memory.value(); };
  BOOST_TEST(peak(modules) < peak(none));
  BOOST_TEST(none.eval.iteration_time_s < modules.eval.iteration_time_s);
  BOOST_TEST(recompute_flops(modules.program) == 0);  // memory-bound kernels only
  // The optimizer keeps the modules of a fixed selective plan (its bounds checked exhaustively).
  const ScenarioSpec s =
      scenario(kMoeScenario, {"plan.recompute=selective", "plan.recompute_modules=[moe_act]", "plan.tp=auto",
                              "plan.dp=auto", "plan.micro_batch=auto"});
  const SearchResult r = search_plans(s, {.top = 2, .exhaustive = true});
  BOOST_REQUIRE(!r.top.empty());
  for (const Candidate& cand : r.top)
    BOOST_TEST((cand.plan.stages.front().recompute_modules ==
                RecomputeModules{.core_attn = false, .moe_act = true}));
}

BOOST_AUTO_TEST_CASE(megatron_launches_carry_the_modules_and_fp8_delayed_scaling_refuses_them) {
  const ScenarioSpec s =
      scenario(kMoeScenario, {"plan.recompute=selective", "plan.recompute_modules=[layernorm, moe_act]"});
  const EmittedConfig e = megatron_launch(complete_plan(s), s);
  BOOST_TEST(e.text.find("--recompute-modules layernorm moe_act") != std::string::npos, e.text);
  TrainingSpec fp8 = s.training;  // the test cluster has no fp8 peak; verify() reads the recipe only
  fp8.precision = Precision::Fp8;
  BOOST_TEST(verify(complete_plan(s), s.model, s.cluster, s.training).empty());
  const auto problems = verify(complete_plan(s), s.model, s.cluster, fp8);
  BOOST_REQUIRE(!problems.empty());
  BOOST_TEST(problems.front().find("delayed scaling") != std::string::npos, problems.front());
}

// ---- each stage's first layers (Megatron-LM's block method) ----

BOOST_AUTO_TEST_CASE(block_recompute_runs_each_stages_first_layers_again) {
  // 8 layers over pp 2: stage 0 holds layers 0-3, stage 1 layers 4-7; the first 2 of each recompute.
  const std::vector<std::string> pp2 = {"plan.pp=2", "plan.dp=2", "plan.recompute=full"};
  std::vector<std::string> block = pp2;
  block.push_back("plan.recompute_layers=2");
  const ScenarioSpec s = scenario(kScenario, block);
  const Plan plan = complete_plan(s);
  BOOST_REQUIRE(plan.stages.size() == 2u);
  for (int l : {0, 1, 4, 5}) BOOST_TEST((plan.stages[size_t(l / 4)].layer_recompute(l) == Recompute::Full));
  for (int l : {2, 3, 6, 7}) BOOST_TEST((plan.stages[size_t(l / 4)].layer_recompute(l) == Recompute::None));
  BOOST_TEST(recompute_name(plan) == "full, first 2 layers a stage");
  // Half of each stage's layers: half the full recomputation's FLOPs on every pipeline rank, exactly,
  // and a peak between none's and full's.
  const Run half = run(block), full = run(pp2);
  std::vector<std::string> kept = pp2;
  kept.back() = "plan.recompute=none";
  const Run none = run(kept);
  for (size_t r = 0; r < 2; ++r) {
    Program one = half.program, all = full.program;
    one.roles = {half.program.roles[r]};
    all.roles = {full.program.roles[r]};
    BOOST_TEST(recompute_flops(one) == recompute_flops(all) / 2, tt::tolerance(1e-12));
    BOOST_TEST(half.eval.roles[r].peak_memory.value() < none.eval.roles[r].peak_memory.value());
    BOOST_TEST(half.eval.roles[r].peak_memory.value() > full.eval.roles[r].peak_memory.value());
  }
  // The plan file round trip, and Megatron-LM's launch and its import.
  Diagnostics diag;
  const PlanRequest back = parse_plan_request(parse_yaml(to_yaml(plan), "plan.yaml"), diag);
  diag.throw_if_errors();
  BOOST_TEST((back.stages->back() == plan.stages.back()));
  const EmittedConfig e = megatron_launch(plan, s);
  BOOST_TEST(e.text.find("--recompute-method block") != std::string::npos, e.text);
  BOOST_TEST(e.text.find("--recompute-num-layers 2") != std::string::npos, e.text);
  const ImportedLaunch l = import_megatron(launch_script_words(e.text));
  for (const StagePlan& st : l.plan.stages) BOOST_TEST(st.recompute_layers == 2);
  BOOST_TEST(imported_scenario_yaml(l, "dgx-h100", "dgx", 8).find("recompute_layers: 2") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(block_recompute_needs_a_mode_no_every_nth_layer_and_a_given_plan) {
  const std::string none = error_of(kScenario, {"plan.recompute=none", "plan.recompute_layers=2"});
  BOOST_TEST(none.find("plan.recompute_layers") != std::string::npos, none);
  BOOST_TEST(none.find("full, selective or op") != std::string::npos, none);
  const std::string both =
      error_of(kScenario, {"plan.recompute=full", "plan.recompute_every=2", "plan.recompute_layers=2"});
  BOOST_TEST(both.find("give one of them") != std::string::npos, both);
  // The optimizer's layer costs do not see where a stage begins: it refuses, naming the field.
  const ScenarioSpec s =
      scenario(kScenario, {"plan.pp=auto", "plan.recompute=full", "plan.recompute_layers=2"});
  try {
    search_plans(s, {.top = 1});
    BOOST_FAIL("expected InputError");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("plan.recompute_layers") != std::string::npos, e.what());
  }
}
