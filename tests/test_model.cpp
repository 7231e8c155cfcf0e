// Model files: parameter counts against published totals, FLOPs against the standard formulas.
#define BOOST_TEST_MODULE model
#include <boost/test/unit_test.hpp>

#include "plan/spec/catalog.hpp"
#include "plan/spec/model.hpp"
#include "plan/spec/scenario.hpp"
#include "source_tree.hpp"

using namespace paratwin;

static ModelSpec catalog_model(const std::string& name) {
  auto path = Catalog(paratwin_test::source_dir()).find(CatalogKind::Model, name);
  BOOST_REQUIRE_MESSAGE(path, "catalog model " << name);
  return load_model_file(*path);
}

static ModelSpec parse(const std::string& yaml) {
  Diagnostics diag;
  ModelSpec m = parse_model(parse_yaml(yaml, "test.yaml"), "model", diag);
  diag.throw_if_errors();
  return m;
}

BOOST_AUTO_TEST_CASE(published_parameter_counts_are_reproduced_exactly) {
  // Totals of the released checkpoints (Hugging Face model cards / safetensors headers).
  BOOST_TEST(count_parameters(catalog_model("gpt2-124m")).total == 124439808.0);
  BOOST_TEST(count_parameters(catalog_model("llama2-7b")).total == 6738415616.0);
  BOOST_TEST(count_parameters(catalog_model("llama2-70b")).total == 68976648192.0);
  BOOST_TEST(count_parameters(catalog_model("llama3-8b")).total == 8030261248.0);
  BOOST_TEST(count_parameters(catalog_model("llama3-70b")).total == 70553706496.0);
  BOOST_TEST(count_parameters(catalog_model("llama3-405b")).total == 405853388800.0);
  BOOST_TEST(count_parameters(catalog_model("mixtral-8x7b")).total == 46702792704.0);
}

BOOST_AUTO_TEST_CASE(mpt_models_match_the_benchmark_readmes_parameter_counts) {
  // llm-foundry scripts/train/benchmarking/README.md, NumParams column: the learned positions make the
  // count depend on the benchmark's sequence length (V d + seq d + L 12 d^2 + (13 L + 2) d).
  struct Row {
    const char* model;
    int seq;
    double published;
  };
  const Row rows[] = {
      {"mpt-70b", 2048, 64862437376.0}, {"mpt-30b", 2048, 29975214080.0}, {"mpt-30b", 8192, 30019254272.0},
      {"mpt-13b", 2048, 12853954560.0}, {"mpt-13b", 4096, 12864440320.0}, {"mpt-13b", 8192, 12885411840.0},
      {"mpt-7b", 2048, 6658859008.0},   {"mpt-7b", 8192, 6684024832.0},   {"mpt-3b", 2048, 2651837440.0},
      {"mpt-3b", 8192, 2667566080.0},   {"mpt-1b", 2048, 1315950592.0},   {"mpt-1b", 8192, 1328533504.0},
      {"mpt-760m", 2048, 760470528.0},  {"mpt-350m", 2048, 355985408.0},  {"mpt-350m", 65536, 420997120.0},
      {"mpt-125m", 2048, 125311488.0}};
  for (const Row& r : rows) {
    ModelSpec m = catalog_model(r.model);
    m.seq_len = r.seq;  // what the scenarios' model.seq_len does for the longer rows
    BOOST_TEST(count_parameters(m).total == r.published, r.model << " at " << r.seq);
  }
}

BOOST_AUTO_TEST_CASE(validation_set_models_match_their_published_parameter_counts) {
  // Released checkpoints: Llama 2 13B (Hugging Face), BLOOM 176B (its embedding LayerNorm, 2 x 14336,
  // is not in the model language), Qwen3 30B-A3B (nor are its 48 layers' query and key norms, 2 x 128).
  BOOST_TEST(count_parameters(catalog_model("llama2-13b")).total == 13015864320.0);
  BOOST_TEST(count_parameters(catalog_model("bloom-176b")).total + 2 * 14336 == 176247271424.0);
  BOOST_TEST(count_parameters(catalog_model("qwen3-30b-a3b")).total + 48 * 2 * 128 == 30532122624.0);
  // Nemotron-4 340B technical report: 9.4B embedding and 331.6B non-embedding parameters.
  const ParameterCount nemotron = count_parameters(catalog_model("nemotron4-340b"));
  BOOST_TEST(nemotron.embedding == 9.4e9, boost::test_tools::tolerance(0.005));
  BOOST_TEST(nemotron.total - nemotron.embedding == 331.6e9, boost::test_tools::tolerance(0.0005));
  // Model cards' rounded totals: Llama 2 34B, GPT-OSS 120B (117B; 5.1B active, counted without the
  // input embedding), Qwen3 30B-A3B (3.3B active).
  BOOST_TEST(count_parameters(catalog_model("llama2-34b")).total == 34e9, boost::test_tools::tolerance(0.01));
  const ParameterCount oss = count_parameters(catalog_model("gpt-oss-120b"));
  BOOST_TEST(oss.total == 117e9, boost::test_tools::tolerance(0.01));
  BOOST_TEST(oss.active - 201088.0 * 2880 == 5.1e9, boost::test_tools::tolerance(0.02));
  BOOST_TEST(count_parameters(catalog_model("qwen3-30b-a3b")).active == 3.3e9,
             boost::test_tools::tolerance(0.03));
}

BOOST_AUTO_TEST_CASE(megatron_family_matches_its_parameter_formula) {
  // Narayanan et al. 2021: P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h)).
  for (const char* name : {"gpt3-1.7b", "gpt3-18.4b", "gpt3-175b", "gpt3-1t"}) {
    const ModelSpec m = catalog_model(name);
    const double l = m.layers, h = m.hidden, V = m.vocab, s = m.seq_len;
    const double formula = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h));
    // The formula leaves out the final LayerNorm (2h).
    BOOST_TEST(count_parameters(m).total == formula + 2 * h, boost::test_tools::tolerance(1e-12));
  }
}

BOOST_AUTO_TEST_CASE(moe_counts_all_experts_but_activates_top_k) {
  const ModelSpec m = catalog_model("mixtral-8x7b");
  const ParameterCount c = count_parameters(m);
  // 12.9B active parameters per token (Jiang et al. 2024).
  BOOST_TEST(c.active == 12879925248.0);
  BOOST_TEST(c.per_moe_layer > c.per_dense_layer);
}

BOOST_AUTO_TEST_CASE(tiny_moe_counts_four_experts_and_a_router_per_layer) {
  // Per layer: attention 66,048, 4 experts of 65,920 (GELU MLP 128 x 256 with biases), a 128 x 4
  // router and two LayerNorms of 256; embeddings 49,152 (tied), final norm 256.
  const ParameterCount c = count_parameters(catalog_model("tiny-moe"));
  BOOST_TEST(c.per_moe_layer == 330752.0);
  BOOST_TEST(c.total == 1372416.0);
  BOOST_TEST(c.active == 845056.0);  // top 2 of the 4 experts
}

BOOST_AUTO_TEST_CASE(training_flops_match_megatron_formula_for_gpt) {
  // 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) per iteration of B sequences (no recompute).
  const ModelSpec m = catalog_model("gpt3-175b");
  const double l = m.layers, h = m.hidden, V = m.vocab, s = 2048;
  const double per_token = 72 * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  BOOST_TEST(training_flops_per_token(m, 2048) == per_token, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(training_flops_are_about_six_per_parameter_for_short_sequences) {
  const ModelSpec m = catalog_model("llama2-7b");
  const double six_n = 6 * count_parameters(m).total;
  const double f = training_flops_per_token(m, 128);
  BOOST_TEST(f / six_n > 0.97);
  BOOST_TEST(f / six_n < 1.03);
}

BOOST_AUTO_TEST_CASE(defaults_follow_the_mlp_kind) {
  const ModelSpec gelu = parse("{layers: 2, hidden: 768, heads: 12, vocab: 100, seq_len: 64}");
  BOOST_TEST(gelu.ffn_hidden == 3072);
  BOOST_TEST(gelu.kv_heads == 12);
  BOOST_TEST(gelu.head_dim == 64);
  const ModelSpec swiglu =
      parse("{layers: 2, hidden: 4096, heads: 32, vocab: 100, seq_len: 64, mlp: swiglu}");
  BOOST_TEST(swiglu.ffn_hidden == 11008);  // Llama's 8/3 h rounded up to 256
}

BOOST_AUTO_TEST_CASE(all_model_errors_are_reported_together) {
  try {
    parse("{layers: 0, hidden: abc, heads: 4, vocab: 100, seq_len: 64, mlp: gelu2}");
    BOOST_FAIL("expected InputError");
  } catch (const InputError& e) {
    BOOST_TEST(e.diagnostics().size() == 3u);
    const std::string all = e.what();
    BOOST_TEST(all.find("model.layers must be between 1 and 100000, got 0") != std::string::npos);
    BOOST_TEST(all.find("expected an integer for model.hidden, got 'abc'") != std::string::npos);
    BOOST_TEST(all.find("did you mean 'gelu'?") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(sliding_window_picks_the_windowed_layers_and_survives_the_round_trip) {
  const std::string base = "{layers: 4, hidden: 64, heads: 4, vocab: 100, seq_len: 64, mlp: swiglu, ";
  const ModelSpec plain = parse(base + "position: rope}");
  BOOST_TEST(plain.attention_window(0) == 0);
  BOOST_TEST(to_yaml(plain).find("sliding_window") == std::string::npos);
  // Megatron-Core's window_attn_skip_freq 2: 1-based layers 1 and 3 windowed, 2 and 4 in full.
  const ModelSpec alternating = parse(base + "position: rope, sliding_window: 16, full_attention_every: 2}");
  BOOST_TEST(alternating.attention_window(0) == 16);
  BOOST_TEST(alternating.attention_window(1) == 0);
  BOOST_TEST(alternating.attention_window(2) == 16);
  BOOST_TEST(alternating.attention_window(3) == 0);
  const ModelSpec back = parse(to_yaml(alternating));
  BOOST_TEST(back.sliding_window == 16);
  BOOST_TEST(back.full_attention_every == 2);
  // Without full_attention_every every layer is windowed.
  const ModelSpec all = parse(base + "position: rope, sliding_window: 16}");
  for (int l = 0; l < 4; ++l) BOOST_TEST(all.attention_window(l) == 16);
  try {
    parse(base + "position: rope, full_attention_every: 2}");
    BOOST_FAIL("expected InputError");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("model.full_attention_every") != std::string::npos);
    BOOST_TEST(std::string(e.what()).find("model.sliding_window") != std::string::npos);
  }
  try {
    parse(base + "position: rope, sliding_window: 0}");
    BOOST_FAIL("expected InputError");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("model.sliding_window") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(yarn_factor_scales_rope_only_and_survives_the_round_trip) {
  const std::string base = "{layers: 2, hidden: 64, heads: 4, vocab: 100, seq_len: 64, mlp: swiglu, ";
  BOOST_TEST(parse(base + "position: rope}").yarn_factor == 1.0);
  const ModelSpec yarn = parse(base + "position: rope, yarn_factor: 32}");
  BOOST_TEST(yarn.yarn_factor == 32.0);
  BOOST_TEST(parse(to_yaml(yarn)).yarn_factor == 32.0);
  BOOST_TEST(to_yaml(parse(base + "position: rope}")).find("yarn_factor") == std::string::npos);
  try {
    parse(base + "position: learned, yarn_factor: 32}");
    BOOST_FAIL("expected InputError");
  } catch (const InputError& e) {
    BOOST_TEST(
        std::string(e.what()).find("model.yarn_factor scales rotary embeddings; it needs position: rope") !=
        std::string::npos);
  }
  try {
    parse(base + "position: rope, yarn_factor: 0.5}");
    BOOST_FAIL("expected InputError");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("model.yarn_factor") != std::string::npos);
  }
  // The original context: seq_len / factor unless given (GPT-OSS's 131072 / 32 = 4096).
  BOOST_TEST(yarn.yarn_context() == 2);
  const ModelSpec given = parse(base + "position: rope, yarn_factor: 4, yarn_original_context: 32}");
  BOOST_TEST(given.yarn_context() == 32);
  BOOST_TEST(parse(to_yaml(given)).yarn_context() == 32);
  try {
    parse(base + "position: rope, yarn_original_context: 32}");
    BOOST_FAIL("expected InputError");
  } catch (const InputError& e) {
    BOOST_TEST(std::string(e.what()).find("model.yarn_original_context is the context YaRN extends; it needs "
                                          "a yarn_factor above 1") != std::string::npos);
  }
}
