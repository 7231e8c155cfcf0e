// Rotary position embedding (Su et al. 2021) on the query and key heads, in place, with YaRN's
// frequencies and scale (Peng et al. 2023). The rotation is orthogonal, so its backward is the inverse
// rotation applied to the gradient, times the same scale.
#include <algorithm>
#include <cmath>

#include "exec/gpt/kernels.hpp"

namespace paratwin::exec::kernels {

RotaryAngles rotary_angles(int D, double yarn_factor, int original_context) {
  RotaryAngles a;
  const int pairs = D / 2;
  for (int i = 0; i < pairs; ++i) a.inv_freq.push_back(std::pow(10000.0, -2.0 * i / D));
  if (yarn_factor <= 1) return a;
  // The dimension index at which a pair turns `rotations` times over the original context.
  const auto dimension = [&](double rotations) {
    return D * std::log(original_context / (rotations * 2 * std::acos(-1.0))) / (2 * std::log(10000.0));
  };
  const double low = std::max(std::floor(dimension(32)), 0.0);
  double high = std::min(std::ceil(dimension(1)), D - 1.0);
  if (high == low) high += 0.001;
  for (int i = 0; i < pairs; ++i) {
    const double extrapolated = 1 - std::clamp((i - low) / (high - low), 0.0, 1.0);
    a.inv_freq[size_t(i)] =
        a.inv_freq[size_t(i)] / yarn_factor * (1 - extrapolated) + a.inv_freq[size_t(i)] * extrapolated;
  }
  a.scale = 0.1 * std::log(yarn_factor) + 1;
  return a;
}

template <class T>
void rope(T* qkv, int B, int Tn, int H, int K, int D, bool inverse, const int* positions,
          const RotaryAngles& angles) {
  // qkv is (B,T,(H+2K)D); the first H+K heads (queries, then keys) are rotated, values are not
  const int width = (H + 2 * K) * D;
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < Tn; ++t) {
      T* row = qkv + (static_cast<long>(b) * Tn + t) * width;
      for (int i = 0; i < D / 2; ++i) {
        const double angle = (positions ? positions[t] : t) * angles.inv_freq[size_t(i)];
        const double sine = inverse ? -std::sin(angle) : std::sin(angle);
        const T c = T(angles.scale * std::cos(angle)), s = T(angles.scale * sine);
        for (int h = 0; h < H + K; ++h) {
          T* x = row + h * D + 2 * i;
          const T x0 = x[0], x1 = x[1];
          x[0] = x0 * c - x1 * s;
          x[1] = x0 * s + x1 * c;
        }
      }
    }
}

template void rope<float>(float*, int, int, int, int, int, bool, const int*, const RotaryAngles&);
template void rope<double>(double*, int, int, int, int, int, bool, const int*, const RotaryAngles&);

}  // namespace paratwin::exec::kernels
