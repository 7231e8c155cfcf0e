// Each CUDA kernel against the CPU kernel of exec/gpt/ (in double, on the same bf16-rounded inputs),
// with explicit tolerances; the max differences are printed. Skipped (exit 77) without a GPU.
#include <algorithm>
#include <numeric>

#include "exec/cuda/gemm.hpp"
#include "exec/cuda/kernels.cuh"
#include "exec/gpt/kernels.hpp"
#include "exec/optim/adamw.hpp"
#include "tests/cuda/gpu_test_main.hpp"

using namespace paratwin::exec;
using namespace paratwin::exec::cuda;
using namespace paratwin::exec::cuda::test;

namespace {

std::vector<double> to_double(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

// A tolerance relative to the reference's largest magnitude (at least 1).
double relative(double factor, const std::vector<double>& ref) {
  double m = 1;
  for (double x : ref) m = std::max(m, std::abs(x));
  return factor * m;
}

// bf16 outputs carry a relative rounding error of 2^-8 (~0.4%).
constexpr double kBf16 = 1.0 / 256;

}  // namespace

BOOST_AUTO_TEST_CASE(gemms_match_cpu_linear_layers) {
  const int N = 96, C = 64, OC = 80;
  const auto x = round_bf16(random_floats(size_t(N) * C, 1.0f, 1)),
             w = round_bf16(random_floats(size_t(C) * OC, 0.1f, 2));
  const auto bias = round_bf16(random_floats(OC, 0.1f, 3)),
             dy = round_bf16(random_floats(size_t(N) * OC, 1.0f, 4));
  auto dx_x = to_device_bf16(x), dw = to_device_bf16(w), db = to_device_bf16(bias), ddy = to_device_bf16(dy);
  DeviceBuffer<__nv_bfloat16> out(size_t(N) * OC), dinp(size_t(N) * C);
  DeviceBuffer<float> dweight(size_t(C) * OC);
  dweight.zero(nullptr);
  Gemm gemm;
  gemm.run(linear_forward_gemm(N, C, OC), dx_x.data(), dw.data(), out.data(), ResultType::Bf16, 1, 0,
           db.data(), nullptr);
  gemm.run(linear_input_grad_gemm(N, C, OC), ddy.data(), dw.data(), dinp.data(), ResultType::Bf16, 1, 0,
           nullptr, nullptr);
  gemm.run(linear_weight_grad_gemm(N, C, OC), dx_x.data(), ddy.data(), dweight.data(), ResultType::Float, 1,
           1, nullptr, nullptr);
  std::vector<double> ref_out(size_t(N) * OC), ref_dinp(size_t(N) * C, 0), ref_dw(size_t(C) * OC, 0),
      ref_db(OC, 0);
  const auto xd = to_double(x), wd = to_double(w), bd = to_double(bias), dyd = to_double(dy);
  kernels::linear_forward(ref_out.data(), xd.data(), wd.data(), bd.data(), N, C, OC);
  kernels::linear_backward(ref_dinp.data(), ref_dw.data(), ref_db.data(), dyd.data(), xd.data(), wd.data(), N,
                           C, OC);
  expect_close("linear forward (bias epilogue)", to_host(out), ref_out, 4 * kBf16 * 3);
  expect_close("linear input gradient", to_host(dinp), ref_dinp, 4 * kBf16 * 3);
  expect_close("linear weight gradient (fp32)", to_host(dweight), ref_dw, 1e-3 * 10);
}

BOOST_AUTO_TEST_CASE(layernorm_and_rmsnorm_match_cpu) {
  const int N = 67, C = 200;  // C not a multiple of 32: the warp's last stride is partial
  const auto x = round_bf16(random_floats(size_t(N) * C, 2.0f, 5)), w = round_bf16(random_floats(C, 1.0f, 6));
  const auto b = round_bf16(random_floats(C, 0.5f, 7)),
             dy = round_bf16(random_floats(size_t(N) * C, 1.0f, 8));
  for (bool rms : {false, true}) {
    auto dx = to_device_bf16(x), dwt = to_device_bf16(w), dbs = to_device_bf16(b), ddy = to_device_bf16(dy);
    DeviceBuffer<__nv_bfloat16> out(size_t(N) * C), dres16(size_t(N) * C);
    DeviceBuffer<float> mean(N), rstd(N), dres(size_t(N) * C), dweight(C), dbias(C);
    dres.zero(nullptr), dweight.zero(nullptr), dbias.zero(nullptr);
    norm_forward(out.data(), rms ? nullptr : mean.data(), rstd.data(), dx.data(), dwt.data(),
                 rms ? nullptr : dbs.data(), N, C, nullptr);
    norm_backward(dres.data(), dres16.data(), dweight.data(), rms ? nullptr : dbias.data(), ddy.data(),
                  dx.data(), dwt.data(), rms ? nullptr : mean.data(), rstd.data(), N, C, nullptr);
    const auto xd = to_double(x), wd = to_double(w), bd = to_double(b), dyd = to_double(dy);
    std::vector<double> ref(size_t(N) * C), m(N), s(N), rdx(size_t(N) * C, 0), rdw(C, 0), rdb(C, 0);
    kernels::norm_forward(ref.data(), rms ? nullptr : m.data(), s.data(), xd.data(), wd.data(),
                          rms ? nullptr : bd.data(), N, C);
    kernels::norm_backward(rdx.data(), rdw.data(), rms ? nullptr : rdb.data(), dyd.data(), xd.data(),
                           wd.data(), rms ? nullptr : m.data(), s.data(), N, C);
    expect_close(rms ? "rmsnorm forward" : "layernorm forward", to_host(out), ref, 8 * kBf16 * 4);
    expect_close(rms ? "rmsnorm rstd" : "layernorm rstd", to_host(rstd), s, 1e-4);
    expect_close(rms ? "rmsnorm input gradient" : "layernorm input gradient", to_host(dres), rdx, 1e-3);
    expect_close(rms ? "rmsnorm weight gradient" : "layernorm weight gradient", to_host(dweight), rdw, 1e-2);
    if (!rms) expect_close("layernorm bias gradient", to_host(dbias), rdb, 1e-3);
  }
}

BOOST_AUTO_TEST_CASE(gelu_and_swiglu_match_cpu) {
  const int N = 33, F = 70;
  const auto x = round_bf16(random_floats(size_t(N) * 2 * F, 2.0f, 9)),
             dy = round_bf16(random_floats(size_t(N) * 2 * F, 1.0f, 10));
  auto dx = to_device_bf16(x), ddy = to_device_bf16(dy);
  DeviceBuffer<__nv_bfloat16> out(x.size()), dinp(x.size());
  const auto xd = to_double(x), dyd = to_double(dy);
  std::vector<double> ref(x.size()), rdx(x.size());
  gelu_forward(out.data(), dx.data(), int64_t(x.size()), nullptr);
  gelu_backward(dinp.data(), dx.data(), ddy.data(), int64_t(x.size()), nullptr);
  kernels::gelu_forward(ref.data(), xd.data(), long(x.size()));
  kernels::gelu_backward(rdx.data(), xd.data(), dyd.data(), long(x.size()));
  expect_close("gelu forward", to_host(out), ref, relative(2 * kBf16, ref));
  expect_close("gelu backward", to_host(dinp), rdx, relative(2 * kBf16, rdx));
  swiglu_forward(out.data(), dx.data(), N, F, nullptr);
  swiglu_backward(dinp.data(), dx.data(), ddy.data(), N, F, nullptr);
  std::vector<double> sref(size_t(N) * F), sdx(x.size());
  kernels::swiglu_forward(sref.data(), xd.data(), N, F);
  kernels::swiglu_backward(sdx.data(), xd.data(), dyd.data(), N, F);
  expect_close("swiglu forward", to_host(out), sref, relative(2 * kBf16, sref));
  expect_close("swiglu backward", to_host(dinp), sdx, relative(2 * kBf16, sdx));
}

BOOST_AUTO_TEST_CASE(embedding_matches_cpu) {
  const int B = 3, Tn = 17, C = 40, V = 23;
  const auto wte = round_bf16(random_floats(size_t(V) * C, 1.0f, 11)),
             wpe = round_bf16(random_floats(size_t(Tn) * C, 1.0f, 12));
  std::vector<int32_t> tokens(size_t(B) * Tn);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t((i * 7) % V);  // repeats: atomics collide
  const auto dout = random_floats(size_t(B) * Tn * C, 1.0f, 13);
  auto dt = to_device(tokens);
  auto dwte = to_device_bf16(wte), dwpe = to_device_bf16(wpe);
  auto ddout = to_device(dout);
  DeviceBuffer<__nv_bfloat16> out(size_t(B) * Tn * C);
  DeviceBuffer<float> gwte(size_t(V) * C), gwpe(size_t(Tn) * C);
  gwte.zero(nullptr), gwpe.zero(nullptr);
  embedding_forward(out.data(), dt.data(), dwte.data(), dwpe.data(), B, Tn, C, nullptr);
  embedding_backward(gwte.data(), gwpe.data(), ddout.data(), dt.data(), B, Tn, C, nullptr);
  const auto wted = to_double(wte), wped = to_double(wpe), doutd = to_double(dout);
  std::vector<double> ref(out.size()), rwte(gwte.size(), 0), rwpe(gwpe.size(), 0);
  kernels::embedding_forward(ref.data(), tokens.data(), wted.data(), wped.data(), B, Tn, C);
  kernels::embedding_backward(rwte.data(), rwpe.data(), doutd.data(), tokens.data(), B, Tn, C);
  expect_close("embedding forward", to_host(out), ref, 8 * kBf16 * 2);
  expect_close("embedding backward wte", to_host(gwte), rwte, 1e-4);
  expect_close("embedding backward wpe", to_host(gwpe), rwpe, 1e-4);
}

BOOST_AUTO_TEST_CASE(causal_softmax_and_head_permutes_match_cpu_attention) {
  // The attention core as the model runs it, with the GEMMs done on the host from the GPU's own
  // intermediate values, checked at each kernel: split/merge heads (grouped query), causal softmax
  // forward and backward.
  const int B = 2, Tn = 37, H = 4, K = 2, D = 8, W = (H + 2 * K) * D;
  const auto qkv = round_bf16(random_floats(size_t(B) * Tn * W, 1.0f, 14));
  auto dqkv_in = to_device_bf16(qkv);
  const size_t heads = size_t(B) * H * Tn * D;
  DeviceBuffer<__nv_bfloat16> q(heads), k(heads), v(heads);
  split_heads(q.data(), k.data(), v.data(), dqkv_in.data(), B, Tn, H, K, D, nullptr);
  const auto hq = to_host(q), hk = to_host(k);
  // element (b,h,t,d) of the split heads must equal qkv's element of the head group
  double worst = 0;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < Tn; ++t)
        for (int d = 0; d < D; ++d) {
          const size_t i = ((size_t(b) * H + h) * Tn + t) * D + d, row = (size_t(b) * Tn + t) * W;
          worst = std::max({worst, double(std::abs(hq[i] - qkv[row + h * D + d])),
                            double(std::abs(hk[i] - qkv[row + (H + h / (H / K)) * D + d]))});
        }
  std::printf("  %-36s max |gpu - cpu| = %.3e (tolerance 0, exact copy)\n", "split heads", worst);
  BOOST_TEST(worst == 0.0);
  // scores from the split heads (host GEMM), then the GPU's softmax against the CPU's
  const size_t TT = size_t(Tn) * Tn;
  std::vector<float> scores(size_t(B) * H * TT);
  const float scale = 1.0f / std::sqrt(float(D));
  for (size_t bh = 0; bh < size_t(B) * H; ++bh)
    for (int i = 0; i < Tn; ++i)
      for (int j = 0; j < Tn; ++j) {
        float s = 0;
        for (int d = 0; d < D; ++d) s += hq[(bh * Tn + i) * D + d] * hk[(bh * Tn + j) * D + d];
        scores[bh * TT + size_t(i) * Tn + j] = s * scale;
      }
  scores = round_bf16(scores);
  auto dscores = to_device_bf16(scores);
  DeviceBuffer<__nv_bfloat16> att(scores.size());
  causal_softmax_forward(att.data(), dscores.data(), int64_t(B) * H * Tn, Tn, nullptr);
  std::vector<double> ref(scores.size());
  for (size_t r = 0; r < size_t(B) * H * Tn; ++r) {
    const size_t i = r % Tn;
    double m = -1e300, sum = 0;
    for (size_t j = 0; j <= i; ++j) m = std::max(m, double(scores[r * Tn + j]));
    for (size_t j = 0; j <= i; ++j) sum += std::exp(scores[r * Tn + j] - m);
    for (size_t j = 0; j < size_t(Tn); ++j)
      ref[r * Tn + j] = j <= i ? std::exp(scores[r * Tn + j] - m) / sum : 0.0;
  }
  const auto hatt = to_host(att);
  expect_close("causal softmax forward", hatt, ref, 2 * kBf16);
  const auto datt = round_bf16(random_floats(scores.size(), 1.0f, 15));
  auto ddatt = to_device_bf16(datt);
  causal_softmax_backward(ddatt.data(), ddatt.data(), att.data(), int64_t(B) * H * Tn, Tn, scale, nullptr);
  std::vector<double> rds(scores.size());
  for (size_t r = 0; r < size_t(B) * H * Tn; ++r) {
    const size_t i = r % Tn;
    double dot = 0;
    for (size_t j = 0; j <= i; ++j) dot += hatt[r * Tn + j] * datt[r * Tn + j];
    for (size_t j = 0; j < size_t(Tn); ++j)
      rds[r * Tn + j] = j <= i ? hatt[r * Tn + j] * (datt[r * Tn + j] - dot) * scale : 0.0;
  }
  expect_close("causal softmax backward (in place)", to_host(ddatt), rds, 4 * kBf16);
  // merge_head_grads sums each key/value head over its query heads
  DeviceBuffer<__nv_bfloat16> dqkv(qkv.size());
  merge_head_grads(dqkv.data(), q.data(), k.data(), v.data(), B, Tn, H, K, D, nullptr);
  const auto hv = to_host(v), hm = to_host(dqkv);
  std::vector<double> rm(qkv.size());
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < Tn; ++t)
      for (int col = 0; col < W; ++col) {
        const int head = col / D, d = col % D;
        auto at = [&](int h) { return ((size_t(b) * H + h) * Tn + t) * D + d; };
        double s = 0;
        if (head < H)
          s = hq[at(head)];
        else if (head < H + K)
          for (int j = 0; j < H / K; ++j) s += hk[at((head - H) * (H / K) + j)];
        else
          for (int j = 0; j < H / K; ++j) s += hv[at((head - H - K) * (H / K) + j)];
        rm[(size_t(b) * Tn + t) * W + col] = s;
      }
  expect_close("merge head gradients (grouped)", hm, rm, 2 * kBf16 * 8);
}

BOOST_AUTO_TEST_CASE(rope_matches_cpu_and_inverts) {
  const int B = 2, Tn = 9, H = 4, K = 2, D = 16, W = (H + 2 * K) * D;
  const auto qkv = round_bf16(random_floats(size_t(B) * Tn * W, 1.0f, 16));
  auto d = to_device_bf16(qkv);
  rope(d.data(), B, Tn, H, K, D, false, nullptr);
  std::vector<double> ref = to_double(qkv);
  kernels::rope(ref.data(), B, Tn, H, K, D, false, nullptr, kernels::rotary_angles(D));
  expect_close("rope forward", to_host(d), ref, 4 * kBf16 * 4);
  rope(d.data(), B, Tn, H, K, D, true, nullptr);
  expect_close("rope inverse of forward", to_host(d), qkv, 8 * kBf16 * 4);
}

BOOST_AUTO_TEST_CASE(cross_entropy_matches_cpu) {
  const int N = 21, V = 300, ld = 320;  // rows padded as the model pads the vocabulary
  auto logits = round_bf16(random_floats(size_t(N) * ld, 3.0f, 17));
  std::vector<int32_t> targets(N);
  for (int i = 0; i < N; ++i) targets[i] = (i * 37) % V;
  auto dl = to_device_bf16(logits);
  auto dt = to_device(targets);
  DeviceBuffer<float> losses(N), lse(N);
  cross_entropy_forward(losses.data(), lse.data(), dl.data(), dt.data(), N, V, ld, nullptr);
  const float scale = 0.5f / N;
  cross_entropy_backward(dl.data(), lse.data(), dt.data(), N, V, ld, scale, nullptr);
  std::vector<double> packed(size_t(N) * V), probs(packed.size()), rl(N), rd(packed.size());
  for (int i = 0; i < N; ++i)
    for (int v = 0; v < V; ++v) packed[size_t(i) * V + v] = logits[size_t(i) * ld + v];
  kernels::cross_entropy_forward(probs.data(), rl.data(), packed.data(), targets.data(), N, V);
  kernels::cross_entropy_backward(rd.data(), probs.data(), targets.data(), N, V, double(scale));
  expect_close("cross-entropy losses", to_host(losses), rl, 1e-4);
  const auto hd = to_host(dl);
  std::vector<float> gpu(packed.size());
  for (int i = 0; i < N; ++i)
    for (int v = 0; v < V; ++v) gpu[size_t(i) * V + v] = hd[size_t(i) * ld + v];
  expect_close("cross-entropy dlogits", gpu, rd, 2 * kBf16 * scale);
}

BOOST_AUTO_TEST_CASE(adamw_matches_cpu_and_writes_bf16_copy) {
  const size_t P = 1000;
  const auto w0 = random_floats(P, 1.0f, 18), grads = random_floats(P, 0.1f, 19);
  std::vector<bool> decay(P);
  std::vector<uint8_t> decay8(P);
  for (size_t i = 0; i < P; ++i) decay8[i] = decay[i] = i % 3 != 0;
  AdamW cpu({}, decay.size(), ranges_of(decay));
  std::vector<float> wc = w0;
  auto master = to_device(w0), g = to_device(grads), m = to_device(std::vector<float>(P, 0)),
       v = to_device(std::vector<float>(P, 0));
  auto d8 = to_device(decay8);
  DeviceBuffer<__nv_bfloat16> params(P);
  AdamWSettings s;
  const float grad_scale = 0.5f;
  std::vector<float> gs(grads);
  for (auto& x : gs) x *= grad_scale;
  for (int step = 1; step <= 3; ++step) {
    cpu.update(wc.data(), gs.data(), 10, P - 10, 1e-2f, step);
    AdamWStep a;
    a.lr = 1e-2f, a.beta1 = s.beta1, a.beta2 = s.beta2, a.epsilon = s.epsilon,
    a.weight_decay = s.weight_decay;
    a.bias_correction1 = 1.0f - std::pow(s.beta1, float(step));
    a.bias_correction2 = 1.0f - std::pow(s.beta2, float(step));
    a.grad_scale = grad_scale;
    adamw_update(master.data(), params.data(), m.data(), v.data(), g.data(), d8.data(), 10, P - 10, a,
                 nullptr);
  }
  const auto hm = to_host(master), hp = to_host(params);
  expect_close("adamw master weights (3 steps)", hm, wc, 1e-6);
  std::vector<float> inner(hp.begin() + 10, hp.end() - 10), ref(wc.begin() + 10, wc.end() - 10);
  expect_close("adamw bf16 copy", inner, ref, 2 * kBf16 * 4);
  BOOST_TEST(hm[0] == w0[0]);  // outside [begin, end): untouched
}

BOOST_AUTO_TEST_CASE(topk_keeps_the_largest_and_feeds_back_the_rest) {
  const int64_t n = 100000, k = 1000;
  auto grads = random_floats(n, 1.0f, 20);
  grads[5] = grads[6] = 1e3f;  // ties at the top
  auto error0 = random_floats(n, 0.01f, 21);
  auto dg = to_device(grads), de = to_device(error0);
  DeviceBuffer<float> values(k);
  DeviceBuffer<int32_t> indices(k);
  TopK topk(n);
  topk.select(values.data(), indices.data(), de.data(), dg.data(), n, k, nullptr);
  std::vector<float> acc(n);
  for (int64_t i = 0; i < n; ++i) acc[i] = grads[i] + error0[i];
  std::vector<float> sorted(acc);
  for (auto& x : sorted) x = std::abs(x);
  std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<float>());
  const float kth = sorted[k - 1];
  const auto hv = to_host(values), he = to_host(de);
  const auto hi = indices.to_host(nullptr);
  std::vector<bool> chosen(n, false);
  int wrong = 0;
  for (int64_t j = 0; j < k; ++j) {
    if (hi[j] < 0 || hi[j] >= n || chosen[hi[j]] || hv[j] != acc[hi[j]] || std::abs(hv[j]) < kth)
      ++wrong;
    else
      chosen[hi[j]] = true;
  }
  double feedback = 0;
  for (int64_t i = 0; i < n; ++i)
    feedback = std::max(feedback, double(std::abs(he[i] - (chosen[i] ? 0.0f : acc[i]))));
  std::printf("  %-36s %d wrong of %lld kept; max |error - expected| = %.3e\n", "top-k", wrong, (long long)k,
              feedback);
  BOOST_TEST(wrong == 0);
  BOOST_TEST(feedback == 0.0);
}

int main(int argc, char** argv) {
  return paratwin_gpu_test_main(argc, argv);
}
