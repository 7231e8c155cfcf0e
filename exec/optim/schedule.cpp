// Learning-rate schedule and gradient clipping.
#include "exec/optim/schedule.hpp"

#include <algorithm>
#include <cmath>

#include <Eigen/Core>

#include "exec/threads.hpp"

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
  // Pieces of 1024 summed in float by Eigen's vectorized reduction (independent accumulators), the
  // pieces' sums in double and in order: the same bits on any number of threads.
  static constexpr long kPiece = 1024;
  const float* x = grads + begin;
  return parallel_sum(long(end - begin), kPiece * 64, [x](long b, long e) {
    double s = 0;
    for (long at = b; at < e; at += kPiece)
      s += Eigen::Map<const Eigen::ArrayXf>(x + at, std::min(kPiece, e - at)).square().sum();
    return s;
  });
}

}  // namespace paratwin::exec
