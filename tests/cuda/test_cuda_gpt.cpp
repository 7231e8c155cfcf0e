// The GPT on the GPU against the CPU model (exec/gpt/) from the same weights: the loss and every
// gradient tensor, then training steps with AdamW, then the weights handed back to the CPU model (a
// checkpoint saved on GPU resumes on CPU). Max differences printed; skipped (exit 77) without a GPU.
#include <algorithm>
#include <cmath>

#include "exec/cuda/train_step.hpp"
#include "exec/gpt/model.hpp"
#include "exec/optim/schedule.hpp"
#include "tests/cuda/gpu_test_main.hpp"

using namespace paratwin::exec;
using namespace paratwin::exec::cuda;
using namespace paratwin::exec::cuda::test;

namespace {

GptConfig gpt2_like() {
  GptConfig c;
  c.layers = 2, c.hidden = 64, c.heads = 4, c.kv_heads = 4, c.head_dim = 16, c.ffn = 256, c.vocab = 256;
  c.max_seq_len = 64;
  return c;
}

GptConfig llama_like() {
  GptConfig c = gpt2_like();
  c.kv_heads = 2, c.ffn = 160, c.swiglu = true, c.rmsnorm = true, c.rope = true, c.tied = false,
  c.bias = false;
  return c;
}

struct Batch {
  std::vector<int32_t> tokens, targets;
};

Batch batch(int N, int V, unsigned seed) {
  Batch b{std::vector<int32_t>(N), std::vector<int32_t>(N)};
  std::mt19937 rng(seed);
  for (int i = 0; i < N; ++i) b.tokens[i] = int32_t(rng() % V), b.targets[i] = int32_t(rng() % V);
  return b;
}

void compare_loss_and_gradients(const GptConfig& config, const char* name) {
  std::printf("%s\n", name);
  const int B = 2, Tn = 48;
  Gpt<float> cpu(config);
  cpu.initialize(7);
  Stream stream;
  CudaGpt gpu(config, stream.get());
  BOOST_REQUIRE_EQUAL(gpu.layout().total, cpu.layout().total);
  gpu.load_parameters(cpu.parameters().data());
  Activations<float> ca;
  cpu.allocate(ca, B, Tn);
  CudaActivations ga;
  gpu.allocate(ga, B, Tn);
  const Batch b = batch(B * Tn, config.vocab, 3);
  ca.tokens.assign(b.tokens.begin(), b.tokens.end());
  ca.targets.assign(b.targets.begin(), b.targets.end());
  cpu.zero_gradients();
  gpu.zero_gradients();
  const double cl = cpu.forward(ca), gl = gpu.forward(ga, b.tokens.data(), b.targets.data());
  expect_close("loss", std::vector<double>{gl}, std::vector<double>{cl}, 2e-2);
  cpu.backward(ca, 0, config.layers, 1.0f);
  gpu.backward(ga, 0, config.layers, 1.0f);
  std::vector<float> grads(gpu.layout().total);
  gpu.store_gradients(grads.data());
  // Each tensor's gradient within 5% of that tensor's largest CPU gradient (bf16 activations).
  for (const auto& t : cpu.layout().tensors) {
    const std::vector<float> g(grads.begin() + long(t.offset), grads.begin() + long(t.offset + t.size()));
    const std::vector<float> r(cpu.gradients().begin() + long(t.offset),
                               cpu.gradients().begin() + long(t.offset + t.size()));
    double scale = 1e-6;
    for (float x : r) scale = std::max(scale, double(std::abs(x)));
    expect_close(("gradient " + t.name).c_str(), g, r, 5e-2 * scale);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(gpt2_like_model_matches_cpu_loss_and_gradients) {
  compare_loss_and_gradients(gpt2_like(),
                             "GPT-2 shapes: LayerNorm, GELU, learned positions, tied head, biases");
}

BOOST_AUTO_TEST_CASE(llama_like_model_matches_cpu_loss_and_gradients) {
  compare_loss_and_gradients(llama_like(),
                             "Llama shapes: RMSNorm, SwiGLU, rotary, grouped-query, untied, no biases");
}

BOOST_AUTO_TEST_CASE(training_steps_follow_cpu_and_weights_resume_on_cpu) {
  const GptConfig config = gpt2_like();
  const int B = 4, Tn = 64, steps = 8;
  const float lr = 3e-3f, max_norm = 1.0f;
  Gpt<float> cpu(config);
  cpu.initialize(11);
  Stream stream;
  CudaGpt gpu(config, stream.get());
  gpu.load_parameters(cpu.parameters().data());
  std::vector<bool> decay(cpu.layout().total, false);
  for (const auto& t : cpu.layout().tensors)
    if (t.rows > 1 && t.name != "wpe")
      std::fill(decay.begin() + long(t.offset), decay.begin() + long(t.offset + t.size()), true);
  AdamW cpu_adamw({}, decay.size(), ranges_of(decay));
  CudaAdamW gpu_adamw({}, gpu.layout(), stream.get());
  Activations<float> ca;
  cpu.allocate(ca, B, Tn);
  CudaActivations ga;
  gpu.allocate(ga, B, Tn);
  // The same sequence repeated: the loss must fall on both, step by step together.
  const Batch b = batch(B * Tn, config.vocab, 5);
  std::vector<double> cpu_losses, gpu_losses;
  for (int step = 1; step <= steps; ++step) {
    ca.tokens.assign(b.tokens.begin(), b.tokens.end());
    ca.targets.assign(b.targets.begin(), b.targets.end());
    cpu.zero_gradients();
    cpu_losses.push_back(cpu.forward(ca));
    cpu.backward(ca, 0, config.layers, 1.0f);
    const size_t P = cpu.layout().total;
    const float scale = clip_scale(std::sqrt(sum_of_squares(cpu.gradients().data(), 0, P)), max_norm);
    for (auto& g : cpu.gradients()) g *= scale;
    cpu_adamw.update(cpu.parameters().data(), cpu.gradients().data(), 0, P, lr, step);
    gpu_losses.push_back(
        train_step(gpu, gpu_adamw, ga, b.tokens.data(), b.targets.data(), lr, step, max_norm));
    std::printf("  step %d: loss cpu %.5f gpu %.5f (difference %.2e)\n", step, cpu_losses.back(),
                gpu_losses.back(), std::abs(cpu_losses.back() - gpu_losses.back()));
  }
  expect_close("losses over the steps", gpu_losses, cpu_losses, 3e-2);
  BOOST_TEST(gpu_losses.back() < gpu_losses.front() - 0.1);
  // The GPU's master weights in the CPU layout: what a checkpoint holds. The CPU model resumes from
  // them and computes the GPU's loss.
  std::vector<float> weights(gpu.layout().total);
  gpu.store_parameters(weights.data());
  // Adam moves a weight by about lr per step whatever the gradient's size, so a gradient near zero
  // whose sign differs between bf16 and fp32 may move it the other way: at most 2 lr per step.
  expect_close("weights after the steps", weights, cpu.parameters(), 2.0 * lr * steps);
  Gpt<float> resumed(config);
  resumed.parameters().assign(weights.begin(), weights.end());
  ca.tokens.assign(b.tokens.begin(), b.tokens.end());
  ca.targets.assign(b.targets.begin(), b.targets.end());
  const double on_cpu = resumed.forward(ca), on_gpu = gpu.forward(ga, b.tokens.data(), b.targets.data());
  expect_close("loss of GPU weights on CPU", std::vector<double>{on_gpu}, std::vector<double>{on_cpu}, 2e-2);
}

int main(int argc, char** argv) {
  return paratwin_gpu_test_main(argc, argv);
}
