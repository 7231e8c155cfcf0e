// Learning-rate schedule and gradient clipping.
#include "exec/optim/schedule.hpp"

#include <algorithm>
#include <cmath>

namespace paratwin::exec {

float LearningRate::at(int64_t step) const {
  if (step < warmup_steps) return max * float(step + 1) / float(warmup_steps);
  const double span = std::max<int64_t>(1, total_steps - warmup_steps);
  const double progress = std::min(1.0, double(step - warmup_steps) / span);
  const double cosine = 0.5 * (1.0 + std::cos(3.141592653589793 * progress));
  return float(max * (min_ratio + (1.0 - min_ratio) * cosine));
}

float clip_scale(double norm, double max_norm) {
  return norm > max_norm ? float(max_norm / norm) : 1.0f;
}

double sum_of_squares(const float* grads, size_t begin, size_t end) {
  double s = 0;
  for (size_t i = begin; i < end; ++i) s += double(grads[i]) * grads[i];
  return s;
}

}  // namespace paratwin::exec
