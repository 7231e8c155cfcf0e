// Softmax cross-entropy over the vocabulary, the loss the model is trained on: rows (tokens) apart on
// the rank's threads, each row's exponentials vectorized by Eigen.
#include <cmath>

#include <Eigen/Core>

#include "exec/gpt/kernels.hpp"
#include "exec/threads.hpp"

namespace paratwin::exec::kernels {

namespace {
template <class T>
using Row = Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>>;
template <class T>
using ConstRow = Eigen::Map<const Eigen::Array<T, 1, Eigen::Dynamic>>;
}  // namespace

template <class T>
double cross_entropy_forward(T* probs, T* losses, const T* logits, const int32_t* targets, int N, int V) {
  // logits and probs are (N,V), targets and losses are (N)
  parallel_for(N, 1, [&](long r0, long r1) {
    for (long i = r0; i < r1; ++i) {
      Row<T> p(probs + i * V, V);
      ConstRow<T> z(logits + i * V, V);
      p = (z - z.maxCoeff()).exp();
      p /= p.sum();
      losses[i] = -std::log(p[targets[i]]);
    }
  });
  double total = 0;  // in row order
  for (long i = 0; i < N; ++i) total += losses[i];
  return total / N;
}

template <class T>
void cross_entropy_backward(T* dlogits, const T* probs, const int32_t* targets, int N, int V, T scale) {
  // probs and dlogits are (N,V), targets is (N); dlogits may alias probs
  parallel_for(N, 1, [&](long r0, long r1) {
    for (long i = r0; i < r1; ++i) {
      Row<T>(dlogits + i * V, V) = ConstRow<T>(probs + i * V, V) * scale;
      dlogits[i * V + targets[i]] -= scale;
    }
  });
}

template double cross_entropy_forward<float>(float*, float*, const float*, const int32_t*, int, int);
template double cross_entropy_forward<double>(double*, double*, const double*, const int32_t*, int, int);
template void cross_entropy_backward<float>(float*, const float*, const int32_t*, int, int, float);
template void cross_entropy_backward<double>(double*, const double*, const int32_t*, int, int, double);

}  // namespace paratwin::exec::kernels
