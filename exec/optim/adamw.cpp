// AdamW update, one parameter at a time as llm.c's adamw_update, over the moments of the owned ranges.
#include "exec/optim/adamw.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace paratwin::exec {

namespace {

size_t total(const ParameterRanges& ranges) {
  size_t n = 0;
  for (const auto& [b, e] : ranges) n += e - b;
  return n;
}

}  // namespace

AdamW::AdamW(AdamWSettings settings, std::vector<bool> decay, ParameterRanges owned)
    : s_(settings), decay_(std::move(decay)), owned_(std::move(owned)) {
  if (owned_.empty()) owned_.push_back({0, decay_.size()});
  MemoryUseScope use(MemoryUse::Optimizer);
  m_.assign(total(owned_), 0.0f);
  v_.assign(total(owned_), 0.0f);
}

size_t AdamW::state_index(size_t begin, size_t end) const {
  size_t offset = 0;
  for (const auto& [b, e] : owned_) {
    if (begin >= b && end <= e) return offset + (begin - b);
    offset += e - b;
  }
  throw std::invalid_argument("AdamW update of parameters [" + std::to_string(begin) + ", " +
                              std::to_string(end) + ") that this rank does not own");
}

void AdamW::update(float* params, const float* grads, size_t begin, size_t end, float lr, int64_t step) {
  // params and grads are (end - begin) from parameter `begin`; m and v from its state index
  const size_t first = state_index(begin, end);
  float* m = m_.data() + first;
  float* v = v_.data() + first;
  const float c1 = 1.0f - std::pow(s_.beta1, float(step)), c2 = 1.0f - std::pow(s_.beta2, float(step));
  for (size_t j = 0; j < end - begin; ++j) {
    const float g = grads[j];
    m[j] = s_.beta1 * m[j] + (1.0f - s_.beta1) * g;
    v[j] = s_.beta2 * v[j] + (1.0f - s_.beta2) * g * g;
    const float m_hat = m[j] / c1, v_hat = v[j] / c2;
    params[j] -= lr * (m_hat / (std::sqrt(v_hat) + s_.epsilon) +
                       (decay_[begin + j] ? s_.weight_decay * params[j] : 0.0f));
  }
}

std::vector<float> AdamW::full(const Buffer<float>& compact) const {
  std::vector<float> out(decay_.size(), 0.0f);
  size_t offset = 0;
  for (const auto& [b, e] : owned_) {
    std::copy(compact.begin() + long(offset), compact.begin() + long(offset + e - b), out.begin() + long(b));
    offset += e - b;
  }
  return out;
}

std::vector<float> AdamW::full_m() const {
  return full(m_);
}
std::vector<float> AdamW::full_v() const {
  return full(v_);
}

void AdamW::assign_full(const std::vector<float>& m, const std::vector<float>& v) {
  if (m.size() != decay_.size() || v.size() != decay_.size())
    throw std::invalid_argument("optimizer state of " + std::to_string(m.size()) +
                                " parameters for a model of " + std::to_string(decay_.size()));
  size_t offset = 0;
  for (const auto& [b, e] : owned_) {
    std::copy(m.begin() + long(b), m.begin() + long(e), m_.begin() + long(offset));
    std::copy(v.begin() + long(b), v.begin() + long(e), v_.begin() + long(offset));
    offset += e - b;
  }
}

}  // namespace paratwin::exec
