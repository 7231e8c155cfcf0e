// AdamW update as llm.c's adamw_update, fused: one pass reads each gradient, moment and weight once and
// writes each once, in pieces on the rank's threads; a piece walks the decayed ranges it crosses, so
// the loop over a run of parameters has no per-parameter test and vectorizes.
#include "exec/optim/adamw.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "exec/threads.hpp"

namespace paratwin::exec {

namespace {

constexpr long kPiece = 1L << 15;  // parameters of a piece (its four arrays fit a core's L2 cache)

size_t total(const ParameterRanges& ranges) {
  size_t n = 0;
  for (const auto& [b, e] : ranges) n += e - b;
  return n;
}

struct Step {
  float beta1, beta2, one_minus_beta1, one_minus_beta2, c1, c2, epsilon, lr, decay, grad_scale;
};

// Parameters [0, n) of one run, decayed or not.
template <bool kDecayed>
void update_run(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v,
                long n, const Step& s) {
  for (long j = 0; j < n; ++j) {
    const float grad = g[j] * s.grad_scale;
    m[j] = s.beta1 * m[j] + s.one_minus_beta1 * grad;
    v[j] = s.beta2 * v[j] + s.one_minus_beta2 * grad * grad;
    const float m_hat = m[j] / s.c1, v_hat = v[j] / s.c2;
    p[j] -= s.lr * (m_hat / (std::sqrt(v_hat) + s.epsilon) + (kDecayed ? s.decay * p[j] : 0.0f));
  }
}

}  // namespace

ParameterRanges ranges_of(const std::vector<bool>& flags) {
  ParameterRanges out;
  for (size_t i = 0; i < flags.size(); ++i) {
    if (!flags[i]) continue;
    if (!out.empty() && out.back().second == i)
      ++out.back().second;
    else
      out.push_back({i, i + 1});
  }
  return out;
}

AdamW::AdamW(AdamWSettings settings, size_t parameters, ParameterRanges decayed, ParameterRanges owned)
    : s_(settings), parameters_(parameters), decayed_(std::move(decayed)), owned_(std::move(owned)) {
  if (owned_.empty()) owned_.push_back({0, parameters_});
  MemoryUseScope use(MemoryUse::Optimizer);
  m_.resize(total(owned_));  // zero (exec/tensor.hpp): its pages are touched by the first step
  v_.resize(total(owned_));
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

void AdamW::update(float* params, const float* grads, size_t begin, size_t end, float lr, int64_t step,
                   float grad_scale) {
  // params and grads are (end - begin) from parameter `begin`; m and v from its state index
  const size_t first = state_index(begin, end);
  float* m = m_.data() + first;
  float* v = v_.data() + first;
  const Step s{s_.beta1,
               s_.beta2,
               1.0f - s_.beta1,
               1.0f - s_.beta2,
               1.0f - std::pow(s_.beta1, float(step)),
               1.0f - std::pow(s_.beta2, float(step)),
               s_.epsilon,
               lr,
               s_.weight_decay,
               grad_scale};
  parallel_for(long(end - begin), kPiece, [&](long b, long e) {
    // Parameters [begin + b, begin + e), cut where decayed ranges start and end.
    size_t at = begin + size_t(b);
    const size_t stop = begin + size_t(e);
    auto d = std::upper_bound(decayed_.begin(), decayed_.end(), std::pair<size_t, size_t>{at, SIZE_MAX});
    if (d != decayed_.begin() && std::prev(d)->second > at) --d;
    while (at < stop) {
      const bool decayed = d != decayed_.end() && d->first <= at;
      const size_t next =
          decayed ? std::min(stop, d->second) : std::min(stop, d == decayed_.end() ? stop : d->first);
      const size_t j = at - begin;
      if (decayed)
        update_run<true>(params + j, grads + j, m + j, v + j, long(next - at), s);
      else
        update_run<false>(params + j, grads + j, m + j, v + j, long(next - at), s);
      if (decayed && next == d->second) ++d;
      at = next;
    }
  });
}

std::vector<float> AdamW::full(const Buffer<float>& compact) const {
  std::vector<float> out(parameters_, 0.0f);
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
  if (m.size() != parameters_ || v.size() != parameters_)
    throw std::invalid_argument("optimizer state of " + std::to_string(m.size()) +
                                " parameters for a model of " + std::to_string(parameters_));
  size_t offset = 0;
  for (const auto& [b, e] : owned_) {
    std::copy(m.begin() + long(b), m.begin() + long(e), m_.begin() + long(offset));
    std::copy(v.begin() + long(b), v.begin() + long(e), v_.begin() + long(offset));
    offset += e - b;
  }
}

}  // namespace paratwin::exec
