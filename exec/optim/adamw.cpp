// AdamW update, one parameter at a time as llm.c's adamw_update.
#include "exec/optim/adamw.hpp"

#include <cmath>

namespace paratwin::exec {

AdamW::AdamW(AdamWSettings settings, std::vector<bool> decay)
    : s_(settings), decay_(std::move(decay)), m_(decay_.size(), 0.0f), v_(decay_.size(), 0.0f) {}

void AdamW::update(float* params, const float* grads, size_t begin, size_t end, float lr, int64_t step) {
  // params, grads, m and v are (P) flat; only [begin, end) is touched
  const float c1 = 1.0f - std::pow(s_.beta1, float(step)), c2 = 1.0f - std::pow(s_.beta2, float(step));
  for (size_t i = begin; i < end; ++i) {
    const float g = grads[i];
    m_[i] = s_.beta1 * m_[i] + (1.0f - s_.beta1) * g;
    v_[i] = s_.beta2 * v_[i] + (1.0f - s_.beta2) * g * g;
    const float m_hat = m_[i] / c1, v_hat = v_[i] / c2;
    params[i] -=
        lr * (m_hat / (std::sqrt(v_hat) + s_.epsilon) + (decay_[i] ? s_.weight_decay * params[i] : 0.0f));
  }
}

}  // namespace paratwin::exec
