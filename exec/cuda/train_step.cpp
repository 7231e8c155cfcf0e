// AdamW state on the GPU and the single-rank training step.
#include "exec/cuda/train_step.hpp"

#include <cmath>
#include <vector>

#include "exec/optim/schedule.hpp"

namespace paratwin::exec::cuda {

CudaAdamW::CudaAdamW(AdamWSettings settings, const ParameterLayout& layout, cudaStream_t stream)
    : s_(settings), stream_(stream), decay_(layout.total), m_(layout.total), v_(layout.total) {
  std::vector<uint8_t> decay(layout.total, 0);
  for (const auto& t : layout.tensors)
    if (t.rows > 1 && t.name != "wpe")
      std::fill(decay.begin() + long(t.offset), decay.begin() + long(t.offset + t.size()), 1);
  decay_.upload(decay.data(), decay.size(), stream_);
  m_.zero(stream_);
  v_.zero(stream_);
  PARATWIN_CUDA_CHECK(cudaStreamSynchronize(stream_));  // `decay` leaves scope
}

void CudaAdamW::update(CudaGpt& model, size_t begin, size_t end, float lr, int64_t step, float grad_scale) {
  AdamWStep s;
  s.lr = lr;
  s.beta1 = s_.beta1;
  s.beta2 = s_.beta2;
  s.epsilon = s_.epsilon;
  s.weight_decay = s_.weight_decay;
  // The same float arithmetic as exec/optim/adamw.cpp.
  s.bias_correction1 = 1.0f - std::pow(s_.beta1, float(step));
  s.bias_correction2 = 1.0f - std::pow(s_.beta2, float(step));
  s.grad_scale = grad_scale;
  adamw_update(model.master(), model.params(), m_.data(), v_.data(), model.gradients(), decay_.data(),
               int64_t(begin), int64_t(end), s, stream_);
}

void CudaAdamW::load_state(const float* m, const float* v) {
  m_.upload(m, m_.size(), stream_);
  v_.upload(v, v_.size(), stream_);
  PARATWIN_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaAdamW::store_state(float* m, float* v) const {
  m_.download(m, m_.size(), stream_);
  v_.download(v, v_.size(), stream_);
}

double gradient_sum_of_squares(const float* grads, size_t begin, size_t end, cudaStream_t stream) {
  DeviceBuffer<double> result(1);
  result.zero(stream);
  sum_of_squares(result.data(), grads + begin, int64_t(end - begin), stream);
  double host = 0;
  result.download(&host, 1, stream);
  return host;
}

double train_step(CudaGpt& model, CudaAdamW& adamw, CudaActivations& acts, const int32_t* tokens,
                  const int32_t* targets, float lr, int64_t step, float max_grad_norm) {
  model.zero_gradients();
  const double loss = model.forward(acts, tokens, targets);
  model.backward(acts, 0, model.config().layers, 1.0f);
  const size_t total = model.layout().total;
  const float scale = clip_scale(
      std::sqrt(gradient_sum_of_squares(model.gradients(), 0, total, model.stream())), max_grad_norm);
  adamw.update(model, 0, total, lr, step, scale);
  return loss;
}

}  // namespace paratwin::exec::cuda
