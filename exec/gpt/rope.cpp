// Rotary position embedding (Su et al. 2021) on the query and key heads, in place. The rotation is
// orthogonal, so its backward is the inverse rotation applied to the gradient.
#include <cmath>

#include "exec/gpt/kernels.hpp"

namespace paratwin::exec::kernels {

template <class T>
void rope(T* qkv, int B, int Tn, int H, int K, int D, bool inverse, const int* positions) {
  // qkv is (B,T,(H+2K)D); the first H+K heads (queries, then keys) are rotated, values are not
  const int width = (H + 2 * K) * D;
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < Tn; ++t) {
      T* row = qkv + (static_cast<long>(b) * Tn + t) * width;
      for (int i = 0; i < D / 2; ++i) {
        const double angle = (positions ? positions[t] : t) * std::pow(10000.0, -2.0 * i / D);
        const T c = T(std::cos(angle)), s = T(inverse ? -std::sin(angle) : std::sin(angle));
        for (int h = 0; h < H + K; ++h) {
          T* x = row + h * D + 2 * i;
          const T x0 = x[0], x1 = x[1];
          x[0] = x0 * c - x1 * s;
          x[1] = x0 * s + x1 * c;
        }
      }
    }
}

template void rope<float>(float*, int, int, int, int, int, bool, const int*);
template void rope<double>(double*, int, int, int, int, int, bool, const int*);

}  // namespace paratwin::exec::kernels
