// `import megatron` as the inverse of `plan --emit megatron`: every plan the emit tests render and every
// catalog scenario's fixed plan, emitted and read back, gives the same plan (and, written as a scenario and
// loaded, the same plan again); arguments the import does not read are reported; bad values name the
// argument and exit 2.
#define BOOST_TEST_MODULE import
#include <boost/test/unit_test.hpp>
#include <fstream>

#include "emit_cases.hpp"
#include "paratwin_process.hpp"
#include "plan/cost/memory.hpp"
#include "plan/report/emit.hpp"
#include "plan/report/import_deepspeed.hpp"
#include "plan/report/import_megatron.hpp"
#include "plan/spec/doc.hpp"
#include "plan/spec/jobs.hpp"
#include "source_tree.hpp"

using namespace paratwin;
using namespace paratwin_test;

namespace {

struct Named {
  std::string name;
  ScenarioSpec scenario;
};

// Plans with what the emit tests' plans leave at the defaults: overlap off, TP overlap, other kernels.
const std::vector<Case> kOverlaps = {
    {"quickstart-overlap-tp-no-dp",
     "quickstart",
     {"cluster.from=dgx-h100", "plan.overlap.dp=false", "plan.overlap.tp=true", "training.attention=unfused",
      "training.precision=fp8", "training.grad_reduce=fp32", "training.fp8_param_gather=true",
      "training.fp8_recipe=te_current", "training.launch_blocking=true", "training.cross_entropy=fused"}},
    {"llama-interleaved-no-p2p-overlap", "quickstart",
     with(kLlama,
          {"plan.tp=2", "plan.pp=4", "plan.dp=4", "plan.schedule=interleaved", "plan.virtual_stages=2",
           "plan.overlap.pp=false", "training.precision=fp32", "plan.zero=0"})},
    {"mixtral-fused-dispatch", "quickstart",
     with(kMixtral, {"plan.ep=4", "plan.pp=2", "plan.dp=16", "training.moe_dispatcher=fused"})},
    {"mixtral-folded-experts", "quickstart",
     with(kMixtral,
          {"plan.ep=8", "plan.expert_tp=1", "plan.pp=2", "plan.dp=16", "plan.sequence_parallel=true",
           "plan.schedule=interleaved", "plan.virtual_stages=2", "plan.overlap.ep=true"})},
};

// The emit tests' plans, those above and every catalog scenario that fixes its plan.
std::vector<Named> every_fixed_plan() {
  std::vector<Named> out;
  for (const auto* cases : {&kGolden, &kMore, &kOverlaps})
    for (const Case& c : *cases) out.push_back({c.name, load(c)});
  const Catalog catalog(paratwin_test::source_dir());
  for (const auto& entry : catalog.list(CatalogKind::Scenario)) {
    if (holds_jobs(load_yaml_file(entry.path))) continue;  // several jobs: no one plan to emit
    ScenarioSpec s = load_scenario(entry.path, {}, catalog);
    if (s.plan.fully_fixed()) out.push_back({entry.name, std::move(s)});
  }
  return out;
}

ImportedLaunch round_trip(const Plan& plan, const ScenarioSpec& s) {
  return import_megatron(launch_script_words(megatron_launch(plan, s).text));
}

// What both frameworks carry: dp, tp, pp, the batch, ZeRO and its gradient buckets.
void check_degrees_batch_and_zero(const Plan& p, const Plan& q) {
  BOOST_TEST(q.dp == p.dp);
  BOOST_TEST(q.tp == p.tp);
  BOOST_TEST(q.pp == p.pp);
  BOOST_TEST(q.micro_batch == p.micro_batch);
  BOOST_TEST(q.num_microbatches == p.num_microbatches);
  BOOST_TEST(q.zero == p.zero);
  BOOST_TEST(q.offload_optimizer == (p.offload_optimizer && p.zero >= 1));
  BOOST_TEST(q.overlap_dp == p.overlap_dp);
  // The bucket travels in whole gradient elements.
  BOOST_TEST(std::abs(q.bucket_size.value() - p.bucket_size.value()) < 8.0);
}

// What of the plan a Megatron-LM launch carries, as emit_megatron.cpp writes it.
void check_same_plan(const Plan& p, const ScenarioSpec& s, const ImportedLaunch& l) {
  const Plan& q = l.plan;
  check_degrees_batch_and_zero(p, q);
  BOOST_TEST(q.cp == p.cp);
  BOOST_TEST(q.ep == p.ep);
  BOOST_TEST(q.expert_tp == p.expert_tp);
  BOOST_TEST(q.overlap_ep == p.overlap_ep);
  BOOST_TEST(l.world == p.gpus());
  BOOST_TEST(q.virtual_stages == p.virtual_stages);
  if (p.schedule != Schedule::GPipe) BOOST_TEST((q.schedule == p.schedule));  // gpipe runs as 1F1B (a note)
  BOOST_TEST(emit_detail::chunk_layers(q) == emit_detail::chunk_layers(p));
  std::vector<std::string> notes;
  const Recompute recompute = emit_detail::uniform_recompute(p, notes);
  for (const auto& st : q.stages) BOOST_TEST((st.recompute == recompute));
  BOOST_TEST(q.sequence_parallel == (p.sequence_parallel && p.tp > 1));
  BOOST_TEST(q.overlap_tp == (p.overlap_tp && p.tp > 1 && p.sequence_parallel));
  if (p.virtual_stages > 1 && p.pp > 2) BOOST_TEST(q.overlap_pp == p.overlap_pp);
  const bool pp_before_dp = p.order == "tp-cp-pp-dp" || p.order == "tp-pp-cp-dp";
  BOOST_TEST(q.order == (pp_before_dp ? "tp-cp-pp-dp" : "tp-cp-dp-pp"));
  BOOST_TEST((l.training.precision == s.training.precision));
  BOOST_TEST(cost::gradient_bytes(l.training) == cost::gradient_bytes(s.training));
  BOOST_TEST(l.training.fp8_param_gather == s.training.fp8_param_gather);
  // Megatron-LM's --fp8-recipe tensorwise is dynamic tensorwise scaling: torchao's comes back as TE's.
  const Fp8Recipe recipe =
      s.training.fp8_recipe == Fp8Recipe::TeDelayed ? Fp8Recipe::TeDelayed : Fp8Recipe::TeCurrent;
  if (s.training.precision == Precision::Fp8) BOOST_TEST((l.training.fp8_recipe == recipe));
  BOOST_TEST(l.training.launch_blocking == s.training.launch_blocking);
  if (s.model.moe) BOOST_TEST((l.training.moe_dispatcher == s.training.moe_dispatcher));
  // Megatron-LM has no F.cross_entropy: an unfused loss comes back as its vocab_parallel_cross_entropy.
  const CrossEntropy loss =
      s.training.cross_entropy == CrossEntropy::Fused ? CrossEntropy::Fused : CrossEntropy::VocabParallel;
  BOOST_TEST((l.training.cross_entropy == loss));
  // Megatron-LM runs Transformer Engine's rings only: PyTorch's comes back as TE's p2p ring.
  const CpAttention cp_attention =
      s.training.cp_attention == CpAttention::TorchRing ? CpAttention::TeP2p : s.training.cp_attention;
  if (p.cp > 1) BOOST_TEST((l.training.cp_attention == cp_attention));
  const AttentionKind attention =
      s.training.attention == AttentionKind::Unfused ? AttentionKind::Unfused : AttentionKind::Flash;
  BOOST_TEST((l.training.attention == attention));
  BOOST_TEST(l.training.global_batch == s.training.global_batch);
  BOOST_TEST(l.training.seq_len == s.training.seq_len);
  ModelSpec model = s.model;
  model.name = l.model.name;
  model.description = l.model.description;
  model.seq_len = std::max(model.seq_len, s.training.seq_len);
  // A launch has no routing to say: Megatron-LM's learned router decides; the twin's is an assumption.
  if (model.moe) model.moe->routing = MoeRouting{};
  BOOST_TEST(to_yaml(l.model) == to_yaml(model));
}

}  // namespace

BOOST_AUTO_TEST_CASE(emitted_launches_import_back_to_the_same_plan) {
  const auto all = every_fixed_plan();
  BOOST_TEST(all.size() > kGolden.size() + kMore.size() + kOverlaps.size());
  for (const auto& [name, s] : all) {
    BOOST_TEST_CONTEXT(name) {
      const Plan plan = complete_plan(s);
      check_same_plan(plan, s, round_trip(plan, s));
    }
  }
}

// Written as a scenario on the same cluster and loaded, the import is the plan `paratwin plan` evaluates.
BOOST_AUTO_TEST_CASE(imported_scenarios_load_to_the_imported_plan) {
  const Catalog catalog(paratwin_test::source_dir());
  int loaded = 0;
  for (const auto& [name, s] : every_fixed_plan()) {
    if (s.cluster.pools.size() != 1 || !catalog.find(CatalogKind::Topology, s.cluster.name)) continue;
    BOOST_TEST_CONTEXT(name) {
      const Plan plan = complete_plan(s);
      const ImportedLaunch l = round_trip(plan, s);
      // The catalog's cluster, as `import megatron --cluster` reads it (the scenario may resize its nodes).
      const PoolSpec pool =
          load_cluster_file(*catalog.find(CatalogKind::Topology, s.cluster.name)).pools.front();
      const std::string yaml = imported_scenario_yaml(l, s.cluster.name, pool.name, pool.gpus_per_node);
      const ScenarioSpec back = load_scenario(parse_yaml(yaml, name + ".yaml"), {}, catalog);
      Plan expected = l.plan;
      for (auto& st : expected.stages) st.pool = s.cluster.pools.front().name;
      expected.checkpoint_interval = back.checkpoint.interval;
      BOOST_TEST((complete_plan(back) == expected));
      BOOST_TEST(verify(expected, back.model, back.cluster, back.training) ==
                     verify(plan, s.model, s.cluster, s.training),
                 boost::test_tools::per_element());
      ++loaded;
    }
  }
  BOOST_TEST(loaded > 5);
}

BOOST_AUTO_TEST_CASE(arguments_the_import_does_not_read_are_reported) {
  const ImportedLaunch l =
      import_megatron({"stray", "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
                       "--seq-length", "128", "--vocab-size", "256", "--lr", "1e-4",
                       "--moe-router-load-balancing-type", "aux_loss", "--no-rope-fusion"},
                      8);
  BOOST_TEST(l.plan.dp == 8);
  const std::string all = join(l.warnings, "\n");
  BOOST_TEST(all.find("--moe-router-load-balancing-type") != std::string::npos);
  BOOST_TEST(all.find("--no-rope-fusion") != std::string::npos);
  BOOST_TEST(all.find("'stray'") != std::string::npos);
  BOOST_TEST(all.find("--lr") == std::string::npos);  // read, and nothing the twin models
  BOOST_TEST(l.warnings.size() == 3u);
}

BOOST_AUTO_TEST_CASE(context_parallelism_imports_as_transformer_engines_ring) {
  // Megatron-Core's CP is Transformer Engine's: --cp-comm-type p2p (the default) is its p2p ring,
  // allgather the gather, the all-to-all kinds the gather with a warning; the written scenario says which.
  const std::vector<std::string> base = {
      "--num-layers", "2",   "--hidden-size", "64",  "--num-attention-heads",   "4",
      "--seq-length", "128", "--vocab-size",  "256", "--context-parallel-size", "2"};
  const ImportedLaunch p2p = import_megatron(base, 8);
  BOOST_TEST(p2p.plan.cp == 2);
  BOOST_TEST((p2p.training.cp_attention == CpAttention::TeP2p));
  BOOST_TEST(imported_scenario_yaml(p2p, "dgx-h100", "dgx", 8).find("cp_attention: te_p2p") !=
             std::string::npos);
  std::vector<std::string> a2a = base;
  a2a.insert(a2a.end(), {"--cp-comm-type", "a2a"});
  const ImportedLaunch gather = import_megatron(a2a, 8);
  BOOST_TEST((gather.training.cp_attention == CpAttention::Gather));
  BOOST_TEST(join(gather.warnings, "\n").find("--cp-comm-type a2a") != std::string::npos);
  std::vector<std::string> allgather = base;
  allgather.insert(allgather.end(), {"--cp-comm-type", "allgather"});
  const ImportedLaunch all = import_megatron(allgather, 8);
  BOOST_TEST((all.training.cp_attention == CpAttention::Gather));
  BOOST_TEST(all.warnings.empty());
}

BOOST_AUTO_TEST_CASE(gradient_accumulation_without_the_fusion_imports_as_unfused) {
  // --no-gradient-accumulation-fusion with bf16 (fp32 main_grad, Megatron-LM's default): unfused, and
  // the written scenario and a launch emitted from it say so; with --grad-reduce-in-bf16 there is no
  // fp32 buffer to add into, so nothing changes.
  const std::vector<std::string> base = {
      "--num-layers",          "2",   "--hidden-size", "64",
      "--num-attention-heads", "4",   "--seq-length",  "128",
      "--vocab-size",          "256", "--bf16",        "--no-gradient-accumulation-fusion"};
  const ImportedLaunch l = import_megatron(base, 8);
  BOOST_TEST((l.training.grad_accumulation == GradAccumulation::Unfused));
  BOOST_TEST(l.warnings.empty());
  BOOST_TEST(imported_scenario_yaml(l, "dgx-h100", "dgx", 8).find("grad_accumulation: unfused") !=
             std::string::npos);
  std::vector<std::string> reduced = base;
  reduced.push_back("--grad-reduce-in-bf16");
  BOOST_TEST((import_megatron(reduced, 8).training.grad_accumulation == GradAccumulation::InPlace));
}

BOOST_AUTO_TEST_CASE(uneven_first_and_last_stages_become_the_plans_stages) {
  const ImportedLaunch l =
      import_megatron({"--num-layers", "30", "--hidden-size", "64", "--num-attention-heads", "4",
                       "--seq-length", "128", "--vocab-size", "256", "--pipeline-model-parallel-size", "4",
                       "--decoder-first-pipeline-num-layers", "6", "--decoder-last-pipeline-num-layers", "4"},
                      8);
  BOOST_TEST(l.uneven_stages);
  BOOST_TEST(emit_detail::chunk_layers(l.plan) == std::vector<int>({6, 10, 10, 4}),
             boost::test_tools::per_element());
  BOOST_TEST(l.warnings.empty());
}

// Megatron-Bridge's Llama 3.1 405B recipe: 126 layers over pp 8 x vp 8 with the embedding and the loss
// counted as layers, 2 a chunk, so the first and last chunks hold one transformer layer.
BOOST_AUTO_TEST_CASE(embedding_and_loss_counted_as_layers_split_as_megatron_core_does) {
  const std::vector<std::string> base = {
      "--num-layers", "126", "--hidden-size", "64",  "--num-attention-heads",          "4",
      "--seq-length", "128", "--vocab-size",  "256", "--pipeline-model-parallel-size", "8"};
  auto chunks = [&](std::vector<std::string> more) {
    more.insert(more.begin(), base.begin(), base.end());
    return emit_detail::chunk_layers(import_megatron(more, 64).plan);
  };
  std::vector<int> expected(64, 2);
  expected.front() = expected.back() = 1;
  const auto both =
      chunks({"--num-virtual-stages-per-pipeline-rank", "8", "--account-for-embedding-in-pipeline-split",
              "--account-for-loss-in-pipeline-split"});
  BOOST_TEST(both == expected, boost::test_tools::per_element());
  // The per-chunk count reads the layers with what they count: 128 / (2 x 8) = 8 virtual stages.
  BOOST_TEST(
      chunks({"--num-layers-per-virtual-pipeline-stage", "2", "--account-for-embedding-in-pipeline-split",
              "--account-for-loss-in-pipeline-split"}) == expected,
      boost::test_tools::per_element());
  // The embedding alone: 127 over 8 chunks does not divide, as Megatron-Core asserts it must.
  try {
    chunks({"--account-for-embedding-in-pipeline-split"});
    BOOST_FAIL("an uneven count was accepted");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("--account-for-embedding-in-pipeline-split") != std::string::npos);
    BOOST_TEST(std::string(e.what()).find("127") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(recompute_modules_import_with_the_unmodelled_ones_left_out) {
  // A list-valued argument: every word up to the next --name.
  const std::vector<std::string> base = {
      "--num-layers",       "2",   "--hidden-size", "64",  "--num-attention-heads",   "4",
      "--seq-length",       "128", "--vocab-size",  "256", "--recompute-granularity", "selective",
      "--recompute-modules"};
  std::vector<std::string> words = base;
  words.insert(words.end(), {"layernorm", "mla_up_proj", "moe_act", "--bf16"});
  const ImportedLaunch l = import_megatron(words, 8);
  BOOST_TEST((l.plan.stages.front().recompute == Recompute::Selective));
  BOOST_TEST((l.plan.stages.front().recompute_modules ==
              RecomputeModules{.core_attn = false, .layernorm = true, .moe_act = true}));
  BOOST_TEST((l.training.precision == Precision::Bf16));
  BOOST_REQUIRE(l.warnings.size() == 1u);
  BOOST_TEST(l.warnings.front().find("mla_up_proj") != std::string::npos, l.warnings.front());
  BOOST_TEST(
      imported_scenario_yaml(l, "dgx-h100", "dgx", 8).find("recompute_modules: [layernorm, moe_act]") !=
      std::string::npos);
  words = base;
  words.push_back("moe_acts");
  try {
    import_megatron(words, 8);
    BOOST_FAIL("expected InputError");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("'moe_act'") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_CASE(bad_values_name_the_argument) {
  const std::vector<std::string> base = {"--num-layers",          "4",  "--hidden-size", "64",
                                         "--num-attention-heads", "4",  "--seq-length",  "128",
                                         "--vocab-size",          "256"};
  auto message = [&](std::vector<std::string> more, std::optional<int> gpus = 8) {
    more.insert(more.begin(), base.begin(), base.end());
    try {
      import_megatron(more, gpus);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  BOOST_TEST(message({"--tensor-model-parallel-size", "two"}).find("--tensor-model-parallel-size") !=
             std::string::npos);
  BOOST_TEST(message({"--tensor-model-parallel-size", "3"}).find("not a multiple of tp x pp x cp") !=
             std::string::npos);
  BOOST_TEST(message({"--global-batch-size", "12"}).find("--global-batch-size") != std::string::npos);
  BOOST_TEST(message({"--normalization", "GroupNorm"}).find("--normalization") != std::string::npos);
  BOOST_TEST(message({"--position-embedding-type", "mrope"}).find("--position-embedding-type") !=
             std::string::npos);
  BOOST_TEST(message({"--recompute-granularity", "full", "--recompute-method", "block",
                      "--recompute-num-layers", "0"})
                 .find("--recompute-num-layers") != std::string::npos);
  BOOST_TEST(
      message({"--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout", "E,t*2|t*1,L"})
          .find("--num-layers says 4") != std::string::npos);
  BOOST_TEST(message({"--num-experts", "4", "--moe-layer-freq", "[1,0,0,1]"}).find("--moe-layer-freq") !=
             std::string::npos);
  BOOST_TEST(message({}, std::nullopt).find("--gpus") != std::string::npos);
  // MoE parallel folding: whole experts (1) or the TP group's width, nothing between.
  BOOST_TEST(message({"--tensor-model-parallel-size", "4", "--num-experts", "4",
                      "--expert-model-parallel-size", "4", "--expert-tensor-parallel-size", "2"})
                 .find("--expert-tensor-parallel-size 2 differs") != std::string::npos);
  BOOST_TEST(message({"--tensor-model-parallel-size", "2", "--num-experts", "4", "--sequence-parallel",
                      "--expert-model-parallel-size", "4", "--expert-tensor-parallel-size", "1"}) ==
             "no error");
  BOOST_TEST(message({"--tensor-model-parallel-size", "2", "--num-experts", "4",
                      "--expert-model-parallel-size", "2", "--expert-tensor-parallel-size", "2"}) ==
             "no error");
  BOOST_TEST(message({"--pipeline-model-parallel-size", "2", "--decoder-first-pipeline-num-layers", "1",
                      "--decoder-last-pipeline-num-layers", "1"})
                 .find("--decoder-first-pipeline-num-layers") != std::string::npos);
}

// What of the plan a DeepSpeed config carries, as emit_deepspeed.cpp writes it (cp and ep are the model's).
BOOST_AUTO_TEST_CASE(deepspeed_configs_import_back_to_the_same_plan) {
  int imported = 0;
  for (const auto& [name, s] : every_fixed_plan()) {
    const Plan p = complete_plan(s);
    if (!deepspeed_refusals(p, s).empty()) continue;
    BOOST_TEST_CONTEXT(name) {
      const ImportedLaunch l =
          import_deepspeed(deepspeed_config(p, s).text, name + ".json", s.model, s.training.seq_len);
      const Plan& q = l.plan;
      check_degrees_batch_and_zero(p, q);
      const bool partition = p.tp > 1 && p.sequence_parallel;
      BOOST_TEST(q.sequence_parallel == partition);
      std::vector<std::string> notes;
      const Recompute r = emit_detail::uniform_recompute(p, notes);
      BOOST_TEST(q.offload_activations == (p.offload_activations && partition && r != Recompute::None));
      // Without a pipeline, DeepSpeed's config says that layers are checkpointed, not which part of them.
      const Recompute expected = p.pp == 1 && r == Recompute::Selective ? Recompute::Full : r;
      for (const auto& st : q.stages) BOOST_TEST((st.recompute == expected));
      const Precision precision =
          s.training.precision == Precision::Fp8 ? Precision::Bf16 : s.training.precision;
      BOOST_TEST((l.training.precision == precision));
      BOOST_TEST(cost::gradient_bytes(l.training) == cost::gradient_bytes(s.training));
      BOOST_TEST(l.training.global_batch == s.training.global_batch);
      ++imported;
    }
  }
  BOOST_TEST(imported > 5);
}

BOOST_AUTO_TEST_CASE(deepspeed_keys_the_import_does_not_read_are_reported) {
  const ModelSpec model = load_model_file(paratwin_test::source_dir() + "/models/gpt3-1.7b.yaml");
  const ImportedLaunch l = import_deepspeed(
      R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
          "zero_optimization": {"stage": 2, "round_robin_gradients": true}, "flops_profiler": {"enabled": true},
          "optimizer": {"type": "AdamW"}})",
      "ds.json", model);
  BOOST_TEST(l.plan.dp == 8);
  BOOST_TEST(l.plan.zero == 2);
  const std::string all = join(l.warnings, "\n");
  BOOST_TEST(all.find("zero_optimization.round_robin_gradients") != std::string::npos);
  BOOST_TEST(all.find("flops_profiler.enabled") != std::string::npos);
  BOOST_TEST(all.find("optimizer") == std::string::npos);
  BOOST_TEST((l.training.grad_accumulation == GradAccumulation::InPlace));
  // bf16 with fp32 gradient accumulation under ZeRO 1 is DeepSpeed's BF16_Optimizer.
  const ImportedLaunch bf16 = import_deepspeed(
      R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
          "bf16": {"enabled": true}, "data_types": {"grad_accum_dtype": "fp32"},
          "zero_optimization": {"stage": 1}})",
      "ds.json", model);
  BOOST_TEST((bf16.training.grad_accumulation == GradAccumulation::Copy));
  BOOST_TEST(imported_scenario_yaml(bf16, "dgx-a100-80g", "dgx", 8).find("grad_accumulation: copy") !=
             std::string::npos);
  // Reduced in fp32 but accumulated in bf16, ZeRO 1 runs DeepSpeed's ZeRO optimizer: no copy.
  const ImportedLaunch reduced = import_deepspeed(
      R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
          "bf16": {"enabled": true}, "communication_data_type": "fp32", "zero_optimization": {"stage": 1}})",
      "ds.json", model);
  BOOST_TEST((reduced.training.grad_accumulation == GradAccumulation::InPlace));
  BOOST_CHECK_THROW(import_deepspeed(R"({"train_batch_size": 64, "zero_optimization": {"stage": 4}})",
                                     "ds.json", model, std::nullopt, 8),
                    InputError);
  try {
    import_deepspeed(R"({"train_batch_size": 60, "train_micro_batch_size_per_gpu": 8})", "ds.json", model,
                     std::nullopt, 8);
    BOOST_FAIL("a batch that micro-batch x dp does not divide was accepted");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("train_batch_size") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(the_command_writes_a_scenario_that_plan_evaluates) {
  const auto dir = test_dir("paratwin-import-");
  const std::string scenario = (dir / "imported.yaml").string();
  const std::string source = paratwin_test::source_dir();
  Result emitted = paratwin_test::paratwin("plan " + source + "/scenarios/quickstart.yaml --emit megatron");
  BOOST_TEST_REQUIRE(emitted.status == 0);
  std::ofstream((dir / "launch.sh").string()) << emitted.out;
  Result imported =
      paratwin_test::paratwin("import megatron --cluster dgx-a100-80g --launch " +
                              (dir / "launch.sh").string() + " -o " + scenario + " -- --no-rope-fusion");
  BOOST_TEST_INFO(imported.err);
  BOOST_TEST(imported.status == 0);
  BOOST_TEST(imported.err.find("warning: --no-rope-fusion") != std::string::npos);
  Result planned = paratwin_test::paratwin("plan " + scenario);
  BOOST_TEST_INFO(planned.err);
  BOOST_TEST(planned.status == 0);
  BOOST_TEST(planned.out.find("dp 16 x tp 2 x pp 1") != std::string::npos);
  Result bad = paratwin_test::paratwin("import megatron --gpus 8 -- --num-layers 2 --hidden-size x");
  BOOST_TEST(bad.status == 2);
  BOOST_TEST(bad.err.find("--hidden-size: expected an integer") != std::string::npos);

  Result config = paratwin_test::paratwin("plan " + source + "/scenarios/quickstart.yaml --emit deepspeed");
  BOOST_TEST_REQUIRE(config.status == 0);
  std::ofstream((dir / "ds.json").string()) << config.out;
  Result deepspeed = paratwin_test::paratwin("import deepspeed " + (dir / "ds.json").string() +
                                             " --model gpt3-1.7b --cluster dgx-a100-80g -o " + scenario);
  BOOST_TEST_INFO(deepspeed.err);
  BOOST_TEST(deepspeed.status == 0);
  planned = paratwin_test::paratwin("plan " + scenario);
  BOOST_TEST(planned.status == 0);
  BOOST_TEST(planned.out.find("dp 16 x tp 2 x pp 1") != std::string::npos);
}
