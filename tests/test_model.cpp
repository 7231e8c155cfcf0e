// Model files: parameter counts against published totals, FLOPs against the standard formulas.
#define BOOST_TEST_MODULE model
#include <boost/test/unit_test.hpp>

#include "plan/spec/catalog.hpp"
#include "plan/spec/model.hpp"
#include "plan/spec/scenario.hpp"

using namespace paratwin;

static ModelSpec catalog_model(const std::string& name) {
  auto path = Catalog(PARATWIN_SOURCE_DIR).find(CatalogKind::Model, name);
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
