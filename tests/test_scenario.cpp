// Scenarios: references into the catalog, inline and overlaid parts, plan requests, semantic checks.
#define BOOST_TEST_MODULE scenario
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>

#include "catalog_scenario.hpp"
#include "plan/ir/plan.hpp"
#include "plan/spec/scenario.hpp"
#include "plan/spec/summary.hpp"

using namespace paratwin;
using paratwin_test::catalog;

static ScenarioSpec load(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  std::vector<Override> overrides;
  for (const auto& s : sets) overrides.push_back(parse_override(s));
  return load_scenario(parse_yaml(yaml, "s.yaml"), overrides, catalog());
}

static std::string error_of(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  try {
    load(yaml, sets);
  } catch (const InputError& e) {
    return e.what();
  }
  BOOST_FAIL("expected InputError");
  return "";
}

BOOST_AUTO_TEST_CASE(the_architecture_example_loads_verbatim) {
  const ScenarioSpec s = load(R"(
name: gpt3-175b on 1024 A100
model: gpt3-175b              # or inline: {layers: 96, hidden: 12288, heads: 96, vocab: 51200, seq_len: 2048}
cluster: dgx-a100-80g         # or a path, or inline; size with cluster.nodes
training:
  global_batch: 1536          # sequences
  seq_len: 2048
  precision: bf16
plan:
  tp: 8
  pp: 8
  dp: 16
  micro_batch: 1
  schedule: interleaved       # gpipe | 1f1b | interleaved
  virtual_stages: 2           # model chunks per pipeline rank (interleaved)
  recompute: selective        # none | selective | full
  sequence_parallel: true
  zero: 1                     # 0 | 1 | 2 | 3
)",
                              {"cluster.nodes=128"});
  BOOST_TEST(s.model.layers == 96);
  BOOST_TEST(s.cluster.gpus() == 1024);
  BOOST_TEST(*s.plan.tp == 8);
  BOOST_TEST((*s.plan.schedule == Schedule::Interleaved));
  BOOST_TEST((*s.plan.recompute == Recompute::Selective));
  BOOST_TEST(*s.plan.zero == 1);
  BOOST_TEST(s.plan.fully_fixed());
}

BOOST_AUTO_TEST_CASE(inline_model_and_cluster_overlay_are_accepted) {
  const ScenarioSpec s = load(R"(
model: {layers: 4, hidden: 256, heads: 8, vocab: 1000, seq_len: 512}
cluster: {from: dgx-h100, nodes: 2}
training: {global_batch: 64}
plan: auto
)");
  BOOST_TEST(s.model.hidden == 256);
  BOOST_TEST(s.training.seq_len == 512);  // the model's, when the job does not say
  BOOST_TEST(s.cluster.gpus() == 16);
  BOOST_TEST(s.plan.fully_automatic());
}

BOOST_AUTO_TEST_CASE(fixed_fields_with_the_rest_auto) {
  const ScenarioSpec s = load(R"(
model: llama3-8b
cluster: dgx-h100
training: {global_batch: 512, seq_len: 8192}
plan: {tp: 8, pp: auto, recompute: auto}
)");
  BOOST_TEST(*s.plan.tp == 8);
  BOOST_TEST(!s.plan.pp.has_value());
  BOOST_TEST(!s.plan.recompute.has_value());
  BOOST_TEST(!s.plan.fully_automatic());
}

BOOST_AUTO_TEST_CASE(errors_in_a_referenced_catalog_name_suggest_the_nearest) {
  const std::string e = error_of("model: gpt3-175\ncluster: dgx-h100\ntraining: {global_batch: 8}\n");
  BOOST_TEST(e.find("s.yaml:1:8: error: unknown model 'gpt3-175' — did you mean 'gpt3-175b'?") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(tp_must_divide_heads_and_fit_the_node) {
  const std::string base =
      "model: gpt3-175b\ncluster: {from: dgx-a100-80g, nodes: 1}\ntraining: {global_batch: 8}\n";
  BOOST_TEST(error_of(base + "plan: {tp: 5}\n").find("plan.tp=5 does not divide model.heads=96") !=
             std::string::npos);
  BOOST_TEST(error_of(base + "plan: {tp: 16}\n").find("does not fit the 8 GPUs per node") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(degrees_must_use_the_whole_cluster) {
  const std::string e = error_of(R"(
model: gpt3-1.7b
cluster: {from: dgx-a100-80g, nodes: 4}
training: {global_batch: 512}
plan: {tp: 2, pp: 1, dp: 8}
)");
  BOOST_TEST(
      e.find("dp x tp x pp x cp = 16 but the cluster has 32 GPUs; set cluster.nodes=2 or set plan.dp=16") !=
      std::string::npos);
}

BOOST_AUTO_TEST_CASE(global_batch_must_split_into_whole_micro_batches) {
  const std::string e = error_of(R"(
model: gpt3-1.7b
cluster: {from: dgx-a100-80g, nodes: 4}
training: {global_batch: 512}
plan: {tp: 2, pp: 1, dp: 16, micro_batch: 3}
)");
  BOOST_TEST(e.find("training.global_batch=512 is not divisible by dp x micro_batch = 48") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(overrides_are_checked_like_the_file) {
  const std::string yaml =
      "model: gpt3-1.7b\ncluster: {from: dgx-a100-80g, nodes: 4}\ntraining: {global_batch: 512}\n";
  const std::string e = error_of(yaml, {"plan.schedule=interleave"});
  BOOST_TEST(
      e.find("<--set plan.schedule=interleave>:1:15: error: invalid value 'interleave' for plan.schedule") !=
      std::string::npos);
  BOOST_TEST(e.find("did you mean 'interleaved'?") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(moe_dispatcher_is_alltoall_unless_said_fused) {
  const std::string yaml =
      "model: mixtral-8x7b\ncluster: {from: dgx-h100, nodes: 2}\ntraining: {global_batch: 64}\n";
  BOOST_TEST((load(yaml).training.moe_dispatcher == MoeDispatcher::AllToAll));
  BOOST_TEST((load(yaml, {"training.moe_dispatcher=fused"}).training.moe_dispatcher == MoeDispatcher::Fused));
  const std::string e = error_of(yaml, {"training.moe_dispatcher=fuse"});
  BOOST_TEST(e.find("invalid value 'fuse' for training.moe_dispatcher") != std::string::npos);
  BOOST_TEST(e.find("did you mean 'fused'?") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(reshard_is_one_of_fsdps_three_and_belongs_to_zero_3) {
  const std::string yaml =
      "model: gpt3-1.7b\ncluster: {from: dgx-a100-80g, nodes: 4}\ntraining: {global_batch: 512}\n";
  BOOST_TEST((load(yaml).plan.reshard == std::nullopt));
  BOOST_TEST((load(yaml, {"plan.reshard=after_step"}).plan.reshard == Reshard::AfterStep));
  const std::string typo = error_of(yaml, {"plan.reshard=after_stpe"});
  BOOST_TEST(typo.find("invalid value 'after_stpe' for plan.reshard") != std::string::npos);
  BOOST_TEST(typo.find("did you mean 'after_step'?") != std::string::npos);
  const std::string stage =
      error_of(yaml + "plan: {tp: 1, pp: 1, micro_batch: 1, zero: 1, reshard: after_backward}\n");
  BOOST_TEST_INFO(stage);
  BOOST_TEST(stage.find("s.yaml:4:") != std::string::npos);
  BOOST_TEST(stage.find("plan.reshard: after_backward says when ZeRO 3 frees the parameters it gathers, and "
                        "plan.zero is 1: give plan.zero 3, or reshard after_forward") != std::string::npos);
}

// Megatron-Core's account_for_{embedding,loss}_in_pipeline_split: 22 layers and the two counted as
// layers over 2 x 2 chunks give 6 a chunk, the first and last chunk a transformer layer less.
BOOST_AUTO_TEST_CASE(pipeline_split_counts_the_embedding_and_the_loss_as_layers) {
  const std::string yaml = R"(
model: {from: gpt3-1.7b, layers: 22}
cluster: {from: dgx-a100-80g, nodes: 1}
training: {global_batch: 64}
plan: {tp: 2, pp: 2, micro_batch: 1, schedule: interleaved, virtual_stages: 2,
       pipeline_split: {embedding: true, loss: true}}
)";
  const Plan p = complete_plan(load(yaml));
  std::vector<int> sizes;
  for (const auto& st : p.stages) sizes.push_back(st.layer_end - st.layer_begin);
  BOOST_TEST(sizes == std::vector<int>({5, 6, 6, 5}), boost::test_tools::per_element());
  BOOST_TEST(p.stages.back().layer_end == 22);
  // Without it the same plan splits the 22 layers evenly.
  const Plan even =
      complete_plan(load(yaml, {"plan.pipeline_split.loss=false", "plan.pipeline_split.embedding=false"}));
  BOOST_TEST(even.stages.front().layer_end == 6);
  // The loss alone makes 23, which 4 chunks do not divide: Megatron-Core asserts; so does the check.
  const std::string uneven = error_of(yaml, {"plan.pipeline_split.embedding=false"});
  BOOST_TEST_INFO(uneven);
  BOOST_TEST(uneven.find("s.yaml:6:") != std::string::npos);
  BOOST_TEST(uneven.find("22 layers with the loss counted as layers make 23, which do not divide evenly over "
                         "the 4 chunks") != std::string::npos);
  // The optimizer partitions layers itself.
  BOOST_TEST(error_of(yaml, {"plan.micro_batch=auto"})
                 .find("plan.pipeline_split needs plan.tp, plan.pp and "
                       "plan.micro_batch") != std::string::npos);
  // A plan file is not checked as a scenario is: completing it refuses the same split, at the file's line.
  const std::string path = (std::filesystem::temp_directory_path() / "paratwin_pipeline_split.yaml").string();
  std::ofstream(path) << "dp: 2\ntp: 2\npp: 2\nmicro_batch: 1\nschedule: interleaved\nvirtual_stages: 2\n"
                         "pipeline_split: {loss: true}\n";
  try {
    load_plan_file(path, load(yaml));
    BOOST_FAIL("the plan file's uneven split was accepted");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find(path + ":7:") != std::string::npos, e.what());
  }
}

BOOST_AUTO_TEST_CASE(sweep_values_are_validated_one_by_one) {
  const std::string e = error_of(R"(
model: gpt3-1.7b
cluster: dgx-a100-80g
training: {global_batch: 512, tokens: 1B}
sweep:
  grid:
    cluster.nodes: [4, many]
)");
  BOOST_TEST(
      e.find("s.yaml:7:24: error: sweep.grid.cluster.nodes: expected an integer for cluster.nodes, got "
             "'many'") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(summary_counts_flops_per_iteration) {
  const ScenarioSpec s = load(
      "model: gpt3-175b\ncluster: {from: dgx-a100-80g, nodes: 128}\n"
      "training: {global_batch: 1536, tokens: 300B}\n");
  const ScenarioSummary sum = summarize(s);
  BOOST_TEST(sum.gpus == 1024);
  BOOST_TEST(sum.tokens_per_iteration == 1536.0 * 2048);
  BOOST_TEST(sum.peak.value() == 1024 * 312e12);
  BOOST_TEST(sum.iterations == 300e9 / (1536.0 * 2048), boost::test_tools::tolerance(1e-12));
}
