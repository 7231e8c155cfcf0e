// fp8 training's quantization passes around the linear layers (plan/cost/fp8_casts.hpp): the bytes and
// launches each recipe adds to a layer's forward and backward, worked out by hand from the sources the
// header cites.
#define BOOST_TEST_MODULE fp8_casts
#include <boost/test/unit_test.hpp>

#include "catalog_files.hpp"
#include "plan/cost/compute.hpp"
#include "plan/cost/fp8_casts.hpp"

using namespace paratwin;
using namespace paratwin::cost;
using namespace paratwin::test;
namespace tt = boost::test_tools;

namespace {

// Llama 3 8B (h 4096, 32 query and 8 key-value heads of 128, SwiGLU f 14336), one micro-batch of 2 x
// 8192 tokens on one rank.
struct Llama8b {
  ModelSpec m = model("llama3-8b");
  double T = 2.0 * 8192, h = 4096, A = 4096, Kv = 1024, f = 14336;
  // The four linears' weights: QKV, output, gate-and-up, down.
  double weights() const { return h * (A + 2 * Kv) + A * h + h * 2 * f + f * h; }

  LayerWork work(Precision p, Fp8Recipe recipe, int tp = 1, bool sp = false) const {
    TrainingSpec t;
    t.seq_len = 8192;
    t.precision = p;
    t.fp8_recipe = recipe;
    return layer_work(t, 2, tp, 1, sp, 1, false);
  }
  // What fp8 adds over bf16 to one layer's forward or backward: the same kernels but for the casts.
  KernelCost added(const LayerWork& fp8, bool forward) const {
    LayerWork bf16 = fp8;
    bf16.precision = Precision::Bf16;
    const KernelCost a = forward ? layer_forward(m, fp8, false) : layer_backward(m, fp8, false);
    const KernelCost b = forward ? layer_forward(m, bf16, false) : layer_backward(m, bf16, false);
    KernelCost d;
    d.elementwise_bytes = a.elementwise_bytes - b.elementwise_bytes;
    d.launches = a.launches - b.launches;
    return d;
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(te_delayed_scaling_casts_with_the_transpose_and_lets_the_norm_write_fp8) {
  const Llama8b l;
  const LayerWork w = l.work(Precision::Fp8, Fp8Recipe::TeDelayed);
  // Forward: the two norms write fp8 (a byte less an element); the output and down projections'
  // inputs go through fp8_cast_transpose_fused (reads 2, writes 1 + 1).
  const KernelCost fwd = l.added(w, true);
  BOOST_TEST(fwd.elementwise_bytes.value() == -2 * l.T * l.h + 4 * l.T * (l.A + l.f), tt::tolerance(1e-12));
  BOOST_TEST(fwd.launches == 2);
  // Backward: the norms' fp8 outputs transposed (1 + 1), every output gradient cast and transposed
  // (fp8_cast_transpose_bgrad_fused: 2 + 1 + 1) over its n columns.
  const KernelCost bwd = l.added(w, false);
  const double grads = (l.A + 2 * l.Kv) + l.h + 2 * l.f + l.h;
  BOOST_TEST(bwd.elementwise_bytes.value() == 2 * 2 * l.T * l.h + 4 * l.T * grads, tt::tolerance(1e-12));
  BOOST_TEST(bwd.launches == 2 + 4);
}

BOOST_AUTO_TEST_CASE(te_current_scaling_reads_each_tensor_once_more_for_its_amax) {
  const Llama8b l;
  const LayerWork w = l.work(Precision::Fp8, Fp8Recipe::TeCurrent);
  // The norms write 16 bits with their amax, a cast-transpose follows (2 + 1 + 1); the other inputs
  // and every output gradient take an amax pass (2) before theirs.
  const KernelCost fwd = l.added(w, true);
  BOOST_TEST(fwd.elementwise_bytes.value() == 2 * 4 * l.T * l.h + 6 * l.T * (l.A + l.f),
             tt::tolerance(1e-12));
  BOOST_TEST(fwd.launches == 2 + 2 * 2);
  const KernelCost bwd = l.added(w, false);
  const double grads = (l.A + 2 * l.Kv) + l.h + 2 * l.f + l.h;
  BOOST_TEST(bwd.elementwise_bytes.value() == 6 * l.T * grads, tt::tolerance(1e-12));
  BOOST_TEST(bwd.launches == 4 * 2);
}

BOOST_AUTO_TEST_CASE(te_under_sequence_parallelism_casts_before_the_gather_and_transposes_after) {
  const Llama8b l;
  const double t = 4;
  const LayerWork w = l.work(Precision::Fp8, Fp8Recipe::TeDelayed, 4, true);
  // The norms work on T / tp rows (a byte less each); the output and down projections cast their
  // inputs (2 + 1) and transpose them in the backward (1 + 1) instead of one cast-transpose.
  const KernelCost fwd = l.added(w, true);
  BOOST_TEST(fwd.elementwise_bytes.value() == -2 * l.T / t * l.h + 3 * l.T * (l.A + l.f) / t,
             tt::tolerance(1e-12));
  const KernelCost bwd = l.added(w, false);
  const double grads = (l.A + 2 * l.Kv) / t + l.h + 2 * l.f / t + l.h;
  BOOST_TEST(bwd.elementwise_bytes.value() == 2 * 2 * l.T * l.h + 2 * l.T * (l.A + l.f) / t + 4 * l.T * grads,
             tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(torchao_casts_every_weight_every_micro_batch_and_fuses_amax_under_compile) {
  const Llama8b l;
  const LayerWork w = l.work(Precision::Fp8, Fp8Recipe::TorchaoTensorwise);
  // Compiled: the norms' and the activation's outputs have their amax fused into the kernel that wrote
  // them and are cast to both layouts (2 + 1 + 1); the attention output's amax is a pass (2). Each
  // weight: amax (2) and cast (2 + 1). Every amax ends in a second-stage launch over a few values.
  const KernelCost fwd = l.added(w, true);
  BOOST_TEST(
      fwd.elementwise_bytes.value() == 4 * l.T * (2 * l.h + l.A + l.f) + 2 * l.T * l.A + 5 * l.weights(),
      tt::tolerance(1e-12));
  BOOST_TEST(fwd.launches == (2 + 3 + 2 + 2) + 4 * 3);
  // Backward: the output gradients as the inputs (amax fused), the weights cast again (2 + 1).
  const KernelCost bwd = l.added(w, false);
  const double grads = (l.A + 2 * l.Kv) + l.h + 2 * l.f + l.h;
  BOOST_TEST(bwd.elementwise_bytes.value() == 4 * l.T * grads + 3 * l.weights(), tt::tolerance(1e-12));
  BOOST_TEST(bwd.launches == 4 * 2 + 4);

  // With FSDP's fp8 all-gather the forward gets fp8 weights; the backward copies each to the
  // column-major layout the input gradient's _scaled_mm takes (1 + 1).
  LayerWork gathered = w;
  gathered.fp8_param_gather = true;
  BOOST_TEST(
      l.added(gathered, true).elementwise_bytes.value() == 4 * l.T * (2 * l.h + l.A + l.f) + 2 * l.T * l.A,
      tt::tolerance(1e-12));
  BOOST_TEST(l.added(gathered, false).elementwise_bytes.value() == 4 * l.T * grads + 2 * l.weights(),
             tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(eager_torchao_reads_for_the_amax_and_copies_the_transposes_apart) {
  const Llama8b l;
  LayerWork w = l.work(Precision::Fp8, Fp8Recipe::TorchaoTensorwise);
  w.kernels = LayerKernels::Eager;
  w.fp8_param_gather = true;
  // Each input: amax (2), cast (2 + 1), and the backward's copy to the column-major layout (1 + 1).
  const double inputs = l.h + l.A + l.h + l.f;
  KernelCost fwd = fp8_casts_forward(fp8_linears(l.m, w, false), w);
  BOOST_TEST(fwd.elementwise_bytes.value() == 5 * l.T * inputs, tt::tolerance(1e-12));
  const double grads = (l.A + 2 * l.Kv) + l.h + 2 * l.f + l.h;
  KernelCost bwd = fp8_casts_backward(fp8_linears(l.m, w, false), w);
  BOOST_TEST(bwd.elementwise_bytes.value() == 2 * l.T * inputs + 7 * l.T * grads + 2 * l.weights(),
             tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(transformer_engine_casts_the_weights_once_a_step_and_torchao_never_then) {
  const Llama8b l;
  for (auto [recipe, bytes] : {std::pair{Fp8Recipe::TeDelayed, 4.0}, std::pair{Fp8Recipe::TeCurrent, 6.0},
                               std::pair{Fp8Recipe::TorchaoTensorwise, 0.0}}) {
    const LayerWork w = l.work(Precision::Fp8, recipe);
    const KernelCost c = fp8_weight_casts_per_step(fp8_linears(l.m, w, false), w);
    BOOST_TEST(c.elementwise_bytes.value() == bytes * l.weights(), tt::tolerance(1e-12));
  }
  // Nothing outside fp8 training.
  const LayerWork bf16 = l.work(Precision::Bf16, Fp8Recipe::TeDelayed);
  BOOST_TEST(fp8_linears(l.m, bf16, false).empty());
}

BOOST_AUTO_TEST_CASE(op_recompute_casts_again_the_inputs_of_the_linears_it_reruns) {
  const Llama8b l;
  LayerWork w = l.work(Precision::Fp8, Fp8Recipe::TeDelayed);
  w.projections = Projections::Separate;
  LayerWork bf16 = w;
  bf16.precision = Precision::Bf16;
  const auto added = [&] {
    return recompute_forward(l.m, w, Recompute::Op, false).elementwise_bytes.value() -
           recompute_forward(l.m, bf16, Recompute::Op, false).elementwise_bytes.value();
  };
  // Separate linears: the key projection (after the norm: its fp8 write), the output projection
  // (cast-transpose) and SwiGLU's up projection (after the norm).
  BOOST_TEST(added() == -2 * l.T * l.h + 4 * l.T * l.A, tt::tolerance(1e-12));
  // Fused: the output projection alone.
  w.projections = bf16.projections = Projections::Fused;
  BOOST_TEST(added() == 4 * l.T * l.A, tt::tolerance(1e-12));
}
