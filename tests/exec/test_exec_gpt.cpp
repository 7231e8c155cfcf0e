// The GPT's backward against finite differences of its forward, for every parameter tensor, in both
// the GPT-2 shape of tiny-gpt and a Llama-shaped variant (RMSNorm, SwiGLU, RoPE, GQA, untied, no bias),
// and their mixture-of-experts forms (tiny-moe's router, experts, dispatch and gated combine).
#define BOOST_TEST_MODULE exec_gpt
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "exec/gpt/kernels.hpp"
#include "exec/gpt/model.hpp"
#include "exec/gpt/tensor_parallel.hpp"
#include "plan/spec/scenario.hpp"
#include "source_tree.hpp"

using namespace paratwin;
using namespace paratwin::exec;
namespace tt = boost::test_tools;

namespace {

ModelSpec tiny_gpt() {
  return load_model_file(paratwin_test::source_dir() + "/models/tiny-gpt.yaml");
}

ModelSpec llama_shaped() {
  ModelSpec m = tiny_gpt();
  m.norm = NormKind::RmsNorm;
  m.mlp = MlpKind::SwiGlu;
  m.position = PositionKind::Rope;
  m.kv_heads = 2;
  m.tied_embeddings = false;
  m.bias = false;
  m.ffn_hidden = 352;
  return m;
}

ModelSpec tiny_moe() {
  return load_model_file(paratwin_test::source_dir() + "/models/tiny-moe.yaml");
}

// Mixtral's shape on a small scale, with dense and MoE layers alternating (every 2nd layer is MoE).
ModelSpec llama_shaped_moe() {
  ModelSpec m = llama_shaped();
  m.ffn_hidden = 96;
  MoeSpec moe;
  moe.experts = 4, moe.top_k = 2, moe.every = 2;
  m.moe = moe;
  return m;
}

template <class T>
void fill_batch(Activations<T>& a, uint32_t seed) {
  for (size_t i = 0; i < a.tokens.size(); ++i) {
    seed = seed * 1664525u + 1013904223u;
    a.tokens[i] = static_cast<int32_t>((seed >> 8) % 256);
    a.targets[i] = static_cast<int32_t>((seed >> 20) % 256);
  }
}

// Central differences in double for a few entries of every tensor: the largest analytic gradient and
// two spread over the tensor.
void check_gradients_match_finite_differences(const ModelSpec& spec) {
  Gpt<double> model(gpt_config(spec));
  model.initialize(7);
  // Larger weights than the 0.02 init make every path carry a gradient well above rounding.
  for (auto& w : model.parameters()) w *= 3;
  Activations<double> a;
  model.allocate(a, 2, 8);
  fill_batch(a, 11);
  model.zero_gradients();
  model.forward(a);
  model.backward(a, 0, spec.layers, 1.0);
  const auto analytic = model.gradients();
  const double h = 1e-5;
  int checked = 0;
  for (const auto& t : model.layout().tensors) {
    size_t largest = t.offset;
    for (size_t i = t.offset; i < t.offset + t.size(); ++i)
      if (std::abs(analytic[i]) > std::abs(analytic[largest])) largest = i;
    for (size_t i : {largest, t.offset + t.size() / 3, t.offset + (2 * t.size()) / 3 + 1}) {
      if (i >= t.offset + t.size()) continue;
      double& w = model.parameters()[i];
      const double saved = w;
      w = saved + h;
      const double up = model.forward(a);
      w = saved - h;
      const double down = model.forward(a);
      w = saved;
      const double numeric = (up - down) / (2 * h);
      BOOST_TEST_INFO(t.name << "[" << i - t.offset << "]: analytic " << analytic[i] << ", numeric "
                             << numeric);
      BOOST_TEST(std::abs(analytic[i] - numeric) <=
                 1e-6 * std::max(std::abs(analytic[i]), std::abs(numeric)) + 1e-9);
      ++checked;
    }
  }
  BOOST_TEST(checked >= 2 * static_cast<int>(model.layout().tensors.size()));
  BOOST_TEST(std::abs(analytic[0]) + std::abs(analytic[analytic.size() - 1]) > 0);
}

}  // namespace

BOOST_AUTO_TEST_CASE(gpt2_shaped_gradients_match_finite_differences) {
  check_gradients_match_finite_differences(tiny_gpt());
}

BOOST_AUTO_TEST_CASE(llama_shaped_gradients_match_finite_differences) {
  check_gradients_match_finite_differences(llama_shaped());
}

BOOST_AUTO_TEST_CASE(yarn_gradients_match_finite_differences) {
  // GPT-OSS's YaRN: the scaled cos and sin enter the forward and, transposed, the backward.
  ModelSpec m = llama_shaped();
  m.yarn_factor = 4;
  check_gradients_match_finite_differences(m);
}

// YaRN's frequencies (Peng et al. 2023, Hugging Face's _compute_yarn_parameters): GPT-OSS's head of 128
// over an original 4096 tokens, factor 32. Pair i turns 4096 x 10000^(-2i/128) / 2 pi times over the
// original context: more than 32 times up to i = 20 (kept), fewer than once from i = 46 (divided by 32);
// the attention factor 0.1 ln 32 + 1 scales every rotated pair.
BOOST_AUTO_TEST_CASE(yarn_keeps_fast_pairs_interpolates_slow_ones_and_scales_them) {
  const kernels::RotaryAngles rope = kernels::rotary_angles(128),
                              yarn = kernels::rotary_angles(128, 32, 4096);
  BOOST_TEST(rope.scale == 1.0);
  BOOST_TEST(rope.inv_freq[1] == std::pow(10000.0, -2.0 / 128));
  BOOST_TEST(yarn.scale == 0.1 * std::log(32.0) + 1, tt::tolerance(1e-15));
  for (int i = 0; i <= 20; ++i) BOOST_TEST(yarn.inv_freq[size_t(i)] == rope.inv_freq[size_t(i)]);
  for (int i = 46; i < 64; ++i)
    BOOST_TEST(yarn.inv_freq[size_t(i)] == rope.inv_freq[size_t(i)] / 32, tt::tolerance(1e-15));
  for (int i = 21; i < 46; ++i) {  // the ramp: between the two, falling towards the interpolated
    BOOST_TEST(yarn.inv_freq[size_t(i)] < rope.inv_freq[size_t(i)]);
    BOOST_TEST(yarn.inv_freq[size_t(i)] > rope.inv_freq[size_t(i)] / 32);
  }
  // Rotated and rotated back: the scale twice, the vector otherwise unchanged.
  const int D = 8;
  std::vector<double> qkv(3 * D);
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = 0.1 * double(i) + 0.3;
  std::vector<double> turned = qkv;
  const kernels::RotaryAngles small = kernels::rotary_angles(D, 4, 2);
  const int positions[] = {5};
  kernels::rope(turned.data(), 1, 1, 1, 1, D, false, positions, small);
  kernels::rope(turned.data(), 1, 1, 1, 1, D, true, positions, small);
  for (size_t i = 0; i < 2 * D; ++i)
    BOOST_TEST(turned[i] == qkv[i] * small.scale * small.scale, tt::tolerance(1e-12));
  for (size_t i = 2 * D; i < qkv.size(); ++i) BOOST_TEST(turned[i] == qkv[i]);  // values are not rotated
}

BOOST_AUTO_TEST_CASE(alibi_and_sliding_window_gradients_match_finite_differences) {
  // BLOOM's ALiBi (no position table) and GPT-OSS's windows on every other layer: the bias and the mask
  // change the probabilities, the backward follows them.
  ModelSpec m = tiny_gpt();
  m.position = PositionKind::Alibi;
  m.sliding_window = 3;
  m.full_attention_every = 2;
  BOOST_TEST(parameter_layout(gpt_config(m)).total < parameter_layout(gpt_config(tiny_gpt())).total);
  check_gradients_match_finite_differences(m);
}

// A window of one key leaves each query its own value; a window as long as the sequence changes
// nothing; a steep ALiBi slope pulls every query to its own key.
BOOST_AUTO_TEST_CASE(the_attention_mask_limits_and_biases_the_keys) {
  const int B = 1, Tn = 6, H = 2, K = 1, D = 4, width = (H + 2 * K) * D;
  std::vector<double> qkv(size_t(B) * Tn * width);
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = std::sin(0.7 * double(i) + 0.3);
  std::vector<double> plain(size_t(Tn) * H * D), out(plain.size()), att(size_t(H) * Tn * Tn);
  kernels::attention_forward(plain.data(), att.data(), qkv.data(), B, Tn, H, K, D);
  kernels::attention_forward(out.data(), att.data(), qkv.data(), B, Tn, H, K, D, {nullptr, Tn});
  // Equal to rounding: the causal path's softmax is Eigen's vectorized exp and sum, the masked path's
  // std::exp and a sum in key order (exact equality held on earlier CI machines and failed on an AMD
  // EPYC one).
  for (size_t i = 0; i < plain.size(); ++i) BOOST_TEST(out[i] == plain[i], tt::tolerance(1e-13));
  const auto own_values = [&](const std::vector<double>& o, double tolerance) {
    for (int t = 0; t < Tn; ++t)
      for (int h = 0; h < H; ++h)
        for (int d = 0; d < D; ++d)
          BOOST_TEST(std::abs(o[size_t(t) * H * D + h * D + d] - qkv[size_t(t) * width + (H + K) * D + d]) <=
                     tolerance);
  };
  kernels::attention_forward(out.data(), att.data(), qkv.data(), B, Tn, H, K, D, {nullptr, 1});
  own_values(out, 0.0);
  const std::vector<double> steep{200.0, 200.0};
  kernels::attention_forward(out.data(), att.data(), qkv.data(), B, Tn, H, K, D, {steep.data(), 0});
  own_values(out, 1e-12);
}

BOOST_AUTO_TEST_CASE(alibi_slopes_follow_press_et_al) {
  const std::vector<double> eight = kernels::alibi_slopes(8);
  for (int i = 0; i < 8; ++i) BOOST_TEST(eight[size_t(i)] == std::pow(2.0, -(i + 1)), tt::tolerance(1e-15));
  // 12 heads: the 8 of eight, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5 (every other slope of sixteen).
  const std::vector<double> twelve = kernels::alibi_slopes(12);
  BOOST_TEST_REQUIRE(twelve.size() == 12u);
  for (int i = 0; i < 4; ++i)
    BOOST_TEST(twelve[size_t(8 + i)] == std::pow(2.0, -0.5 - i), tt::tolerance(1e-15));
}

BOOST_AUTO_TEST_CASE(moe_gradients_match_finite_differences) {
  // Router, every expert's MLP, and the layers below them through the dispatch and the gated combine.
  check_gradients_match_finite_differences(tiny_moe());
}

BOOST_AUTO_TEST_CASE(mixtral_shaped_moe_gradients_match_finite_differences) {
  check_gradients_match_finite_differences(llama_shaped_moe());
}

BOOST_AUTO_TEST_CASE(moe_layout_has_a_router_and_every_expert_in_moe_layers_only) {
  const ParameterLayout layout = parameter_layout(gpt_config(llama_shaped_moe()));
  BOOST_CHECK_THROW(layout.find("layer0.router_w"), std::out_of_range);  // layer 0 is dense
  BOOST_TEST(layout.find("layer0.fc_w").size() == 128u * 2 * 96);
  BOOST_TEST(layout.find("layer1.router_w").cols == 4u);
  BOOST_TEST(layout.find("layer1.expert3.fc_proj_w").size() == 96u * 128);
  BOOST_CHECK_THROW(layout.find("layer1.fc_w"), std::out_of_range);
  // The catalog's count: the live layout holds exactly the parameters the planner counts.
  BOOST_TEST(double(parameter_layout(gpt_config(tiny_moe())).total) == count_parameters(tiny_moe()).total);
}

BOOST_AUTO_TEST_CASE(fp32_gradients_agree_with_fp64_gradients) {
  // The same weights in both precisions; each tensor's fp32 gradient within 1e-3 of fp64's (norm-wise).
  for (const ModelSpec& spec : {tiny_gpt(), llama_shaped(), tiny_moe()}) {
    Gpt<double> wide(gpt_config(spec));
    Gpt<float> narrow(gpt_config(spec));
    wide.initialize(3);
    for (size_t i = 0; i < wide.parameters().size(); ++i)
      narrow.parameters()[i] = float(wide.parameters()[i]);
    Activations<double> aw;
    Activations<float> an;
    wide.allocate(aw, 2, 32);
    narrow.allocate(an, 2, 32);
    fill_batch(aw, 5);
    fill_batch(an, 5);
    wide.zero_gradients();
    narrow.zero_gradients();
    const double lw = wide.forward(aw), ln = narrow.forward(an);
    BOOST_TEST(std::abs(lw - ln) < 1e-5 * lw);
    wide.backward(aw, 0, spec.layers, 1.0);
    narrow.backward(an, 0, spec.layers, 1.0f);
    for (const auto& t : wide.layout().tensors) {
      double diff = 0, norm = 0;
      for (size_t i = t.offset; i < t.offset + t.size(); ++i) {
        diff += std::pow(wide.gradients()[i] - narrow.gradients()[i], 2);
        norm += std::pow(wide.gradients()[i], 2);
      }
      BOOST_TEST_INFO(spec.name << " " << t.name);
      BOOST_TEST(std::sqrt(diff) <= 1e-3 * std::sqrt(norm) + 1e-12);
    }
  }
}

BOOST_AUTO_TEST_CASE(moe_layers_recompute_to_the_same_gradients) {
  // Full and selective recomputation run the MoE layer's routing and experts again: same bits.
  Gpt<float> model(gpt_config(tiny_moe()));
  model.initialize(2);
  std::vector<Buffer<float>> grads;
  for (ActivationPolicy policy :
       {ActivationPolicy::KeepAll, ActivationPolicy::RecomputeLayers, ActivationPolicy::RecomputeSelective}) {
    Activations<float> a;
    model.allocate(a, 2, 16, policy);
    fill_batch(a, 4);
    model.zero_gradients();
    model.forward(a);
    model.backward(a, 0, 4, 1.0f);
    grads.push_back(model.gradients());
  }
  BOOST_TEST((grads[1] == grads[0]));
  BOOST_TEST((grads[2] == grads[0]));
}

// A stage's recompute_every and recompute_layers leave some layers keeping everything: the runner's
// model (one rank's shard, here the whole model) takes a policy per layer, the dropped layers sharing
// one layer's buffers, and gives the same gradients bit for bit as keeping all.
BOOST_AUTO_TEST_CASE(layers_recomputed_by_their_own_policy_give_the_same_gradients) {
  using P = ActivationPolicy;
  const P keep = P::KeepAll, full = P::RecomputeLayers, core = P::RecomputeSelective, ops = P::RecomputeOps;
  for (const ModelSpec& spec : {tiny_gpt(), tiny_moe()}) {
    const GptConfig config = gpt_config(spec);
    ShardSpec shard;
    shard.chunks = {{0, config.layers}};
    shard.first = shard.last = true;
    ShardedGpt model(config, shard, nullptr);
    model.initialize(3);
    std::vector<Buffer<float>> grads;
    std::vector<size_t> kept_bytes;
    for (const std::vector<P>& policies : std::vector<std::vector<P>>{{keep, keep, keep, keep},
                                                                      {keep, full, keep, full},
                                                                      {full, keep, keep, keep},
                                                                      {keep, core, keep, core},
                                                                      {full, full, full, full},
                                                                      {ops, ops, ops, ops},
                                                                      {keep, ops, keep, ops}}) {
      ChunkActivations a;
      model.allocate(a, 0, 2, 16, policies);
      for (size_t i = 0; i < a.tokens.size(); ++i) {
        a.tokens[i] = int32_t(i * 7 % 256);
        a.targets[i] = int32_t(i * 13 % 256);
      }
      model.zero_gradients();
      model.forward(a);
      model.recompute(a, 3);  // as the Program's recompute task, before the backward
      model.backward(a, 2, 4, 1.0f);
      model.backward(a, 0, 2, 1.0f);
      grads.push_back(model.gradients());
      kept_bytes.push_back(a.ln1.size() + a.att.size() + a.fc.size());
    }
    for (size_t i = 1; i < grads.size(); ++i) {
      BOOST_TEST_INFO(spec.name << ", policies " << i);
      BOOST_TEST((grads[i] == grads[0]));
    }
    // Two layers of four keep their inner activations, the other two share one place: 3 of 4 layers'
    // buffers; one layer dropped needs the one place it shares, all four dropped one place in all.
    BOOST_TEST(kept_bytes[1] == kept_bytes[0] * 3 / 4);
    BOOST_TEST(kept_bytes[2] == kept_bytes[0]);
    BOOST_TEST(kept_bytes[4] == kept_bytes[0] / 4);
    // Per-operator recomputation keeps every layer's qkv and fc, and one layer's norm outputs, attention
    // probabilities and activation.
    const auto bytes = [](const ChunkActivations& a) {
      return a.qkv.size() + a.fc.size() + a.ln1.size() + a.att.size() + a.fc_act.size() + a.attn_out.size();
    };
    ChunkActivations all, per_op;
    model.allocate(all, 0, 2, 16);
    model.allocate(per_op, 0, 2, 16, {ops, ops, ops, ops});
    // Megatron-Core's recompute modules: an MoE layer's pre-MLP norm and experts' activation dropped
    // too, or instead of the attention core.
    for (const RecomputeModules modules :
         {RecomputeModules{true, true, true}, RecomputeModules{false, true, true},
          RecomputeModules{false, false, true}}) {
      ChunkActivations a;
      model.allocate(a, 0, 2, 16, {core, core, core, core}, modules);
      for (size_t i = 0; i < a.tokens.size(); ++i) {
        a.tokens[i] = int32_t(i * 7 % 256);
        a.targets[i] = int32_t(i * 13 % 256);
      }
      model.zero_gradients();
      model.forward(a);
      model.backward(a, 0, 4, 1.0f);
      BOOST_TEST_INFO(spec.name << ", modules " << modules.names());
      BOOST_TEST((model.gradients() == grads[0]));
      const bool moe = config.experts > 0;
      BOOST_TEST(a.att.size() == (modules.core_attn ? all.att.size() / 4 : all.att.size()));
      BOOST_TEST(a.ln2.size() == (moe && modules.layernorm ? all.ln2.size() / 4 : all.ln2.size()));
      for (const MoeActivations<float>& m : a.moe) BOOST_TEST(m.fc_act.empty());  // freed by each backward
    }
    BOOST_TEST(per_op.qkv.size() == all.qkv.size());
    BOOST_TEST(per_op.fc.size() == all.fc.size());
    BOOST_TEST(per_op.ln1.size() == all.ln1.size() / 4);
    BOOST_TEST(per_op.att.size() == all.att.size() / 4);
    BOOST_TEST(per_op.fc_act.size() == all.fc_act.size() / 4);
    BOOST_TEST(bytes(per_op) < bytes(all));
  }
}

BOOST_AUTO_TEST_CASE(backward_in_layer_segments_equals_one_backward) {
  for (const ModelSpec& spec : {tiny_gpt(), tiny_moe()}) {
    Gpt<float> model(gpt_config(spec));
    model.initialize(1);
    Activations<float> a;
    model.allocate(a, 2, 16);
    fill_batch(a, 9);
    model.forward(a);
    model.zero_gradients();
    model.backward(a, 0, 4, 1.0f);
    const auto whole = model.gradients();
    model.zero_gradients();
    model.backward(a, 3, 4, 1.0f);
    model.backward(a, 1, 3, 1.0f);
    model.backward(a, 0, 1, 1.0f);
    BOOST_TEST(model.gradients() == whole);
  }
}

BOOST_AUTO_TEST_CASE(initial_loss_is_near_uniform_over_the_vocabulary) {
  Gpt<float> model(gpt_config(tiny_gpt()));
  model.initialize(1);
  Activations<float> a;
  model.allocate(a, 2, 64);
  fill_batch(a, 4);
  BOOST_TEST(std::abs(model.forward(a) - std::log(256.0)) < 0.1);
  BOOST_CHECK_THROW(model.allocate(a, 1, 129), std::invalid_argument);
}
